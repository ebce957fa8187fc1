import Foundation
import Logging
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraModel

/// One task of an active job that is in memory: queued in the job's window, running,
/// waiting for its retry, or held by a job-kind rule. Finished tasks are not in memory
/// (their result is in the journal) and neither are tasks not paged in yet.
package struct TaskSlot {
    package enum State: UInt8 { case pending, dispatched, delayed, held }
    package var input: InputFile
    package var state: State = .pending
    /// Dispatches in this coordinator epoch (the low 16 bits of the attempt number).
    package var dispatches: UInt32 = 0
    /// The attempt number of the current lease.
    package var attempt: UInt32 = 0
    /// Reported failures that were worth retrying (capped by `maxAttempts`).
    package var failures: Int = 0
    /// Workers this task was running on when they died or hung (poison rule).
    package var crashes: Int = 0
    /// The worker holding it, when dispatched.
    package var worker: WorkerConn?
    /// Lease deadline (dispatched) or not-before time (delayed), monotonic seconds.
    package var deadline: Double = 0
    /// When the current attempt was dispatched (monotonic seconds).
    package var dispatchedAt: Double = 0
    /// Incremental jobs: the earlier rendition of this input with the same recipe.
    package var rendition: Journal.Rendition?

    package init(input: InputFile) { self.input = input }
}

/// Tiles jobs: a pyramid's descriptor part (`.dzi`, `info.json`, a pyramidal TIFF's
/// assembly) runs only after every other part of its pyramid, and fails when one of them
/// failed, so no descriptor ever describes tiles that are not there. A tail waits for its
/// pyramid's stacks, whose stripes of its first level it reads instead of decoding the
/// source (when a stack failed, the tail decodes it). The scheduler asks it about each task
/// it pages in and tells it about each part that ends; it holds only per-pyramid counts.
package struct PyramidGate {
    private struct Counts {
        var open = 0
        var failed = 0
        var openStacks = 0
    }
    private var parts: [String: Counts] = [:]
    /// Descriptor tasks paged in and waiting for their parts: pyramid path -> task id.
    private var waiting: [String: UInt64] = [:]
    /// Tails paged in and waiting for their stacks: pyramid path -> task id.
    private var waitingTails: [String: UInt64] = [:]

    /// From every task of the job: whether it has finished, and whether it failed.
    package init(tasks: [(input: InputFile, finished: Bool, failed: Bool)]) {
        for t in tasks where Self.makesTiles(t.input) {
            var p = parts[t.input.path] ?? Counts()
            if !t.finished {
                p.open += 1
                if Self.isStack(t.input) { p.openStacks += 1 }
            } else if t.failed {
                p.failed += 1
            }
            parts[t.input.path] = p
        }
    }

    /// A band, stack or the tail of a pyramid (not its descriptor, not a whole-file task).
    static func makesTiles(_ input: InputFile) -> Bool {
        guard let part = input.part else { return false }
        return part != .descriptor
    }

    static func isStack(_ input: InputFile) -> Bool {
        if case .stack? = input.part { return true }
        return false
    }

    package enum Admission: Equatable { case ready, held, incomplete(failedParts: Int) }

    /// Whether a task just paged in may be queued.
    package mutating func admit(_ id: UInt64, _ input: InputFile) -> Admission {
        switch input.part {
        case .descriptor?:
            let p = parts[input.path] ?? Counts()
            if p.open > 0 {
                waiting[input.path] = id
                return .held
            }
            return p.failed > 0 ? .incomplete(failedParts: p.failed) : .ready
        case .tail?:
            guard (parts[input.path]?.openStacks ?? 0) > 0 else { return .ready }
            waitingTails[input.path] = id
            return .held
        default:
            return .ready
        }
    }

    /// A part ended: the tasks it lets go, each with the number of failed parts of its
    /// pyramid (a tail whose stacks have all ended; the descriptor, if paged in, when the
    /// pyramid's last part ended).
    package mutating func partEnded(_ input: InputFile, failed: Bool) -> [(task: UInt64, failedParts: Int, descriptor: Bool)] {
        guard Self.makesTiles(input), var p = parts[input.path] else { return [] }
        p.open -= 1
        if failed { p.failed += 1 }
        var released: [(task: UInt64, failedParts: Int, descriptor: Bool)] = []
        if Self.isStack(input) {
            p.openStacks -= 1
            if p.openStacks == 0, let tail = waitingTails.removeValue(forKey: input.path) { released.append((tail, 0, false)) }
        }
        parts[input.path] = p
        if p.open == 0, let id = waiting.removeValue(forKey: input.path) { released.append((id, p.failed, true)) }
        return released
    }
}

/// A job with unfinished tasks. Its pending tasks stay in the journal and are paged in
/// a window at a time, in task order; only the window, the running and the delayed
/// tasks are in memory, so a million-task job costs what a few thousand do.
package final class ActiveJob {
    package let id: String
    package let seq: Int
    package let spec: JobSpec
    /// The body of the `job` message that tells a worker how to run this job's tasks
    /// (its `ExecutableJob`), encoded once.
    package let announcement: [UInt8]
    /// What workers are told to run (output names: what a task may write).
    package let executable: ExecutableJob
    package let recipeHash: UInt64
    package let firstTask: UInt64
    package let total: Int
    /// The CURVE key that submitted it ("" without CURVE).
    package var owner = ""
    /// Tasks in memory by id (see `TaskSlot`).
    package var live: [UInt64: TaskSlot] = [:]
    /// Ids ready to dispatch, FIFO from `readyHead`.
    private var ready: [UInt64] = []
    private var readyHead = 0
    /// Ids waiting for their backoff.
    package var delayed: [UInt64] = []
    /// Every task below this id has been paged in (or has a result).
    package var pagedThrough: UInt64
    package var counts = OutcomeCounts()
    package var running = 0
    package var state: JobStatus.State = .queued
    package let submitted: Double
    package var finished: Double?
    /// Clients waiting for this job to end.
    package var waiters: [[UInt8]] = []
    /// The job kind's rule on the order of its tasks (tiles: `PyramidGate`).
    package var gate: PyramidGate?

    package init(id: String, seq: Int, spec: JobSpec, firstTask: UInt64, total: Int, submitted: Double, access: JobAccess? = nil) {
        self.id = id
        self.seq = seq
        self.spec = spec
        var executable = spec.executable
        executable.createdAt = submitted
        executable.access = access
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        announcement = Array((try? e.encode(JobAnnouncement(job: id, spec: executable))) ?? Data())
        self.executable = executable
        recipeHash = executable.recipeHash
        self.firstTask = firstTask
        self.total = total
        pagedThrough = firstTask
        self.submitted = submitted
    }

    package var end: UInt64 { firstTask + UInt64(total) }
    package var done: Int { counts.total }
    package var readyCount: Int { ready.count - readyHead }
    package var fullyPaged: Bool { pagedThrough >= end }

    package func contains(_ task: UInt64) -> Bool { task >= firstTask && task < end }

    package func enqueue(_ id: UInt64) { ready.append(id) }

    package func dequeue() -> UInt64? {
        guard readyHead < ready.count else { return nil }
        let i = ready[readyHead]
        readyHead += 1
        if readyHead > 4096 && readyHead * 2 > ready.count {
            ready.removeFirst(readyHead)
            readyHead = 0
        }
        return i
    }

    package func clearQueues() {
        ready = []
        readyHead = 0
        delayed = []
    }

    package func status() -> JobStatus {
        let pending = total - done - running
        return JobStatus(id: id, name: spec.name, kind: spec.kind, priority: spec.priority, state: state,
                         total: total, pending: pending, running: running, succeeded: counts[.succeeded],
                         failed: counts[.failed], skipped: counts[.skipped], cancelled: counts[.cancelled], submitted: submitted,
                         finished: finished)
    }
}

/// A connected worker.
package final class WorkerConn {
    package let identity: [UInt8]
    package let id: String
    package var host: String
    package var pid: Int32
    /// Tasks it said it can hold (credit-based flow control).
    package var capacity: Int
    package var inline: Bool
    package var lastSeen: Double
    package var lastSent: Double = 0
    /// Tasks dispatched to it and not yet reported, with their job.
    package var held: [TaskRef: ActiveJob] = [:]
    /// Tasks it said were running at its last heartbeat (only these are charged if it dies).
    package var running: Set<TaskRef> = []
    /// Held tasks whose commit was granted: their work is done (what is left is renaming the
    /// staged files and the report), so they hold no executor and no credit. The next task
    /// goes out with the grant instead of a round trip after the report.
    package var committed: Set<TaskRef> = []
    package var announced: Set<String> = []
    /// Tasks taken back after their lease expired that may still occupy an executor:
    /// they count against its capacity until a heartbeat shows them gone.
    package var revoked: Set<TaskRef> = []
    /// Attempts taken back from it (the tail's rebalancing, another attempt that finished
    /// first): a report of one crossed the take-back on the wire and is dropped without a
    /// warning. The latest 1,024.
    package private(set) var takenBack: Set<TaskRef> = []
    private var takenBackOrder: [TaskRef] = []
    package let concurrency: Int
    package var draining = false
    /// The highest task peak it reported.
    package var peakMemory: PeakMemory?
    package var completed = 0
    /// The last minute of its heartbeats' resident memory (bytes) and CPU use (% of a core),
    /// one sample a second at most (the dashboard's sparklines).
    package var rssHistory: [UInt64] = []
    package var cpuHistory: [Double] = []
    package var lastSample: (time: Double, cpu: Double)?

    /// The CURVE key it authenticated with (nil without CURVE): every later message on
    /// this identity must come from the same key.
    package var key: String?

    package init(identity: [UInt8], hello: WorkerHello, now: Double) {
        self.identity = identity
        id = hello.worker
        host = hello.host
        pid = hello.pid
        capacity = max(1, hello.credit)
        concurrency = max(1, hello.concurrency)
        inline = hello.inline
        lastSeen = now
    }

    /// Executors with nothing to run: held tasks (less those committed, whose work is done)
    /// and tasks taken back that may still run, short of its concurrency.
    package var idleExecutors: Int {
        draining ? 0 : max(0, concurrency - (held.count - committed.count) - revoked.count)
    }

    /// Remembers attempts taken back from this worker.
    package func tookBack(_ refs: [TaskRef]) {
        for ref in refs where takenBack.insert(ref).inserted { takenBackOrder.append(ref) }
        if takenBackOrder.count > 1024 {
            for ref in takenBackOrder.prefix(takenBackOrder.count - 1024) { takenBack.remove(ref) }
            takenBackOrder.removeFirst(takenBackOrder.count - 1024)
        }
    }

    /// Whether `ref` was taken back from this worker (and forgets it: reported once).
    package func wasTakenBack(_ ref: TaskRef) -> Bool {
        guard takenBack.remove(ref) != nil else { return false }
        takenBackOrder.removeAll { $0 == ref }
        return true
    }

    package var freeCredit: Int {
        if draining || revoked.count >= concurrency { return 0 }  // every executor may be stuck
        // Every committed task is held (granted only while held; dropped wherever held drops it).
        return max(0, capacity - (held.count - committed.count) - revoked.count)
    }
}

/// Every state change of every task: queue, page in, dispatch, complete, fail and retry,
/// crash and poison, lease expiry, return, cancel, hold and release. No sockets and no
/// threads: callers pass the time (`now`, monotonic seconds), and what must be sent
/// because of a change (revocations, ended jobs) is left in `effects` for the event loop.
/// Results and retries go to the journal's write queue; the loop commits them.
package final class Scheduler {
    package struct Policy {
        /// A task that was running on this many workers that died or hung fails as poison.
        package var poisonThreshold = 3
        /// First retry delay in seconds; doubles per failure, capped at `maxBackoff`.
        package var retryBackoff = 1.0
        package var maxBackoff = 30.0
        /// Pending tasks paged in at a time per job.
        package var pageSize = 4096

        package init(poisonThreshold: Int = 3, retryBackoff: Double = 1, maxBackoff: Double = 30, pageSize: Int = 4096) {
            self.poisonThreshold = poisonThreshold
            self.retryBackoff = retryBackoff
            self.maxBackoff = maxBackoff
            self.pageSize = pageSize
        }
    }

    package enum Effect {
        /// Tell a worker to drop these attempts.
        case revoke(worker: [UInt8], refs: [TaskRef])
        /// A job ended: answer its waiters.
        case ended(waiters: [[UInt8]], status: JobStatus)
    }

    package let journal: Journal
    package let policy: Policy
    package let epoch: UInt32
    package let metrics: CoordinatorMetrics
    package let logger: Logger
    /// Active jobs by (-priority, seq).
    package private(set) var jobs: [ActiveJob] = []
    package private(set) var jobsByID: [String: ActiveJob] = [:]
    package var finishedJobs: [String: JobStatus] = [:]
    package var effects: [Effect] = []

    package init(journal: Journal, policy: Policy, epoch: UInt32, metrics: CoordinatorMetrics, logger: Logger) {
        self.journal = journal
        self.policy = policy
        self.epoch = epoch
        self.metrics = metrics
        self.logger = logger
    }

    // MARK: Jobs

    /// Makes a journaled job active (a new one, or one found unfinished at start).
    package func add(_ job: ActiveJob) {
        jobs.append(job)
        jobs.sort { ($0.spec.priority, -$0.seq) > ($1.spec.priority, -$1.seq) }
        jobsByID[job.id] = job
        if job.done == job.total { finishJob(job) }
    }

    /// The job a task id belongs to.
    package func job(of task: UInt64) -> ActiveJob? { jobs.first { $0.contains(task) } }

    package func finishJob(_ job: ActiveJob) {
        if job.state != .cancelled { job.state = job.counts[.failed] > 0 ? .failed : .succeeded }
        job.finished = Date().timeIntervalSince1970
        journal.append(.jobState(job: job.id, state: job.state, finished: job.finished, counts: job.counts))
        let status = job.status()
        effects.append(.ended(waiters: job.waiters, status: status))
        job.waiters = []
        job.live = [:]
        job.clearQueues()
        jobs.removeAll { $0 === job }
        jobsByID.removeValue(forKey: job.id)
        finishedJobs[job.id] = status
        logger.info("job \(job.id) (\(LogText.field(job.spec.name))) \(job.state.rawValue): \(job.counts[.succeeded]) ok, \(job.counts[.failed]) failed, \(job.counts[.skipped]) skipped, \(job.counts[.cancelled]) cancelled")
    }

    /// Cancels a job: its unfinished tasks get a cancelled result (in one journal
    /// transaction), its running attempts are revoked.
    package func cancel(_ job: ActiveJob) throws {
        var revokes: [[UInt8]: [TaskRef]] = [:]
        for (id, slot) in job.live where slot.state == .dispatched {
            if let w = slot.worker {
                let ref = TaskRef(task: id, attempt: slot.attempt)
                revokes[w.identity, default: []].append(ref)
                w.held.removeValue(forKey: ref)
                w.committed.remove(ref)
            }
        }
        let n = try journal.cancelUnfinished(job: job.id, from: job.firstTask, end: job.end) { input in
            var record = TaskRecord(input: input.name, status: .cancelled)
            record.error = .init(code: Outcome.cancelled.name, message: "\(Paths.display(input.name)): job cancelled")
            return Array((try? JSONEncoder().encode(record)) ?? Data())
        }
        job.state = .cancelled
        job.running = 0
        job.counts[.cancelled] += n
        metrics.completed(.cancelled, count: n)
        for (identity, refs) in revokes { effects.append(.revoke(worker: identity, refs: refs)) }
        finishJob(job)
    }

    // MARK: Paging and dispatch

    /// The next task to dispatch, highest priority job first; pages tasks in as needed.
    package func nextReady(now: Double) -> (ActiveJob, UInt64)? {
        for job in jobs where job.state != .cancelled {
            while true {
                if job.readyCount < policy.pageSize / 2 && !job.fullyPaged { pageIn(job, now: now) }
                guard let id = job.dequeue() else { break }
                if job.live[id]?.state == .pending { return (job, id) }
            }
        }
        return nil
    }

    /// Loads the next page of a job's unfinished tasks from the journal (committing
    /// queued writes first, so nothing finished is loaded again).
    package func pageIn(_ job: ActiveJob, now: Double) {
        do {
            try journal.flush()
            let rows = try journal.unfinishedTasks(from: job.pagedThrough, end: job.end, limit: policy.pageSize,
                                                   recipe: job.spec.options.incremental && job.spec.kind != .noop ? job.recipeHash : nil)
            job.pagedThrough = rows.count < policy.pageSize ? job.end : rows[rows.count - 1].id + 1
            for row in rows where job.live[row.id] == nil {  // a task re-attached by its worker is in already
                var slot = TaskSlot(input: row.input)
                slot.failures = row.attempts
                slot.crashes = row.crashes
                slot.rendition = row.rendition
                switch job.gate?.admit(row.id, row.input) ?? .ready {
                case .ready:
                    job.live[row.id] = slot
                    job.enqueue(row.id)
                case .held:
                    slot.state = .held
                    job.live[row.id] = slot
                case .incomplete(let failed):
                    job.live[row.id] = slot
                    descriptorIncomplete(job, row.id, failedParts: failed)
                }
            }
        } catch {
            // The journal is unreadable: the loop's next flush reports it and stops.
            logger.error("paging tasks of job \(job.id) in: \(error)")
        }
    }

    /// The tail of the work: nothing is ready, yet some executors are idle while a worker
    /// holds tasks beyond its own executors that it has not started (prefetched). The last
    /// dispatched of those are taken back — revoked, so the holder drops them from its queue
    /// (one it started meanwhile has its commit refused: exactly once either way) — and
    /// queued again for the idle executors. Uncharged. Returns how many were taken back.
    package func rebalance(_ workers: [WorkerConn]) -> Int {
        var idle = workers.reduce(0) { $0 + $1.idleExecutors }
        guard idle > 0 else { return 0 }
        var taken = 0
        for w in workers where idle > 0 && !w.draining {
            var spare = (w.held.count - w.committed.count) - w.concurrency
            guard spare > 0 else { continue }
            let waiting = w.held.filter { !w.running.contains($0.key) && !w.committed.contains($0.key) && !w.revoked.contains($0.key) }
                .map { (ref: $0.key, job: $0.value, at: $0.value.live[$0.key.task]?.dispatchedAt ?? 0) }
                .sorted { ($0.at, $0.ref.task) > ($1.at, $1.ref.task) }
            var refs: [TaskRef] = []
            for t in waiting where spare > 0 && idle > 0 {
                guard let slot = t.job.live[t.ref.task], slot.state == .dispatched, slot.attempt == t.ref.attempt,
                      slot.worker === w else { continue }
                returned(t.job, t.ref.task)
                refs.append(t.ref)
                spare -= 1
                idle -= 1
            }
            if !refs.isEmpty {
                // One may have started (its notice in flight): it holds an executor until a
                // heartbeat shows it gone, as an expired lease's does.
                w.revoked.formUnion(refs)
                w.tookBack(refs)
                effects.append(.revoke(worker: w.identity, refs: refs))
                taken += refs.count
            }
        }
        return taken
    }

    /// Leases a pending task to a worker; returns the attempt's reference.
    package func dispatch(_ job: ActiveJob, _ id: UInt64, to w: WorkerConn, now: Double) -> TaskRef {
        var slot = job.live[id]!
        slot.dispatches += 1
        let ref = TaskRef(task: id, attempt: (epoch & 0xFFFF) << 16 | (slot.dispatches & 0xFFFF))
        slot.state = .dispatched
        slot.attempt = ref.attempt
        slot.worker = w
        slot.deadline = now + job.spec.options.timeout
        slot.dispatchedAt = now
        job.live[id] = slot
        job.running += 1
        job.state = .running
        w.held[ref] = job
        return ref
    }

    /// The task behind `ref` if it is the current attempt and `w` holds it.
    package func current(_ ref: TaskRef, of w: WorkerConn) -> ActiveJob? {
        guard let job = w.held[ref], let slot = job.live[ref.task], slot.state == .dispatched,
              slot.attempt == ref.attempt, slot.worker === w else { return nil }
        return job
    }

    /// A worker (after our restart or its reconnect) still holds these attempts: they are
    /// its again, unless finished or running elsewhere.
    package func reattach(_ refs: [TaskRef], to w: WorkerConn, now: Double) {
        for ref in refs {
            guard let job = job(of: ref.task) else { continue }
            var slot: TaskSlot
            if let s = job.live[ref.task] {
                slot = s
                // Someone else has it (the same identity saying hello again is not someone else).
                if slot.state == .dispatched, let other = slot.worker, other !== w, other.identity != w.identity { continue }
            } else {
                // Not in memory: paged in yet, or finished (then it has a result).
                guard ref.task >= job.pagedThrough, let row = try? journal.unfinishedTasks(
                    from: ref.task, end: ref.task + 1, limit: 1, recipe: nil).first else { continue }
                slot = TaskSlot(input: row.input)
                slot.failures = row.attempts
                slot.crashes = row.crashes
            }
            if slot.state != .dispatched { job.running += 1 }
            slot.state = .dispatched
            slot.attempt = ref.attempt
            slot.worker = w
            slot.deadline = now + job.spec.options.timeout
            job.live[ref.task] = slot
            w.held[ref] = job
            w.announced.insert(job.id)
            job.state = .running
        }
    }

    /// Fencing: may this attempt publish its outputs?
    package func grantCommit(_ ref: TaskRef, of w: WorkerConn) -> Bool {
        guard current(ref, of: w) != nil, !w.revoked.contains(ref) else { return false }
        w.committed.insert(ref)
        return true
    }

    // MARK: Outcomes

    /// Takes a dispatched task off its worker.
    private func release(_ job: ActiveJob, _ id: UInt64) {
        guard var slot = job.live[id] else { return }
        if slot.state == .dispatched {
            job.running -= 1
            slot.worker?.held.removeValue(forKey: TaskRef(task: id, attempt: slot.attempt))
            slot.worker?.committed.remove(TaskRef(task: id, attempt: slot.attempt))
        }
        slot.worker = nil
        job.live[id] = slot
    }

    /// The worker handed the attempt back unstarted: queue it again.
    package func returned(_ job: ActiveJob, _ id: UInt64) {
        release(job, id)
        job.live[id]?.state = .pending
        job.enqueue(id)
    }

    /// Results a job's planning gave (tasks whose outputs collide), already journaled:
    /// counted, observed and never dispatched (paging skips finished tasks).
    package func failedAtPlanning(_ job: ActiveJob, _ failed: [(task: UInt64, record: [UInt8])]) {
        guard !failed.isEmpty else { return }
        job.counts[.failed] += failed.count
        metrics.completed(.failed, count: failed.count)
        for f in failed { resultObserver?(job, f.record) }
    }

    /// A task's final result (`reported`: the attempt that reported it, if one did).
    /// Called with every final result (the dashboard's views), nil when nobody watches.
    package var resultObserver: ((ActiveJob, [UInt8]) -> Void)?

    package func complete(_ job: ActiveJob, _ id: UInt64, status: Outcome, record: [UInt8],
                          reported: TaskRef? = nil) {
        guard let slot = job.live[id] else { return }
        // Another attempt still out is now pointless: take it back.
        if slot.state == .dispatched, let other = slot.worker {
            let ref = TaskRef(task: id, attempt: slot.attempt)
            if ref != reported, other.held[ref] != nil {
                other.tookBack([ref])
                effects.append(.revoke(worker: other.identity, refs: [ref]))
            }
        }
        release(job, id)
        job.live.removeValue(forKey: id)
        job.counts[status] += 1
        journal.append(.result(task: id, job: job.id, status: status, record: record))
        metrics.completed(status)
        resultObserver?(job, record)
        for (task, failed, descriptor) in job.gate?.partEnded(slot.input, failed: status == .failed || status == .cancelled) ?? [] {
            if descriptor && failed > 0 { descriptorIncomplete(job, task, failedParts: failed) } else if job.live[task]?.state == .held {
                job.live[task]?.state = .pending
                job.enqueue(task)
            }
        }
        if job.done == job.total { finishJob(job) }
    }

    private func descriptorIncomplete(_ job: ActiveJob, _ id: UInt64, failedParts: Int) {
        guard job.state != .cancelled, let path = job.live[id].map({ Paths.display($0.input.name) }) else { return }
        complete(job, id, status: .failed,
                 record: failureRecord(job, id, code: "incomplete",
                                       message: "\(path): pyramid not finished (\(failedParts) part\(failedParts == 1 ? "" : "s") failed): no descriptor written"))
    }

    /// A failure: retried with backoff when it may pass, else final.
    package func fail(_ job: ActiveJob, _ id: UInt64, retryable: Bool, code: String, message: String,
              record: [UInt8]?, now: Double) {
        guard var slot = job.live[id] else { return }
        slot.failures += retryable ? 1 : 0
        job.live[id] = slot
        if retryable && slot.failures < job.spec.options.maxAttempts {
            release(job, id)
            let delay = min(policy.maxBackoff, policy.retryBackoff * pow(2, Double(slot.failures - 1)))
            job.live[id]?.state = .delayed
            job.live[id]?.deadline = now + delay
            job.delayed.append(id)
            journal.append(.retry(task: id, attempts: slot.failures, crashes: slot.crashes,
                                  notBefore: Date().timeIntervalSince1970 + delay, error: message))
            metrics.retries.increment()
            logger.info("retrying \(LogText.field(Paths.display(slot.input.name))) in \(delay) s: \(message)")
            return
        }
        let rec = record.flatMap { $0.isEmpty ? nil : $0 }
            ?? failureRecord(job, id, code: code, message: retryable ? "\(message) (after \(slot.failures) attempts)" : message)
        complete(job, id, status: .failed, record: rec)
    }

    /// A worker died or hung while holding the task: requeue, or fail it as poison.
    package func crashed(_ job: ActiveJob, _ id: UInt64, charge: Bool, reason: String) {
        release(job, id)
        guard var slot = job.live[id] else { return }
        if charge { slot.crashes += 1 }
        job.live[id] = slot
        if slot.crashes >= policy.poisonThreshold {
            let message = "\(Paths.display(slot.input.name)): poison task: \(reason) \(slot.crashes) times"
            logger.warning("\(LogText.field(message, limit: 1000))")
            metrics.poisoned.increment()
            complete(job, id, status: .failed, record: failureRecord(job, id, code: "poison", message: message))
            return
        }
        if charge {
            journal.append(.retry(task: id, attempts: slot.failures, crashes: slot.crashes, notBefore: 0, error: reason))
        }
        job.live[id]?.state = .pending
        job.enqueue(id)
        metrics.requeued.increment()
    }

    package func failureRecord(_ job: ActiveJob, _ id: UInt64, code: String, message: String) -> [UInt8] {
        var record = TaskRecord(input: job.live[id]?.input.name ?? "", status: .failed)
        record.error = .init(code: code, message: message)
        return Array((try? JSONEncoder().encode(record)) ?? Data())
    }

    /// Gives a worker up: requeue what it held, charging tasks it was running.
    package func lose(_ w: WorkerConn, reason: String, charge: Bool = true, keep: Set<TaskRef> = []) {
        // Charged: what it said was running, and — when it died before saying anything about
        // the tasks it was sent last — the first of those (what its executors would have
        // started), so a task that kills its worker on arrival still meets the poison rule.
        // Tasks it had already mentioned as queued are not charged (one queued behind the
        // killer is innocent); a heartbeat in flight when a task was sent can leave a death
        // charged to nobody (the rule then needs one death more). A task whose commit was
        // granted had finished its work: never charged, and it holds no executor.
        let busy = w.running.subtracting(w.committed)
        var charged = busy
        func sentAt(_ ref: TaskRef, _ job: ActiveJob) -> Double { job.live[ref.task]?.dispatchedAt ?? 0 }
        let silent = w.held.filter { ref, job in
            !w.running.contains(ref) && !w.committed.contains(ref) && sentAt(ref, job) >= w.lastSeen
        }.sorted { (sentAt($0.key, $0.value), $0.key.task) < (sentAt($1.key, $1.value), $1.key.task) }
        for (ref, _) in silent.prefix(max(0, w.concurrency - busy.count)) { charged.insert(ref) }
        for (ref, job) in w.held where !keep.contains(ref) {
            guard let slot = job.live[ref.task], slot.state == .dispatched, slot.attempt == ref.attempt else { continue }
            crashed(job, ref.task, charge: charge && charged.contains(ref), reason: "worker \(reason)")
        }
        w.held = [:]
        w.committed = []
        if charge { metrics.workersLost.increment() }
    }

    // MARK: Timers

    /// Leases past their deadline: the task hung (or its worker did). Revoked and requeued;
    /// charged only when the worker said it had started it (one queued behind a hung one
    /// is innocent).
    package func expireLeases(of workers: [WorkerConn], now: Double) {
        for w in workers {
            for (ref, job) in w.held {
                guard let slot = job.live[ref.task], slot.state == .dispatched, slot.attempt == ref.attempt,
                      now > slot.deadline else { continue }
                logger.warning("lease expired for \(LogText.field(Paths.display(slot.input.name))) on \(LogText.field(w.id))")
                effects.append(.revoke(worker: w.identity, refs: [ref]))
                let started = w.running.contains(ref)
                if started { w.revoked.insert(ref) }
                crashed(job, ref.task, charge: started, reason: "hung (lease expired after \(job.spec.options.timeout) s)")
            }
        }
    }

    /// Tasks whose retry backoff is over go back in the queue.
    package func releaseDelayed(now: Double) {
        for job in jobs where !job.delayed.isEmpty {
            var still: [UInt64] = []
            for id in job.delayed {
                guard let slot = job.live[id], slot.state == .delayed else { continue }
                if now >= slot.deadline {
                    job.live[id]?.state = .pending
                    job.enqueue(id)
                } else {
                    still.append(id)
                }
            }
            job.delayed = still
        }
    }
}
