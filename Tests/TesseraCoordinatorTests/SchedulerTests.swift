import Foundation
import Logging
import TesseraCoordinator
import TesseraImaging
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraTestSupport
import XCTest
import TesseraModel

/// The scheduler alone: no sockets, no threads, a clock the test moves, and a real
/// SQLite journal in a temporary directory. Each test drives transitions and checks the
/// journal: one result per task, ever.
final class SchedulerTests: XCTestCase {
    var dir = ""
    var journal: Journal!
    var now = 1000.0

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "scheduler-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        journal = try Journal(path: dir + "/journal.sqlite")
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func makeScheduler(pageSize: Int = 64, epoch: UInt32 = 1) -> Scheduler {
        Scheduler(journal: journal, policy: .init(poisonThreshold: 3, retryBackoff: 1, maxBackoff: 30, pageSize: pageSize),
                  epoch: epoch, metrics: .discarding(), logger: Logger(label: "test"))
    }

    /// Journals a job of `paths` (streamed in batches of `batch`) and makes it active.
    @discardableResult
    func submit(_ s: Scheduler, _ paths: [String], kind: JobKind = .noop, parts: [PyramidPart?]? = nil, maxAttempts: Int = 3,
                timeout: Double = 10, batch: Int = 1000) throws -> ActiveJob {
        var spec = JobSpec(name: "t", kind: kind, inputs: [.manifest("/dev/null")], output: dir + "/out")
        spec.options.maxAttempts = maxAttempts
        spec.options.timeout = timeout
        let inputs = paths.enumerated().map { InputFile(path: $0.element, root: "/", part: parts?[$0.offset] ?? nil) }
        let id = "j\(UUID().uuidString.prefix(8))"
        let planned = try journal.insertJob(id: id, spec: spec, submitted: 0, batch: batch) { add in
            for i in inputs { try add(i) }
        }
        let job = ActiveJob(id: id, seq: planned.seq, spec: spec, firstTask: planned.firstTask, total: planned.total, submitted: 0)
        if kind == .tiles { job.gate = PyramidGate(tasks: inputs.map { ($0, false, false) }) }
        s.add(job)
        return job
    }

    func worker(_ name: String, credit: Int = 8, concurrency: Int = 2) -> WorkerConn {
        WorkerConn(identity: Array(name.utf8), hello: WorkerHello(worker: name, host: "h", pid: 1, concurrency: concurrency,
                                                                  credit: credit, inline: false, holding: []), now: now)
    }

    /// Leases up to `n` ready tasks to `w`.
    func take(_ s: Scheduler, _ w: WorkerConn, _ n: Int) -> [(ActiveJob, TaskRef)] {
        var out: [(ActiveJob, TaskRef)] = []
        while out.count < n, let (job, id) = s.nextReady(now: now) { out.append((job, s.dispatch(job, id, to: w, now: now))) }
        return out
    }

    func ok(_ s: Scheduler, _ job: ActiveJob, _ ref: TaskRef) {
        s.complete(job, ref.task, status: .succeeded, record: Array("{\"input\":\"\(ref.task)\"}".utf8), reported: ref)
    }

    func results(_ job: ActiveJob) throws -> [(task: UInt64, record: [UInt8])] {
        try journal.flush()
        return try journal.results(job: job.id, after: 0, limit: 10_000_000)
    }

    // MARK: -

    func testEveryTaskEndsExactlyOnceThroughPagesFailuresCrashesAndReturns() throws {
        let s = makeScheduler(pageSize: 64)
        let job = try submit(s, (0..<5000).map { "/in/\($0).jpg" }, maxAttempts: 2, batch: 700)
        XCTAssertEqual(job.total, 5000)
        XCTAssertTrue(job.live.isEmpty, "nothing is in memory before the first dispatch")
        var a = worker("a"), b = worker("b")
        var rng = SeededGenerator(seed: 29)
        var maxLive = 0, lostOnce = false
        var rounds = 0
        while s.finishedJobs[job.id] == nil && rounds < 100_000 {
            rounds += 1
            var taken = 0
            for w in [a, b] {
                let got = take(s, w, w.freeCredit)
                taken += got.count
                for (j, ref) in got {
                    switch Int.random(in: 0..<20, using: &rng) {
                    case 0: s.fail(j, ref.task, retryable: true, code: "read-failed", message: "flaky", record: nil, now: now)
                    case 1: s.returned(j, ref.task)
                    case 2: break  // still running when its worker dies below
                    default: ok(s, j, ref)
                    }
                }
            }
            maxLive = max(maxLive, job.live.count)
            if !lostOnce && job.done > 2500 {
                s.lose(a, reason: "killed")
                a = worker("a2")
                lostOnce = true
            }
            // Tasks left running on a worker: it dies and comes back.
            if a.held.count > 4 { s.lose(a, reason: "killed"); a = worker("a\(job.done)") }
            if b.held.count > 4 || (taken == 0 && !b.held.isEmpty) { s.lose(b, reason: "killed"); b = worker("b\(job.done)") }
            if taken == 0 && !a.held.isEmpty { s.lose(a, reason: "killed"); a = worker("a\(job.done)") }
            now += 1.5
            s.releaseDelayed(now: now)
            if job.done == job.total { break }
        }
        let rows = try results(job)
        XCTAssertEqual(rows.count, 5000, "one result per task")
        XCTAssertEqual(Set(rows.map(\.task)).count, 5000)
        XCTAssertEqual(job.counts.total, 5000)
        XCTAssertEqual(s.finishedJobs[job.id]?.total, 5000)
        XCTAssertLessThanOrEqual(maxLive, 64 + 64 + 16, "memory holds a window, not the job")
        XCTAssertTrue(s.jobs.isEmpty)
    }

    func testRetriesWaitTheirBackoffAndStopAtMaxAttempts() throws {
        let s = makeScheduler()
        let job = try submit(s, ["/in/a.jpg"], maxAttempts: 3)
        let w = worker("w")
        var (_, ref) = take(s, w, 1)[0]
        s.fail(job, ref.task, retryable: true, code: "read-failed", message: "EIO", record: nil, now: now)
        XCTAssertEqual(job.live[ref.task]?.state, .delayed)
        XCTAssertNil(s.nextReady(now: now))
        s.releaseDelayed(now: now + 0.9)
        XCTAssertNil(s.nextReady(now: now + 0.9), "1 s backoff")
        s.releaseDelayed(now: now + 1)
        ref = take(s, w, 1)[0].1
        s.fail(job, ref.task, retryable: true, code: "read-failed", message: "EIO", record: nil, now: now)
        s.releaseDelayed(now: now + 1.9)
        XCTAssertNil(s.nextReady(now: now + 1.9), "2 s backoff after the second failure")
        s.releaseDelayed(now: now + 2)
        ref = take(s, w, 1)[0].1
        XCTAssertEqual(ref.attempt & 0xFFFF, 3, "third dispatch")
        s.fail(job, ref.task, retryable: true, code: "read-failed", message: "EIO", record: nil, now: now)
        let rows = try results(job)
        XCTAssertEqual(rows.count, 1)
        XCTAssertTrue(String(decoding: rows[0].record, as: UTF8.self).contains("EIO (after 3 attempts)"))
        XCTAssertEqual(job.counts[.failed], 1)
        XCTAssertEqual(s.finishedJobs[job.id]?.state, .failed)
    }

    func testThreeChargedCrashesMakeAPoisonTaskAndUnchargedOnesDoNot() throws {
        let s = makeScheduler()
        let job = try submit(s, ["/in/bomb.jpg", "/in/fine.jpg"])
        for round in 0..<3 {
            let w = worker("w\(round)", credit: 2, concurrency: 1)
            let got = take(s, w, 2)
            XCTAssertEqual(got.count, 2)
            // The bomb was running; the other was queued behind it and is innocent.
            w.running = [got.first { job.live[$0.1.task]?.input.path == "/in/bomb.jpg" }!.1]
            s.lose(w, reason: "killed")
        }
        try journal.flush()
        let rows = try results(job)
        XCTAssertEqual(rows.count, 1)
        XCTAssertTrue(String(decoding: rows[0].record, as: UTF8.self).contains("poison"))
        XCTAssertEqual(job.live.values.map(\.crashes), [0], "the innocent one is not charged")
        let w = worker("last")
        let (_, ref) = take(s, w, 1)[0]
        ok(s, job, ref)
        XCTAssertEqual(s.finishedJobs[job.id]?.failed, 1)
        XCTAssertEqual(s.finishedJobs[job.id]?.succeeded, 1)
    }

    func testExpiredLeasesAreRevokedAndChargedOnlyWhenStarted() throws {
        let s = makeScheduler()
        let job = try submit(s, ["/in/a.jpg", "/in/b.jpg"], timeout: 10)
        let w = worker("w")
        let refs = take(s, w, 2).map(\.1)
        w.running = [refs[0]]
        s.expireLeases(of: [w], now: now + 9)
        XCTAssertTrue(s.effects.isEmpty, "not yet")
        s.expireLeases(of: [w], now: now + 10.5)
        let revoked = s.effects.flatMap { e -> [TaskRef] in if case .revoke(_, let r) = e { return r } else { return [] } }
        XCTAssertEqual(Set(revoked), Set(refs))
        XCTAssertEqual(w.revoked, [refs[0]], "a started attempt keeps holding an executor until a heartbeat says otherwise")
        XCTAssertEqual(job.live[refs[0].task]?.crashes, 1)
        XCTAssertEqual(job.live[refs[1].task]?.crashes, 0)
        XCTAssertEqual(job.running, 0)
        // The stale attempt may not publish; the new one may.
        XCTAssertFalse(s.grantCommit(refs[0], of: w))
        let w2 = worker("w2")
        let again = take(s, w2, 2).map(\.1)
        XCTAssertEqual(Set(again.map(\.task)), Set(refs.map(\.task)))
        XCTAssertTrue(again.allSatisfy { s.grantCommit($0, of: w2) })
        XCTAssertNotEqual(again[0].attempt, refs[0].attempt)
    }

    /// The tail of a job: a worker's idle executor gets what another holds unstarted beyond
    /// its own executors (the last dispatched first); a started task, a committed one, or
    /// one the holder's own free executor will start is never taken.
    func testAtTheTailAnIdleExecutorGetsWhatAnotherHoldsUnstarted() throws {
        let s = makeScheduler()
        let job = try submit(s, (0..<5).map { "/in/\($0).jpg" }, timeout: 10)
        let a = worker("a", credit: 4, concurrency: 2), b = worker("b", credit: 2, concurrency: 1)
        let held = take(s, a, 4).map(\.1)
        let bs = take(s, b, 1).map(\.1)
        XCTAssertEqual(bs.count, 1)
        XCTAssertEqual(s.rebalance([a, b]), 0, "no executor is idle")
        a.running = [held[0]]
        XCTAssertTrue(s.grantCommit(held[1], of: a), "one is done (committed): a's second executor is free")
        ok(s, job, bs[0])
        b.held.removeValue(forKey: bs[0])
        XCTAssertNil(s.nextReady(now: now), "nothing left to dispatch")
        XCTAssertEqual(b.idleExecutors, 1)
        // a: held 4, committed 1 -> 3 busy or waiting on 2 executors: one waits beyond them.
        XCTAssertEqual(s.rebalance([a, b]), 1)
        let revoked = s.effects.flatMap { e -> [TaskRef] in if case .revoke(_, let r) = e { return r } else { return [] } }
        XCTAssertEqual(revoked, [held[3]], "the last dispatched unstarted one")
        XCTAssertNil(a.held[held[3]])
        XCTAssertEqual(a.revoked, [held[3]], "counted on a's executors until a heartbeat shows it gone")
        XCTAssertEqual(a.idleExecutors, 0)
        XCTAssertFalse(s.grantCommit(held[3], of: a), "a start that raced the revoke publishes nothing")
        let moved = take(s, b, b.freeCredit).map(\.1)
        XCTAssertEqual(moved.map(\.task), [held[3].task])
        XCTAssertNotEqual(moved[0].attempt, held[3].attempt)
        s.effects.removeAll()
        XCTAssertEqual(s.rebalance([a, b]), 0, "a now holds no more than its executors")
        // Every task still ends once.
        for ref in [held[0], held[1], held[2]] { ok(s, job, ref) }
        ok(s, job, moved[0])
        XCTAssertEqual(try results(job).count, 5)
    }

    /// A granted commit frees the worker's credit (its executor is done: renaming and the
    /// report are left), so its next task goes out with the grant; a refused one does not.
    func testAGrantedCommitFreesItsCreditARefusedOneDoesNot() throws {
        let s = makeScheduler()
        let job = try submit(s, ["/in/a.jpg", "/in/b.jpg", "/in/c.jpg"], timeout: 10)
        let w = worker("w", credit: 1, concurrency: 1)
        let first = take(s, w, w.freeCredit).map(\.1)
        XCTAssertEqual(first.count, 1)
        XCTAssertEqual(w.freeCredit, 0)
        XCTAssertFalse(s.grantCommit(TaskRef(task: first[0].task, attempt: first[0].attempt + 1), of: w))
        XCTAssertEqual(w.freeCredit, 0, "a refused commit frees nothing")
        XCTAssertTrue(s.grantCommit(first[0], of: w))
        XCTAssertEqual(w.freeCredit, 1, "the granted attempt holds no executor")
        let second = take(s, w, w.freeCredit).map(\.1)
        XCTAssertEqual(second.count, 1)
        XCTAssertEqual(w.freeCredit, 0)
        XCTAssertEqual(w.held.count, 2, "both are this worker's until reported")
        // It dies on receiving the second: that one is charged, not the finished first.
        w.running = [first[0]]
        s.lose(w, reason: "died")
        XCTAssertEqual(job.live[first[0].task]?.crashes, 0, "its work was done")
        XCTAssertEqual(job.live[second[0].task]?.crashes, 1, "what its executor had started")
    }

    func testCancelGivesEveryUnfinishedTaskOneCancelledResult() throws {
        let s = makeScheduler(pageSize: 32)
        let job = try submit(s, (0..<3000).map { "/in/\($0).jpg" })
        let w = worker("w", credit: 20)
        let got = take(s, w, 20)
        for (j, ref) in got.prefix(10) { ok(s, j, ref) }
        let running = Set(got.suffix(10).map(\.1))
        try s.cancel(job)
        let revoked = s.effects.flatMap { e -> [TaskRef] in if case .revoke(_, let r) = e { return r } else { return [] } }
        XCTAssertEqual(Set(revoked), running)
        XCTAssertTrue(w.held.isEmpty)
        let status = try XCTUnwrap(s.finishedJobs[job.id])
        XCTAssertEqual(status.state, .cancelled)
        XCTAssertEqual([status.succeeded, status.cancelled], [10, 2990])
        let rows = try results(job)
        XCTAssertEqual(rows.count, 3000)
        XCTAssertEqual(Set(rows.map(\.task)).count, 3000)
        // A late report of a running attempt changes nothing.
        XCTAssertNil(s.current(running.first!, of: w))
    }

    func testRestartLoadsNoTaskUntilDispatchAndReattachesWhatWorkersHold() throws {
        let first = makeScheduler(pageSize: 16, epoch: 1)
        try submit(first, (0..<200).map { "/in/\($0).jpg" })
        let w = worker("w", credit: 50)
        let got = take(first, w, 50)
        for (j, ref) in got.prefix(40) { ok(first, j, ref) }
        try journal.flush()
        // The coordinator dies; a new one starts on the same journal.
        let s = makeScheduler(pageSize: 16, epoch: 2)
        let row = try XCTUnwrap(try journal.unfinishedJobs().first)
        let again = ActiveJob(id: row.id, seq: row.seq, spec: row.spec, firstTask: row.firstTask, total: row.total, submitted: 0)
        again.counts = try journal.resultCounts(job: row.id)
        s.add(again)
        XCTAssertEqual(again.done, 40)
        XCTAssertTrue(again.live.isEmpty)
        // The worker still runs the last 10 it was sent: they are its again, never sent twice.
        let held = got.suffix(10).map(\.1)
        let w2 = worker("w")
        s.reattach(held, to: w2, now: now)
        XCTAssertEqual(again.running, 10)
        var sent: [UInt64] = []
        while let (j, id) = s.nextReady(now: now) { sent.append(s.dispatch(j, id, to: w2, now: now).task) }
        XCTAssertEqual(sent.count, 150)
        XCTAssertTrue(Set(sent).isDisjoint(with: held.map(\.task)))
        XCTAssertTrue(Set(sent).isDisjoint(with: got.prefix(40).map(\.1.task)))
        for id in sent { ok(s, again, TaskRef(task: id, attempt: again.live[id]!.attempt)) }
        for ref in held { ok(s, again, ref) }
        XCTAssertEqual(try results(again).count, 200)
        XCTAssertEqual(s.finishedJobs[again.id]?.succeeded, 200)
    }

    /// A worker that says hello again on the same identity keeps what it still runs: those
    /// attempts are its own (they were left pointing at its old session, with no lease
    /// watching them, and a restarted coordinator waited for them forever).
    func testAHelloAgainKeepsTheAttemptsStillRunning() throws {
        let s = makeScheduler()
        let job = try submit(s, (0..<6).map { "/in/\($0).jpg" })
        let old = worker("w", credit: 6)
        let refs = take(s, old, 6).map(\.1)
        // It dropped its queue and runs two: hello again holding those.
        let keep = Set(refs.prefix(2))
        s.lose(old, reason: "re-hello", charge: false, keep: keep)
        let w = worker("w", credit: 6)
        s.reattach(Array(keep), to: w, now: now)
        XCTAssertEqual(Set(w.held.keys), keep)
        XCTAssertEqual(job.running, 2)
        for ref in keep { XCTAssertNotNil(s.current(ref, of: w)); ok(s, job, ref) }
        for (j, ref) in take(s, w, 6) { ok(s, j, ref) }
        XCTAssertEqual(try results(job).count, 6)
        XCTAssertEqual(s.finishedJobs[job.id]?.succeeded, 6)
    }

    func testAPyramidDescriptorWaitsForItsPartsAndFailsWhenOneFailed() throws {
        let s = makeScheduler(pageSize: 4)
        let paths = ["/a.jpg", "/a.jpg", "/a.jpg", "/b.jpg", "/b.jpg"]
        let parts: [PyramidPart?] = [.band(shrink: 0, rows: 0..<1), .tail(from: 1), .descriptor, .tail(from: 0), .descriptor]
        let job = try submit(s, paths, kind: .tiles, parts: parts)
        let w = worker("w", credit: 10)
        var got = take(s, w, 10)
        XCTAssertEqual(got.map { job.live[$0.1.task]!.input.part }, [.band(shrink: 0, rows: 0..<1), .tail(from: 1), .tail(from: 0)], "descriptors wait")
        s.fail(job, got[2].1.task, retryable: false, code: "corrupt", message: "bad", record: nil, now: now)  // b's only part
        ok(s, job, got[0].1)
        XCTAssertTrue(take(s, w, 10).isEmpty, "a's descriptor still waits for its tail")
        ok(s, job, got[1].1)
        got = take(s, w, 10)
        XCTAssertEqual(got.map { job.live[$0.1.task]!.input.key }, ["/a.jpg#meta"])
        ok(s, job, got[0].1)
        let records = try results(job).map { String(decoding: $0.record, as: UTF8.self) }
        XCTAssertEqual(records.count, 5)
        XCTAssertTrue(records.contains { $0.contains("pyramid not finished (1 part failed)") }, "\(records)")
        XCTAssertEqual(s.finishedJobs[job.id]?.failed, 2)
    }

    /// A tail waits for its pyramid's stacks (it reads the stripes they leave), whether they
    /// succeed or fail; a band does not hold a tail back; the descriptor waits for them all.
    func testATailWaitsForItsStacksAndTheDescriptorForEverything() throws {
        let s = makeScheduler(pageSize: 3)
        let paths = ["/a.tif", "/a.tif", "/a.tif", "/a.tif", "/b.jpg", "/b.jpg"]
        let parts: [PyramidPart?] = [.stack(levels: 2, rows: 0..<1), .stack(levels: 2, rows: 1..<2), .tail(from: 2), .descriptor,
                                     .band(shrink: 0, rows: 0..<1), .tail(from: 1)]
        let job = try submit(s, paths, kind: .tiles, parts: parts)
        let w = worker("w", credit: 10)
        func key(_ t: (ActiveJob, TaskRef)) -> String { job.live[t.1.task]!.input.key }
        let first = take(s, w, 10)
        XCTAssertEqual(Set(first.map(key)), ["/a.tif#k0-1:r0-1", "/a.tif#k0-1:r1-2", "/b.jpg#k0:r0-1", "/b.jpg#k1+"],
                       "a's tail waits for its stacks; b's tail never waits for a band")
        let byKey = Dictionary(uniqueKeysWithValues: first.map { (key($0), $0.1) })
        ok(s, job, byKey["/a.tif#k0-1:r0-1"]!)
        XCTAssertTrue(take(s, w, 10).isEmpty, "a's tail waits for its second stack")
        s.fail(job, byKey["/a.tif#k0-1:r1-2"]!.task, retryable: false, code: "corrupt", message: "bad", record: nil, now: now)
        let tail = take(s, w, 10)
        XCTAssertEqual(tail.map(key), ["/a.tif#k2+"], "a's tail goes once its stacks ended, a failed one too")
        for ref in [tail[0].1, byKey["/b.jpg#k0:r0-1"]!] { ok(s, job, ref) }
        XCTAssertTrue(take(s, w, 10).isEmpty, "b's descriptor-less job still runs its tail")
        ok(s, job, byKey["/b.jpg#k1+"]!)
        let records = try results(job).map { String(decoding: $0.record, as: UTF8.self) }
        XCTAssertTrue(records.contains { $0.contains("pyramid not finished (1 part failed)") }, "\(records)")
        XCTAssertEqual(s.finishedJobs[job.id]?.failed, 2)
        // After a restart, the gate is built from the journal: an unfinished stack holds the tail again.
        var gate = PyramidGate(tasks: [(InputFile(path: "/c.tif", root: "/", part: .stack(levels: 1, rows: 0..<1)), false, false),
                                       (InputFile(path: "/c.tif", root: "/", part: .tail(from: 1)), false, false)])
        XCTAssertEqual(gate.admit(9, InputFile(path: "/c.tif", root: "/", part: .tail(from: 1))), .held)
        XCTAssertEqual(gate.partEnded(InputFile(path: "/c.tif", root: "/", part: .stack(levels: 1, rows: 0..<1)), failed: false).map(\.task), [9])
    }

    func testStreamingInsertDropsDuplicatesAcrossBatches() throws {
        let s = makeScheduler()
        var paths = (0..<2500).map { "/in/\($0).jpg" }
        paths += ["/in/7.jpg", "/in/2499.jpg", "/in/1200.jpg"]
        let job = try submit(s, paths, batch: 1000)
        XCTAssertEqual(job.total, 2500)
        let w = worker("w", credit: 10_000)
        XCTAssertEqual(Set(take(s, w, 10_000).compactMap { job.live[$0.1.task]?.input.path }).count, 2500)
    }

    func testAJobThatFailsToPlanLeavesNothingBehind() throws {
        struct Boom: Error {}
        let spec = JobSpec(name: "t", kind: .noop, inputs: [.manifest("/dev/null")], output: dir)
        XCTAssertThrowsError(try journal.insertJob(id: "jx", spec: spec, submitted: 0, batch: 10) { add in
            for i in 0..<25 { try add(InputFile(path: "/in/\(i)", root: "/")) }
            throw Boom()
        })
        XCTAssertNil(try journal.job("jx"))
        XCTAssertTrue(try journal.tasks(first: 0, total: 100).isEmpty)
        XCTAssertTrue(try journal.unfinishedJobs().isEmpty)
    }
}
