import Foundation
import TesseraTasks
import Histogram
import TesseraModel

/// What a finished job comes to: counts, failures with reasons, throughput, task-time
/// percentiles (HdrHistogram), the per-stage split and each worker's peak memory.
public struct RunSummary: Codable, Sendable {
    public struct Failure: Codable, Sendable {
        public var code: String
        public var count: Int
        /// Up to five example messages (file and reason).
        public var examples: [String]
    }

    /// Task time percentiles, milliseconds.
    public struct Percentiles: Codable, Sendable {
        public var p50: Double
        public var p95: Double
        public var p99: Double
        public var max: Double
    }

    /// `summary`: what this JSON line is (docs/JSON.md).
    public var type = "summary"
    public var version = JSONOutput.version
    /// Tasks of the job: one per input file, or per pyramid part for tiles jobs.
    public var tasks: Int
    public var succeeded: Int
    public var failed: Int
    /// Unchanged since an earlier run (incremental): not redone.
    public var skipped: Int
    public var cancelled: Int
    public var elapsedSeconds: Double
    /// Tasks done by this run (succeeded or failed; skipped ones excluded) per second.
    public var tasksPerSecond: Double
    /// A resumed job: tasks an earlier, interrupted run did.
    public var resumedTasks: Int?
    /// Bytes read, each source counted once (a pyramid's parts all read one source).
    public var bytesIn: Int
    public var bytesOut: Int
    /// Task time percentiles over succeeded tasks, milliseconds.
    public var taskMilliseconds: Percentiles
    /// Share of summed task time per stage (queue wait excluded), by `Stage` name.
    public var stageShare: [String: Double]
    /// Summed milliseconds per stage, by `Stage` name.
    public var stageMilliseconds: [String: Double]
    /// The highest peak resident memory of a task, per worker, bytes (`workerPeakMemory` in JSON form).
    public var workerPeakRSSBytes: [String: UInt64]
    /// Workers whose figure is an upper bound (tasks ran side by side): `true`.
    public var workerPeakRSSShared: [String: Bool]?

    /// The highest task peak per worker, with its upper-bound flag.
    public var workerPeakMemory: [String: PeakMemory] {
        Dictionary(uniqueKeysWithValues: workerPeakRSSBytes.map { worker, bytes in
            (worker, PeakMemory(bytes: bytes, isUpperBound: workerPeakRSSShared?[worker] ?? false))
        })
    }
    public var failures: [Failure]
    /// Tiles jobs: the whole pyramid(s).
    public var pyramids: PyramidSummary?
    /// Files the directory walks passed over (not images Tessera reads), by extension.
    public var skippedFiles: [String: Int]?
    /// Where the outputs went, and the journal that makes reruns incremental.
    public var outputRoot: String?
    public var journal: String?
    /// The job's name and id (`run --report`: what `report` calls the run).
    public var job: String?
    public var jobID: String?

    /// What the tasks of a tiles job made together.
    public struct PyramidSummary: Codable, Sendable {
        public var sources: Int
        public var tasks: Int
        public var tiles: Int
        public var tilesSkipped: Int
        public var bytes: Int
        /// Tasks per DCT scale ("8/8", "1/8", "png").
        public var scales: [String: Int]
        /// Tasks per way of reaching their first row (restart-marker, skip-scanlines, ...).
        public var seeks: [String: Int]
        public var tilesPerSecond: Double

        /// One line: `pyramids: 1 source, 2320 tiles (13.3 MB), ...`.
        public var line: String {
            let scaleText = scales.sorted { $0.key > $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
            let seekText = seeks.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "pyramids: \(sources) source\(sources == 1 ? "" : "s"), \(tiles) tiles"
                + (tilesSkipped > 0 ? " (+\(tilesSkipped) kept from an earlier attempt)" : "")
                + String(format: ", %.0f tiles/s; %d tasks; decode scales: ", tilesPerSecond, tasks) + scaleText
                + "; band starts: " + seekText
        }
    }

    /// - Parameter workedBefore: tasks of a resumed job that an earlier run did (not in this run's rate).
    public init(records: [TaskRecord], seconds: Double, outputRoot: String? = nil, journal: String? = nil,
                workedBefore: Int = 0) {
        tasks = records.count
        succeeded = records.filter { $0.status == .succeeded }.count
        skipped = records.filter { $0.status == .skipped }.count
        cancelled = records.filter { $0.status == .cancelled }.count
        failed = records.filter { $0.status == .failed }.count
        elapsedSeconds = seconds
        tasksPerSecond = seconds > 0 ? Double(max(0, succeeded + failed - workedBefore)) / seconds : 0
        resumedTasks = workedBefore > 0 ? workedBefore : nil
        var bytesBySource: [String: Int] = [:]
        for r in records { bytesBySource[r.input] = max(bytesBySource[r.input] ?? 0, r.bytesIn) }
        bytesIn = bytesBySource.values.reduce(0, +)
        bytesOut = records.reduce(0) { $0 + $1.bytesOut }
        self.outputRoot = outputRoot
        self.journal = journal
        var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        var stages: [String: Double] = [:]
        for r in records where r.status == .succeeded {
            _ = histogram.record(UInt64(min(max(1, (r.timings.total * 1000).rounded()), 1e15)))  // microseconds
        }
        // The time stages took, failed tasks' too (a file that decoded, then failed, spent its decode).
        for r in records where r.status == .succeeded || r.status == .failed {
            for stage in Stage.allCases { stages[stage.rawValue, default: 0] += r.timings[stage] }
        }
        let measured = histogram.totalCount > 0
        func ms(_ v: UInt64) -> Double { measured ? Double(v) / 1000 : 0 }
        taskMilliseconds = Percentiles(p50: ms(histogram.valueAtPercentile(50)), p95: ms(histogram.valueAtPercentile(95)),
                                       p99: ms(histogram.valueAtPercentile(99)), max: ms(histogram.max))
        stageMilliseconds = stages
        let sums = Dictionary(uniqueKeysWithValues: stages.compactMap { k, v in Stage(rawValue: k).map { ($0, v) } })
        stageShare = Dictionary(uniqueKeysWithValues: StageTimings.shares(of: sums).map { ($0.key.rawValue, $0.value) })
        var peaks: [String: PeakMemory] = [:]
        for r in records {
            guard let w = r.worker, let p = r.peakMemory else { continue }
            peaks[w] = p.max(peaks[w])
        }
        workerPeakRSSBytes = peaks.mapValues(\.bytes)
        let shared = peaks.filter(\.value.isUpperBound).mapValues { _ in true }
        workerPeakRSSShared = shared.isEmpty ? nil : shared
        var byCode: [String: Failure] = [:]
        for r in records where r.status == .failed {
            guard let e = r.error else { continue }
            var f = byCode[e.code] ?? Failure(code: e.code, count: 0, examples: [])
            f.count += 1
            if f.examples.count < 5 { f.examples.append(e.message) }
            byCode[e.code] = f
        }
        failures = byCode.values.sorted { ($0.count, $1.code) > ($1.count, $0.code) }
        let tileRecords = records.compactMap { r in r.tiles.map { (r, $0) } }
        if !tileRecords.isEmpty {
            var scales: [String: Int] = [:], seeks: [String: Int] = [:]
            for (r, t) in tileRecords where t.part != .descriptor {
                let scale = "\(t.decode.scaleEighths)/8"
                scales[scale + (t.decode.boxShrink > 1 ? "+box\(t.decode.boxShrink)" : ""), default: 0] += 1
                seeks[t.decode.seek.rawValue, default: 0] += 1
            }
            let tiles = tileRecords.reduce(0) { $0 + $1.1.tilesWritten }
            pyramids = PyramidSummary(sources: Set(records.map(\.input)).count, tasks: tileRecords.count,
                                      tiles: tiles, tilesSkipped: tileRecords.reduce(0) { $0 + $1.1.tilesSkipped },
                                      bytes: tileRecords.reduce(0) { $0 + $1.1.bytes }, scales: scales, seeks: seeks,
                                      tilesPerSecond: seconds > 0 ? Double(tiles) / seconds : 0)
        }
    }
}

extension RunSummary {
    /// The seconds records were being worked on: the union of their tasks' intervals
    /// (finish time less task time). What a report of records without a summary divides by:
    /// the pause between an interrupted run and its resumption is not work.
    public static func busySeconds(_ records: [TaskRecord]) -> Double {
        let spans = records.compactMap { r -> (Double, Double)? in
            guard let end = r.finishedAt, end.isFinite else { return nil }
            let length = r.timings.total.isFinite ? min(max(0, r.timings.total / 1000), 86_400) : 0
            return (end - length, end)
        }.sorted { $0.0 < $1.0 }
        var busy = 0.0
        var current: (Double, Double)?
        for span in spans {
            if let c = current, span.0 <= c.1 {
                current = (c.0, max(c.1, span.1))
            } else {
                if let c = current { busy += c.1 - c.0 }
                current = span
            }
        }
        if let c = current { busy += c.1 - c.0 }
        return busy
    }
}

/// Per-task records as JSON lines and as CSV.
public enum RecordWriters {
    /// One run in an HTML report: its records and summary, and what to call it.
    public struct ReportRun {
        public var records: [TaskRecord]
        public var summary: RunSummary
        public var id: String
        public var name: String
        public var kind: String
        public init(records: [TaskRecord], summary: RunSummary, id: String, name: String, kind: String) {
            self.records = records
            self.summary = summary
            self.id = id
            self.name = name
            self.kind = kind
        }

        public var view: JobView {
            let accumulator = JobView.Accumulator()
            let start = records.compactMap(\.finishedAt).min() ?? 0
            for (i, r) in records.enumerated() { accumulator.add(r, at: r.finishedAt ?? start + Double(i) * 1e-3) }
            let state = summary.failed > 0 ? "failed" : summary.cancelled > 0 ? "cancelled" : "succeeded"
            return accumulator.view(id: id, name: name, kind: kind, state: state, total: summary.tasks, running: 0,
                                    elapsed: summary.elapsedSeconds, tasksPerSecond: summary.tasksPerSecond)
        }
    }

    /// A self-contained HTML report: the dashboard's page with each run's view and `about`
    /// (machine, version, job file…) embedded; two runs or more are also compared side by side.
    public static func html(_ runs: [ReportRun], about: [String: String]) -> [UInt8] {
        struct Embedded: Encodable {
            var jobs: [JobView]
            var workers: [String] = []
            var report: [String: String]
        }
        var report = about
        report["generated"] = ISO8601DateFormatter().string(from: Date())
        if runs.count == 1, let s = runs.first?.summary {
            report["elapsed"] = String(format: "%.2f s", s.elapsedSeconds)
            report["tasks per second"] = String(format: "%.1f", s.tasksPerSecond)
            report["task time p50 / p95 / p99 / max"] = [s.taskMilliseconds.p50, s.taskMilliseconds.p95,
                                                          s.taskMilliseconds.p99, s.taskMilliseconds.max]
                .map { String(format: "%.1f", $0) }.joined(separator: " / ") + " ms"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(Embedded(jobs: runs.map(\.view), report: report))) ?? Data()
        let title = runs.count == 1 ? "Tessera report: \(runs[0].name)" : "Tessera: " + runs.map(\.name).joined(separator: " vs ")
        return Array(DashboardPage.report(title: title, data: data).utf8)
    }

    public static func jsonLines(_ records: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for r in records {
            out += r
            out.append(UInt8(ascii: "\n"))
        }
        return out
    }

    public static let csvColumns = [
        "input", "status", "error_code", "error", "worker", "source_format", "source_width", "source_height",
        "scale_eighths", "bytes_in", "bytes_out", "outputs",
    ] + Stage.allCases.map { $0.snakeName + "_ms" } + ["peak_rss_bytes", "peak_rss_upper_bound",
        "thumbhash", "blurhash", "phash", "dhash", "average_color", "dominant_color"]

    public static func csv(_ records: [TaskRecord]) -> [UInt8] {
        func field(_ s: String) -> String {
            s.contains(",") || s.contains("\"") || s.contains("\n") ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
        }
        func num(_ v: Double) -> String { String(format: "%.3f", v) }
        var lines = [csvColumns.joined(separator: ",")]
        for r in records {
            let outputs = r.outputs.map { "\($0.name):\($0.width)x\($0.height):\($0.bytes)" }.joined(separator: ";")
            var row: [String] = [
                r.input, r.status.name, r.error?.code ?? "", r.error?.message ?? "", r.worker ?? "",
                r.sourceFormat?.rawValue ?? "", r.sourceWidth.map(String.init) ?? "", r.sourceHeight.map(String.init) ?? "",
                r.scaleEighths.map(String.init) ?? "", String(r.bytesIn), String(r.bytesOut), outputs,
            ]
            for stage in Stage.allCases { row.append(num(r.timings[stage])) }
            let peak = r.peakMemory
            row.append(peak.map { String($0.bytes) } ?? "")
            row.append(peak.map { $0.isUpperBound ? "true" : "false" } ?? "")
            row += [r.placeholders?.thumbhash ?? "", r.placeholders?.blurhash ?? ""]
            row += [r.fingerprints?.phash ?? "", r.fingerprints?.dhash ?? "", r.fingerprints?.averageColor ?? "",
                    r.fingerprints?.dominantColor ?? ""]
            lines.append(row.map(field).joined(separator: ","))
        }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }
}
