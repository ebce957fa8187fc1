import Foundation
import TesseraImaging
import TesseraJobs
import TesseraWire

/// Monotonic seconds (leases, heartbeats, backoff: immune to wall-clock steps).
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// One task of an active job, in memory.
struct TaskSlot {
    enum State: UInt8 { case pending, dispatched, delayed, done }
    var input: InputFile
    var state: State = .pending
    /// Dispatches in this coordinator epoch (the low 16 bits of the attempt number).
    var dispatches: UInt32 = 0
    /// The attempt number of the current lease.
    var attempt: UInt32 = 0
    /// Reported failures that were worth retrying (capped by `maxAttempts`).
    var failures: Int = 0
    /// Workers this task was running on when they died or hung (poison rule).
    var crashes: Int = 0
    /// Index of the worker holding it, when dispatched.
    var worker: WorkerConn?
    /// Lease deadline (dispatched) or not-before time (delayed), monotonic seconds.
    var deadline: Double = 0
    /// When the current attempt was dispatched (monotonic seconds).
    var dispatchedAt: Double = 0
    /// The current attempt was allowed to publish its outputs (fencing).
    var committed = false
}

/// A job with unfinished tasks.
final class ActiveJob {
    let id: String
    let seq: Int
    let spec: JobSpec
    let exec: ExecutableJob
    let execJSON: Data
    let recipeHash: UInt64
    let firstTask: UInt64
    /// The CURVE key that submitted it ("" without CURVE).
    var owner = ""
    var tasks: [TaskSlot]
    /// Indices ready to dispatch, FIFO from `readyHead`.
    private var ready: [Int] = []
    private var readyHead = 0
    /// Indices waiting for their backoff.
    var delayed: [Int] = []
    var counts = [0, 0, 0, 0]  // succeeded, failed, skipped, cancelled
    var running = 0
    var state: JobStatus.State = .queued
    let submitted: Double
    var finished: Double?
    /// Clients waiting for this job to end.
    var waiters: [[UInt8]] = []
    /// Earlier renditions with this recipe: input path -> (content hash, outputs).
    var renditions: [String: (hash: UInt64, outputs: [String])] = [:]
    /// Tiles jobs: a pyramid's descriptor task waits (input path -> its index) until the
    /// other parts of the pyramid are done (input path -> parts open, parts failed).
    var heldDescriptors: [String: Int] = [:]
    var pyramidParts: [String: (open: Int, failed: Int)] = [:]

    /// Sets up the waits from what is already finished (`finished[i]`: whether task i has a
    /// result, and whether it failed); returns the pyramids whose parts are all done.
    func holdDescriptors(finished: (Int) -> (done: Bool, failed: Bool)) -> [String] {
        guard spec.kind == .tiles else { return [] }
        for i in tasks.indices where !tasks[i].input.part.isEmpty {
            let path = tasks[i].input.path, f = finished(i)
            if tasks[i].input.part == PyramidPart.descriptorName {
                if !f.done { heldDescriptors[path] = i }
            } else {
                var p = pyramidParts[path] ?? (0, 0)
                if !f.done { p.open += 1 } else if f.failed { p.failed += 1 }
                pyramidParts[path] = p
            }
        }
        return heldDescriptors.keys.filter { (pyramidParts[$0]?.open ?? 0) == 0 }
    }

    func isHeld(_ i: Int) -> Bool { heldDescriptors[tasks[i].input.path] == i }

    init(id: String, seq: Int, spec: JobSpec, firstTask: UInt64, inputs: [InputFile], submitted: Double) {
        self.id = id
        self.seq = seq
        self.spec = spec
        var exec = spec.executable
        exec.createdAt = submitted
        self.exec = exec
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        execJSON = (try? e.encode(JobAnnouncement(job: id, spec: exec))) ?? Data()
        recipeHash = exec.recipeHash
        self.firstTask = firstTask
        self.submitted = submitted
        tasks = inputs.map { TaskSlot(input: $0) }
    }

    var done: Int { counts.reduce(0, +) }
    var hasReady: Bool { readyHead < ready.count }

    func enqueue(_ index: Int) { ready.append(index) }

    func dequeue() -> Int? {
        guard readyHead < ready.count else { return nil }
        let i = ready[readyHead]
        readyHead += 1
        if readyHead > 4096 && readyHead * 2 > ready.count {
            ready.removeFirst(readyHead)
            readyHead = 0
        }
        return i
    }

    /// Pending tasks still queued (for cancel).
    func drainReady() -> [Int] {
        defer { ready = []; readyHead = 0 }
        return Array(ready[readyHead...])
    }

    func status() -> JobStatus {
        let pending = tasks.count - done - running
        return JobStatus(id: id, name: spec.name, kind: spec.kind, priority: spec.priority, state: state,
                         total: tasks.count, pending: pending, running: running, succeeded: counts[0],
                         failed: counts[1], skipped: counts[2], cancelled: counts[3], submitted: submitted,
                         finished: finished)
    }
}

/// A connected worker.
final class WorkerConn {
    let identity: [UInt8]
    let id: String
    var host: String
    var pid: Int32
    /// Tasks it said it can hold (credit-based flow control).
    var capacity: Int
    var inline: Bool
    var lastSeen: Double
    var lastSent: Double = 0
    /// Tasks dispatched to it and not yet reported: ref -> (job, index).
    var held: [TaskRef: (ActiveJob, Int)] = [:]
    /// Tasks it said were running at its last heartbeat (only these are charged if it dies).
    var running: Set<TaskRef> = []
    var announced: Set<String> = []
    /// Tasks taken back after their lease expired that may still occupy an executor:
    /// they count against its capacity until a heartbeat shows them gone.
    var revoked: Set<TaskRef> = []
    let concurrency: Int
    var draining = false
    /// Peak RSS it reported, bytes.
    var peakRSS: UInt64 = 0
    var completed = 0

    /// The CURVE key it authenticated with (nil without CURVE): every later message on
    /// this identity must come from the same key.
    var key: String?

    init(identity: [UInt8], hello: WorkerHello, now: Double) {
        self.identity = identity
        id = hello.worker
        host = hello.host
        pid = hello.pid
        capacity = max(1, hello.credit)
        concurrency = max(1, hello.concurrency)
        inline = hello.inline
        lastSeen = now
    }

    var freeCredit: Int {
        if draining || revoked.count >= concurrency { return 0 }  // every executor may be stuck
        return max(0, capacity - held.count - revoked.count)
    }
}
