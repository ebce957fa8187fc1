import Foundation
import TesseraTasks
import TesseraTestSupport
import XCTest
import TesseraModel
import TesseraReports

/// The aggregation behind the dashboard and the HTML report, fed records in any order.
final class ReportTests: XCTestCase {
    func records(_ n: Int, start: Double = 1_700_000_000) -> [TaskRecord] {
        (0..<n).map { i in
            var r = TaskRecord(input: "/in/\(i).jpg", status: i % 10 == 3 ? .failed : .succeeded)
            if r.status == .failed { r.error = .init(code: "corrupt", message: "/in/\(i).jpg: bad [corrupt]") }
            r.finishedAt = start + Double(i) * 0.05
            r.timings.decode = 10
            r.timings.total = 12
            r.bytesIn = 1000
            return r
        }
    }

    /// The report crashed when the first record given had not finished first.
    func testRecordsInAnyOrderGiveTheSameCounts() throws {
        var generator = SeededGenerator(seed: 29)
        for n in [2, 50, 2000] {
            let ordered = records(n)
            for order in [ordered, ordered.reversed(), ordered.shuffled(using: &generator)] {
                let accumulator = JobView.Accumulator()
                for r in order { accumulator.add(r, at: r.finishedAt!) }
                let view = accumulator.view(id: "j", name: "n", kind: "thumbnail", state: "succeeded", total: n, running: 0, elapsed: 10)
                XCTAssertEqual(view.timeline.reduce(0, +), n, "every record is on the timeline")
                XCTAssertLessThanOrEqual(view.timeline.count, 600)
                XCTAssertEqual(view.succeeded + view.failed, n)
                XCTAssertEqual(view.failed, ordered.filter { $0.status == .failed }.count)
                // The first slot holds the earliest record, wherever it came in the list.
                XCTAssertGreaterThan(view.timeline.first ?? 0, 0)
            }
        }
    }

    /// Times that are no times (a hand-edited report) are counted, not trapped on.
    func testAbsurdTimesDoNotCrash() {
        let accumulator = JobView.Accumulator()
        var r = records(1)[0]
        for t in [1e9, -1e300, .nan, .infinity, 1e300, 0, 5e12] {
            r.timings.total = t.isFinite ? abs(t) : t
            accumulator.add(r, at: t)
        }
        let view = accumulator.view(id: "j", name: "n", kind: "", state: "", total: 7, running: 0, elapsed: 1)
        XCTAssertEqual(view.timeline.reduce(0, +), 7)
        _ = RunSummary(records: [r], seconds: 1)
    }

    /// The terminal summary (and `--json`) and the report or dashboard show one share per
    /// stage: the terminal divided by summed totals, the report by summed stages (records
    /// of older versions, or cut short, have totals that are not their stages' sum).
    func testTheSummaryAndTheReportShowTheSameStageShares() {
        var generator = SeededGenerator(seed: 6)
        var rs = records(400)
        for i in rs.indices {
            rs[i].timings.queueWait = Double(i % 7)
            rs[i].timings.fetch = Double(i % 3)
            rs[i].timings.encode = Double(i % 5) + 1
            rs[i].timings.write = 0.5
            rs[i].timings.total = Double(i % 11) + 9  // not the stages' sum
        }
        rs.shuffle(using: &generator)
        let summary = RunSummary(records: rs, seconds: 20)
        let accumulator = JobView.Accumulator()
        for r in rs { accumulator.add(r, at: r.finishedAt!) }
        let view = accumulator.view(id: "j", name: "n", kind: "thumbnail", state: "succeeded", total: rs.count, running: 0, elapsed: 20)
        var sum = 0.0
        for stat in view.stages where stat.stage != Stage.queueWait.rawValue {
            XCTAssertEqual(stat.share, summary.stageShare[stat.stage] ?? 0, accuracy: 1e-12, stat.stage)
            sum += stat.share
        }
        XCTAssertEqual(sum, 1, accuracy: 1e-9, "the shares are of the stages that make up a task")
        XCTAssertNil(summary.stageShare[Stage.queueWait.rawValue])
        XCTAssertGreaterThan(summary.stageShare[Stage.decode.rawValue] ?? 0, 0.4)
    }

    /// `cancelled` is an outcome of its own (it was `failed` with the error code `cancelled`,
    /// tested by string in five places); records of older versions read as it.
    func testCancelledIsAnOutcomeAndOlderRecordsReadAsIt() throws {
        let old = #"{"input":"/in/a.jpg","status":"failed","error":{"code":"cancelled","message":"/in/a.jpg: job cancelled"}}"#
        let cancelled = try JSONDecoder().decode(TaskRecord.self, from: Data(old.utf8))
        XCTAssertEqual(cancelled.status, .cancelled)
        let encoded = String(decoding: try JSONEncoder().encode(TaskRecord(input: "/in/b.jpg", status: .cancelled)), as: UTF8.self)
        XCTAssertTrue(encoded.contains(#""status":"cancelled""#), encoded)
        var failed = TaskRecord(input: "/in/c.jpg", status: .failed)
        failed.error = .init(code: "corrupt", message: "/in/c.jpg: bad [corrupt]")
        let rs = [cancelled, failed, TaskRecord(input: "/in/d.jpg", status: .succeeded)]
        let summary = RunSummary(records: rs, seconds: 1)
        XCTAssertEqual([summary.succeeded, summary.failed, summary.skipped, summary.cancelled], [1, 1, 0, 1])
        XCTAssertEqual(summary.failures.map(\.code), ["corrupt"], "a cancelled task is not a failure")
        let accumulator = JobView.Accumulator()
        for (i, r) in rs.enumerated() { accumulator.add(r, at: Double(i)) }
        let view = accumulator.view(id: "j", name: "n", kind: "thumbnail", state: "cancelled", total: 3, running: 0, elapsed: 1)
        XCTAssertEqual([view.succeeded, view.failed, view.skipped, view.cancelled], [1, 1, 0, 1])
        XCTAssertEqual(view.failures.map(\.code), ["corrupt"])
    }

    func testTheHTMLReportOfShuffledRecordsIsWritten() {
        var generator = SeededGenerator(seed: 28)
        let shuffled = records(300).shuffled(using: &generator)
        let summary = RunSummary(records: shuffled, seconds: 15)
        let html = RecordWriters.html([.init(records: shuffled, summary: summary, id: "j", name: "shuffled", kind: "thumbnail")],
                                      about: [:])
        XCTAssertGreaterThan(html.count, 1000)
        XCTAssertTrue(String(decoding: html, as: UTF8.self).contains("shuffled"))
    }
}

/// One throughput and one byte unit across the terminal summary, the HTML report and
/// `tessera report` (a resumed job's report showed 31.7, 12.1 and 5.4 files/s; "MB" meant MiB).
final class ThroughputTests: XCTestCase {
    func testTheReportShowsTheSummarysRateAndDecimalMegabytes() {
        var records: [TaskRecord] = []
        for i in 0..<100 {
            var r = TaskRecord(input: "/in/\(i).jpg", status: .succeeded)
            // 60 done by an earlier run an hour before, 40 by this one over 10 s.
            r.finishedAt = i < 60 ? 1_000 + Double(i) * 0.1 : 4_600 + Double(i - 60) * 0.25
            r.timings.total = 100
            r.bytesIn = 2_000_000
            records.append(r)
        }
        let summary = RunSummary(records: records, seconds: 10, workedBefore: 60)
        XCTAssertEqual(summary.tasksPerSecond, 4, accuracy: 1e-9, "40 tasks this run in 10 s")
        let view = RecordWriters.ReportRun(records: records, summary: summary, id: "j", name: "n", kind: "thumbnail").view
        XCTAssertEqual(view.filesPerSecond, summary.tasksPerSecond, accuracy: 1e-9, "the report's rate is the summary's")
        XCTAssertEqual(view.megabytesPerSecond, 8, accuracy: 1e-9, "4 files/s of 2,000,000 bytes: 8 decimal MB/s")
        // Records alone (no summary): the time they were being worked on, not the hour between runs.
        XCTAssertEqual(RunSummary.busySeconds(records), 6.0 + 40 * 0.1, accuracy: 1e-6, "6 s back to back, then 40 tasks of 0.1 s")
    }
}
