import Foundation

/// The stages of a task, in pipeline order: the one list every consumer of timings
/// takes its names from (records, the report header, metrics, CSV, summaries).
/// `total` is the whole task (or render), not the sum of the others.
public enum Stage: String, CaseIterable, Sendable, Codable, CodingKey {
    /// Waiting in the worker's queue before a thread took the task.
    case queueWait
    /// Downloading the source from object storage or HTTP (0 for files and cache hits).
    case fetch
    /// Reading (mapping) the source bytes and hashing them for reruns.
    case read
    case decode
    case resize
    /// Orientation, flattening, colour conversion.
    case finish
    /// Placeholders and fingerprints from the pixels already decoded (when asked for).
    case describe
    case encode
    /// Writing the outputs to the output root's disk (staged, then published).
    case write
    /// Uploading the outputs to object storage.
    case store
    case total

    /// `queue_wait`, `decode`…: the name in metrics and CSV columns.
    public var snakeName: String {
        self == .queueWait ? "queue_wait" : rawValue
    }
}

/// Milliseconds spent in each `Stage`.
public struct StageTimings: Sendable, Equatable, Codable {
    public var queueWait: Double = 0
    public var fetch: Double = 0
    public var read: Double = 0
    public var decode: Double = 0
    public var resize: Double = 0
    public var finish: Double = 0
    public var describe: Double = 0
    public var encode: Double = 0
    public var write: Double = 0
    public var store: Double = 0
    public var total: Double = 0

    public init() {}

    /// The stages that make up `total` (all but `queueWait`, which comes before it, and `total`).
    public var staged: Double {
        Stage.allCases.reduce(0) { $1 == .total || $1 == .queueWait ? $0 : $0 + self[$1] }
    }

    /// Each stage's share of the time tasks spent, from per-stage sums over tasks: a stage's
    /// sum over the sum of the stages that make up `total` (queue wait, which comes before a
    /// task starts, has none). The one definition the terminal summary, the `--json`
    /// summary, the HTML report and the dashboard all show.
    public static func shares(of sums: [Stage: Double]) -> [Stage: Double] {
        let summed = sums.reduce(0) { $1.key == .total || $1.key == .queueWait ? $0 : $0 + $1.value }
        guard summed > 0 else { return [:] }
        var out: [Stage: Double] = [:]
        for stage in Stage.allCases where stage != .total && stage != .queueWait { out[stage] = (sums[stage] ?? 0) / summed }
        return out
    }

    /// Sets `total` to `milliseconds` and gives what no stage timed (bookkeeping between
    /// them, the thread being descheduled there) to `stage`: every millisecond belongs to a stage.
    public mutating func close(at milliseconds: Double, remainderTo stage: Stage) {
        total = milliseconds
        let rest = milliseconds - staged
        if rest > 0 { self[stage] += rest }
    }

    /// Records of older versions lack the stages added since: they read as 0.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Stage.self)
        for stage in Stage.allCases { self[stage] = try c.decodeIfPresent(Double.self, forKey: stage) ?? 0 }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Stage.self)
        for stage in Stage.allCases { try c.encode(self[stage], forKey: stage) }
    }

    public subscript(stage: Stage) -> Double {
        get {
            switch stage {
            case .queueWait: return queueWait
            case .fetch: return fetch
            case .read: return read
            case .decode: return decode
            case .resize: return resize
            case .finish: return finish
            case .describe: return describe
            case .encode: return encode
            case .write: return write
            case .store: return store
            case .total: return total
            }
        }
        set {
            switch stage {
            case .queueWait: queueWait = newValue
            case .fetch: fetch = newValue
            case .read: read = newValue
            case .decode: decode = newValue
            case .resize: resize = newValue
            case .finish: finish = newValue
            case .describe: describe = newValue
            case .encode: encode = newValue
            case .write: write = newValue
            case .store: store = newValue
            case .total: total = newValue
            }
        }
    }
}

/// The one clock: monotonic time, immune to wall-clock changes.
public enum Monotonic {
    /// Seconds since an arbitrary fixed point (boot).
    @inline(__always)
    public static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Time since it was made, on the monotonic clock.
public struct Stopwatch: Sendable {
    private let start = Monotonic.seconds()
    public init() {}
    public var seconds: Double { Monotonic.seconds() - start }
    public var milliseconds: Double { seconds * 1000 }
}
