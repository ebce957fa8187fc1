import ArgumentParser
import Foundation
import TesseraCoordinator
import TesseraJobs
import TesseraWire

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a job file on this machine: a coordinator and N worker processes in one command.",
        discussion: """
            The journal (default: OUTPUT/.tessera/journal.sqlite) makes reruns incremental: inputs
            whose content and recipe are unchanged, and whose outputs exist, are skipped. Ends with
            a summary; --report writes the per-task records as JSON lines and CSV.
            """)

    @Argument(help: "Job file (YAML).")
    var job: String

    @Option(name: .shortAndLong, help: "Worker processes (default: the core count).")
    var workers: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(help: "Tasks each worker runs at once.")
    var concurrency: Int = 1

    @Option(help: "Tasks each worker holds queued beyond --concurrency (0: none, so no worker sits on work another could start).")
    var prefetch: Int = 0

    @Option(help: "SQLite journal.")
    var journal: String?

    @Option(help: "Write per-task records to FILE.jsonl and FILE.csv.")
    var report: String?

    @Option(help: "Preset file (JSON) adding presets (repeatable).")
    var presets: [String] = []

    @Flag(help: "Progress and summary as JSON lines.")
    var json = false

    @Flag(help: "Send image bytes inside messages, as workers without shared storage do.")
    var inline = false

    @Option(help: "Serve the coordinator's Prometheus metrics on this port while the job runs.")
    var metricsPort: Int?

    @OptionGroup var overrides: JobOverrides
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard workers >= 1 else { throw ValidationError("--workers must be at least 1") }
    }

    func run() throws {
        try execute(try loadJob(job, presets: presets, overrides: overrides))
    }

    /// Runs `spec` on a local pool (what `run` does with a job file, and `tiles` with its arguments).
    func execute(_ job: JobSpec) throws {
        var spec = job
        if inline { spec.options.inline = true }
        let journalPath = journal ?? spec.output + "/.tessera/journal.sqlite"
        try FileManager.default.createDirectory(atPath: (journalPath as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        var logger = log.logger("tessera.run")
        if log.logLevel == "info" { logger.logLevel = .warning }  // the progress bar says enough
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        let pool = try LocalPool(journal: journalPath, workers: workers, executable: executable,
                                 workerArguments: ["--concurrency", String(concurrency), "--prefetch", String(prefetch),
                                                   "--log-level", "warning"],
                                 configure: { $0.metricsPort = metricsPort }, logger: logger)
        let signals = onTermination { pool.coordinator.stop() }
        defer { _ = signals }
        let client = CoordinatorClient(endpoint: pool.endpoint, timeout: 60)
        let start = Date()
        let submitted: SubmitReply
        do { submitted = try client.submit(spec) } catch {
            warn("error: \(error)")
            pool.shutdown()
            throw Exit.usage
        }
        let progress = Progress(total: submitted.tasks, json: json)
        var end: JobStatus
        while true {
            // `wait` answers the moment the job ends; its timeout paces the progress updates.
            if let done = try? client.request(Envelope(MessageType.wait, json: JobQuery(job: submitted.job)),
                                              timeout: progress.interactive ? 0.2 : 1).decode(JobStatus.self) {
                progress.update(done, elapsed: Date().timeIntervalSince(start))
                end = done
                break
            }
            if let s = try? client.status(job: submitted.job).jobs.first {
                progress.update(s, elapsed: Date().timeIntervalSince(start))
                if s.isTerminal {
                    end = s
                    break
                }
            }
        }
        progress.finish()
        let seconds = Date().timeIntervalSince(start)
        let raw = (try? client.results(job: submitted.job)) ?? []
        pool.shutdown()
        let records = raw.compactMap { try? JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
        let summary = RunSummary(records: records, seconds: seconds)
        if let report {
            let base = report.hasSuffix(".jsonl") || report.hasSuffix(".csv")
                ? (report as NSString).deletingPathExtension : report
            try FileIO.writeAtomically(RecordWriters.jsonLines(raw), to: base + ".jsonl")
            try FileIO.writeAtomically(RecordWriters.csv(records), to: base + ".csv")
        }
        if json {
            printJSONLine(summary)
        } else {
            printSummary(summary, job: end, planned: submitted)
        }
        if end.failed > 0 || end.state == .cancelled { throw Exit.someFailed }
    }

    func printSummary(_ s: RunSummary, job: JobStatus, planned: SubmitReply) {
        let unit = job.kind == .tiles ? "tasks" : "images"
        print(String(format: "%@ (%@): %d %@ in %.2f s, %.1f %@/s — %d ok, %d skipped (unchanged), %d failed%@",
                     job.name, job.id, s.images, unit, s.seconds, s.imagesPerSecond, unit, s.succeeded, s.skipped, s.failed,
                     s.cancelled > 0 ? ", \(s.cancelled) cancelled" : ""))
        if let p = s.pyramids { print(p.line) }
        if s.succeeded > 0 {
            print(String(format: "task time: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms", s.p50, s.p95, s.p99,
                         s.maxMilliseconds))
            let order = ["read", "decode", "resize", "finish", "encode", "write"]
            print("stages: " + order.map { String(format: "%@ %.0f%%", $0, (s.stageShare[$0] ?? 0) * 100) }
                .joined(separator: ", "))
            print("bytes: \(formatBytes(s.bytesIn)) in, \(formatBytes(s.bytesOut)) out; planned in "
                  + String(format: "%.0f ms", planned.planMilliseconds))
        }
        if !s.workerPeakRSS.isEmpty {
            print("peak memory per worker: " + s.workerPeakRSS.sorted { $0.key < $1.key }
                .map { "\($0.key.split(separator: "@").first ?? "") \(formatBytes($0.value))" }.joined(separator: ", "))
        }
        for f in s.failures {
            print("failed (\(f.code)): \(f.count)")
            for e in f.examples { print("  \(e)") }
        }
    }
}

/// A progress bar with rate and ETA on a terminal; plain (or JSON) lines otherwise.
final class Progress {
    let total: Int
    let json: Bool
    let interactive: Bool
    private var lastLine = 0.0

    init(total: Int, json: Bool) {
        self.total = total
        self.json = json
        interactive = !json && isatty(STDERR_FILENO) != 0
    }

    func update(_ s: JobStatus, elapsed: Double) {
        let rate = elapsed > 0 ? Double(s.done) / elapsed : 0
        let eta = rate > 0 ? Double(s.total - s.done) / rate : 0
        if json {
            struct Line: Encodable { var done: Int; var total: Int; var failed: Int; var rate: Double; var eta: Double }
            printJSONLine(Line(done: s.done, total: s.total, failed: s.failed, rate: rate, eta: eta))
            return
        }
        if interactive {
            let width = 30
            let filled = s.total > 0 ? width * s.done / s.total : width
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            let line = String(format: "\r[%@] %d/%d %3.0f%%  %.1f img/s  ETA %@  %d failed ", bar, s.done, s.total,
                              s.total > 0 ? 100 * Double(s.done) / Double(s.total) : 100, rate, clock(eta), s.failed)
            FileHandle.standardError.write(Data(line.utf8))
        } else if elapsed - lastLine >= 5 || s.isTerminal {
            lastLine = elapsed
            warn(String(format: "progress %d/%d, %.1f img/s, ETA %@, %d failed", s.done, s.total, rate, clock(eta), s.failed))
        }
    }

    func finish() {
        if interactive { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    private func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
