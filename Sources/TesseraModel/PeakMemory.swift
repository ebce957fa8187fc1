import Foundation

/// A task's peak resident memory: the kernel's high-water mark of the process that ran it.
/// When other tasks ran in the same process at the same time, it is the process' peak over
/// the task's run, an upper bound rather than the task's own figure, and says so.
public struct PeakMemory: Sendable, Equatable, Codable {
    public var bytes: UInt64
    public var isUpperBound: Bool

    public init(bytes: UInt64, isUpperBound: Bool) {
        self.bytes = bytes
        self.isUpperBound = isUpperBound
    }

    /// The higher of two peaks; an upper bound if that one is.
    public func max(_ other: PeakMemory?) -> PeakMemory {
        guard let other, other.bytes > bytes || (other.bytes == bytes && !other.isUpperBound) else { return self }
        return other
    }

    /// `47.3 MB`, or `≤ 47.3 MB` for an upper bound.
    public var display: String {
        (isUpperBound ? "≤ " : "") + String(format: "%.1f MB", Double(bytes) / 1e6)
    }
}
