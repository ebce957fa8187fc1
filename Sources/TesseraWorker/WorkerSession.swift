import Foundation
import TesseraModel
import TesseraTasks
import TesseraWire

/// The worker's side of the protocol, without sockets, threads or files: what the loop
/// thread knows — the jobs announced, tasks parked until their job is, tasks waiting for
/// their bytes, reports not yet acknowledged, the hello in flight, the refusal back-off —
/// and what each message from the coordinator means. The loop feeds it messages and the
/// clock and carries out its effects (the executors' queue, the socket, the log are the
/// loop's). Like `Scheduler` for the coordinator: every decision in one place, tested alone.
struct WorkerSession {
    /// What the loop does because of a message.
    enum Effect {
        /// Queue the task for an executor (or ask for its bytes when its input is not
        /// readable here: the loop looks, and calls `awaitBytes`).
        case accept(TaskAssignment, ExecutableJob)
        /// The coordinator does not know this worker: drop every queued task (not run),
        /// ask again for the commits still waiting, then say hello (`hello` follows).
        case forgetQueued
        case hello
        /// Commits granted.
        case committed([TaskRef])
        /// Attempts taken back: out of the queue; a running one's commit will be refused.
        case revoke(Set<TaskRef>)
        case drain
        case log(Level, String)
    }

    enum Level { case info, warning, error }

    private(set) var jobs: [String: ExecutableJob] = [:]
    private(set) var parked: [String: [TaskAssignment]] = [:]
    private(set) var awaitingBytes: [TaskRef: TaskAssignment] = [:]
    /// When the last hello went out, until its welcome: the reregisters answering what this
    /// worker sent before that hello arrived are not reasons to say hello again (after a
    /// coordinator restart they come by the hundred, and each hello lists every task held).
    private(set) var helloSentAt: Double?
    private(set) var unacked: [TaskRef: (report: TaskReport, sent: Double)] = [:]
    /// While the coordinator refuses this worker's key (`forbidden`: revoked, or a client
    /// key), heartbeats wait until then, backing off up to a minute.
    private(set) var refusedUntil = 0.0
    private(set) var refusedBackoff = 0.0

    /// The effects of one message. `draining`: this worker has said goodbye (it does not
    /// come back when the coordinator asks it to register again).
    mutating func receive(_ e: Envelope, now: Double, draining: Bool) throws -> [Effect] {
        switch e.type {
        case MessageType.welcome:
            helloSentAt = nil
            refusedBackoff = 0
        case MessageType.heartbeat:
            break
        case MessageType.reregister:
            if let sent = helloSentAt, now - sent < 5 { break }  // the hello is on its way
            if draining { break }
            // The coordinator restarted, or gave this worker up and requeued its tasks:
            // what waits here is dropped, not run; then hello again with what still runs.
            parked.removeAll()
            awaitingBytes.removeAll()
            return [.forgetQueued, .hello]
        case MessageType.committed:
            return [.committed(try TaskRef.decode(e.body))]
        case MessageType.job:
            let a = try e.decode(JobAnnouncement.self)
            jobs[a.job] = a.spec
            return (parked.removeValue(forKey: a.job) ?? []).map { .accept($0, a.spec) }
        case MessageType.tasks:
            var effects: [Effect] = []
            for t in try TaskAssignment.decode(e) {
                if let job = jobs[t.job] { effects.append(.accept(t, job)) } else { parked[t.job, default: []].append(t) }
            }
            return effects
        case MessageType.ack:
            for ref in try TaskRef.decode(e.body) { unacked.removeValue(forKey: ref) }
        case MessageType.revoke:
            let refs = Set(try TaskRef.decode(e.body))
            for r in refs { awaitingBytes.removeValue(forKey: r) }
            return [.revoke(refs)]
        case MessageType.drain:
            return [.drain]
        case MessageType.error:
            let err = try? e.decode(ErrorReply.self)
            guard err?.code == "forbidden" else { return [.log(.error, "coordinator error: \(err?.description ?? "?")")] }
            guard now >= refusedUntil else { break }  // replies to what was sent before the pause
            refusedBackoff = min(60, max(2, refusedBackoff * 2))
            refusedUntil = now + refusedBackoff
            return [.log(.error, "coordinator error: \(err?.description ?? "?"); trying again in \(Int(refusedBackoff)) s")]
        default:
            return [.log(.warning, "ignoring \(e.type)")]
        }
        return []
    }

    /// The task's input is not readable here: it waits for its bytes (`needBytes`).
    mutating func awaitBytes(_ t: TaskAssignment) { awaitingBytes[t.ref] = t }

    /// The task is queued (its bytes came, or it needed none).
    mutating func queued(_ ref: TaskRef) { awaitingBytes.removeValue(forKey: ref) }

    /// A hello went out: what it lists beyond the executors' tasks (reports not yet
    /// acknowledged, tasks waiting for bytes).
    mutating func helloSent(now: Double) -> [TaskRef] {
        helloSentAt = now
        return Array(unacked.keys) + Array(awaitingBytes.keys)
    }

    /// Reports sent: kept until acknowledged.
    mutating func sent(_ reports: [TaskReport], now: Double) {
        for r in reports { unacked[r.ref] = (r, now) }
    }

    /// Reports unacknowledged for `after` seconds, to send again (the coordinator dedupes).
    mutating func stale(now: Double, after: Double) -> [TaskReport] {
        let stale = unacked.filter { now - $0.value.sent > after }
        for k in stale.keys { unacked[k]?.sent = now }
        return stale.map(\.value.report)
    }

    /// Whether a heartbeat may go out (not while the coordinator refuses this worker).
    func mayHeartbeat(now: Double) -> Bool { now >= refusedUntil }

    /// Drain, first step: every task held here and not queued (parked, waiting for bytes), handed back.
    mutating func handBack() -> [TaskRef] {
        let refs = Array(awaitingBytes.keys) + parked.values.flatMap { $0.map(\.ref) }
        awaitingBytes.removeAll()
        parked.removeAll()
        return refs
    }
}
