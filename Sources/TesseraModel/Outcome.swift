import Foundation

/// How a task ended: the one list the scheduler, the journal, records, reports, metrics
/// labels and counts all use. The raw values are the journal's `status` column.
public enum Outcome: Int, CaseIterable, Sendable, Codable, CustomStringConvertible {
    case succeeded = 0
    /// Failed for good: the input's fault, or out of attempts.
    case failed = 1
    /// Nothing to do: unchanged since its outputs were made (incremental reruns).
    case skipped = 2
    /// Its job was cancelled before it ran.
    case cancelled = 3

    /// `succeeded`, `failed`…: the name in records, CSV, metrics labels and reports.
    public var name: String {
        switch self {
        case .succeeded: return "succeeded"
        case .failed: return "failed"
        case .skipped: return "skipped"
        case .cancelled: return "cancelled"
        }
    }

    public var description: String { name }

    public init?(name: String) {
        guard let o = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = o
    }

    /// Records write the name.
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        let s = try c.decode(String.self)
        guard let o = Outcome(name: s) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "expected one of \(Self.allCases.map(\.name).joined(separator: ", ")), got \"\(s)\"")
        }
        self = o
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(name)
    }
}

/// Tasks counted by how they ended.
public struct OutcomeCounts: Sendable, Equatable {
    private var counts = [Int](repeating: 0, count: Outcome.allCases.count)

    public init() {}

    public init(succeeded: Int = 0, failed: Int = 0, skipped: Int = 0, cancelled: Int = 0) {
        counts = [succeeded, failed, skipped, cancelled]
    }

    public subscript(_ outcome: Outcome) -> Int {
        get { counts[outcome.rawValue] }
        set { counts[outcome.rawValue] = newValue }
    }

    /// Tasks that ended, however.
    public var total: Int { counts.reduce(0, +) }
    /// Tasks a worker ran to the end (succeeded or failed): what a rate counts.
    public var worked: Int { self[.succeeded] + self[.failed] }
}
