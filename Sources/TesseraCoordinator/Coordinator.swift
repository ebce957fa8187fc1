import CoreMetrics
import Foundation
import Logging
import TesseraImaging
import TesseraJobs
import TesseraService
import TesseraWire

/// How a coordinator runs.
public struct CoordinatorConfig: Sendable {
    /// Endpoints to bind (`tcp://*:5555`, `ipc:///run/tessera.sock`, ...).
    public var endpoints: [String]
    public var journalPath: String
    /// Seconds between heartbeats to idle workers.
    public var heartbeatInterval = 1.0
    /// Seconds without a message before a worker is declared lost and its tasks requeued.
    public var workerTimeout = 5.0
    /// A task that was running on this many workers that died or hung fails as poison.
    public var poisonThreshold = 3
    /// First retry delay in seconds; doubles per failure, capped at `maxBackoff`.
    public var retryBackoff = 1.0
    public var maxBackoff = 30.0
    /// Most tasks in one `tasks` message.
    public var maxBatch = 256
    /// After a restart, seconds to let workers re-claim tasks they hold before re-dispatching.
    public var recoveryGrace = 3.0
    /// Largest message accepted from the network.
    public var maxMessageBytes = 600 << 20
    /// Seconds an inline input may take to read (off the loop) before its task fails.
    public var inlineReadTimeout = 30.0
    /// CURVE: the coordinator's key pair; connections must present a key in `allowList`.
    public var curve: CurveKeyPair?
    /// A directory of `.pub` files or a file of keys (re-read every few seconds).
    public var allowList: String?
    /// Serve `/metrics`, `/healthz` and `/readyz` over HTTP on this port (nil: off; 0: any free port).
    public var metricsPort: Int?
    /// The address the HTTP port binds (loopback unless told otherwise).
    public var metricsAddress = "127.0.0.1"
    /// Where metrics are recorded and exported from (default with a metrics port: a
    /// Prometheus exporter of `CoordinatorMetrics.catalog`; without one: nowhere).
    public var metrics: MetricsExporter?

    public init(endpoints: [String], journalPath: String) {
        self.endpoints = endpoints
        self.journalPath = journalPath
    }
}

/// Splits jobs into tasks and hands them to workers over a ROUTER socket, keeping
/// everything in the journal so a kill at any instant loses nothing.
///
/// One thread runs the event loop and owns the socket and all state; `stop()` and
/// `endpointsBound` are the only members other threads use.
public final class Coordinator: @unchecked Sendable {
    let config: CoordinatorConfig
    let logger: Logger
    let journal: Journal
    let epoch: UInt32
    let id = "coord-\(UInt32.random(in: 0...UInt32.max))"

    var jobs: [ActiveJob] = []          // by (-priority, seq)
    var jobsByID: [String: ActiveJob] = [:]
    var workers: [[UInt8]: WorkerConn] = [:]
    var pendingAcks: [[UInt8]: [TaskRef]] = [:]
    var pendingReplies: [([UInt8], Envelope)] = []
    var dispatchPausedUntil = 0.0
    var started = monotonicNow()
    let metrics: CoordinatorMetrics
    /// The exporter `/metrics` serves, if any.
    let exporter: MetricsExporter?

    private let context = ZMQContext()
    private var router: ZMQSocket!
    private var control: ZMQSocket!
    private let controlEndpoint = "inproc://coordinator-control-\(UInt32.random(in: 0...UInt32.max))"
    private let stopLock = NSLock()
    private var stopRequested = false
    private var dispatchHeld = false
    /// The unfinished jobs found in the journal at start (set before `run()`; read-only after).
    /// `worked`: tasks that succeeded or failed (not skipped or cancelled).
    public private(set) var recovered: [(id: String, spec: JobSpec, done: Int, worked: Int, total: Int)] = []
    private var boundEndpoints: [String] = []
    private let boundCondition = NSCondition()
    private var zap: ZMQSocket?
    private let readerEndpoint = "inproc://coordinator-reader-\(UInt32.random(in: 0...UInt32.max))"
    private var readerWake: ZMQSocket?
    private lazy var reader = InlineReader(context: context, wakeEndpoint: readerEndpoint)
    /// Inline reads under way: task ref -> deadline (monotonic seconds).
    var pendingReads: [TaskRef: Double] = [:]
    var allow: AllowList?
    private var http: HTTPService?
    /// When the loop last turned, and whether it is serving (read by the probes).
    private let probeLock = NSLock()
    private var loopTurned = 0.0
    private var serving = false
    /// The port metrics are served on, once running.
    public private(set) var metricsPort: Int?

    public init(config: CoordinatorConfig, logger: Logger = Logger(label: "tessera.coordinator")) throws {
        self.config = config
        self.logger = logger
        journal = try Journal(path: config.journalPath)
        epoch = try journal.nextEpoch()
        if config.curve != nil {
            guard let path = config.allowList else { throw KeyError("CURVE needs an allow-list of client keys (--allow)") }
            allow = try AllowList(path: path)
        }
        exporter = config.metrics ?? config.metricsPort.map { _ in
            MetricsExporter(metrics: CoordinatorMetrics.catalog, role: "coordinator", version: TesseraVersion.string)
        }
        metrics = CoordinatorMetrics(factory: exporter ?? NOOPMetricsHandler.instance)
        try recover()
        if let port = config.metricsPort {
            let h = try HTTPService(address: config.metricsAddress, port: port, routes: [
                "/metrics": { [weak self] _, _ in
                    guard let exporter = self?.exporter else { return .text("stopping\n", status: 503) }
                    return HTTPReply(contentType: MetricsExporter.contentType, body: exporter.exposition())
                },
                // Alive: the event loop turned in the last 10 s.
                "/healthz": { [weak self] _, _ in
                    guard let self else { return .text("stopping\n", status: 503) }
                    let age = self.probe().age
                    return age < 10 ? .text("ok\n") : .text("event loop stalled for \(Int(age)) s\n", status: 503)
                },
                // Ready: bound and serving (journal recovered), not stopping.
                "/readyz": { [weak self] _, _ in
                    guard let self else { return .text("stopping\n", status: 503) }
                    let p = self.probe()
                    return p.serving && p.age < 10 ? .text("ok\n") : .text("not serving\n", status: 503)
                },
            ])
            http = h
            metricsPort = h.port
        }
    }

    private func probe() -> (age: Double, serving: Bool) {
        probeLock.lock()
        defer { probeLock.unlock() }
        return (monotonicNow() - loopTurned, serving && !stopRequestedUnlocked)
    }

    private var stopRequestedUnlocked: Bool {
        stopLock.lock()
        defer { stopLock.unlock() }
        return stopRequested
    }

    /// Rebuilds every unfinished job from the journal.
    private func recover() throws {
        let rows = try journal.unfinishedJobs()
        for row in rows {
            let taskRows = try journal.tasks(ofJob: row.id)
            let job = ActiveJob(id: row.id, seq: row.seq, spec: row.spec, firstTask: row.firstTask,
                                inputs: taskRows.map { InputFile(path: $0.path, root: $0.root, part: $0.part) },
                                submitted: row.submitted)
            job.owner = row.owner
            job.state = .running
            let complete = job.holdDescriptors { i in
                (taskRows[i].result != nil, taskRows[i].result == .failed || taskRows[i].result == .cancelled)
            }
            for (i, t) in taskRows.enumerated() {
                job.tasks[i].failures = t.attempts
                job.tasks[i].crashes = t.crashes
                if let r = t.result {
                    job.tasks[i].state = .done
                    job.counts[[Journal.ResultStatus.succeeded: 0, .failed: 1, .skipped: 2, .cancelled: 3][r]!] += 1
                } else if !job.isHeld(i) {
                    job.enqueue(i)
                }
            }
            for path in complete { releaseDescriptor(job, path: path, now: monotonicNow()) }
            if job.spec.options.incremental { job.renditions = (try? journal.renditions(recipe: job.recipeHash)) ?? [:] }
            insert(job)
            recovered.append((row.id, row.spec, job.done, job.counts[0] + job.counts[1], job.tasks.count))
            logger.info("recovered job \(row.id) (\(row.spec.name)): \(job.done)/\(job.tasks.count) done")
        }
        if !rows.isEmpty { dispatchPausedUntil = monotonicNow() + config.recoveryGrace }
        // Jobs whose every task finished just before the crash end now.
        for job in jobs where job.done == job.tasks.count { finishJob(job, now: monotonicNow()) }
    }

    // MARK: Control from other threads

    /// The endpoints actually bound (ports chosen for `:*`), once the loop is up.
    public func waitUntilBound(timeout: Double = 10) -> [String] {
        boundCondition.lock()
        defer { boundCondition.unlock() }
        let deadline = Date().addingTimeInterval(timeout)
        while boundEndpoints.isEmpty && boundCondition.wait(until: deadline) {}
        return boundEndpoints
    }

    /// Ends `run()` after the current iteration (flushing the journal first).
    public func stop() {
        stopLock.lock()
        stopRequested = true
        stopLock.unlock()
        if let s = try? ZMQSocket(context, .pair) {
            try? s.connect(controlEndpoint)
            _ = try? s.send([[1]], dontWait: true)
            s.close()
        }
    }

    /// Stops handing out tasks (for good): what runs finishes or comes back, nothing new starts.
    public func holdDispatch() {
        stopLock.lock()
        dispatchHeld = true
        stopLock.unlock()
    }

    private var isDispatchHeld: Bool {
        stopLock.lock()
        defer { stopLock.unlock() }
        return dispatchHeld
    }

    private var shouldStop: Bool {
        stopLock.lock()
        defer { stopLock.unlock() }
        return stopRequested
    }

    // MARK: Event loop

    /// Runs until `stop()` or a `shutdown` request.
    public func run() throws {
        if let curve = config.curve {
            // The ZAP handler must exist, in this context, before any CURVE handshake.
            let z = try ZMQSocket(context, .rep)
            try z.bind("inproc://zeromq.zap.01")
            zap = z
            router = try ZMQSocket(context, .router)
            try router.setCurveServer(secretKey: curve.secretKey)
            try router.setZAPDomain("tessera")
            logger.info("CURVE on: server key \(curve.publicKey), \(allow?.keys.count ?? 0) client keys allowed")
        } else {
            router = try ZMQSocket(context, .router)
        }
        try router.setRouterMandatory(true)
        try router.setRouterHandover(true)
        try router.setHighWaterMarks(send: 100_000, receive: 100_000)
        try router.setMaxMessageSize(config.maxMessageBytes)
        // Connections that went silent (a cut link, a frozen host) are closed by libzmq.
        try router.setConnectionHeartbeat(intervalMilliseconds: 2000, timeoutMilliseconds: 10_000)
        control = try ZMQSocket(context, .pair)
        try control.bind(controlEndpoint)
        let wake = try ZMQSocket(context, .pull)
        try wake.bind(readerEndpoint)
        readerWake = wake
        var bound: [String] = []
        for e in config.endpoints {
            try router.bind(e)
            bound.append(router.lastEndpoint)
        }
        boundCondition.lock()
        boundEndpoints = bound
        boundCondition.broadcast()
        boundCondition.unlock()
        logger.info("coordinator \(id) epoch \(epoch) listening on \(bound.joined(separator: ", "))")
        probeLock.lock()
        serving = true
        loopTurned = monotonicNow()
        probeLock.unlock()
        defer {
            probeLock.lock()
            serving = false
            probeLock.unlock()
            try? journal.flush()
            reader.stop()
            router.close()
            control.close()
            readerWake?.close()
            zap?.close()
            http?.stop()
        }
        var poller = ZMQPoller()
        poller.add(router)
        poller.add(control)
        poller.add(wake)
        if let zap { poller.add(zap) }
        var lastTimers = 0.0
        var lastSlowTimers = 0.0
        var lastAllowReload = monotonicNow()
        while !shouldStop {
            let readable = try poller.poll(timeoutMilliseconds: journal.hasPending ? 0 : 50)
            if readable[1] || shouldStop { break }
            if readable[2] {
                while try wake.receive(dontWait: true) != nil {}
            }
            inlineReadsDone(now: monotonicNow())
            if readable.count > 3 && readable[3], let zap {
                while let frames = try zap.receive(dontWait: true) { try zap.send(authenticate(frames)) }
            }
            if readable[0] {
                // Drain what is queued (bounded), so journal writes and acks batch under load.
                var n = 0
                while n < 2000, let message = try router.receiveMessage(dontWait: true) {
                    handle(message.frames, userID: message.userID)
                    n += 1
                }
            }
            let now = monotonicNow()
            if now - lastTimers >= 0.05 {
                timers(now: now)
                lastTimers = now
            }
            if now - lastSlowTimers >= 0.5 {
                lastSlowTimers = now
                probeLock.lock()
                loopTurned = now
                probeLock.unlock()
                if exporter != nil { metrics.refresh(jobs: jobs, workers: Array(workers.values)) }
                if let allow, now - lastAllowReload >= 3 {
                    lastAllowReload = now
                    do {
                        if let change = try allow.reload() {
                            logger.info("allow-list reloaded: \(allow.keys.count) keys (+\(change.added) -\(change.removed.count))")
                            revokeSessions(of: change.removed, now: now)
                        }
                    } catch {
                        logger.error("allow-list not reloaded (the previous one stays in force): \(error)")
                    }
                }
            }
            dispatch(now: now)
            try flushJournalAndSend()
        }
    }

    /// ZAP (RFC 27): answers a CURVE handshake; only allow-listed keys pass. Frames in:
    /// version, request id, domain, address, identity, mechanism, credentials.
    func authenticate(_ f: [[UInt8]]) -> [[UInt8]] {
        guard f.count >= 6 else { return [Array("1.0".utf8), [], Array("400".utf8), Array("malformed".utf8), [], []] }
        let address = String(decoding: f[3], as: UTF8.self)
        let mechanism = String(decoding: f[5], as: UTF8.self)
        var status = "400", text = "key not allowed", user = ""
        if mechanism == "CURVE", f.count >= 7, let key = CurveKeys.z85(f[6]) {
            if let role = allow?.role(of: key) {
                status = "200"
                text = "OK"
                user = role.rawValue + ":" + key  // every message on the connection carries it (User-Id)
            } else {
                metrics.authRefused.increment()
                logger.warning("refused CURVE key \(key.prefix(8)) (\(key)) from \(address): not in the allow-list")
            }
        } else {
            metrics.authRefused.increment()
            logger.warning("refused \(mechanism) connection from \(address): CURVE required")
        }
        return [f[0], f[1], Array(status.utf8), Array(text.utf8), Array(user.utf8), []]
    }

    /// Commits queued journal writes, then sends what waited for them (acks, replies).
    func flushJournalAndSend() throws {
        if journal.hasPending { try journal.flush() }
        for (identity, refs) in pendingAcks where !refs.isEmpty {
            send(identity, Envelope(MessageType.ack, body: TaskRef.encode(refs)))
        }
        pendingAcks.removeAll(keepingCapacity: true)
        let replies = pendingReplies
        pendingReplies.removeAll()
        for (identity, e) in replies { send(identity, e) }
    }

    /// Sends to a peer; a peer that is gone (ROUTER_MANDATORY) is handled, never silently dropped.
    @discardableResult
    func send(_ identity: [UInt8], _ e: Envelope) -> Bool {
        do {
            try router.send([identity] + e.frames)
            if let w = workers[identity] { w.lastSent = monotonicNow() }
            return true
        } catch let error as ZMQError where error == .hostUnreachable {
            if let w = workers[identity] {
                logger.warning("worker \(w.id) unreachable; requeueing its tasks")
                lose(w, now: monotonicNow(), reason: "unreachable")
            }
            return false
        } catch {
            logger.error("send failed: \(error)")
            return false
        }
    }

    func reply(_ identity: [UInt8], _ e: Envelope) { pendingReplies.append((identity, e)) }

    func replyError(_ identity: [UInt8], _ code: String, _ message: String) {
        reply(identity, Envelope(MessageType.error, json: ErrorReply(code: code, message: message)))
    }

    // MARK: Messages

    /// Who sent a message: under CURVE its role and key (from the ZAP user id, checked
    /// against the allow-list as it is now, so a removed key is refused at once); without
    /// CURVE (loopback, ipc) a local peer, trusted with everything.
    struct Peer {
        var role: PeerRole?
        var key: String?
        var isLocal: Bool { key == nil }
        func may(_ r: PeerRole) -> Bool { isLocal || role == r || (r == .client && role == .admin) }
    }

    static let workerMessages: Set<String> = [MessageType.hello, MessageType.heartbeat, MessageType.report,
                                              MessageType.needBytes, MessageType.started, MessageType.bye,
                                              MessageType.commit]
    static let clientMessages: Set<String> = [MessageType.submit, MessageType.status, MessageType.wait,
                                              MessageType.cancel, MessageType.results]

    /// The peer behind `userID`, allowed to send `type`; throws the refusal otherwise.
    func authorize(_ type: String, userID: String?) throws -> Peer {
        guard let allow else { return Peer(role: nil, key: nil) }
        guard let userID, let colon = userID.firstIndex(of: ":"),
              let role = PeerRole(rawValue: String(userID[..<colon])) else {
            throw ErrorReply(code: "forbidden", message: "unauthenticated connection")
        }
        let key = String(userID[userID.index(after: colon)...])
        guard allow.role(of: key) == role else {
            throw ErrorReply(code: "forbidden", message: "key \(key.prefix(8))… is no longer allowed as \(role.rawValue)")
        }
        let peer = Peer(role: role, key: key)
        if Self.workerMessages.contains(type) && !peer.may(.worker) {
            throw ErrorReply(code: "forbidden", message: "\(type) needs a worker key; this is a \(role.rawValue) key")
        }
        if Self.clientMessages.contains(type) && !peer.may(.client) {
            throw ErrorReply(code: "forbidden", message: "\(type) needs a client key; this is a \(role.rawValue) key")
        }
        if type == MessageType.shutdown && !peer.may(.admin) {
            throw ErrorReply(code: "forbidden", message: "shutdown needs an admin key")
        }
        return peer
    }

    /// Logs a refused message (at most once a second per reason, so a misbehaving peer
    /// cannot flood the log) and counts it.
    func refuse(_ what: String, from identity: [UInt8], reason: String) {
        metrics.refused(reason)
        let now = monotonicNow()
        if now - (lastRefusalLog[reason] ?? 0) >= 1 {
            lastRefusalLog[reason] = now
            logger.warning("refused \(what) from \(String(decoding: identity.prefix(64), as: UTF8.self)): \(reason)")
        }
    }

    private func handle(_ frames: [[UInt8]], userID: String?) {
        guard frames.count >= 2 else { return }
        let identity = frames[0]
        let envelope: Envelope
        do {
            envelope = try Envelope(frames: frames[1...])
        } catch {
            metrics.malformed.increment()
            replyError(identity, "bad-message", "\(error)")
            return
        }
        let peer: Peer
        do { peer = try authorize(envelope.type, userID: userID) } catch let e as ErrorReply {
            refuse(envelope.type, from: identity, reason: e.message)
            replyError(identity, e.code, e.message)
            return
        } catch { return }
        let now = monotonicNow()
        // Worker traffic after hello: only from the key that said hello on this identity.
        var worker = workers[identity]
        if let w = worker, w.key != peer.key {
            if envelope.type != MessageType.hello {
                refuse(envelope.type, from: identity, reason: "identity \(w.id) belongs to another key")
                replyError(identity, "forbidden", "this worker identity belongs to another key")
                return
            }
            worker = nil
        }
        if let w = worker, Self.workerMessages.contains(envelope.type) { w.lastSeen = now }
        do {
            switch envelope.type {
            case MessageType.hello: try hello(identity, envelope, peer: peer, now: now)
            case MessageType.heartbeat: try heartbeat(identity, envelope)
            case MessageType.report: try report(identity, envelope, now: now)
            case MessageType.needBytes: try needBytes(identity, envelope, now: now)
            case MessageType.commit: try grantCommit(identity, envelope, now: now)
            case MessageType.started:
                // Precise crash attribution: these tasks are now executing (only its own).
                if let w = worker {
                    for ref in try TaskRef.decode(envelope.body) where w.held[ref] != nil { w.running.insert(ref) }
                }
            case MessageType.bye: try bye(identity, envelope, now: now)
            case MessageType.submit: try submit(identity, envelope, owner: peer.key ?? "", now: now)
            case MessageType.status: try status(identity, envelope)
            case MessageType.wait: try wait(identity, envelope)
            case MessageType.cancel: try cancel(identity, envelope, peer: peer, now: now)
            case MessageType.results: try results(identity, envelope)
            case MessageType.ping: reply(identity, Envelope(MessageType.pong, json: ["coordinator": id]))
            case MessageType.shutdown:
                reply(identity, Envelope(MessageType.shutdown, json: ["ok": true]))
                shutdownWorkers()
                stopLock.lock()
                stopRequested = true
                stopLock.unlock()
            default:
                replyError(identity, "unknown-type", "unknown message type \"\(envelope.type)\"")
            }
        } catch let e as WireError {
            metrics.malformed.increment()
            replyError(identity, "bad-message", e.description)
        } catch let e as ErrorReply {
            replyError(identity, e.code, e.message)
        } catch {
            replyError(identity, "internal", "\(error)")
        }
    }

    /// Keys removed from the allow-list (or moved to another role): their worker sessions
    /// end now (held tasks requeued, not charged); their later messages are refused.
    func revokeSessions(of keys: Set<String>, now: Double) {
        guard !keys.isEmpty else { return }
        for w in Array(workers.values) where w.key.map(keys.contains) == true {
            logger.warning("worker \(w.id): its key was removed from the allow-list; session ended, \(w.held.count) tasks requeued")
            send(w.identity, Envelope(MessageType.error, json: ErrorReply(code: "forbidden", message: "this worker's key was revoked")))
            lose(w, now: now, reason: "key revoked", charge: false)
        }
    }

    private func hello(_ identity: [UInt8], _ e: Envelope, peer: Peer, now: Double) throws {
        let h = try e.decode(WorkerHello.self)
        guard h.protocolVersion == Envelope.version else {
            throw ErrorReply(code: "version", message: "worker speaks protocol \(h.protocolVersion), coordinator \(Envelope.version)")
        }
        if let old = workers[identity] {
            guard old.key == peer.key else {
                throw ErrorReply(code: "forbidden", message: "worker identity \(old.id) is in use by another key")
            }
            // Same identity again (it restarted its session): forget what it held unless it still holds it.
            lose(old, now: now, reason: "re-hello", charge: false, keep: Set(h.holding))
        }
        let w = WorkerConn(identity: identity, hello: h, now: now)
        w.key = peer.key
        workers[identity] = w
        // Re-attach tasks it still holds (after our restart or a reconnect).
        for ref in h.holding {
            guard let (job, i) = locate(ref.task), job.tasks[i].state != .done else { continue }
            if job.tasks[i].state == .dispatched, job.tasks[i].worker !== w { continue }  // someone else has it
            if job.tasks[i].state != .dispatched { job.running += 1 }
            job.tasks[i].state = .dispatched
            job.tasks[i].attempt = ref.attempt
            job.tasks[i].worker = w
            job.tasks[i].deadline = now + job.spec.options.timeout
            w.held[ref] = (job, i)
            w.announced.insert(job.id)
            job.state = .running
        }
        logger.info("worker \(h.worker) on \(h.host) pid \(h.pid): capacity \(h.credit), holding \(h.holding.count)")
        send(identity, Envelope(MessageType.welcome, json: Welcome(coordinator: id,
                                                                  heartbeatMilliseconds: Int(config.heartbeatInterval * 1000))))
        // Jobs it holds tasks of need announcing again if it restarted; announce on demand.
        for job in Set(w.held.values.map { ObjectIdentifier($0.0) }).compactMap({ oid in jobs.first { ObjectIdentifier($0) == oid } }) {
            send(identity, Envelope(MessageType.job, body: Array(job.execJSON)))
        }
    }

    private func heartbeat(_ identity: [UInt8], _ e: Envelope) throws {
        guard let w = workers[identity] else {
            send(identity, Envelope(MessageType.reregister))
            return
        }
        let hb = try e.decode(WorkerHeartbeat.self)
        w.running = Set(hb.running)
        w.revoked.formIntersection(w.running)
    }

    private func report(_ identity: [UInt8], _ e: Envelope, now: Double) throws {
        let reports = try TaskReport.decode(e)
        guard let w = workers[identity] else {
            // Unknown (we restarted, or declared it lost): it says hello again and resends.
            refuse("report", from: identity, reason: "report from a worker that has not said hello")
            send(identity, Envelope(MessageType.reregister))
            return
        }
        for r in reports {
            // Acknowledged either way: a refused report is final, the worker stops resending it.
            pendingAcks[identity, default: []].append(r.ref)
            metrics.reports += 1
            // Only the current attempt of a task this worker holds: not another worker's
            // task, not a superseded attempt, not a finished task.
            guard let (job, i) = w.held[r.ref], job.tasks[i].state == .dispatched,
                  job.tasks[i].attempt == r.ref.attempt, job.tasks[i].worker === w else {
                w.running.remove(r.ref)
                w.revoked.remove(r.ref)
                // A superseded attempt handing its task back is normal; anything else is refused.
                if r.status != .returned {
                    refuse("report", from: identity, reason: "task \(r.ref.task) attempt \(r.ref.attempt) is not this worker's current attempt")
                }
                continue
            }
            w.running.remove(r.ref)
            w.revoked.remove(r.ref)
            w.held.removeValue(forKey: r.ref)
            w.completed += 1
            w.peakRSS = max(w.peakRSS, r.peakRSS)
            switch r.status {
            case .returned:
                release(job, i, now: now)
                job.tasks[i].state = .pending
                job.enqueue(i)
            case .succeeded, .skipped:
                var record = r.record
                if !r.inlineOutputs.isEmpty {
                    do {
                        record = try writeInline(job, r, record: record)
                    } catch {
                        fail(job, i, ref: r.ref, retryable: true, code: "write-failed",
                             message: "\(job.tasks[i].input.path): writing inline outputs: \(error)", record: nil, now: now)
                        continue
                    }
                }
                complete(job, i, status: r.status == .succeeded ? .succeeded : .skipped, record: record, now: now)
                metrics.observe(r)
                if r.status == .succeeded, job.spec.options.incremental, job.spec.kind != .noop, r.inputHash != 0 {
                    let outputs = outputPaths(record, root: job.spec.output)
                    journal.append(.rendition(path: job.tasks[i].input.key, recipe: job.recipeHash,
                                              inputHash: r.inputHash, outputs: outputs))
                    job.renditions[job.tasks[i].input.key] = (r.inputHash, outputs)
                }
            case .failed:
                metrics.observe(r)
                fail(job, i, ref: r.ref, retryable: r.retryable, code: r.errorCode, message: r.errorMessage,
                     record: r.record, now: now)
            }
        }
    }

    /// Fencing: a worker asks to publish the outputs of attempts it staged. Only the current
    /// attempt of a task it holds may; the others are revoked (the worker discards them).
    private func grantCommit(_ identity: [UInt8], _ e: Envelope, now: Double) throws {
        let refs = try TaskRef.decode(e.body)
        guard let w = workers[identity] else {
            // Not known (yet): after its hello the worker asks again for what it still holds.
            send(identity, Envelope(MessageType.reregister))
            return
        }
        var granted: [TaskRef] = [], refused: [TaskRef] = []
        for ref in refs {
            if let (job, i) = w.held[ref], job.tasks[i].state == .dispatched, job.tasks[i].attempt == ref.attempt,
               job.tasks[i].worker === w, !w.revoked.contains(ref) {
                granted.append(ref)
                job.tasks[i].committed = true
            } else {
                refused.append(ref)
                refuse("commit", from: identity, reason: "task \(ref.task) attempt \(ref.attempt) is not this worker's current attempt")
            }
        }
        if !granted.isEmpty { send(identity, Envelope(MessageType.committed, body: TaskRef.encode(granted))) }
        if !refused.isEmpty { send(identity, Envelope(MessageType.revoke, body: TaskRef.encode(refused))) }
    }

    /// The worker could not read the input: send it the bytes.
    private func needBytes(_ identity: [UInt8], _ e: Envelope, now: Double) throws {
        guard let w = workers[identity] else { return }
        for ref in try TaskRef.decode(e.body) {
            guard let (job, i) = w.held[ref], job.tasks[i].state == .dispatched, job.tasks[i].attempt == ref.attempt else { continue }
            readInline(job, i, ref: ref, for: w, now: now)
        }
    }

    /// Starts reading an inline task's input off the loop; `inlineReadsDone` sends it.
    func readInline(_ job: ActiveJob, _ i: Int, ref: TaskRef, for w: WorkerConn, now: Double) {
        guard pendingReads[ref] == nil else { return }
        pendingReads[ref] = now + config.inlineReadTimeout
        reader.submit(.init(job: job.id, index: i, ref: ref, worker: w.identity, path: job.tasks[i].input.path,
                            limit: job.spec.options.maxInputMB << 20))
    }

    /// Sends the inline inputs that were read, fails the tasks whose input could not be,
    /// and those whose read is past its deadline.
    func inlineReadsDone(now: Double) {
        for d in reader.take() {
            let ref = d.request.ref
            guard pendingReads.removeValue(forKey: ref) != nil, let job = jobsByID[d.request.job],
                  job.tasks[d.request.index].state == .dispatched, job.tasks[d.request.index].attempt == ref.attempt,
                  let w = workers[d.request.worker], job.tasks[d.request.index].worker === w else { continue }
            let i = d.request.index
            if let bytes = d.bytes {
                metrics.dispatched.increment()
                send(w.identity, TaskAssignment.envelope([assignment(job, i, ref: ref, inline: bytes)]))
            } else {
                let code = (d.error as? JobError)?.code ?? .readFailed
                fail(job, i, ref: ref, retryable: code == .readFailed, code: code.rawValue,
                     message: "\(d.error.map { "\($0)" } ?? "unreadable")", record: nil, now: now)
            }
        }
        guard !pendingReads.isEmpty else { return }
        for (ref, deadline) in pendingReads where now > deadline {
            pendingReads.removeValue(forKey: ref)
            guard let (job, i) = locate(ref.task), job.tasks[i].state == .dispatched, job.tasks[i].attempt == ref.attempt else { continue }
            logger.warning("reading \(job.tasks[i].input.path) took over \(Int(config.inlineReadTimeout)) s: failing the attempt")
            if let w = job.tasks[i].worker { send(w.identity, Envelope(MessageType.revoke, body: TaskRef.encode([ref]))) }
            fail(job, i, ref: ref, retryable: true, code: JobError.Code.readFailed.rawValue,
                 message: "\(job.tasks[i].input.path): reading the input took over \(Int(config.inlineReadTimeout)) s",
                 record: nil, now: now)
        }
    }

    private func bye(_ identity: [UInt8], _ e: Envelope, now: Double) throws {
        guard let w = workers[identity] else { return }
        let b = try e.decode(WorkerBye.self)
        for ref in b.returned {
            guard let (job, i) = w.held.removeValue(forKey: ref), job.tasks[i].state == .dispatched,
                  job.tasks[i].attempt == ref.attempt else { continue }
            release(job, i, now: now)
            job.tasks[i].state = .pending
            job.enqueue(i)
        }
        if w.held.isEmpty {
            workers.removeValue(forKey: identity)
            logger.info("worker \(w.id) left")
        } else {
            w.draining = true  // still finishing some; lost-worker rules apply if it vanishes
        }
    }

    // MARK: Task lifecycle

    func locate(_ task: UInt64) -> (ActiveJob, Int)? {
        for job in jobs where task >= job.firstTask && task < job.firstTask + UInt64(job.tasks.count) {
            return (job, Int(task - job.firstTask))
        }
        return nil
    }

    /// Takes a dispatched task off its worker.
    func release(_ job: ActiveJob, _ i: Int, now: Double) {
        if job.tasks[i].state == .dispatched {
            job.running -= 1
            if let w = job.tasks[i].worker {
                let ref = TaskRef(task: job.firstTask + UInt64(i), attempt: job.tasks[i].attempt)
                w.held.removeValue(forKey: ref)
            }
        }
        job.tasks[i].worker = nil
    }

    func complete(_ job: ActiveJob, _ i: Int, status: Journal.ResultStatus, record: [UInt8], now: Double) {
        // A newer attempt elsewhere is now pointless: take it back.
        if job.tasks[i].state == .dispatched, let other = job.tasks[i].worker {
            let ref = TaskRef(task: job.firstTask + UInt64(i), attempt: job.tasks[i].attempt)
            if other.held[ref] != nil { send(other.identity, Envelope(MessageType.revoke, body: TaskRef.encode([ref]))) }
        }
        release(job, i, now: now)
        job.tasks[i].state = .done
        job.counts[[Journal.ResultStatus.succeeded: 0, .failed: 1, .skipped: 2, .cancelled: 3][status]!] += 1
        journal.append(.result(task: job.firstTask + UInt64(i), job: job.id, status: status, record: record))
        metrics.completed(status)
        if job.done == job.tasks.count { finishJob(job, now: now) }
        if job.spec.kind == .tiles { pyramidPartDone(job, i, status: status, now: now) }
    }

    /// A part of a pyramid ended: when it was the last, the descriptor part may run.
    func pyramidPartDone(_ job: ActiveJob, _ i: Int, status: Journal.ResultStatus, now: Double) {
        let input = job.tasks[i].input
        guard !input.part.isEmpty, input.part != PyramidPart.descriptorName, var p = job.pyramidParts[input.path] else { return }
        p.open -= 1
        if status == .failed || status == .cancelled { p.failed += 1 }
        job.pyramidParts[input.path] = p
        if p.open == 0 { releaseDescriptor(job, path: input.path, now: now) }
    }

    /// Queues a pyramid's descriptor part, or fails it when a part of the pyramid failed:
    /// no `.dzi` or `info.json` ever describes tiles that are not there.
    func releaseDescriptor(_ job: ActiveJob, path: String, now: Double) {
        guard job.state != .cancelled, let m = job.heldDescriptors.removeValue(forKey: path),
              job.tasks[m].state != .done else { return }
        let failed = job.pyramidParts[path]?.failed ?? 0
        if failed > 0 {
            complete(job, m, status: .failed,
                     record: failureRecord(job, m, code: "incomplete",
                                           message: "\(path): pyramid not finished (\(failed) part\(failed == 1 ? "" : "s") failed): no descriptor written"),
                     now: now)
        } else {
            job.enqueue(m)
        }
    }

    /// A failure: retried with backoff when it may pass, else final.
    func fail(_ job: ActiveJob, _ i: Int, ref: TaskRef, retryable: Bool, code: String, message: String,
              record: [UInt8]?, now: Double) {
        job.tasks[i].failures += retryable ? 1 : 0
        if retryable && job.tasks[i].failures < job.spec.options.maxAttempts {
            release(job, i, now: now)
            let delay = min(config.maxBackoff, config.retryBackoff * pow(2, Double(job.tasks[i].failures - 1)))
            job.tasks[i].state = .delayed
            job.tasks[i].deadline = now + delay
            job.delayed.append(i)
            journal.append(.retry(task: job.firstTask + UInt64(i), attempts: job.tasks[i].failures,
                                  crashes: job.tasks[i].crashes, notBefore: Date().timeIntervalSince1970 + delay,
                                  error: message))
            metrics.retries.increment()
            logger.info("retrying \(job.tasks[i].input.path) in \(delay) s: \(message)")
            return
        }
        let rec = record.flatMap { $0.isEmpty ? nil : $0 }
            ?? failureRecord(job, i, code: code, message: retryable ? "\(message) (after \(job.tasks[i].failures) attempts)" : message)
        complete(job, i, status: .failed, record: rec, now: now)
    }

    /// A worker died or hung while holding the task: requeue, or fail it as poison.
    func crashed(_ job: ActiveJob, _ i: Int, charge: Bool, reason: String, now: Double) {
        release(job, i, now: now)
        if charge { job.tasks[i].crashes += 1 }
        if job.tasks[i].crashes >= config.poisonThreshold {
            let message = "\(job.tasks[i].input.path): poison task: \(reason) \(job.tasks[i].crashes) times"
            logger.warning("\(message)")
            metrics.poisoned.increment()
            complete(job, i, status: .failed, record: failureRecord(job, i, code: "poison", message: message), now: now)
            return
        }
        if charge {
            journal.append(.retry(task: job.firstTask + UInt64(i), attempts: job.tasks[i].failures,
                                  crashes: job.tasks[i].crashes, notBefore: 0, error: reason))
        }
        job.tasks[i].state = .pending
        job.enqueue(i)
        metrics.requeued.increment()
    }

    func failureRecord(_ job: ActiveJob, _ i: Int, code: String, message: String) -> [UInt8] {
        var record = TaskRecord(input: job.tasks[i].input.path, status: .failed)
        record.error = .init(code: code, message: message)
        return Array((try? JSONEncoder().encode(record)) ?? Data())
    }

    func finishJob(_ job: ActiveJob, now: Double) {
        if job.state != .cancelled { job.state = job.counts[1] > 0 ? .failed : .succeeded }
        job.finished = Date().timeIntervalSince1970
        journal.append(.jobState(job: job.id, state: job.state, finished: job.finished, counts: job.counts))
        let status = job.status()
        for waiter in job.waiters { reply(waiter, Envelope(MessageType.done, json: status)) }
        job.waiters = []
        jobs.removeAll { $0 === job }
        jobsByID.removeValue(forKey: job.id)
        finishedJobs[job.id] = status
        logger.info("job \(job.id) (\(job.spec.name)) \(job.state.rawValue): \(job.counts[0]) ok, \(job.counts[1]) failed, \(job.counts[2]) skipped, \(job.counts[3]) cancelled")
    }

    var finishedJobs: [String: JobStatus] = [:]
    var lastRefusalLog: [String: Double] = [:]

    /// Gives a worker up: requeue what it held, charging tasks it was running.
    func lose(_ w: WorkerConn, now: Double, reason: String, charge: Bool = true, keep: Set<TaskRef> = []) {
        workers.removeValue(forKey: w.identity)
        // Charged: what it said was running, and — when it died before saying anything about
        // the tasks it was sent last — the first of those (what its executors would have
        // started), so a task that kills its worker on arrival still meets the poison rule.
        var charged = w.running
        let silent = w.held.filter { ref, slot in
            !w.running.contains(ref) && slot.0.tasks[slot.1].dispatchedAt >= w.lastSeen
        }.sorted { ($0.value.0.tasks[$0.value.1].dispatchedAt, $0.key.task) < ($1.value.0.tasks[$1.value.1].dispatchedAt, $1.key.task) }
        for (ref, _) in silent.prefix(max(0, w.concurrency - w.running.count)) { charged.insert(ref) }
        for (ref, (job, i)) in w.held where !keep.contains(ref) {
            guard job.tasks[i].state == .dispatched, job.tasks[i].attempt == ref.attempt else { continue }
            crashed(job, i, charge: charge && charged.contains(ref), reason: "worker \(reason)", now: now)
        }
        w.held = [:]
        if charge { metrics.workersLost.increment() }
    }

    // MARK: Timers and dispatch

    private func timers(now: Double) {
        for w in Array(workers.values) {
            if now - w.lastSeen > config.workerTimeout {
                logger.warning("worker \(w.id) silent for \(String(format: "%.1f", now - w.lastSeen)) s: lost")
                lose(w, now: now, reason: "lost (no heartbeat)")
            } else if now - w.lastSent >= config.heartbeatInterval {
                send(w.identity, Envelope(MessageType.heartbeat))
            }
        }
        for job in jobs {
            // Expired leases: the task hung (or its worker did).
            for w in workers.values {
                for (ref, (j, i)) in w.held where j === job && job.tasks[i].state == .dispatched && now > job.tasks[i].deadline {
                    logger.warning("lease expired for \(job.tasks[i].input.path) on \(w.id)")
                    send(w.identity, Envelope(MessageType.revoke, body: TaskRef.encode([ref])))
                    // A hang is charged only to a task the worker said it started (one still
                    // queued behind a hung one is innocent).
                    let started = w.running.contains(ref)
                    if started { w.revoked.insert(ref) }
                    crashed(job, i, charge: started, reason: "hung (lease expired after \(job.spec.options.timeout) s)", now: now)
                }
            }
            if !job.delayed.isEmpty {
                var still: [Int] = []
                for i in job.delayed {
                    if job.tasks[i].state == .delayed && now >= job.tasks[i].deadline {
                        job.tasks[i].state = .pending
                        job.enqueue(i)
                    } else if job.tasks[i].state == .delayed {
                        still.append(i)
                    }
                }
                job.delayed = still
            }
        }
    }

    private func nextReady() -> (ActiveJob, Int)? {
        for job in jobs where job.state != .cancelled {
            while let i = job.dequeue() {
                if job.tasks[i].state == .pending { return (job, i) }
            }
        }
        return nil
    }

    private func dispatch(now: Double) {
        guard now >= dispatchPausedUntil, !jobs.isEmpty, !isDispatchHeld else { return }
        for w in workers.values where w.freeCredit > 0 {
            var batch: [TaskAssignment] = []
            var needsInline: [(ActiveJob, Int)] = []
            while batch.count + needsInline.count < min(w.freeCredit, config.maxBatch), let (job, i) = nextReady() {
                if !w.announced.contains(job.id) {
                    if !batch.isEmpty { send(w.identity, TaskAssignment.envelope(batch)); batch = [] }
                    send(w.identity, Envelope(MessageType.job, body: Array(job.execJSON)))
                    w.announced.insert(job.id)
                }
                job.tasks[i].dispatches += 1
                let ref = TaskRef(task: job.firstTask + UInt64(i), attempt: (epoch & 0xFFFF) << 16 | (job.tasks[i].dispatches & 0xFFFF))
                job.tasks[i].state = .dispatched
                job.tasks[i].attempt = ref.attempt
                job.tasks[i].worker = w
                job.tasks[i].deadline = now + job.spec.options.timeout
                job.tasks[i].dispatchedAt = now
                job.tasks[i].committed = false
                job.running += 1
                job.state = .running
                w.held[ref] = (job, i)
                if w.inline || job.spec.options.inline {
                    needsInline.append((job, i))
                } else {
                    batch.append(assignment(job, i, ref: ref, inline: nil))
                }
            }
            for (job, i) in needsInline {
                // Read off the loop: sent when the bytes are in (inlineReadsDone).
                readInline(job, i, ref: TaskRef(task: job.firstTask + UInt64(i), attempt: job.tasks[i].attempt), for: w, now: now)
            }
            if !batch.isEmpty {
                metrics.dispatched.increment(by: batch.count)
                send(w.identity, TaskAssignment.envelope(batch))
            }
        }
    }

    func assignment(_ job: ActiveJob, _ i: Int, ref: TaskRef, inline: [UInt8]?) -> TaskAssignment {
        var expected: UInt64?
        if job.spec.options.incremental, let r = job.renditions[job.tasks[i].input.key],
           !r.outputs.isEmpty, r.outputs.allSatisfy(Paths.exists) {
            expected = r.hash
        }
        return TaskAssignment(ref: ref, job: job.id, input: job.tasks[i].input, expectedHash: expected,
                              inlineInput: inline, leaseSeconds: Float(job.spec.options.timeout))
    }

    /// Writes outputs that came back inline under the job's root; returns the record
    /// with their absolute paths.
    func writeInline(_ job: ActiveJob, _ r: TaskReport, record: [UInt8]) throws -> [UInt8] {
        var written: [String] = []
        do {
            for o in r.inlineOutputs {
                let path = try OutputNaming.confine(o.path, under: job.spec.output)
                try FileIO.writeAtomically(o.bytes, to: path)
                written.append(path)
            }
        } catch {
            for p in written { unlink(p) }
            throw error
        }
        guard var rec = try? JSONDecoder().decode(TaskRecord.self, from: Data(record)) else { return record }
        for k in rec.outputs.indices where !rec.outputs[k].path.hasPrefix("/") {
            rec.outputs[k].path = job.spec.output + "/" + rec.outputs[k].path
        }
        return Array((try? JSONEncoder().encode(rec)) ?? Data(record))
    }

    func outputPaths(_ record: [UInt8], root: String) -> [String] {
        guard let rec = try? JSONDecoder().decode(TaskRecord.self, from: Data(record)) else { return [] }
        return rec.outputs.map { $0.path.hasPrefix("/") ? $0.path : root + "/" + $0.path }
    }

    // MARK: Jobs

    func insert(_ job: ActiveJob) {
        jobs.append(job)
        jobs.sort { ($0.spec.priority, -$0.seq) > ($1.spec.priority, -$1.seq) }
        jobsByID[job.id] = job
    }

    private func shutdownWorkers() {
        for w in workers.values { send(w.identity, Envelope(MessageType.drain)) }
    }
}
