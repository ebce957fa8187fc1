import Foundation
import TesseraJobs
import TesseraTasks
import TesseraWire

/// Reads the inputs of inline tasks (workers without shared storage) on threads of its
/// own, so a slow disk or a hung network file system never stalls the coordinator's event
/// loop. The loop submits reads and collects what finished; a read that does not finish
/// by its deadline fails its task (retryable) and its late bytes are dropped.
final class InlineReader: @unchecked Sendable {
    struct Request: Sendable {
        let job: String
        let ref: TaskRef
        let worker: [UInt8]
        let path: String
        let limit: Int
    }

    struct Done {
        let request: Request
        let bytes: [UInt8]?
        let error: Error?
    }

    private let lock = NSCondition()
    private var queue: [Request] = []
    private var finished: [Done] = []
    private var idle = 0
    private var threads = 0
    private var stopped = false
    private let maxThreads: Int
    private let context: ZMQContext
    private let wakeEndpoint: String

    /// - Parameters:
    ///   - wakeEndpoint: an inproc PULL socket of the loop's; each reader pokes it when done.
    init(context: ZMQContext, wakeEndpoint: String, maxThreads: Int = 4) {
        self.context = context
        self.wakeEndpoint = wakeEndpoint
        self.maxThreads = maxThreads
    }

    func submit(_ r: Request) {
        lock.lock()
        queue.append(r)
        if idle == 0 && threads < maxThreads {
            threads += 1
            let t = Thread { [self] in work() }
            t.name = "inline-reader"
            t.start()
        }
        lock.signal()
        lock.unlock()
    }

    /// What finished since the last call.
    func take() -> [Done] {
        lock.lock()
        defer { lock.unlock() }
        let out = finished
        finished.removeAll()
        return out
    }

    func stop() {
        lock.lock()
        stopped = true
        lock.broadcast()
        lock.unlock()
    }

    private func work() {
        let poke = try? ZMQSocket(context, .push)
        try? poke?.connect(wakeEndpoint)
        defer { poke?.close() }
        while true {
            lock.lock()
            idle += 1
            while queue.isEmpty && !stopped { lock.wait() }
            idle -= 1
            if stopped {
                threads -= 1
                lock.unlock()
                return
            }
            let r = queue.removeFirst()
            lock.unlock()
            var done: Done
            do { done = Done(request: r, bytes: try FileIO.read(r.path, limit: r.limit), error: nil) } catch {
                done = Done(request: r, bytes: nil, error: error)
            }
            lock.lock()
            finished.append(done)
            lock.unlock()
            _ = try? poke?.send([[1]], dontWait: true)
        }
    }
}
