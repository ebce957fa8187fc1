import Foundation
import TesseraExecution
import TesseraImaging
import TesseraTasks
import XCTest

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
        var generator = SystemRandomNumberGenerator()
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

    func testTheHTMLReportOfShuffledRecordsIsWritten() {
        let shuffled = records(300).shuffled()
        let summary = RunSummary(records: shuffled, seconds: 15)
        let html = RecordWriters.html([.init(records: shuffled, summary: summary, id: "j", name: "shuffled", kind: "thumbnail")],
                                      about: [:])
        XCTAssertGreaterThan(html.count, 1000)
        XCTAssertTrue(String(decoding: html, as: UTF8.self).contains("shuffled"))
    }
}
