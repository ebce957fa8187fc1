import ArgumentParser
import Foundation
import TesseraService
import TesseraCoordinator
import TesseraExecution
import TesseraImaging
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraModel
import TesseraReports

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a job file on this machine: a coordinator and N worker processes in one command.",
        discussion: """
            The journal (default: OUTPUT/.tessera/journal.sqlite) makes reruns incremental: inputs \
            whose content and recipe are unchanged, and whose outputs exist, are skipped. Ends with \
            a summary; --report writes the per-task records as JSON lines and CSV.

            \(Exit.help)
            """)

    @Argument(help: "Job file (YAML).", completion: .file(extensions: ["yaml", "yml", "json"]))
    var job: String

    @Option(name: [.customShort("w"), .customLong("workers")], parsing: .unconditional, help: "Worker processes (default: the core count).")
    var workersOption: Int?

    var workers: Int { workersOption ?? ProcessInfo.processInfo.activeProcessorCount }

    @Option(parsing: .unconditional, help: "Tasks each worker runs at once.")
    var concurrency: Int = 1

    @Option(parsing: .unconditional, help: "Tasks each worker holds queued beyond --concurrency, to start the next at once (at a job's end, what a worker holds unstarted goes to an idle one).")
    var prefetch: Int = 1

    @Option(help: "SQLite journal.")
    var journal: String?

    @Option(help: "Write per-task records to FILE.jsonl and FILE.csv (FILE.html: also a self-contained HTML report with charts).", completion: .file())
    var report: String?

    @Option(help: "Preset file (JSON) adding presets (repeatable).", completion: .file(extensions: ["json"]))
    var presets: [String] = []

    @Flag(help: "Progress and summary as JSON lines.")
    var json = false

    @Flag(help: "Send image bytes inside messages, as workers without shared storage do.")
    var inline = false

    @Option(parsing: .unconditional, help: "Serve the coordinator's /metrics, /healthz and /readyz on this port while the job runs.")
    var metricsPort: Int?

    @Option(help: "Address the HTTP port binds (0.0.0.0: every interface).")
    var metricsAddress: String = "127.0.0.1"

    @Flag(help: "Serve a live dashboard while the job runs (on --metrics-port, or a free port); its address is printed.")
    var dashboard = false

    @Option(help: ArgumentHelp("Fault injection for tests: the journal may grow by this many pages once the job is planned, then fails as on a full disk.", visibility: .hidden))
    var journalGrowthPages: Int?

    @OptionGroup var overrides: JobOverrides
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard (1...256).contains(workers) else { throw ValidationError("--workers must be 1...256, got \(workers)") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1...256, got \(concurrency)") }
        guard (0...256).contains(prefetch) else { throw ValidationError("--prefetch must be 0...256, got \(prefetch)") }
    }

    func run() throws {
        try execute(try loadJob(job, presets: presets, overrides: overrides))
    }

    /// Seconds running tasks get to finish after SIGINT/SIGTERM before their workers are killed.
    static let interruptGrace = 3.0

    /// Runs `spec` on a local pool (what `run` does with a job file, and `tiles` with its arguments):
    /// start the pool, submit the job (or resume an interrupted run of it), follow it to its
    /// end, then report.
    func execute(_ job: JobSpec) throws {
        var spec = job
        if inline { spec.options.inline = true }
        let journalPath = journal ?? LocalRun.journalPath(output: spec.output)
        // Inputs that are not there: a usage error, before the journal (or anything) is made.
        for source in spec.inputs {
            let path: String
            switch source {
            case .path(let p, _, _): path = p
            case .manifest(let m): path = m
            }
            if !Location.isRemote(path) && !Paths.exists(path) {
                warn("error: \(Paths.display(path)): no such file or directory [input-not-found]")
                throw Exit.usage
            }
        }
        // A root that cannot be written is a usage error, found before any work starts.
        try OutputRoot.prepare(spec.output, journal: journalPath, storage: spec.storage)
        let pool = try startPool(journal: journalPath)
        // First SIGINT/SIGTERM: `follow` stops the job cleanly; a second: kill the workers and exit now.
        let signals = StopSignals(first: { _ in
            // No new task from this moment: the follow loop sees the signal at its next turn,
            // up to a second later (then the workers are told to hand back what they hold).
            pool.coordinator.holdDispatch()
        }, again: { sig in
            pool.killWorkers()
            warn("\n\(StopSignals.name(sig)) again: workers killed, exiting now (a rerun resumes)")
            Foundation.exit(StopSignals.status(sig))
        })
        defer { _ = signals }
        let client = CoordinatorClient(endpoint: pool.endpoint, timeout: 5)
        let clock = Stopwatch()
        let started = try submitOrResume(spec, pool: pool, client: client, journal: journalPath)
        let last = try follow(started, spec: spec, pool: pool, client: client, signals: signals, clock: clock,
                              journal: journalPath)
        let seconds = clock.seconds
        let raw = (try? client.results(job: started.id)) ?? []
        pool.shutdown()
        let records = raw.compactMap { try? JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
        var summary = RunSummary(records: records, seconds: seconds, outputRoot: spec.output, journal: journalPath,
                                 workedBefore: started.earlier?.worked ?? 0)
        summary.skippedFiles = started.skippedFiles
        summary.job = spec.name
        summary.jobID = started.id
        if let report {
            try writeReport(to: report, raw: raw, records: records, summary: summary, spec: spec, id: started.id,
                            journal: journalPath)
        }
        if json {
            printJSONLine(summary)
        } else {
            printSummary(summary, job: last, planMilliseconds: started.planMilliseconds)
        }
        if last.failed > 0 || last.state == .cancelled { throw Exit.someFailed }
    }

    /// The coordinator in this process and the worker processes, the dashboard's address printed.
    private func startPool(journal: String) throws -> LocalPool {
        var logger = log.logger("tessera.run")
        if log.logLevel == "info" { logger.logLevel = .warning }  // the progress bar says enough
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        let pool: LocalPool
        do {
            pool = try LocalPool(journal: journal, workers: workers, executable: executable,
                                 workerArguments: ["--concurrency", String(concurrency), "--prefetch", String(prefetch),
                                                   "--log-level", "warning"],
                                 configure: {
                                     $0.metricsPort = metricsPort ?? (dashboard ? 0 : nil)
                                     $0.metricsAddress = metricsAddress
                                     $0.dashboard = dashboard
                                     $0.journalGrowthPages = journalGrowthPages
                                 }, logger: logger)
        } catch let busy as JournalBusy {
            warn("error: \(busy) [journal-in-use]")
            throw Exit.usage
        } catch {
            warn("error: \(journal): cannot start the coordinator: \(error) [coordinator-failed]")
            throw Exit.coordinator
        }
        if dashboard, let port = pool.coordinator.metricsPort {
            warn("dashboard: http://\(metricsAddress.contains(":") ? "[\(metricsAddress)]" : metricsAddress):\(port)/")
        }
        return pool
    }

    /// The job this run follows: submitted now, or an interrupted run's, resumed.
    struct Started {
        var id: String
        var total: Int
        var planMilliseconds: Double
        var skippedFiles: [String: Int]?
        var earlier: RecoveredJob?
    }

    /// Resumes an interrupted run of this same job (other unfinished jobs of this journal
    /// are dropped), or submits it.
    private func submitOrResume(_ spec: JobSpec, pool: LocalPool, client: CoordinatorClient, journal: String) throws -> Started {
        let (earlier, others) = LocalRun.resumption(of: spec, among: pool.coordinator.recovered)
        for other in others {
            _ = try? client.cancel(job: other.id)
            warn("note: cancelled unfinished job \(other.id) (\(other.spec.name)) of an earlier run with other settings")
        }
        if let earlier {
            warn("resuming \(earlier.id) (\(spec.name)): \(earlier.done) of \(earlier.total) tasks done by an earlier run")
            return Started(id: earlier.id, total: earlier.total, planMilliseconds: 0, earlier: earlier)
        }
        do {
            // Our own coordinator: planning may take as long as it takes (it stops with us).
            let submitted = try client.submit(spec, timeout: 3600)
            if submitted.tasks == 0 {
                warn("warning: no images in the job's inputs" + (SkippedFiles.line(submitted.skippedFiles ?? [:]).map { " (\($0))" } ?? ""))
            }
            return Started(id: submitted.job, total: submitted.tasks, planMilliseconds: submitted.planMilliseconds,
                           skippedFiles: submitted.skippedFiles)
        } catch let e as ErrorReply {
            pool.killWorkers()
            pool.stopCoordinator()
            warn("error: \(e)")
            throw e.code == "internal" ? Exit.coordinator : Exit.usage
        } catch {
            pool.killWorkers()
            warn("error: \(pool.failure.map { "\(journal): the coordinator stopped: \($0)" } ?? "\(error)") [coordinator-failed]")
            throw Exit.coordinator
        }
    }

    /// Shows progress until the job ends; a signal stops it (`interrupted`), a dead coordinator fails it.
    private func follow(_ started: Started, spec: JobSpec, pool: LocalPool, client: CoordinatorClient,
                        signals: StopSignals, clock: Stopwatch, journal: String) throws -> JobStatus {
        let poll = CoordinatorClient(endpoint: pool.endpoint, timeout: 1)  // progress: a dead coordinator shows fast
        let progress = Progress(total: started.total, tiles: spec.kind == .tiles, json: json,
                                doneBefore: started.earlier?.done ?? 0, workedBefore: started.earlier?.worked ?? 0)
        var last = JobStatus(id: started.id, name: spec.name, kind: spec.kind, priority: spec.priority, state: .queued,
                             total: started.total, pending: started.total, running: 0, succeeded: 0, failed: 0, skipped: 0,
                             cancelled: 0, submitted: Date().timeIntervalSince1970 - clock.seconds, finished: nil)
        while !last.isTerminal {
            if let sig = signals.first {
                progress.finish()
                try interrupted(by: sig, pool: pool, client: client, last: last, clock: clock, spec: spec, journal: journal)
            }
            if !pool.isRunning {
                progress.finish()
                pool.cleanUpAfterFailure(outputRoot: spec.output)
                warn("error: \(journal): the coordinator stopped: \(pool.failure.map { "\($0)" } ?? "no reason given")"
                     + " [coordinator-failed]")
                throw Exit.coordinator
            }
            // `wait` answers the moment the job ends; its timeout paces the progress updates.
            if let done = try? client.request(Envelope(MessageType.wait, json: JobQuery(job: started.id)),
                                              timeout: progress.interactive ? 0.2 : 1).decode(JobStatus.self) {
                last = done
            } else if pool.isRunning, let s = try? poll.status(job: started.id).jobs.first {
                last = s
            }
            progress.update(last, elapsed: clock.seconds)
        }
        progress.finish()
        return last
    }

    /// `--report FILE`: the records as JSON lines (then this run's summary, what `tessera report`
    /// takes its rate from) and CSV; with `.html`, the self-contained report too.
    private func writeReport(to report: String, raw: [[UInt8]], records: [TaskRecord], summary: RunSummary, spec: JobSpec,
                             id: String, journal: String) throws {
        let base = report.hasSuffix(".jsonl") || report.hasSuffix(".csv") || report.hasSuffix(".html")
            ? (report as NSString).deletingPathExtension : report
        let summaryLine = (try? JSONEncoder().encode(summary)).map { [UInt8]($0) }
        try FileIO.writeAtomically(RecordWriters.jsonLines(raw + (summaryLine.map { [$0] } ?? [])), to: base + ".jsonl")
        try FileIO.writeAtomically(RecordWriters.csv(records), to: base + ".csv")
        guard report.hasSuffix(".html") else { return }
        var about = ReportAbout.here()
        // `tessera tiles` runs a job made from its arguments ("-"), not a file.
        if self.job != "-" {
            about["job file"] = self.job
            about["jobFile"] = try? String(contentsOfFile: self.job, encoding: .utf8)
        }
        about["journal"] = journal
        about["outputs"] = spec.output
        let run = RecordWriters.ReportRun(records: records, summary: summary, id: id, name: spec.name, kind: spec.kind.rawValue)
        try FileIO.writeAtomically(RecordWriters.html([run], about: about), to: report)
    }

    /// The first SIGINT/SIGTERM: no new tasks; running ones get `interruptGrace` seconds,
    /// then one line says what was done and what is left, and the command exits 130/143.
    private func interrupted(by sig: Int32, pool: LocalPool, client: CoordinatorClient, last: JobStatus, clock: Stopwatch,
                             spec: JobSpec, journal: String) throws -> Never {
        let name = StopSignals.name(sig)
        warn("\(name): stopping: no new tasks; \(last.running) running get up to \(Int(Run.interruptGrace)) s to finish"
             + " (again to stop now)")
        pool.interrupt(grace: Run.interruptGrace)
        let s = (try? client.status(job: last.id).jobs.first) ?? last
        pool.stopCoordinator()
        let left = s.total - s.done
        let seconds = clock.seconds
        if json {
            printJSONLine(Interrupted(signal: name, elapsedSeconds: seconds, job: s.id, total: s.total, done: s.done,
                                      succeeded: s.succeeded, failed: s.failed, skipped: s.skipped, left: left,
                                      outputRoot: spec.output, journal: journal))
        } else {
            print(String(format: "interrupted by %@ after %.1f s: %d of %d tasks done (%d ok, %d failed, %d skipped), %d left;"
                         + " outputs in %@; the same command resumes (journal %@)",
                         name, seconds, s.done, s.total, s.succeeded, s.failed, s.skipped, left, spec.output, journal))
        }
        Foundation.exit(StopSignals.status(sig))
    }

    /// The `--json` line of an interrupted run.
    struct Interrupted: Encodable {
        var type = "interrupted"
        var version = JSONOutput.version
        var signal: String
        var elapsedSeconds: Double
        var job: String
        var total: Int
        var done: Int
        var succeeded: Int
        var failed: Int
        var skipped: Int
        var left: Int
        var outputRoot: String
        var journal: String
    }

    func printSummary(_ s: RunSummary, job: JobStatus, planMilliseconds: Double) {
        let tiles = job.kind == .tiles
        let unit = tiles ? "parts" : "images"
        // A rerun that skipped every part made no tiles: it knows parts, not pyramids.
        var what = !tiles ? counted(s.tasks, "image")
            : s.pyramids.map { "\(s.tasks) parts of \($0.sources) pyramid\($0.sources == 1 ? "" : "s")" } ?? "\(s.tasks) parts"
        if let before = s.resumedTasks { what += " (\(before) done by an earlier run)" }
        print(String(format: "%@ (%@): %@ in %.2f s, %.1f %@/s — %d ok, %d skipped (unchanged), %d failed%@",
                     job.name, job.id, what, s.elapsedSeconds, s.tasksPerSecond, unit, s.succeeded, s.skipped, s.failed,
                     s.cancelled > 0 ? ", \(s.cancelled) cancelled" : ""))
        if let p = s.pyramids { print(p.line) }
        if s.succeeded > 0 {
            let t = s.taskMilliseconds
            print(String(format: "task time: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms", t.p50, t.p95, t.p99, t.max))
            // Network stages only when the job used the network (URL inputs, object storage).
            let shown = Stage.allCases.filter {
                $0 != .queueWait && $0 != .total && (($0 != .fetch && $0 != .store) || (s.stageMilliseconds[$0.rawValue] ?? 0) > 0)
            }
            let shares = shown.map { stage in String(format: "%@ %.0f%%", stage.rawValue, (s.stageShare[stage.rawValue] ?? 0) * 100) }
            print("stages: " + shares.joined(separator: ", "))
            print("bytes: \(formatBytes(s.bytesIn)) in, \(formatBytes(s.bytesOut)) out"
                  + (planMilliseconds > 0 ? "; planned in " + String(format: "%.0f ms", planMilliseconds) : ""))
        }
        if !s.workerPeakMemory.isEmpty {
            let peaks = s.workerPeakMemory.sorted { $0.key < $1.key }
            print("peak memory per worker: " + peaks.map { "\($0.key.split(separator: "@").first ?? "") \($0.value.display)" }
                .joined(separator: ", ")
                + (peaks.contains { $0.value.isUpperBound } ? " (≤: tasks ran side by side, the process peak is an upper bound)" : ""))
        }
        if let line = SkippedFiles.line(s.skippedFiles ?? [:]) { print(line) }
        printFailures(s.failures, more: report == nil ? "--report FILE lists them all" : "all in the report")
        print("outputs in \(s.outputRoot ?? "?"); journal \(s.journal ?? "?")")
    }
}

/// A progress bar with rate and ETA on a terminal (fitted to its width, redrawn in
/// place); plain lines every 5 s otherwise, or JSON lines with `--json`.
final class Progress {
    let total: Int
    let json: Bool
    let interactive: Bool
    /// Tiles jobs count pyramid parts, not images.
    let unit: String
    /// Tasks a resumed job had done before this run (not counted in the rate).
    let doneBefore: Int
    private var lastLine = -5.0

    let workedBefore: Int

    init(total: Int, tiles: Bool, json: Bool, doneBefore: Int = 0, workedBefore: Int = 0) {
        self.total = total
        self.doneBefore = doneBefore
        self.workedBefore = workedBefore
        self.json = json
        unit = tiles ? "parts" : "img"
        interactive = !json && isatty(STDERR_FILENO) != 0
    }

    /// The terminal's width in columns (80 when it does not say).
    static func columns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    func update(_ s: JobStatus, elapsed: Double) {
        // Skipped (unchanged) tasks take no time: they count for progress, not for the rate.
        let worked = max(0, s.succeeded + s.failed - workedBefore)
        let rate = elapsed > 0 ? Double(worked) / elapsed : 0
        let overall = elapsed > 0 ? Double(max(0, s.done - doneBefore)) / elapsed : 0
        let eta = overall > 0 ? Double(s.total - s.done) / overall : 0
        if json {
            guard elapsed - lastLine >= 1 || s.isTerminal else { return }
            lastLine = elapsed
            struct Line: Encodable {
                var type = "progress"
                var version = JSONOutput.version
                var done: Int, total: Int, succeeded: Int, failed: Int, skipped: Int
                var perSecond: Double, etaSeconds: Double, elapsedSeconds: Double
            }
            printJSONLine(Line(done: s.done, total: s.total, succeeded: s.succeeded, failed: s.failed, skipped: s.skipped,
                               perSecond: rate, etaSeconds: eta, elapsedSeconds: elapsed))
            return
        }
        if interactive {
            let percent = s.total > 0 ? 100 * Double(s.done) / Double(s.total) : 100
            var tail = String(format: " %d/%d %3.0f%%  %.1f %@/s  ETA %@", s.done, s.total, percent, rate, unit, clock(eta))
            if s.failed > 0 { tail += "  \(s.failed) failed" }
            if s.skipped > 0 { tail += "  \(s.skipped) unchanged" }
            let columns = Progress.columns()
            let width = max(0, min(40, columns - tail.count - 3))
            var line = tail
            if width >= 8 {
                let filled = s.total > 0 ? width * s.done / s.total : width
                line = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]" + tail
            }
            // Three columns stay free: a ^C echoed by the terminal must not wrap to a line
            // that the next redraw (or the interrupt's) cannot clear.
            if line.count >= columns - 3 { line = String(line.prefix(max(0, columns - 4))) }
            // Carriage return, the line, clear to the end: redrawn in place, never wrapping.
            Console.write(STDERR_FILENO, "\r" + line + "\u{1B}[K")
        } else if elapsed - lastLine >= 5 || s.isTerminal {
            lastLine = elapsed
            warn(String(format: "progress %d/%d, %.1f %@/s, ETA %@, %d failed", s.done, s.total, rate, unit, clock(eta),
                        s.failed))
        }
    }

    func finish() {
        if interactive { Console.write(STDERR_FILENO, "\r\u{1B}[K") }
    }

    private func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}


/// Where a report was made: machine and version.
enum ReportAbout {
    static func here() -> [String: String] {
        var u = utsname()
        uname(&u)
        func text<T>(_ field: T) -> String { withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) } }
        let memory = ProcessInfo.processInfo.physicalMemory
        return ["version": "tessera \(TesseraVersion.string)",
                "machine": "\(text(u.nodename)): \(ProcessInfo.processInfo.activeProcessorCount) cores, \(memory >> 30) GiB, \(text(u.sysname)) \(text(u.release)) \(text(u.machine))"]
    }
}
