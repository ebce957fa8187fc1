import ArgumentParser
import Foundation
import Logging
import TesseraCoordinator
import TesseraJobs
import TesseraWire
import TesseraWorker

/// The coordinator endpoint clients use.
struct CoordinatorOption: ParsableArguments {
    @Option(name: .long, help: "Coordinator endpoint (default: $TESSERA_COORDINATOR or tcp://127.0.0.1:5555).")
    var coordinator: String = ProcessInfo.processInfo.environment["TESSERA_COORDINATOR"] ?? "tcp://127.0.0.1:5555"

    @Option(help: "Seconds to wait for an answer.")
    var timeout: Double = 30

    var client: CoordinatorClient { CoordinatorClient(endpoint: coordinator, timeout: timeout) }
}

struct LogOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel: String = "info"

    func logger(_ label: String) -> Logger {
        var l = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        l.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        return l
    }
}

/// Runs `body` when SIGTERM or SIGINT arrives (from a dispatch queue, not a signal handler).
func onTermination(_ body: @escaping @Sendable () -> Void) -> [DispatchSourceSignal] {
    [SIGTERM, SIGINT].map { sig in
        signal(sig, SIG_IGN)
        let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        s.setEventHandler(handler: body)
        s.resume()
        return s
    }
}

struct CoordinatorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinator",
        abstract: "Run a coordinator: plan jobs into tasks, dispatch them to workers, journal everything.")

    @Option(help: "Endpoint to bind (repeatable).")
    var bind: [String] = ["tcp://127.0.0.1:5555"]

    @Option(help: "SQLite journal (created if missing; reopened to resume unfinished jobs).")
    var journal: String

    @Option(help: "Seconds without a message before a worker counts as lost.")
    var workerTimeout: Double = 5

    @Option(help: "Fail a task as poison after it was running on this many workers that died or hung.")
    var poison: Int = 3

    @OptionGroup var log: LogOptions

    func run() throws {
        var config = CoordinatorConfig(endpoints: bind, journalPath: journal)
        config.workerTimeout = workerTimeout
        config.poisonThreshold = poison
        let coordinator = try Coordinator(config: config, logger: log.logger("tessera.coordinator"))
        let signals = onTermination { coordinator.stop() }
        defer { _ = signals }
        try coordinator.run()
    }
}

struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Run a worker: take tasks from a coordinator, render them, report timings and memory.",
        discussion: "On SIGTERM the worker hands back queued tasks, finishes running ones, and exits.")

    @Option(help: "Coordinator endpoint.")
    var connect: String

    @Option(help: "Tasks run at once.")
    var concurrency: Int = 1

    @Option(help: "Tasks held queued beyond --concurrency (default: --concurrency).")
    var prefetch: Int?

    @Flag(help: "Receive inputs and return outputs inside messages (no shared storage).")
    var inline = false

    @Option(help: "Worker id (default: host-pid-random).")
    var id: String?

    @Flag(help: ArgumentHelp("Exit when the parent process exits (used by `tessera run`).", visibility: .hidden))
    var exitWithParent = false

    @Option(help: ArgumentHelp("Fault injection for tests: abort on inputs whose path contains this.", visibility: .hidden))
    var crashOn: String?

    @OptionGroup var log: LogOptions

    func run() throws {
        var config = WorkerConfig(endpoint: connect, concurrency: concurrency)
        config.prefetch = prefetch
        config.inline = inline
        config.crashOnInputContaining = crashOn
        if let id { config.id = id }
        let worker = Worker(config: config, logger: log.logger("tessera.worker"))
        let signals = onTermination { worker.requestDrain() }
        defer { _ = signals }
        if exitWithParent {
            let parent = getppid()
            Thread.detachNewThread {
                while getppid() == parent { sleep(1) }
                worker.requestDrain()
            }
        }
        try worker.run()
    }
}
