import Foundation
import Logging
import TesseraTasks
import TesseraWire

/// A coordinator in this process and worker processes on this machine: what
/// `tessera run` starts, talking over an `ipc://` socket.
///
/// The workers die with this process (the kernel's parent-death signal), so neither
/// a crash nor a SIGKILL of `tessera run` leaves an orphan behind.
public final class LocalPool: @unchecked Sendable {
    public let coordinator: Coordinator
    public let endpoint: String
    public private(set) var workers: [Process] = []
    private var thread: Thread?
    private let finished = NSCondition()
    /// Broadcast when a worker process exits.
    private let exits: NSCondition
    private var loopDone = false
    private var loopError: Error?
    private let logger: Logger

    /// - Parameters:
    ///   - executable: the `tessera` binary to start workers from.
    ///   - workerArguments: extra arguments for each `tessera worker`.
    public init(journal: String, workers count: Int, executable: String, workerArguments: [String] = [],
                configure: (inout CoordinatorConfig) -> Void = { _ in },
                logger: Logger = Logger(label: "tessera.pool")) throws {
        self.logger = logger
        let socket = NSTemporaryDirectory() + "tessera-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        endpoint = "ipc://" + socket
        // The workers start first: loading a process (20-30 ms) overlaps the coordinator's
        // own start (journal, binding); they connect as soon as it listens (a worker retries
        // a refused connect after 10 ms, doubling).
        let exits = NSCondition()
        var started: [Process] = []
        // Another run or coordinator on this journal: refused before a worker starts (the
        // coordinator takes the lock for good below).
        try JournalLock(journal: journal).release()
        do {
            for _ in 0..<count {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: executable)
                p.arguments = ["worker", "--connect", endpoint, "--parent-pid", String(getpid())] + workerArguments
                p.standardInput = FileHandle.nullDevice
                p.standardOutput = FileHandle.nullDevice
                // The local pool is plain ipc: a remote cluster's client settings exported in
                // the shell (the README's tour exports them) are not this pool's.
                var environment = ProcessInfo.processInfo.environment
                for name in ["TESSERA_CURVE_SECRET", "TESSERA_SERVER_KEY", "TESSERA_COORDINATOR"] { environment[name] = nil }
                p.environment = environment
                p.terminationHandler = { _ in
                    exits.lock()
                    exits.broadcast()
                    exits.unlock()
                }
                try p.run()
                started.append(p)
            }
            var config = CoordinatorConfig(endpoints: [endpoint], journalPath: journal)
            // The workers are new processes: none holds a task of the journal's, nothing to wait for.
            config.recoveryGrace = 0
            configure(&config)
            coordinator = try Coordinator(config: config, logger: logger)
        } catch {
            LocalPool.killAll(started)
            throw error
        }
        self.exits = exits
        workers = started
        let t = Thread { [self] in
            do { try coordinator.run() } catch {
                finished.lock()
                loopError = error
                finished.unlock()
            }
            finished.lock()
            loopDone = true
            finished.broadcast()
            finished.unlock()
            unlink(socket)
        }
        t.name = "coordinator"
        t.start()
        thread = t
        guard !coordinator.waitUntilBound().isEmpty else {
            LocalPool.killAll(workers)
            throw failure ?? ClientTimeout(endpoint: endpoint, seconds: 10)
        }
    }

    /// Workers of a pool that could not start: killed and waited for.
    private static func killAll(_ workers: [Process]) {
        for p in workers where p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        for p in workers { p.waitUntilExit() }
    }

    /// The error the coordinator's loop ended with, if it ended with one.
    public var failure: Error? {
        finished.lock()
        defer { finished.unlock() }
        return loopError
    }

    /// Whether the coordinator's loop is still running.
    public var isRunning: Bool {
        finished.lock()
        defer { finished.unlock() }
        return !loopDone
    }

    /// Drains the workers, waits for them (terminating stragglers), stops the coordinator.
    public func shutdown(timeout: Double = 30) {
        // The coordinator keeps listening until the workers are gone: one still starting (a
        // job that ended before it connected) is told to drain when it says hello, in case
        // the SIGTERM below came before it could take signals (it waited out the timeout and
        // was killed with a warning before).
        coordinator.drainWorkers()
        for p in workers where p.isRunning { kill(p.processIdentifier, SIGTERM) }
        waitForWorkers(until: Date().addingTimeInterval(timeout))
        stopCoordinator()
    }

    /// An interrupted run: no new dispatches; the workers hand back what they hold and
    /// finish what they run within `grace` seconds, or are killed (their tasks have no
    /// result in the journal, so a rerun does them). The coordinator keeps running (to
    /// take the last reports and answer status) until `stopCoordinator()`.
    public func interrupt(grace: Double) {
        coordinator.holdDispatch()
        for p in workers where p.isRunning { kill(p.processIdentifier, SIGTERM) }
        waitForWorkers(until: Date().addingTimeInterval(grace))
    }

    /// The coordinator failed (its journal cannot be written): the workers drain within
    /// `grace` seconds (or are killed), then nothing is left that the journal does not
    /// record — staged files, and files that attempts granted their commit published.
    public func cleanUpAfterFailure(outputRoot: String?, grace: Double = 3) {
        for p in workers where p.isRunning { kill(p.processIdentifier, SIGTERM) }
        waitForWorkers(until: Date().addingTimeInterval(grace))
        for path in coordinator.unrecordedOutputs { Paths.withCString(path) { _ = unlink($0) } }
        if let outputRoot, !Location.isRemote(outputRoot) {
            try? FileManager.default.removeItem(atPath: outputRoot + "/.tessera/staging")
        }
    }

    /// Kills every worker at once (a second Ctrl-C).
    public func killWorkers() {
        for p in workers where p.isRunning { kill(p.processIdentifier, SIGKILL) }
    }

    /// Ends the coordinator's loop (flushing the journal) and waits for it.
    public func stopCoordinator() {
        coordinator.stop()
        finished.lock()
        while !loopDone { finished.wait() }
        finished.unlock()
    }

    private func waitForWorkers(until deadline: Date) {
        exits.lock()
        // Woken by each exit; the 0.1 s bound only guards against a missed wake-up.
        while workers.contains(where: { $0.isRunning }) && Date() < deadline {
            _ = exits.wait(until: min(deadline, Date().addingTimeInterval(0.1)))
        }
        exits.unlock()
        for p in workers where p.isRunning {
            logger.warning("worker pid \(p.processIdentifier) did not finish in time; killing it")
            Glibc.kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
    }
}

/// An unfinished job a coordinator found in its journal at start.
public struct RecoveredJob: Sendable {
    public var id: String
    public var spec: JobSpec
    public var done: Int
    /// Tasks that succeeded or failed (not skipped or cancelled): what the earlier run worked on.
    public var worked: Int
    public var total: Int

    public init(id: String, spec: JobSpec, done: Int, worked: Int, total: Int) {
        self.id = id
        self.spec = spec
        self.done = done
        self.worked = worked
        self.total = total
    }
}

/// Where `tessera run` keeps a job's journal, and which interrupted job a rerun resumes.
public enum LocalRun {
    /// Where journals of jobs whose outputs are not on this machine live: `$XDG_STATE_HOME/tessera`
    /// (an absolute path, per the XDG base directory spec), else `~/.local/state/tessera`.
    public static func stateDirectory(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/tessera" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/tessera"
    }

    /// The journal of a job writing to `output`: beside the outputs (`.tessera/journal.sqlite`);
    /// a bucket holds no journal, so one writing to object storage keeps it in the state
    /// directory, named after the output root.
    public static func journalPath(output: String, stateDirectory: @autoclosure () -> String = stateDirectory()) -> String {
        Location.isRemote(output)
            ? stateDirectory() + "/journal-\(String(XXH64.hash(Array(output.utf8)), radix: 16)).sqlite"
            : output + "/.tessera/journal.sqlite"
    }

    /// An interrupted run of this same job resumes (the first unfinished job with an equal
    /// spec); every other unfinished job of the journal was another run's, to be dropped.
    public static func resumption(of spec: JobSpec, among recovered: [RecoveredJob]) -> (resume: RecoveredJob?, drop: [RecoveredJob]) {
        let earlier = recovered.first { $0.spec == spec }
        return (earlier, recovered.filter { $0.id != earlier?.id })
    }
}
