import CoreMetrics
import Foundation
import Logging
import TesseraJobs
import TesseraTasks
import TesseraService
import TesseraWire
import TesseraModel

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
    /// Serve the dashboard (`/`, `/api/state`, `/api/events`) on the HTTP port too.
    public var dashboard = false
    /// The dashboard's actions (cancel, retry failed, requeue) need this bearer token;
    /// without one the dashboard is read-only.
    public var dashboardToken: String?
    /// Serve the HTTP JSON API (`/api/v1/`) on the HTTP port (nil: off).
    public var api: APIConfig?
    /// What submitted jobs may reach: roots and the source policy (docs/API.md, "Security").
    public var access = AccessConfig()
    /// Where metrics are recorded and exported from (default with a metrics port: a
    /// Prometheus exporter of `CoordinatorMetrics.catalog`; without one: nowhere).
    public var metrics: MetricsExporter?
    /// Fault injection for tests: after a job is planned, the journal may grow by this many
    /// pages only, then fails as on a full disk.
    public var journalGrowthPages: Int?

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

    /// Every task state change (no sockets): this loop turns messages into calls on it.
    let scheduler: Scheduler
    var jobs: [ActiveJob] { scheduler.jobs }
    var workers: [[UInt8]: WorkerConn] = [:]
    var pendingAcks: [[UInt8]: [TaskRef]] = [:]
    var pendingReplies: [([UInt8], Envelope)] = []
    var dispatchPausedUntil = 0.0
    /// A `shutdown` came: workers that connect from now on are told to drain at once.
    var shuttingDown = false
    /// The journal failed: no commit is granted any more.
    var journalBroken = false
    var started = Monotonic.seconds()
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
    private var drainRequested = false
    private var unrecorded: [String] = []
    /// The unfinished jobs found in the journal at start (set before `run()`; read-only after).
    public private(set) var recovered: [RecoveredJob] = []
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
    /// The HTTP API's side of the loop (nil: API off).
    let api: APIGate?
    /// The dashboard's published state (nil: dashboard off).
    let dashboard: DashboardBoard?
    /// Output roots of finished jobs the dashboard still shows (previews).
    var finishedRoots: [String: String] = [:]
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
        scheduler = Scheduler(journal: journal,
                              policy: .init(poisonThreshold: config.poisonThreshold, retryBackoff: config.retryBackoff,
                                            maxBackoff: config.maxBackoff),
                              epoch: epoch, metrics: metrics, logger: logger)
        dashboard = config.dashboard ? DashboardBoard() : nil
        api = config.api.map { APIGate(config: $0) }
        if let board = dashboard {
            scheduler.resultObserver = { job, record in Coordinator.observe(board, job, record: record) }
        }
        try recover()
        if let port = config.metricsPort {
            let pages = dashboard.map { Coordinator.dashboardRoutes($0, token: config.dashboardToken) }
            let h = try HTTPService(address: config.metricsAddress, port: port, routes: (pages?.routes ?? [:]).merging([
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
            ]) { $1 }, events: pages?.events ?? [:], actions: pages?.actions ?? [:],
               prefixes: ["/api/v1/": api.map(Coordinator.apiRoute) ?? Coordinator.apiOffRoute],
               maxBody: config.api?.maxJobBytes ?? 64 << 10)
            http = h
            metricsPort = h.port
        }
    }

    private func probe() -> (age: Double, serving: Bool) {
        probeLock.lock()
        defer { probeLock.unlock() }
        return (Monotonic.seconds() - loopTurned, serving && !stopRequestedUnlocked)
    }

    private var stopRequestedUnlocked: Bool {
        stopLock.lock()
        defer { stopLock.unlock() }
        return stopRequested
    }

    /// Takes up every unfinished job of the journal: its numbers and counts, not its tasks
    /// (they are paged in as they are dispatched), so a restart costs the same at any size.
    private func recover() throws {
        for id in try journal.forgetUnplannedJobs() {
            logger.warning("job \(id) was still being planned when the coordinator stopped: forgotten (submit it again)")
        }
        let rows = try journal.unfinishedJobs()
        for row in rows {
            let job = try activate(row)
            recovered.append(RecoveredJob(id: row.id, spec: row.spec, done: job.done,
                                          worked: job.counts[.succeeded] + job.counts[.failed], total: job.total))
            logger.info("recovered job \(row.id) (\(LogText.field(row.spec.name))): \(job.done)/\(job.total) done")
            // Jobs whose every task finished just before the crash end now.
            scheduler.add(job)
        }
        if !rows.isEmpty { dispatchPausedUntil = Monotonic.seconds() + config.recoveryGrace }
    }

    /// A journaled job made active again (after a restart, or a retry of its failed tasks):
    /// its counts from its results, its pyramid rule from its tasks.
    func activate(_ row: Journal.JobRow) throws -> ActiveJob {
        let job = ActiveJob(id: row.id, seq: row.seq, spec: row.spec, firstTask: row.firstTask, total: row.total,
                            submitted: row.submitted, access: row.access)
        job.owner = row.owner
        job.state = .running
        job.counts = try journal.resultCounts(job: row.id)
        if row.spec.kind == .tiles {
            job.gate = PyramidGate(tasks: try journal.tasks(first: row.firstTask, total: row.total).map {
                ($0.input, $0.result != nil, $0.result == .failed || $0.result == .cancelled)
            })
        }
        return job
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

    /// Tells every worker to drain (hand back what it holds, finish what runs, leave), and
    /// every worker that connects from now on as soon as it says hello; the loop goes on
    /// (to take their reports) until `stop()`.
    public func drainWorkers() {
        stopLock.lock()
        drainRequested = true
        stopLock.unlock()
    }

    private var isDrainRequested: Bool {
        stopLock.lock()
        defer { stopLock.unlock() }
        return drainRequested
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
        // However run ends (a bind that fails included), API calls waiting for the loop are answered.
        defer { api?.close() }
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
        // API requests wake the loop as finished inline reads do.
        let apiPoke = try api.map { _ in try WakeSender(context: context, endpoint: readerEndpoint) }
        api?.poke = apiPoke.map { p in { @Sendable in p.poke() } }
        var bound: [String] = []
        for e in config.endpoints {
            do { try router.bind(e) } catch { throw CoordinatorStartError(endpoint: e, reason: "\(error)") }
            bound.append(router.lastEndpoint)
        }
        boundCondition.lock()
        boundEndpoints = bound
        boundCondition.broadcast()
        boundCondition.unlock()
        logger.info("coordinator \(id) epoch \(epoch) listening on \(bound.joined(separator: ", "))")
        probeLock.lock()
        serving = true
        loopTurned = Monotonic.seconds()
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
            api?.close()
            apiPoke?.close()
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
        var lastAllowReload = Monotonic.seconds()
        while !shouldStop {
            let readable = try poller.poll(timeoutMilliseconds: journal.hasPending ? 0 : 50)
            if readable[1] || shouldStop { break }
            if readable[2] {
                while try wake.receive(dontWait: true) != nil {}
            }
            inlineReadsDone(now: Monotonic.seconds())
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
            let now = Monotonic.seconds()
            runDashboardActions(now: now)
            runAPIRequests(now: now)
            if !shuttingDown && isDrainRequested { shutdownWorkers() }
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
                publishDashboard()
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
        applyEffects()
        if journal.hasPending {
            do { try journal.flush() } catch {
                journalFailed(error)
                throw error
            }
        }
        for (identity, refs) in pendingAcks where !refs.isEmpty {
            send(identity, Envelope(MessageType.ack, body: TaskRef.encode(refs)))
        }
        pendingAcks.removeAll(keepingCapacity: true)
        let replies = pendingReplies
        pendingReplies.removeAll()
        for (identity, e) in replies { send(identity, e) }
    }

    /// The journal cannot be written (a full disk, an I/O error): the loop ends with the error.
    /// Nothing is left that it does not record: files published by tasks whose results it
    /// could not commit are removed (a rerun makes them again), and every worker is told to
    /// drop what it holds (their staged files are discarded; no commit is granted again).
    func journalFailed(_ error: Error) {
        logger.error("the journal cannot be written (\(error)): stopping; outputs of the results it could not record are removed")
        var removed = 0
        for path in journal.pendingOutputs where !Location.isRemote(path) {
            if Paths.withCString(path, { unlink($0) }) == 0 { removed += 1 }
        }
        if removed > 0 { logger.error("removed \(removed) published outputs whose results could not be journaled") }
        // Granted attempts may still publish: their files are removed once their workers are gone.
        var granted: [String] = []
        for w in workers.values {
            for ref in w.committed {
                guard let job = w.held[ref], let input = job.live[ref.task]?.input, case .local(let root) = Location(job.spec.output)
                else { continue }
                let planned = job.executable.plannedOutputs(for: input, alternatives: true)
                granted += (planned.expected + planned.possible).map { Location.join(root, $0) }
            }
        }
        stopLock.lock()
        unrecorded = granted
        stopLock.unlock()
        for w in workers.values where !w.held.isEmpty {
            send(w.identity, Envelope(MessageType.revoke, body: TaskRef.encode(Array(w.held.keys))))
        }
        for w in workers.values { send(w.identity, Envelope(MessageType.drain)) }
        journalBroken = true
    }

    /// After the journal failed: files that attempts granted their commit may have published
    /// (their results were never recorded). Remove them once the workers are gone.
    public var unrecordedOutputs: [String] {
        stopLock.lock()
        defer { stopLock.unlock() }
        return unrecorded
    }

    /// Sends to a peer; a peer that is gone (ROUTER_MANDATORY) is handled, never silently dropped.
    @discardableResult
    func send(_ identity: [UInt8], _ e: Envelope) -> Bool {
        do {
            try router.send([identity] + e.frames)
            if let w = workers[identity] { w.lastSent = Monotonic.seconds() }
            return true
        } catch let error as ZMQError where error == .hostUnreachable {
            if let w = workers[identity] {
                logger.warning("worker \(w.id) unreachable; requeueing its tasks")
                lose(w, reason: "unreachable")
            }
            return false
        } catch {
            logger.error("send failed: \(error)")
            return false
        }
    }

    func reply(_ identity: [UInt8], _ e: Envelope) { pendingReplies.append((identity, e)) }

    /// Sends what the scheduler's changes call for: revocations now, the answers to a
    /// job's waiters after the journal commits its end.
    func applyEffects() {
        while !scheduler.effects.isEmpty {
            let effects = scheduler.effects
            scheduler.effects.removeAll()
            for effect in effects {
                switch effect {
                case .revoke(let worker, let refs):
                    send(worker, Envelope(MessageType.revoke, body: TaskRef.encode(refs)))
                case .ended(let waiters, let status):
                    // A client told the job is done finds /metrics saying so (they refresh
                    // every half second otherwise).
                    if exporter != nil { metrics.refresh(jobs: jobs, workers: Array(workers.values)) }
                    for waiter in waiters { reply(waiter, Envelope(MessageType.done, json: status)) }
                }
            }
        }
    }

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

    /// A routing id for the log: as text when it is printable (a worker's), else in hex
    /// (ZeroMQ's own 5-byte ids of clients).
    static func printable(_ identity: [UInt8]) -> String {
        let head = identity.prefix(64)
        if !head.isEmpty, head.allSatisfy({ (0x21...0x7E).contains($0) }) { return String(decoding: head, as: UTF8.self) }
        return "0x" + head.map { String(format: "%02x", $0) }.joined()
    }

    /// Logs a refused message (at most once a second per reason, so a misbehaving peer
    /// cannot flood the log) and counts it.
    func refuse(_ what: String, from identity: [UInt8], reason: String) {
        metrics.refused(reason)
        let now = Monotonic.seconds()
        if now - (lastRefusalLog[reason] ?? 0) >= 1 {
            lastRefusalLog[reason] = now
            logger.warning("refused \(what) from \(Self.printable(identity)): \(reason)")
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
        let now = Monotonic.seconds()
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
            case MessageType.submit: try submit(identity, envelope, owner: peer.key ?? "", submitter: submitter(for: peer), now: now)
            case MessageType.status: try status(identity, envelope, peer: peer)
            case MessageType.wait: try wait(identity, envelope, peer: peer)
            case MessageType.cancel: try cancel(identity, envelope, peer: peer, now: now)
            case MessageType.results: try results(identity, envelope, peer: peer)
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
            lose(w, reason: "key revoked", charge: false)
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
            lose(old, reason: "re-hello", charge: false, keep: Set(h.holding))
        }
        let w = WorkerConn(identity: identity, hello: h, now: now)
        w.key = peer.key
        workers[identity] = w
        // Re-attach tasks it still holds (after our restart or a reconnect).
        scheduler.reattach(h.holding, to: w, now: now)
        logger.info("worker \(LogText.field(h.worker)) on \(LogText.field(h.host)) pid \(h.pid): capacity \(h.credit), holding \(h.holding.count)")
        send(identity, Envelope(MessageType.welcome, json: Welcome(coordinator: id,
                                                                  heartbeatMilliseconds: Int(config.heartbeatInterval * 1000))))
        // Jobs it holds tasks of need announcing again if it restarted; announce on demand.
        for job in Set(w.held.values.map(ObjectIdentifier.init)).compactMap({ oid in jobs.first { ObjectIdentifier($0) == oid } }) {
            send(identity, Envelope(MessageType.job, body: job.announcement))
        }
        // Shut down already: a worker that connects late (`tessera run`'s, still starting when
        // the job ended, whose SIGTERM may have come before it could take signals) drains too.
        if shuttingDown { send(identity, Envelope(MessageType.drain)) }
    }

    private func heartbeat(_ identity: [UInt8], _ e: Envelope) throws {
        guard let w = workers[identity] else {
            send(identity, Envelope(MessageType.reregister))
            return
        }
        let hb = try e.decode(WorkerHeartbeat.self)
        w.running = Set(hb.running)
        w.revoked.formIntersection(w.running)
        if dashboard != nil, let rss = hb.rssBytes, let cpu = hb.cpuSeconds {
            let now = Monotonic.seconds()
            if let last = w.lastSample {
                if now - last.time >= 0.9 {
                    w.rssHistory.append(rss)
                    w.cpuHistory.append(max(0, 100 * (cpu - last.cpu) / (now - last.time)))
                    if w.rssHistory.count > 60 { w.rssHistory.removeFirst(); w.cpuHistory.removeFirst() }
                    w.lastSample = (now, cpu)
                }
            } else {
                w.lastSample = (now, cpu)
            }
        }
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
            guard let job = scheduler.current(r.ref, of: w), let input = job.live[r.ref.task]?.input else {
                w.running.remove(r.ref)
                w.revoked.remove(r.ref)
                // A superseded attempt handing its task back is normal, and so is the report of
                // an attempt taken back while it ran (the two crossed); anything else is refused.
                if w.wasTakenBack(r.ref) {
                    logger.debug("task \(r.ref.task) attempt \(r.ref.attempt) was taken back from \(LogText.field(w.id)) as it ended: its report is dropped")
                } else if r.status != .returned {
                    refuse("report", from: identity, reason: "task \(r.ref.task) attempt \(r.ref.attempt) is not this worker's current attempt")
                }
                continue
            }
            w.running.remove(r.ref)
            w.revoked.remove(r.ref)
            w.held.removeValue(forKey: r.ref)  // reported: not this worker's to revoke any more
            w.committed.remove(r.ref)
            w.completed += 1
            w.peakMemory = r.peakMemory?.max(w.peakMemory) ?? w.peakMemory
            let i = r.ref.task
            switch r.status {
            case .returned:
                scheduler.returned(job, i)
            case .succeeded, .skipped:
                var record = r.record
                if !r.inlineOutputs.isEmpty {
                    do {
                        record = try writeInline(job, r, input: input, record: record)
                    } catch let e as JobError where e.code == .unsafeOutputPath {
                        refuse("report", from: identity, reason: e.reason)
                        scheduler.fail(job, i, retryable: true, code: "forbidden",
                                       message: "\(Paths.display(input.name)): the worker's report named files that are not this task's (\(e.reason))", record: nil, now: now)
                        continue
                    } catch {
                        scheduler.fail(job, i, retryable: true, code: "write-failed",
                                       message: "\(Paths.display(input.name)): writing inline outputs: \(error)", record: nil, now: now)
                        continue
                    }
                }
                if r.status == .succeeded, job.spec.kind != .noop {
                    let written = writtenOutputs(record, root: job.spec.output)
                    if job.spec.options.incremental, r.inputHash != 0 {
                        journal.append(.rendition(path: input.key, recipe: job.recipeHash, inputHash: r.inputHash,
                                                  outputs: written.map(\.path)))
                    }
                    // What Tessera wrote, as it is now: a confined job may replace these and no
                    // other file; a rerun finds whether they changed since.
                    let files = written.compactMap { Location.isRemote($0.path) ? nil : Self.onDisk($0.path, hash: $0.hash) }
                    if !files.isEmpty { journal.append(.outputs(task: i, files: files)) }
                }
                scheduler.complete(job, i, status: r.status == .succeeded ? .succeeded : .skipped, record: record,
                                   reported: r.ref)
                metrics.observe(r)
            case .failed:
                metrics.observe(r)
                scheduler.fail(job, i, retryable: r.retryable, code: r.errorCode, message: r.errorMessage,
                               record: r.record, now: now)
            }
        }
        // A draining worker whose last task is reported has left, whether or not its final
        // `bye` arrives (it exits right after sending it; the Slurm test saw one lost).
        if w.draining, w.held.isEmpty, workers[identity] === w { left(w) }
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
            if !journalBroken && scheduler.grantCommit(ref, of: w) {
                granted.append(ref)
            } else {
                refused.append(ref)
                // An attempt taken back while it ran (the two crossed): refused, not suspicious.
                if w.takenBack.contains(ref) {
                    logger.debug("task \(ref.task) attempt \(ref.attempt) was taken back from \(LogText.field(w.id)) as it ran: its commit is refused")
                } else {
                    refuse("commit", from: identity, reason: "task \(ref.task) attempt \(ref.attempt) is not this worker's current attempt")
                }
            }
        }
        if !granted.isEmpty { send(identity, Envelope(MessageType.committed, body: TaskRef.encode(granted))) }
        if !refused.isEmpty { send(identity, Envelope(MessageType.revoke, body: TaskRef.encode(refused))) }
    }

    /// The worker could not read the input: send it the bytes.
    private func needBytes(_ identity: [UInt8], _ e: Envelope, now: Double) throws {
        guard let w = workers[identity] else { return }
        for ref in try TaskRef.decode(e.body) {
            guard let job = scheduler.current(ref, of: w) else { continue }
            readInline(job, ref: ref, for: w, now: now)
        }
    }

    /// Starts reading an inline task's input off the loop; `inlineReadsDone` sends it.
    func readInline(_ job: ActiveJob, ref: TaskRef, for w: WorkerConn, now: Double) {
        guard pendingReads[ref] == nil, let input = job.live[ref.task]?.input else { return }
        pendingReads[ref] = now + config.inlineReadTimeout
        reader.submit(.init(job: job.id, ref: ref, worker: w.identity, path: input.path,
                            limit: job.spec.options.maxInputMB << 20))
    }

    /// Sends the inline inputs that were read, fails the tasks whose input could not be,
    /// and those whose read is past its deadline.
    func inlineReadsDone(now: Double) {
        for d in reader.take() {
            let ref = d.request.ref
            guard pendingReads.removeValue(forKey: ref) != nil, let w = workers[d.request.worker],
                  let job = scheduler.current(ref, of: w) else { continue }
            if let bytes = d.bytes {
                metrics.dispatched.increment()
                send(w.identity, TaskAssignment.envelope([assignment(job, ref: ref, inline: bytes)]))
            } else {
                let code = (d.error as? JobError)?.code ?? .readFailed
                scheduler.fail(job, ref.task, retryable: code == .readFailed, code: code.rawValue,
                               message: "\(d.error.map { "\($0)" } ?? "unreadable")", record: nil, now: now)
            }
        }
        guard !pendingReads.isEmpty else { return }
        for (ref, deadline) in pendingReads where now > deadline {
            pendingReads.removeValue(forKey: ref)
            guard let job = scheduler.job(of: ref.task), let slot = job.live[ref.task], slot.state == .dispatched,
                  slot.attempt == ref.attempt else { continue }
            logger.warning("reading \(LogText.field(Paths.display(slot.input.name))) took over \(Int(config.inlineReadTimeout)) s: failing the attempt")
            if let w = slot.worker { send(w.identity, Envelope(MessageType.revoke, body: TaskRef.encode([ref]))) }
            scheduler.fail(job, ref.task, retryable: true, code: JobError.Code.readFailed.rawValue,
                           message: "\(Paths.display(slot.input.name)): reading the input took over \(Int(config.inlineReadTimeout)) s",
                           record: nil, now: now)
        }
    }

    private func bye(_ identity: [UInt8], _ e: Envelope, now: Double) throws {
        guard let w = workers[identity] else { return }
        let b = try e.decode(WorkerBye.self)
        for ref in b.returned {
            guard let job = scheduler.current(ref, of: w) else { continue }
            scheduler.returned(job, ref.task)
        }
        if w.held.isEmpty {
            left(w)
        } else {
            w.draining = true  // still finishing some; lost-worker rules apply if it vanishes
        }
    }

    /// A worker that holds nothing more has gone (its goodbye, or a drain's last report).
    private func left(_ w: WorkerConn) {
        workers.removeValue(forKey: w.identity)
        logger.info("worker \(w.id) left")
    }

    /// Gives a worker up: requeue what it held, charging tasks it was running.
    func lose(_ w: WorkerConn, reason: String, charge: Bool = true, keep: Set<TaskRef> = []) {
        if workers[w.identity] === w { noteLostForDashboard(w, reason: reason) }
        workers.removeValue(forKey: w.identity)
        scheduler.lose(w, reason: reason, charge: charge, keep: keep)
    }

    var lastRefusalLog: [String: Double] = [:]

    // MARK: Timers and dispatch

    private func timers(now: Double) {
        for w in Array(workers.values) {
            if now - w.lastSeen > config.workerTimeout {
                logger.warning("worker \(w.id) silent for \(String(format: "%.1f", now - w.lastSeen)) s: lost")
                lose(w, reason: "lost (no heartbeat)")
            } else if now - w.lastSent >= config.heartbeatInterval {
                send(w.identity, Envelope(MessageType.heartbeat))
            }
        }
        scheduler.expireLeases(of: Array(workers.values), now: now)
        scheduler.releaseDelayed(now: now)
    }

    private func dispatch(now: Double) {
        guard now >= dispatchPausedUntil, !jobs.isEmpty, !isDispatchHeld else { return }
        // Nothing left to give an idle executor: what another worker holds unstarted is its.
        if !dispatchReady(now: now), scheduler.rebalance(Array(workers.values)) > 0 {
            applyEffects()
            // Only to idle executors: a worker with spare queue credit (the one they came
            // from, whose credit they freed) would take them back to a queue.
            _ = dispatchReady(now: now, idleOnly: true)
        }
    }

    /// Gives ready tasks to workers with credit (`idleOnly`: only as many as a worker has
    /// idle executors); false when tasks ran out before credit did.
    private func dispatchReady(now: Double, idleOnly: Bool = false) -> Bool {
        var more = true
        func room(_ w: WorkerConn) -> Int { idleOnly ? min(w.freeCredit, w.idleExecutors) : w.freeCredit }
        for w in workers.values where room(w) > 0 {
            var batch: [TaskAssignment] = []
            var needsInline: [(ActiveJob, TaskRef)] = []
            func flush() {
                guard !batch.isEmpty else { return }
                metrics.dispatched.increment(by: batch.count)
                send(w.identity, TaskAssignment.envelope(batch))
                batch = []
            }
            // Taken once and counted across messages: each dispatch lowers the worker's free
            // credit (a bound read again would stop at about half of it), and a new job's
            // announcement cuts the message short.
            let limit = min(room(w), config.maxBatch)
            var given = 0
            while given < limit, workers[w.identity] === w,
                  let (job, id) = scheduler.nextReady(now: now) ?? { more = false; return nil }() {
                if !w.announced.contains(job.id) {
                    flush()
                    send(w.identity, Envelope(MessageType.job, body: job.announcement))
                    w.announced.insert(job.id)
                }
                let ref = scheduler.dispatch(job, id, to: w, now: now)
                given += 1
                // A URL input is fetched by the worker itself, never through the coordinator.
                if (w.inline || job.spec.options.inline) && !Location.isRemote(job.live[id]?.input.path ?? "") {
                    needsInline.append((job, ref))
                } else {
                    batch.append(assignment(job, ref: ref, inline: nil))
                }
            }
            for (job, ref) in needsInline {
                // Read off the loop: sent when the bytes are in (inlineReadsDone).
                readInline(job, ref: ref, for: w, now: now)
            }
            flush()
            // Found unreachable while sending the job's announcement: the task taken for it
            // went to a worker already given up; it goes back (uncharged: never received).
            if workers[w.identity] !== w { scheduler.lose(w, reason: "unreachable", charge: false) }
        }
        return more
    }

    func assignment(_ job: ActiveJob, ref: TaskRef, inline: [UInt8]?) -> TaskAssignment {
        let slot = job.live[ref.task]!
        var expected: UInt64?
        var checks: [ExpectedOutput] = []
        if job.spec.options.incremental, let r = slot.rendition, !r.outputs.isEmpty {
            if r.outputs.contains(where: Location.isRemote) {
                // Objects are checked by the worker (HEAD), never from the event loop.
                expected = r.inputHash
                checks = r.outputs.map { ExpectedOutput(path: $0) }
            } else if let local = localChecks(r.outputs, verify: job.spec.options.verify) {
                expected = r.inputHash
                checks = local
            }
        }
        return TaskAssignment(ref: ref, job: job.id, input: slot.input, expectedHash: expected, expectedOutputs: checks,
                              inlineInput: inline, leaseSeconds: Float(job.spec.options.timeout))
    }

    /// Whether an earlier rendition's files are still what Tessera wrote: each there, of the
    /// size and modification time the journal recorded (one `stat`). nil: one is missing or
    /// of another size (the task renders again). A file touched since (same size, another
    /// time), or every file with `verify`, goes to the worker to compare by hash.
    func localChecks(_ outputs: [String], verify: Bool) -> [ExpectedOutput]? {
        var checks: [ExpectedOutput] = []
        for path in outputs {
            guard let now = Self.onDisk(path, hash: 0) else { return nil }
            guard let then = try? journal.written(path) else {
                continue  // written before sizes were journaled: its existence is what counts
            }
            guard now.size == then.size else { return nil }
            if verify || now.mtime != then.mtime {
                guard then.hash != 0 else { return nil }
                checks.append(ExpectedOutput(path: path, size: then.size, hash: then.hash))
            }
        }
        return checks
    }

    /// Writes outputs that came back inline under the job's root; returns the record
    /// with their absolute paths.
    func writeInline(_ job: ActiveJob, _ r: TaskReport, input: InputFile, record: [UInt8]) throws -> [UInt8] {
        // A task writes only its own outputs: a report naming another input's file is refused whole.
        for o in r.inlineOutputs where !job.executable.owns(o.path, input: input) {
            throw JobError(.unsafeOutputPath, "\(o.path) is not an output of \(Paths.display(input.name))", file: input.name)
        }
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
        rec.input = input.name  // the task's, whatever the report says
        for k in rec.outputs.indices where !rec.outputs[k].path.hasPrefix("/") {
            rec.outputs[k].path = job.spec.output + "/" + rec.outputs[k].path
        }
        return Array((try? JSONEncoder().encode(rec)) ?? Data(record))
    }

    func outputPaths(_ record: [UInt8], root: String) -> [String] { writtenOutputs(record, root: root).map(\.path) }

    /// A record's outputs: absolute paths, and the hash of each file's bytes when it says.
    func writtenOutputs(_ record: [UInt8], root: String) -> [(path: String, hash: UInt64)] {
        guard let rec = try? JSONDecoder().decode(TaskRecord.self, from: Data(record)) else { return [] }
        return rec.outputs.map {
            ($0.path.hasPrefix("/") || Location.isRemote($0.path) ? $0.path : root + "/" + $0.path, $0.contentHash ?? 0)
        }
    }

    /// A published file's size and modification time now (nil when it is not there).
    static func onDisk(_ path: String, hash: UInt64) -> Journal.WrittenFile? {
        var st = stat()
        guard Paths.withCString(path, { stat($0, &st) }) == 0 else { return nil }
        return Journal.WrittenFile(path: path, size: Int(st.st_size),
                                   mtime: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9, hash: hash)
    }

    private func shutdownWorkers() {
        shuttingDown = true
        for w in workers.values { send(w.identity, Envelope(MessageType.drain)) }
    }
}

/// An endpoint the coordinator could not bind (in use, no such interface, no permission).
public struct CoordinatorStartError: Error, CustomStringConvertible {
    public let endpoint: String
    public let reason: String
    public var description: String { "\(endpoint): \(reason)" }
}
