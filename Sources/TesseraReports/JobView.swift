import Foundation
import Histogram
import TesseraTasks
import TesseraModel

/// What the dashboard and the HTML report show of one job: bounded in size whatever the
/// job's (a million tasks give the same few kilobytes), built record by record by a
/// `JobView.Accumulator` — live in the coordinator, or from a finished job's records.
public struct JobView: Codable, Sendable {
    public struct StageStat: Codable, Sendable {
        public var stage: String
        public var p50: Double
        public var p95: Double
        /// Share of summed task time (queue wait and total excluded).
        public var share: Double
    }
    public struct Bucket: Codable, Sendable {
        /// Upper bound of the bucket, milliseconds.
        public var upTo: Double
        public var count: Int
    }
    public struct FailureGroup: Codable, Sendable {
        public var code: String
        public var count: Int
        /// Up to three (input, message) examples.
        public var examples: [[String]]
    }
    public struct SlowTask: Codable, Sendable {
        public var input: String
        public var milliseconds: Double
        public var worker: String
    }
    public struct StuckTask: Codable, Sendable {
        public var task: UInt64
        public var input: String
        public var worker: String
        public var seconds: Double
        /// Why it counts as stuck: "slow" (past the threshold) or "silent worker".
        public var reason: String
        public init(task: UInt64, input: String, worker: String, seconds: Double, reason: String) {
            self.task = task
            self.input = input
            self.worker = worker
            self.seconds = seconds
            self.reason = reason
        }
    }
    public struct WorkerStat: Codable, Sendable {
        public var worker: String
        public var tasks: Int
        public var peakRSSBytes: UInt64
    }

    public var id = ""
    public var name = ""
    public var kind = ""
    public var state = ""
    public var total = 0
    public var succeeded = 0
    public var failed = 0
    public var skipped = 0
    public var cancelled = 0
    public var running = 0
    /// Tasks waiting for a worker, and the job's priority (higher runs first).
    public var queued = 0
    public var priority = 0
    public var elapsedSeconds = 0.0
    public var filesPerSecond = 0.0
    public var megabytesPerSecond = 0.0
    public var etaSeconds: Double?
    public var bytesIn = 0
    public var bytesOut = 0
    public var stages: [StageStat] = []
    /// Task times of succeeded tasks, in buckets that double (1 ms, 2 ms, 4 ms…).
    public var taskTimes: [Bucket] = []
    /// Tasks finished per interval of `timelineSeconds`, from the first result.
    public var timeline: [Int] = []
    public var timelineSeconds = 1.0
    public var failures: [FailureGroup] = []
    public var slowest: [SlowTask] = []
    public var decodePaths: [String: Int] = [:]
    public var scales: [String: Int] = [:]
    public var workers: [WorkerStat] = []
    /// The newest outputs (paths), newest first.
    public var latestOutputs: [String] = []
    /// p95 of succeeded tasks' total time, milliseconds.
    public var p95TaskMilliseconds = 0.0
    /// Running tasks past 3× that p95 (at least 10 s), or on a worker not heard from.
    public var stuck: [StuckTask] = []
    /// Whether the dashboard's actions are open (a token is configured).
    public var actions = false

    public var done: Int { succeeded + failed + skipped + cancelled }

    /// Adds records one at a time; `view` costs the same whatever the number added.
    public final class Accumulator: @unchecked Sendable {
        private var histograms: [Stage: Histogram<UInt64>] = [:]
        private var stageSums: [Stage: Double] = [:]
        private var taskTimes = [Int](repeating: 0, count: 24)
        private var timeline: [Int] = []
        /// Starts at a tenth of a second (a short job still draws a line) and doubles as needed.
        private var timelineSeconds = 0.1
        private var firstAt: Double?
        private var lastAt = 0.0
        private var failures: [String: (count: Int, examples: [[String]])] = [:]
        private var slowest: [JobView.SlowTask] = []
        private var decodePaths: [String: Int] = [:]
        private var scales: [String: Int] = [:]
        private var workers: [String: (tasks: Int, peak: UInt64)] = [:]
        private var latest: [String] = []
        private(set) var counts = OutcomeCounts()
        private var bytesIn = 0
        private var bytesOut = 0
        private let lock = NSLock()

        public init() {}

        /// Adds one task's record, finished at `time` (seconds, any fixed origin).
        public func add(_ r: TaskRecord, at time: Double) {
            lock.lock()
            defer { lock.unlock() }
            counts[r.status] += 1
            // Records come in any order, and a report's times are whatever its file says:
            // a time that is no time (NaN, or past year 300,000) counts as the first one.
            let time = time.isFinite && abs(time) < 1e13 ? time : (firstAt ?? 0)
            var first = firstAt ?? time
            // One finished before the first seen moves the origin back by whole intervals
            // (the slots already counted keep their times).
            if time < first {
                while (first - time) / timelineSeconds + Double(timeline.count) > 600 { halveTimeline() }
                let earlier = Int(((first - time) / timelineSeconds).rounded(.up))
                timeline = [Int](repeating: 0, count: earlier) + timeline
                first -= Double(earlier) * timelineSeconds
            }
            firstAt = first
            lastAt = max(lastAt, time)
            // The timeline keeps at most 600 points: intervals double when it would grow past.
            var offset = (time - first) / timelineSeconds
            while offset >= 600 {
                halveTimeline()
                offset = (time - first) / timelineSeconds
            }
            let slot = Int(offset)
            if timeline.count <= slot { timeline += [Int](repeating: 0, count: slot + 1 - timeline.count) }
            timeline[slot] += 1
            if let e = r.error, r.status == .failed {
                var g = failures[e.code] ?? (0, [])
                g.count += 1
                if g.examples.count < 3 { g.examples.append([r.input, e.message]) }
                failures[e.code] = g
            }
            // Every task a worker finished counts for it (as the Workers table counts them).
            if let w = r.worker {
                var s = workers[w] ?? (0, 0)
                s.tasks += 1
                s.peak = max(s.peak, r.peakMemory?.bytes ?? 0)
                workers[w] = s
            }
            // The time stages took counts failed tasks too (a file that decoded, then failed,
            // spent its decode), as the terminal summary counts it; the rest is successes'.
            if r.status == .failed {
                for stage in Stage.allCases where stage != .total { stageSums[stage, default: 0] += r.timings[stage] }
            }
            guard r.status == .succeeded else { return }
            bytesIn += r.bytesIn
            bytesOut += r.bytesOut
            for stage in Stage.allCases {
                let ms = r.timings[stage]
                if stage != .total { stageSums[stage, default: 0] += ms }
                var h = histograms[stage] ?? Histogram<UInt64>(numberOfSignificantValueDigits: .two)
                h.record(UInt64(min(max(0, ms), 1e12) * 1000))  // a day is 8.6e7 ms: a larger time is a bad record
                histograms[stage] = h
            }
            let total = r.timings.total
            var bucket = 0
            while bucket < taskTimes.count - 1 && total > Double(1 << bucket) { bucket += 1 }
            taskTimes[bucket] += 1
            if slowest.count < 10 || total > slowest[slowest.count - 1].milliseconds {
                slowest.append(.init(input: r.input, milliseconds: total, worker: r.worker ?? ""))
                slowest.sort { $0.milliseconds > $1.milliseconds }
                if slowest.count > 10 { slowest.removeLast() }
            }
            if let d = r.decodePath { decodePaths[d, default: 0] += 1 }
            if let s = r.scaleEighths { scales["\(s)/8", default: 0] += 1 }
            for o in r.outputs.prefix(2) {
                latest.insert(o.path, at: 0)
                if latest.count > 8 { latest.removeLast() }
            }
        }

        /// Merges neighbouring timeline slots: half the points, twice the interval.
        private func halveTimeline() {
            timeline = stride(from: 0, to: timeline.count, by: 2).map { timeline[$0] + (($0 + 1) < timeline.count ? timeline[$0 + 1] : 0) }
            timelineSeconds *= 2
        }

        /// The view now; `total`, `running` and `state` come from the scheduler (or the summary).
        /// - Parameter tasksPerSecond: the run's own rate when a summary knows it (a resumed
        ///   job's report counts only this run's tasks, as `RunSummary` does).
        public func view(id: String, name: String, kind: String, state: String, total: Int, running: Int,
                         elapsed: Double, tasksPerSecond: Double? = nil) -> JobView {
            lock.lock()
            defer { lock.unlock() }
            var v = JobView()
            v.id = id
            v.name = name
            v.kind = kind
            v.state = state
            v.total = total
            v.running = running
            (v.succeeded, v.failed, v.skipped, v.cancelled) = (counts[.succeeded], counts[.failed], counts[.skipped], counts[.cancelled])
            v.elapsedSeconds = elapsed
            let worked = counts.worked
            if elapsed > 0 {
                v.filesPerSecond = tasksPerSecond ?? Double(worked) / elapsed
                // Decimal megabytes, as every figure Tessera prints (1 MB = 1,000,000 bytes).
                v.megabytesPerSecond = worked > 0 ? Double(bytesIn) / 1e6 / elapsed * (v.filesPerSecond * elapsed / Double(worked)) : 0
            }
            let left = total - v.done
            if left > 0, v.filesPerSecond > 0 { v.etaSeconds = Double(left) / v.filesPerSecond }
            v.bytesIn = bytesIn
            v.bytesOut = bytesOut
            let shares = StageTimings.shares(of: stageSums)
            v.stages = Stage.allCases.filter { $0 != .total }.map { stage in
                let h = histograms[stage]
                return StageStat(stage: stage.rawValue,
                                 p50: Double(h?.valueAtPercentile(50) ?? 0) / 1000,
                                 p95: Double(h?.valueAtPercentile(95) ?? 0) / 1000,
                                 share: shares[stage] ?? 0)
            }
            let last = taskTimes.lastIndex { $0 > 0 } ?? -1
            v.taskTimes = (0...max(0, last)).map { Bucket(upTo: Double(1 << $0), count: taskTimes[$0]) }
            v.timeline = timeline
            v.timelineSeconds = timelineSeconds
            v.failures = failures.map { FailureGroup(code: $0.key, count: $0.value.count, examples: $0.value.examples) }
                .sorted { ($0.count, $1.code) > ($1.count, $0.code) }
            v.slowest = slowest
            v.decodePaths = decodePaths
            v.scales = scales
            v.workers = workers.map { WorkerStat(worker: $0.key, tasks: $0.value.tasks, peakRSSBytes: $0.value.peak) }
                .sorted { $0.worker < $1.worker }
            v.latestOutputs = latest
            v.p95TaskMilliseconds = Double(histograms[.total]?.valueAtPercentile(95) ?? 0) / 1000
            return v
        }
    }
}
