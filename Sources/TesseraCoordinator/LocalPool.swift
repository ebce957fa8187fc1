import Foundation
import Logging
import TesseraWire

/// A coordinator in this process and worker processes on this machine: what
/// `tessera run` starts, talking over an `ipc://` socket.
public final class LocalPool: @unchecked Sendable {
    public let coordinator: Coordinator
    public let endpoint: String
    public private(set) var workers: [Process] = []
    private var thread: Thread?
    private let finished = NSCondition()
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
        var config = CoordinatorConfig(endpoints: [endpoint], journalPath: journal)
        configure(&config)
        coordinator = try Coordinator(config: config, logger: logger)
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
            throw loopError ?? ClientTimeout(endpoint: endpoint, seconds: 10)
        }
        for _ in 0..<count {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: executable)
            p.arguments = ["worker", "--connect", endpoint, "--exit-with-parent"] + workerArguments
            p.standardInput = FileHandle.nullDevice
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            workers.append(p)
        }
    }

    /// Drains the workers, waits for them (terminating stragglers), stops the coordinator.
    public func shutdown(timeout: Double = 30) {
        try? CoordinatorClient(endpoint: endpoint, timeout: 5).shutdown()
        let deadline = Date().addingTimeInterval(timeout)
        for p in workers {
            while p.isRunning && Date() < deadline { usleep(20_000) }
            if p.isRunning {
                logger.warning("worker pid \(p.processIdentifier) did not drain in time; terminating")
                p.terminate()
                p.waitUntilExit()
            }
        }
        coordinator.stop()
        finished.lock()
        while !loopDone { finished.wait() }
        finished.unlock()
    }
}
