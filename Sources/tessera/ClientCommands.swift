import ArgumentParser
import Foundation
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraModel
import TesseraReports

/// Replaces a job's inputs and output root (command-line overrides, relative to the current directory).
struct JobOverrides: ParsableArguments {
    @Option(name: .long, help: "Use these inputs instead of the job file's (repeatable).", completion: .file())
    var input: [String] = []

    @Option(name: .long, help: "Use this output root instead of the job file's.", completion: .directory)
    var output: String?

    @Flag(help: "Incremental reruns read every earlier output and compare its hash (without it, only outputs whose size or time changed are read; missing or resized ones are made again).")
    var verify = false

    func apply(to spec: inout JobSpec) {
        let cwd = FileManager.default.currentDirectoryPath
        func absolute(_ p: String) -> String { Location.resolve(p, from: cwd) }
        if !input.isEmpty { spec.inputs = input.map { .path(absolute($0), patterns: [], recursive: true) } }
        if let output { spec.output = absolute(output) }
        if verify { spec.options.verify = true }
    }
}

/// Loads a job file or exits 2 with its validation error (file, line, field).
func loadJob(_ path: String, presets: [String], overrides: JobOverrides? = nil) throws -> JobSpec {
    do {
        var spec = try JobFile.load(path: path, catalog: try loadCatalog(presets))
        overrides?.apply(to: &spec)
        return spec
    } catch let e as JobError {
        warn("error: \(e)")
        throw Exit.usage
    } catch let e as ImagingError {
        warn("error: \(e)")
        throw Exit.usage
    }
}

/// Client errors: a coordinator that answers with an error, or does not answer.
func clientCall<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let e as ErrorReply {
        warn("error: \(e)")
        throw e.code == "no-such-job" || e.code == "invalid-job" ? Exit.usage
            : e.code == "internal" ? Exit.coordinator : Exit.someFailed
    } catch let e as ClientTimeout {
        warn("error: \(e)")
        throw Exit.coordinator
    } catch let e as CoordinatorUnreachable {
        warn("error: \(e)")
        throw Exit.coordinator
    } catch let e as AuthenticationRefused {
        warn("error: \(e)")
        throw Exit.refused
    }
}

func describe(_ s: JobStatus) -> String {
    var parts = ["\(s.id) \(s.name) [\(s.kind.rawValue)] \(s.state.rawValue): \(s.done)/\(s.total) done",
                 "\(s.succeeded) ok", "\(s.failed) failed"]
    if s.skipped > 0 { parts.append("\(s.skipped) skipped") }
    if s.cancelled > 0 { parts.append("\(s.cancelled) cancelled") }
    if s.running > 0 { parts.append("\(s.running) running") }
    return parts.joined(separator: ", ")
}

struct Submit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Submit a job file to a running coordinator; prints the job id.", discussion: Exit.help)

    @Argument(help: "Job file (YAML).", completion: .file(extensions: ["yaml", "yml", "json"]))
    var job: String

    @Option(help: "Preset file (JSON) adding presets (repeatable).", completion: .file(extensions: ["json"]))
    var presets: [String] = []

    @Flag(help: "Print {\"type\": \"submitted\", \"version\": 1, \"job\": ID, \"tasks\": N, \"planMilliseconds\": MS} (with --wait, then the job's final status; docs/JSON.md).")
    var json = false

    @Flag(help: "Wait for the job to end (exit 1 if any task failed).")
    var wait = false

    @OptionGroup var overrides: JobOverrides
    @OptionGroup var target: CoordinatorOption

    func run() throws {
        let spec = try loadJob(job, presets: presets, overrides: overrides)
        let client = try target.client(defaultTimeout: 120)
        let reply = try clientCall { try client.submit(spec) }
        if json { printJSONLine(reply, type: "submitted") } else { print(reply.job) }
        guard wait else { return }
        let end = try clientCall { try client.wait(job: reply.job) }
        if json { printJSONLine(end, type: "job") } else { print(describe(end)) }
        if end.failed > 0 || end.state == .cancelled { throw Exit.someFailed }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show jobs (all recent ones, or one).")

    @Argument(help: "Job id.")
    var id: String?

    @Flag(help: "Jobs and workers as JSON (docs/JSON.md).")
    var json = false

    @OptionGroup var target: CoordinatorOption

    func run() throws {
        let client = try target.client
        let reply = try clientCall { try client.status(job: id) }
        if json {
            printJSONLine(reply, type: "status")
            return
        }
        print(counted(reply.workers, "worker") + " connected")
        for s in reply.jobs { print(describe(s)) }
    }
}

struct Wait: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait for a job to end; exit 1 if any task failed.", discussion: Exit.help)

    @Argument(help: "Job id.")
    var id: String

    @Flag(help: "The job's final status as JSON (docs/JSON.md).")
    var json = false

    @OptionGroup var target: CoordinatorOption

    func run() throws {
        let client = try target.client
        let end = try clientCall { try client.wait(job: id) }
        if json { printJSONLine(end, type: "job") } else { print(describe(end)) }
        if end.failed > 0 || end.state == .cancelled { throw Exit.someFailed }
    }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a job: queued tasks are dropped, running ones revoked.")

    @Argument(help: "Job id.")
    var id: String

    @OptionGroup var target: CoordinatorOption

    func run() throws {
        let client = try target.client
        print(describe(try clientCall { try client.cancel(job: id) }))
    }
}

struct Results: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "results",
        abstract: "Print a job's per-task records (JSON lines or CSV), or write its HTML report.")

    @Argument(help: "Job id.")
    var id: String

    @Flag(help: "CSV instead of JSON lines.")
    var csv = false

    @Option(help: "Write a self-contained HTML report of the job (charts and tables) to FILE instead.")
    var html: String?

    @OptionGroup var target: CoordinatorOption

    func run() throws {
        let client = try target.client
        let records = try clientCall { try client.results(job: id) }
        if let html {
            let decoded = records.compactMap { try? JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
            let status = try clientCall { try client.status(job: id) }.jobs.first
            let seconds = max(0, (status?.finished ?? Date().timeIntervalSince1970) - (status?.submitted ?? 0))
            let summary = RunSummary(records: decoded, seconds: seconds, outputRoot: nil)
            let run = RecordWriters.ReportRun(records: decoded, summary: summary, id: id, name: status?.name ?? id,
                                              kind: status?.kind.rawValue ?? "")
            var about = ReportAbout.here()
            about["coordinator"] = target.coordinator
            try FileIO.writeAtomically(RecordWriters.html([run], about: about), to: html)
            return
        }
        let bytes = csv
            ? RecordWriters.csv(records.compactMap { try? JSONDecoder().decode(TaskRecord.self, from: Data($0)) })
            : RecordWriters.jsonLines(records)
        FileHandle.standardOutput.write(Data(bytes))
    }
}


/// `tessera report A.jsonl [B.jsonl …] --html FILE`: records of runs (from `run --report` or
/// `results`) as one HTML report; several runs are compared side by side.
struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Make a self-contained HTML report from records (JSON lines); two or more runs are compared.")

    @Argument(help: "Record files (JSON lines: `run --report FILE` writes FILE.jsonl; `results ID` prints them).",
              completion: .file(extensions: ["jsonl"]))
    var records: [String]

    @Option(help: "The HTML file to write.", completion: .file(extensions: ["html"]))
    var html: String

    func run() throws {
        var runs: [RecordWriters.ReportRun] = []
        for file in records {
            let bytes: [UInt8]
            do { bytes = try FileIO.read(file, limit: 1 << 31) } catch {
                warn("error: \(error)")
                throw Exit.usage
            }
            var decoded: [TaskRecord] = []
            var written: RunSummary?
            struct Kind: Decodable { var type: String? }
            for (n, line) in bytes.split(separator: UInt8(ascii: "\n")).enumerated() where !line.isEmpty {
                // `run --report` ends with the run's summary: its rate is the run's own.
                if (try? JSONDecoder().decode(Kind.self, from: Data(line)))?.type == "summary",
                   let s = try? JSONDecoder().decode(RunSummary.self, from: Data(line)) {
                    written = s
                    continue
                }
                guard let r = try? JSONDecoder().decode(TaskRecord.self, from: Data(line)) else {
                    warn("error: \(file):\(n + 1): not a task record [invalid-record]")
                    throw Exit.usage
                }
                decoded.append(r)
            }
            // Without one (records from `results`): the time the tasks were being worked on.
            let seconds = written?.elapsedSeconds ?? RunSummary.busySeconds(decoded)
            var summary = RunSummary(records: decoded, seconds: seconds, outputRoot: nil, workedBefore: 0)
            if let written {
                summary.tasksPerSecond = written.tasksPerSecond
                summary.resumedTasks = written.resumedTasks
            }
            // The job's own name and id when the file says them (`run --report`), else the file's.
            let stem = ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            runs.append(.init(records: decoded, summary: summary, id: written?.jobID ?? "run \(runs.count + 1)",
                              name: written?.job.map { "\($0) (\(stem))" } ?? stem, kind: ""))
        }
        var about = ReportAbout.here()
        about["records"] = records.joined(separator: ", ")
        try FileIO.writeAtomically(RecordWriters.html(runs, about: about), to: html)
    }
}
