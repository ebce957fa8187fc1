import Foundation

/// A value shared between threads, read and changed under a lock (closures that outlive
/// their caller: HTTP handlers, event streams).
public final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    public init(_ value: Value) { self.value = value }

    /// Changes the value under the lock and returns what `change` returns.
    @discardableResult
    public func update<T>(_ change: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return change(&value)
    }

    public var current: Value { update { $0 } }
}
