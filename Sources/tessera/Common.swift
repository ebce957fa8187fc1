import ArgumentParser
import Foundation
import TesseraStorage
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraModel
import TesseraReports

/// Options every command that reads images shares.
struct LimitOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "Largest image accepted, in megapixels (checked from the header).")
    var maxMegapixels: Double = 100

    @Option(parsing: .unconditional, help: "Largest input file accepted, in megabytes.")
    var maxInputMB: Int = 512

    /// The same ranges as a job file's `options` (`JobOptions.ranges`).
    func validate() throws {
        for (flag, field, value) in [("--max-megapixels", "maxMegapixels", maxMegapixels), ("--max-input-mb", "maxInputMB", Double(maxInputMB))] {
            if let problem = JobOptions.rangeProblem(field, value) { throw ValidationError("\(flag): \(problem)") }
        }
    }

    var limits: Limits {
        var l = Limits()
        l.maxPixels = Int(maxMegapixels * 1_000_000)
        l.maxInputBytes = maxInputMB << 20
        return l
    }
}

/// Loads presets: built-ins plus preset files.
func loadCatalog(_ files: [String]) throws -> PresetCatalog {
    var catalog = PresetCatalog.builtIn
    for f in files {
        let data = try readFile(f)
        try catalog.load(json: data, source: f)
    }
    return catalog
}

func readFile(_ path: String) throws -> Data {
    guard let data = FileManager.default.contents(atPath: path) else {
        let reason = access(path, R_OK) != 0 ? String(cString: strerror(errno)) : "cannot be read"
        throw ValidationError("\(path): \(reason)")
    }
    return data
}

/// Prints to standard error.
func warn(_ s: String) {
    Console.err(s)
}

/// One JSON line on standard output (the value carries its own `type` and `version`).
func printJSONLine<T: Encodable>(_ value: T) {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    if let d = try? e.encode(value), let s = String(data: d, encoding: .utf8) { print(s) }
}

/// One JSON line on standard output: `value`'s fields plus `"type": type` and the format
/// `"version"` (docs/JSON.md).
func printJSONLine<T: Encodable>(_ value: T, type: String) {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    guard let d = try? e.encode(value),
          var object = (try? JSONSerialization.jsonObject(with: d)) as? [String: Any] else { return }
    object["type"] = type
    object["version"] = JSONOutput.version
    if let out = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) {
        print(String(decoding: out, as: UTF8.self))
    }
}

/// The inputs of `render` and `strip`: files as named, directories walked (never into the
/// output root), a warning for an input that holds no images; what the walks passed over is
/// counted in `skipped`.
func discoverInputs(_ inputs: [String], outputRoot: String?, skipped: SkippedFiles) throws -> [InputFile] {
    var files: [InputFile] = []
    for input in inputs {
        let before = skipped.total
        let found = try InputDiscovery.expand([input], outputRoot: outputRoot, skipped: skipped)
        if found.isEmpty {
            let others = skipped.total - before
            warn("warning: \(Paths.display(input)): no images" + (others > 0 ? " (\(counted(others, "other file")))" : ""))
        }
        files += found
    }
    return files
}

/// With `--strict`, the files a walk passed over as failed records (`unsupported-format`).
func strictRecords(_ skipped: SkippedFiles) -> [TaskRecord] {
    skipped.paths.map { path in
        let ext = (path as NSString).pathExtension
        return TaskRecord(failing: InputFile(path: path, root: ""),
                          with: JobError(JobError.Code(rawValue: "unsupported-format"),
                                         "not an image Tessera reads (\(ext.isEmpty ? "no extension" : "." + ext)); passed over by the walk, failed by --strict",
                                         file: path))
    }
}

/// The end of `render` and `strip`: the files the walk passed over (failed with `--strict`,
/// each said as it is; counted in the summary without), then the summary of every record.
func summarise(_ records: [TaskRecord], skipped: SkippedFiles, strict: Bool, json: Bool, seconds: Double,
               outputRoot: String?) -> RunSummary {
    let passedOver = strictRecords(skipped)
    for r in passedOver {
        warn("error: \(r.error?.message ?? r.input)")
        if json { printJSONLine(r) }
    }
    var summary = RunSummary(records: records + passedOver, seconds: seconds, outputRoot: outputRoot)
    if !strict && skipped.total > 0 { summary.skippedFiles = skipped.byExtension }
    return summary
}

/// `1 image`, `2 images`: a count with its noun, plural when it is not 1.
func counted(_ n: Int, _ noun: String, plural: String? = nil) -> String {
    "\(n) " + (n == 1 ? noun : plural ?? noun + "s")
}

/// The failures of a summary, by reason, each with its examples and how many were left
/// out ("and 2 more (see --report)": the summary keeps five examples per reason).
func printFailures(_ failures: [RunSummary.Failure], more: String) {
    for f in failures {
        print("failed (\(f.code)): \(f.count)")
        for e in f.examples { print("  \(e)") }
        if f.count > f.examples.count { print("  and \(f.count - f.examples.count) more (\(more))") }
    }
}

func formatBytes(_ n: Int) -> String {
    let d = Double(n)
    if d >= 1_000_000 { return String(format: "%.1f MB", d / 1_000_000) }
    if d >= 1_000 { return String(format: "%.1f kB", d / 1_000) }
    return "\(n) B"
}

func ms(_ v: Double) -> String { String(format: "%.1f", v) }

/// Runs `body` for indices 0..<count on `threads` threads, in order of index per thread.
func parallelForEach(_ count: Int, threads: Int, stop: @escaping @Sendable () -> Bool = { false },
                     _ body: @escaping @Sendable (Int) -> Void) {
    guard threads > 1, count > 1 else {
        for i in 0..<count where !stop() { body(i) }
        return
    }
    let next = LockedCounter()
    DispatchQueue.concurrentPerform(iterations: min(threads, count)) { _ in
        while !stop() {
            let i = next.increment()
            if i >= count { break }
            body(i)
        }
    }
}

/// SIGINT and SIGTERM for commands that work file by file in this process (`render`,
/// `strip`, `transcode`): the first stops taking files (those under way finish, their
/// lines written whole), so the command prints its summary and exits 130 or 143; a
/// second exits at once, after any line being written (never a cut one).
final class FileByFileStop: @unchecked Sendable {
    private let lock = NSLock()
    private var received: Int32?
    private var signals: StopSignals?

    init() {
        signals = StopSignals(first: { [weak self] sig in self?.set(sig) }, again: { sig in Console.exitNow(128 + sig) })
    }

    private func set(_ sig: Int32) {
        lock.lock()
        received = received ?? sig
        lock.unlock()
    }

    /// The first signal, once one came.
    var signal: Int32? {
        lock.lock()
        defer { lock.unlock() }
        return received
    }

    /// After the summary: the line saying so, and the exit a signal means (nothing when none came).
    func exitIfStopped(done: Int, of total: Int, json: Bool) throws {
        guard let sig = signal else { return }
        warn("interrupted by \(StopSignals.name(sig)): \(done) of \(total) files done, \(total - done) not started")
        throw ExitCode(StopSignals.status(sig))
    }
}

/// A counter shared by worker threads (behind a lock).
final class LockedCounter: @unchecked Sendable {
    private var value = 0
    private let lock = NSLock()
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value - 1
    }
}

/// The output root of a command, checked before any work starts.
enum OutputRoot {
    /// Proves `root` can be written: an existing directory is tried (a file made and removed),
    /// a missing one must be creatable under its nearest existing ancestor — it is made only
    /// when the first output is written, so a command whose every file fails leaves no empty
    /// root behind. The journal's directory, when there is one, is made (the journal needs it).
    /// Exits 2 with the reason otherwise.
    static func prepare(_ root: String, journal: String? = nil, storage: StorageSettings? = nil) throws {
        if Location.isRemote(root) {
            // A bucket: the credentials and the bucket are proved by listing one key.
            do { try RemoteStorage(settings: storage).checkAccess(root) } catch {
                warn("error: \(error)")
                throw Exit.usage
            }
        } else if !Paths.exists(root) {
            var ancestor = Paths.directory(of: root)
            while !ancestor.isEmpty && ancestor != "/" && !Paths.exists(ancestor) { ancestor = Paths.directory(of: ancestor) }
            if ancestor.isEmpty { ancestor = "." }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: ancestor, isDirectory: &isDirectory), isDirectory.boolValue else {
                warn("error: \(root): cannot create the output root: \(ancestor) is not a directory [output-root]")
                throw Exit.usage
            }
            // The first missing folder made and removed at once: what the kernel allows there
            // (access(2) says yes to root anywhere, /proc included).
            var first = root
            while Paths.directory(of: first) != ancestor && !Paths.directory(of: first).isEmpty { first = Paths.directory(of: first) }
            guard mkdir(first, 0o700) == 0 else {
                warn("error: \(root): cannot create the output root: \(String(cString: strerror(errno))) [output-root]")
                throw Exit.usage
            }
            rmdir(first)
        }
        let existing = [root].filter { !Location.isRemote($0) && Paths.exists($0) }
        for dir in existing + (journal.map { [Paths.directory(of: $0).isEmpty ? "." : Paths.directory(of: $0)] } ?? []) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), !isDirectory.boolValue {
                warn("error: \(dir): the output root is not a directory [output-root]")
                throw Exit.usage
            }
            if let failure = makeDirectories(dir) {
                warn("error: \(dir): cannot create the output root: \(failure) [output-root]")
                throw Exit.usage
            }
            var template = Array((dir + "/.tessera-write-test-XXXXXX").utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            guard fd >= 0 else {
                warn("error: \(dir): the output root is not writable: \(String(cString: strerror(errno))) [output-root]")
                throw Exit.usage
            }
            close(fd)
            template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        }
    }

    /// `mkdir -p`; the failing directory and errno's text, or nil.
    static func makeDirectories(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            return isDirectory.boolValue ? nil : "\(path) is not a directory"
        }
        let parent = Paths.directory(of: path)
        if !parent.isEmpty && parent != path, let failure = makeDirectories(parent) { return failure }
        if mkdir(path, 0o777) != 0 && errno != EEXIST { return String(cString: strerror(errno)) }
        return nil
    }
}

/// ` (did you mean "X"?)` for the valid value nearest to `value`, if one is close.
func suggestion(_ value: String, _ valid: [String]) -> String {
    guard let best = valid.min(by: { JobFields.distance(value, $0) < JobFields.distance(value, $1) }),
          JobFields.distance(value, best) <= max(2, best.count / 3) else { return "" }
    return " (did you mean \"\(best)\"?)"
}

/// Runs a job of byte-level work (strip, transcode) here, file by file, as a pool worker
/// runs its tasks: the inputs walked, every output claimed before anything is read (no
/// output may replace an input, nor two share a file), then one record per file — its
/// error warned, its JSON line printed with --json, else `describe`'s line.
func runFileByFile(_ job: ExecutableJob, inputs: [String], strict: Bool, json: Bool,
                   describe: (InputFile, TaskRecord) -> String?) throws
    -> (records: [TaskRecord], summary: RunSummary, finish: () throws -> Void) {
    let files: [InputFile]
    let skipped = SkippedFiles(keepPaths: strict)
    do {
        files = try discoverInputs(inputs, outputRoot: job.outputRoot, skipped: skipped)
    } catch {
        warn("error: \(error)")
        throw Exit.usage
    }
    try OutputRoot.prepare(job.outputRoot)
    let collisions: [Int: JobError]
    do { collisions = try OutputClaims.check(job, inputs: files) } catch {
        warn("error: \(error)")
        throw Exit.usage
    }
    let clock = Stopwatch()
    var records: [TaskRecord] = []
    let stop = FileByFileStop()
    for (i, file) in files.enumerated() where stop.signal == nil {
        let record = collisions[i].map { TaskRecord(failing: file, with: $0) } ?? TaskExecutor.run(job, input: file).record
        records.append(record)
        if let e = record.error { warn("error: \(e.message)") }
        if json {
            printJSONLine(record)
        } else if let line = describe(file, record) {
            print(line)
        }
    }
    let summary = summarise(records, skipped: skipped, strict: strict, json: json, seconds: clock.seconds, outputRoot: job.outputRoot)
    // After the caller's summary: a signal's line and exit status.
    let finish = { try stop.exitIfStopped(done: records.count, of: files.count, json: json) }
    return (records, summary, finish)
}

/// Raises the soft limit on open files to the hard one (at most 65,536): a coordinator
/// serving probes, event streams and a thousand workers needs more than the 1,024 a shell
/// gives by default (nginx's `worker_rlimit_nofile`, systemd's `LimitNOFILE` do the same).
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    let wanted = min(limit.rlim_max, 65_536)
    guard limit.rlim_cur < wanted else { return }
    limit.rlim_cur = wanted
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
