import Foundation
import TesseraStorage

/// Downloads the inputs of queued tasks on its own threads while the executors decode
/// and encode, so a worker's cores are not idle waiting on the network. Only tasks the
/// worker already holds are fetched (its credit bounds the memory); a task an executor
/// takes before its download started is fetched by the executor itself.
public final class Prefetcher: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting: [(key: String, work: () throws -> Fetched)] = []
    private var running: Set<String> = []
    private var done: [String: Result<Fetched, Error>] = [:]
    /// Discarded while downloading: the result is dropped.
    private var dropped: Set<String> = []
    private var stopped = false

    public init(threads: Int) {
        for n in 0..<max(1, threads) {
            let t = Thread { [self] in loop() }
            t.name = "transfer-\(n)"
            t.stackSize = 1 << 20  // waits on curl: small stacks (address space is a budget too)
            t.start()
        }
    }

    /// Starts fetching (when a transfer thread is free) under `key`.
    public func start(_ key: String, _ work: @escaping () throws -> Fetched) {
        condition.lock()
        waiting.append((key, work))
        condition.signal()
        condition.unlock()
    }

    /// The fetched input of `key`, waiting for a download in progress; nil when none was
    /// started (the caller fetches it).
    public func take(_ key: String) -> Result<Fetched, Error>? {
        condition.lock()
        defer { condition.unlock() }
        if let i = waiting.firstIndex(where: { $0.key == key }) {
            waiting.remove(at: i)
            return nil
        }
        while running.contains(key) { condition.wait() }
        return done.removeValue(forKey: key)
    }

    /// Forgets `key` (a revoked or dropped task): a download in progress is dropped when it ends.
    public func discard(_ key: String) {
        condition.lock()
        waiting.removeAll { $0.key == key }
        done.removeValue(forKey: key)
        if running.contains(key) { dropped.insert(key) }
        condition.unlock()
    }

    public func stop() {
        condition.lock()
        stopped = true
        waiting = []
        done = [:]
        condition.broadcast()
        condition.unlock()
    }

    private func loop() {
        condition.lock()
        while true {
            while waiting.isEmpty && !stopped { condition.wait() }
            if stopped {
                condition.unlock()
                return
            }
            let (key, work) = waiting.removeFirst()
            running.insert(key)
            condition.unlock()
            let result = Result { try work() }
            condition.lock()
            running.remove(key)
            if dropped.remove(key) == nil && !stopped { done[key] = result }
            condition.broadcast()
        }
    }
}
