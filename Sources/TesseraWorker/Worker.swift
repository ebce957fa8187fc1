import CoreMetrics
import Foundation
import Logging
import TesseraExecution
import TesseraTasks
import TesseraService
import TesseraShim
import TesseraStorage
import TesseraWire
import TesseraModel

/// How a worker runs.
public struct WorkerConfig: Sendable {
    public var endpoint: String
    /// Tasks run at once (threads).
    public var concurrency = 1
    /// Extra tasks held queued beyond `concurrency` (credit = concurrency + prefetch).
    public var prefetch: Int?
    /// Ask for input and output bytes inside messages (no shared storage).
    public var inline = false
    public var id: String
    public var heartbeatInterval = 1.0
    /// Seconds before an unacknowledged report is sent again.
    public var resendAfter = 3.0
    /// Seconds a draining worker waits for acknowledgements before exiting anyway.
    public var drainTimeout = 30.0
    /// Seconds an executor waits for the coordinator's answer to a commit (none: discard).
    public var commitTimeout = 10.0
    /// The memory this worker may use, in bytes (nil: no budget). Each task gets an equal
    /// share after the worker's own baseline; a task planned over its share fails with
    /// `out-of-memory` before decoding.
    public var memoryLimit: Int?

    /// The per-task budget `memoryLimit` gives (bytes), or nil.
    public var taskMemoryBudget: Int? {
        memoryLimit.map { max(16 << 20, ($0 - Self.baseline) / max(1, concurrency)) }
    }

    /// What a worker holds besides its tasks (code, libraries, sockets, buffers).
    public static let baseline = 48 << 20

    /// The memory limit of this process' cgroup (v2 `memory.max`, v1
    /// `memory.limit_in_bytes`), or nil when there is none.
    public static func cgroupMemoryLimit() -> Int? {
        // /proc/self/cgroup: "ID:controllers:path"; v1 names "memory", v2 is "0::path".
        var candidates: [String] = []
        let groups = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
        for line in groups.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            let path = parts[2] == "/" ? "" : String(parts[2])
            if parts[1].split(separator: ",").contains("memory") {
                candidates.append("/sys/fs/cgroup/memory\(path)/memory.limit_in_bytes")
            } else if parts[0] == "0" && parts[1].isEmpty {
                candidates += ["/sys/fs/cgroup\(path)/memory.max", "/sys/fs/cgroup/unified\(path)/memory.max"]
            }
        }
        for path in candidates {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if value == "max" { continue }
            if let n = Int(value), n < Int(1) << 50 { return n }
        }
        return nil
    }
    /// Downloads of queued tasks' URL inputs running at once, beside the executors.
    public var transfers = 4
    /// The cache of originals fetched from URLs (nil: none), and its bound in bytes.
    public var cacheDirectory: String?
    public var cacheBytes = 2 << 30
    /// Fault injection for tests: abort the process in the middle of a task whose input path
    /// contains this — after its `started` notice went out, as a decoder's crash would.
    public var crashOnInputContaining: String?
    /// Fault injection for tests: abort as soon as such a task arrives (before `started`).
    public var crashOnReceiving: String?
    /// CURVE: this worker's key pair and the coordinator's public key.
    public var curve: (keys: CurveKeyPair, serverKey: String)?
    /// Serve /healthz (loop alive), /readyz (coordinator heard recently) and /metrics.
    public var metricsPort: Int?
    /// The address the HTTP port binds (loopback unless told otherwise).
    public var metricsAddress = "127.0.0.1"
    /// Where metrics are recorded and exported from (default with a metrics port: a
    /// Prometheus exporter of `Worker.metricsCatalog`).
    public var metrics: MetricsExporter?

    public init(endpoint: String, concurrency: Int = 1) {
        self.endpoint = endpoint
        self.concurrency = max(1, concurrency)
        id = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
    }
}

/// Takes tasks from a coordinator over a DEALER socket, runs them with the imaging
/// core on `concurrency` threads, and reports every one (resending until acknowledged).
public final class Worker: @unchecked Sendable {
    let config: WorkerConfig
    /// The DEALER's routing id: the worker id and a random suffix drawn once per process.
    /// Other peers see the worker id (records, results), never this: a peer that could name
    /// it would take the worker's connection over (the coordinator's ROUTER hands a routing
    /// id to whoever connects with it last, so that a worker can reconnect).
    let routingID = "\(UInt64.random(in: 0...UInt64.max) | 1 << 63)"
    let logger: Logger
    private let context = ZMQContext()
    private let host = ProcessInfo.processInfo.hostName
    private let resultsEndpoint = "inproc://worker-results-\(UInt32.random(in: 0...UInt32.max))"

    // Shared with executor threads, under `lock`.
    private let lock = NSCondition()
    private var queue: [(TaskAssignment, ExecutableJob, Double)] = []
    private var running: Set<TaskRef> = []
    private var outbox: [TaskReport] = []
    /// Tasks that began executing since the last `started` notice.
    private var startedOutbox: [TaskRef] = []
    /// Fencing: attempts waiting to be allowed to publish, and the answers.
    private var commitOutbox: [TaskRef] = []
    private var commitAnswers: [TaskRef: Bool] = [:]
    /// Running tasks the coordinator took back: their commit will be refused; asked at once.
    private var revokedRunning: Set<TaskRef> = []
    /// Commits that got no answer in time: those tasks are reported `returned`.
    private var unanswered: Set<TaskRef> = []
    private var awaitingCommit: Set<TaskRef> = []
    /// Finished tasks whose staged outputs wait for the commit's answer while their executor
    /// runs the next task; the loop thread publishes (or discards) them when it comes.
    private var publishing: [TaskRef: Publishing] = [:]
    private var stopping = false
    private var drainRequested = false

    // Loop thread only.
    /// The protocol's state and decisions (jobs, parked tasks, unacknowledged reports, the
    /// hello in flight, the refusal back-off): socket-free, tested alone.
    private var session = WorkerSession()
    private var lastHeard = 0.0
    private var lastSent = 0.0
    private var lastHeartbeat = 0.0
    private var completedCount = 0
    /// The highest task peak this worker reported.
    public private(set) var peakMemory: PeakMemory?
    /// What the health endpoint reads (under `lock`).
    private var health = (loop: 0.0, heard: 0.0, peak: UInt64(0))
    private var http: HTTPService?
    private var exporter: MetricsExporter?
    private var taskCounters: [TaskReport.Status: CoreMetrics.Counter] = [:]
    /// Object storage and HTTP(S): shared connections and the cache of originals.
    private let stores: RemoteStores
    private var prefetcher: Prefetcher?
    private var taskDuration: CoreMetrics.Timer?
    private var runningGauge: Gauge?
    private var queuedGauge: Gauge?
    private var peakGauge: Gauge?

    /// Every metric a worker records, with its help line.
    public static let metricsCatalog: [MetricInfo] = [
        MetricInfo("tessera_worker_tasks_total", "Tasks this worker finished, by outcome."),
        MetricInfo("tessera_worker_task_duration_seconds", "Task time on this worker."),
        MetricInfo("tessera_worker_running_tasks", "Tasks executing now."),
        MetricInfo("tessera_worker_queued_tasks", "Tasks held and waiting for an executor."),
        MetricInfo("tessera_worker_peak_rss_bytes", "Highest peak resident memory of a task on this worker."),
        MetricInfo("tessera_worker_transfer_requests_total", "HTTP(S)/S3 requests made (each attempt)."),
        MetricInfo("tessera_worker_transfer_failures_total", "Requests that failed in a retryable way (5xx, 429, timeouts, resets)."),
        MetricInfo("tessera_worker_transfer_retries_total", "Failed requests that were tried again."),
        MetricInfo("tessera_worker_transfer_bytes_total", "Bytes transferred, by direction (in: downloads, out: uploads)."),
        MetricInfo("tessera_worker_cache_lookups_total", "Originals looked up in the cache, by result (hit, miss)."),
    ]

    public init(config: WorkerConfig, logger: Logger = Logger(label: "tessera.worker")) throws {
        // glibc gives each thread that allocates its own malloc arena, reserving 64 MB of
        // address space apiece: under an address-space limit (ulimit -v, prlimit --as) the
        // executors' threads could not even be created. Two arenas serve a worker's few
        // threads (most memory is pixel buffers, allocated once per task).
        _ = ts_limit_malloc_arenas(2)
        self.config = config
        self.logger = logger
        stores = RemoteStores(cache: try config.cacheDirectory.map { try SourceCache(directory: $0, capacity: config.cacheBytes) })
        prefetcher = config.transfers > 0 ? Prefetcher(threads: config.transfers) : nil
    }

    deinit { prefetcher?.stop() }

    static func key(_ ref: TaskRef) -> String { "\(ref.task).\(ref.attempt)" }

    /// A task waiting for its commit's answer, and what its report needs.
    private struct Publishing {
        let task: TaskAssignment
        let pending: PendingCommit
        let queueWait: Double
        let peak: PeakMemory?
        let askedAt: Double
    }

    /// At most this many finished tasks wait for their commit's answer before an executor
    /// waits too (a coordinator that stopped answering does not see work pile up).
    var publishingLimit: Int { 2 * config.concurrency }

    var credit: Int { config.concurrency + (config.prefetch ?? config.concurrency) }

    /// The port probes and metrics are served on (after `run()` started them).
    public var httpPort: Int? { http?.port }

    private func healthSnapshot() -> (loop: Double, heard: Double, peak: UInt64, running: Int, queued: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (health.loop, health.heard, health.peak, running.count, queue.count)
    }

    /// Finish what is running, hand back what is queued, then return from `run()` (SIGTERM).
    public func requestDrain() {
        lock.lock()
        drainRequested = true
        lock.broadcast()
        lock.unlock()
    }

    // MARK: Loop

    /// The link to the coordinator: a DEALER, and a monitor for refused CURVE handshakes.
    /// After a refused handshake libzmq gives the connection up; a new socket is made
    /// after a growing pause, and the worker says hello again.
    private struct Connection {
        var dealer: ZMQSocket
        var monitor: ZMQMonitor?
        var poller = ZMQPoller()
        var refusedBackoff = 0.0
        var reconnectAt: Double?

        init(_ worker: Worker, results: ZMQSocket) throws {
            let config = worker.config
            dealer = try ZMQSocket(worker.context, .dealer)
            if let curve = config.curve {
                try dealer.setCurveClient(publicKey: curve.keys.publicKey, secretKey: curve.keys.secretKey,
                                          serverKey: curve.serverKey)
                monitor = try ZMQMonitor(worker.context, watching: dealer, events: [.handshakeFailed, .handshakeSucceeded])
            }
            try dealer.setRoutingID(config.id + "." + worker.routingID)
            // From 10 ms, doubling: `tessera run` starts its workers before its coordinator
            // listens. On this machine (ipc://) at most 100 ms apart, so a coordinator slow to
            // start (a large journal) is joined within 100 ms of listening; 5 s over a network.
            try dealer.setReconnect(initialMilliseconds: 10,
                                    maximumMilliseconds: config.endpoint.hasPrefix("ipc://") ? 100 : 5000)
            try dealer.setHighWaterMarks(send: 10_000, receive: 10_000)
            // A cut link shows as a silent connection: ZMTP heartbeats notice and reconnect.
            try dealer.setConnectionHeartbeat(intervalMilliseconds: 1000, timeoutMilliseconds: 5000)
            try dealer.connect(config.endpoint)
            poller.add(dealer)
            poller.add(results)
            if let monitor { poller.add(monitor.socket) }
        }

        func close() {
            monitor?.close()
            dealer.close()
        }

        /// Handshake outcomes: a refusal schedules a new socket.
        mutating func readMonitor(_ worker: Worker, now: Double) throws {
            var events: [ZMQEvent] = []
            while let event = try monitor?.next() { events.append(event) }
            // A failure no retry can pass, among them, ends the worker without a retry said first.
            if let fatal = events.first(where: { $0.kind.contains(.handshakeFailedProtocol) }) { events = [fatal] }
            for event in events {
                if event.kind.contains(.handshakeSucceeded) {
                    if refusedBackoff > 0 { worker.logger.info("coordinator at \(worker.config.endpoint) accepted this worker's key") }
                    refusedBackoff = 0
                } else if event.kind.contains(.handshakeFailedProtocol) {
                    // No retry can pass: the coordinator speaks no CURVE (a local, plain one —
                    // `tessera run`'s — reached with a cluster's keys from the environment), or
                    // the server key is not its own. Said once, and the worker exits (4).
                    let refusal = AuthenticationRefused(endpoint: worker.config.endpoint, keyID: worker.config.curve?.keys.keyID,
                                                        event: event)
                    worker.logger.error("\(refusal)")
                    throw refusal
                } else if reconnectAt == nil {
                    refusedBackoff = min(10, max(2, refusedBackoff * 2))
                    reconnectAt = now + refusedBackoff
                    let why = event.kind.contains(.handshakeFailedAuth)
                        ? "refused this worker's key \(worker.config.curve?.keys.keyID ?? "")… (ZAP \(event.value)): add its .pub to the coordinator's allow-list"
                        : "CURVE handshake failed: check --server-key"
                    worker.logger.error("coordinator at \(worker.config.endpoint) \(why); retrying in \(Int(refusedBackoff)) s")
                }
            }
        }

        /// Whether a new socket is due (after a refused handshake).
        func reconnectDue(now: Double) -> Bool { reconnectAt.map { now >= $0 } ?? false }
    }

    public func run() throws {
        let results = try ZMQSocket(context, .pull)
        try results.bind(resultsEndpoint)
        var link = try Connection(self, results: results)
        try startEndpoint()
        defer {
            link.close()
            results.close()
            http?.stop()
        }
        try startExecutors()
        defer {
            lock.lock()
            stopping = true
            let left = publishing.values
            publishing.removeAll()
            lock.broadcast()
            lock.unlock()
            // Not published: a later attempt of these tasks is run (their staged files go now).
            for p in left { _ = p.pending.finish(granted: false) }
        }
        try sendHello(link.dealer)
        var drainStarted: Double?
        logger.info("worker \(config.id) connecting to \(config.endpoint), \(config.concurrency) threads, credit \(credit)")
        while true {
            let readable = try link.poller.poll(timeoutMilliseconds: 100)
            let now = Monotonic.seconds()
            lock.lock()
            health.loop = now
            health.heard = lastHeard
            health.peak = peakMemory?.bytes ?? 0
            lock.unlock()
            if readable[0] {
                while let frames = try link.dealer.receive(dontWait: true) {
                    lastHeard = now
                    if try handle(frames, link.dealer, now: now) == .drain { requestDrain() }
                }
            }
            if readable[1] { while try results.receive(dontWait: true) != nil {} }
            if readable.count > 2 && readable[2] { try link.readMonitor(self, now: now) }
            if link.reconnectDue(now: now) {
                let backoff = link.refusedBackoff
                link.close()
                link = try Connection(self, results: results)
                link.refusedBackoff = backoff
                try sendHello(link.dealer)
            }
            settleUnanswered(now: now)
            flushOutbox(link.dealer, now: now)
            lock.lock()
            let wantsDrain = drainRequested
            lock.unlock()
            if wantsDrain && drainStarted == nil {
                drainStarted = now
                beginDrain(link.dealer)
            }
            if let started = drainStarted, drained(link.dealer, since: started, now: now) { return }
            // One heartbeat a second even while reports flow: it carries what runs and the
            // worker's memory and CPU (the coordinator's view of it, the dashboard's sparklines).
            if now - lastHeartbeat >= config.heartbeatInterval && session.mayHeartbeat(now: now) {
                lastHeartbeat = now
                heartbeat(link.dealer, now: now)
            }
        }
    }

    /// Probes and metrics on `config.metricsPort`, when one is set.
    private func startEndpoint() throws {
        guard let port = config.metricsPort else { return }
        let exporter = config.metrics
            ?? MetricsExporter(metrics: Worker.metricsCatalog, role: "worker", version: TesseraVersion.string)
        self.exporter = exporter
        for status in [TaskReport.Status.succeeded, .failed, .skipped] {
            taskCounters[status] = CoreMetrics.Counter(label: "tessera_worker_tasks_total",
                                                       dimensions: [("status", "\(status)")], factory: exporter)
        }
        taskDuration = CoreMetrics.Timer(label: "tessera_worker_task_duration_seconds", factory: exporter)
        let running = Gauge(label: "tessera_worker_running_tasks", factory: exporter)
        let queued = Gauge(label: "tessera_worker_queued_tasks", factory: exporter)
        let peak = Gauge(label: "tessera_worker_peak_rss_bytes", factory: exporter)
        // Transfer counters live in the storage layer; each scrape adds what changed since the last.
        func counter(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
            CoreMetrics.Counter(label: label, dimensions: dimensions, factory: exporter)
        }
        let transfer: [(KeyPath<TransferCounters, Int>, CoreMetrics.Counter)] = [
            (\.requests, counter("tessera_worker_transfer_requests_total")),
            (\.failures, counter("tessera_worker_transfer_failures_total")),
            (\.retries, counter("tessera_worker_transfer_retries_total")),
            (\.bytesIn, counter("tessera_worker_transfer_bytes_total", [("direction", "in")])),
            (\.bytesOut, counter("tessera_worker_transfer_bytes_total", [("direction", "out")])),
            (\.cacheHits, counter("tessera_worker_cache_lookups_total", [("result", "hit")])),
            (\.cacheMisses, counter("tessera_worker_cache_lookups_total", [("result", "miss")])),
        ]
        let published = Locked(TransferCounters())
        http = try HTTPService(address: config.metricsAddress, port: port, routes: [
            // Alive: the loop turned in the last 10 s.
            "/healthz": { [weak self] _, _ in
                guard let self else { return .text("stopping\n", status: 503) }
                let age = Monotonic.seconds() - self.healthSnapshot().loop
                return age < 10 ? .text("ok\n") : .text("worker loop stalled for \(Int(age)) s\n", status: 503)
            },
            // Ready: the coordinator answered recently.
            "/readyz": { [weak self] _, _ in
                guard let self else { return .text("stopping\n", status: 503) }
                let limit = max(5, 3 * self.config.heartbeatInterval)
                let age = Monotonic.seconds() - self.healthSnapshot().heard
                return age < limit ? .text("ok\n") : .text("no word from the coordinator for \(Int(age)) s\n", status: 503)
            },
            "/metrics": { [weak self] _, _ in
                guard let self else { return .text("stopping\n", status: 503) }
                let h = self.healthSnapshot()
                running.record(h.running)
                queued.record(h.queued)
                peak.record(Double(h.peak))
                let now = RemoteStorage.counters
                published.update { last in
                    for (field, c) in transfer where now[keyPath: field] > last[keyPath: field] {
                        c.increment(by: now[keyPath: field] - last[keyPath: field])
                    }
                    last = now
                }
                return HTTPReply(contentType: MetricsExporter.contentType, body: exporter.exposition())
            },
        ])
    }

    /// One thread per unit of concurrency, running `executorLoop` until `stopping`. A thread
    /// that cannot be created (Foundation's `Thread.start` says nothing) is an error, not
    /// a worker that takes tasks and never runs them.
    private func startExecutors() throws {
        let started = DispatchSemaphore(value: 0)
        for n in 0..<config.concurrency {
            let t = Thread { [self] in
                started.signal()
                executorLoop()
            }
            t.name = "executor-\(n)"
            t.stackSize = 8 << 20
            t.start()
        }
        for n in 0..<config.concurrency where started.wait(timeout: .now() + 5) == .timedOut {
            throw WorkerStartError(reason: "could start only \(n) of \(config.concurrency) executor threads "
                                   + "(thread creation failed: is the address-space limit, ulimit -v or prlimit --as, too low?)")
        }
    }

    /// Drain, first step: take no more tasks and hand back every queued one.
    private func beginDrain(_ dealer: ZMQSocket) {
        lock.lock()
        var returned = queue.map { $0.0.ref }
        for (t, _, _) in queue { prefetcher?.discard(Worker.key(t.ref)) }
        queue.removeAll()
        lock.unlock()
        returned += session.handBack()
        logger.info("draining: handing back \(returned.count) queued tasks")
        _ = try? dealer.send(Envelope(MessageType.bye, json: WorkerBye(returned: returned)).frames, dontWait: true)
    }

    /// Drain, last step: true (after a final `bye`) once running tasks have finished and
    /// their reports are acknowledged, or `drainTimeout` has passed.
    private func drained(_ dealer: ZMQSocket, since started: Double, now: Double) -> Bool {
        lock.lock()
        let busy = !running.isEmpty || !outbox.isEmpty || !publishing.isEmpty
        lock.unlock()
        guard (!busy && session.unacked.isEmpty) || now - started > config.drainTimeout else { return false }
        if !session.unacked.isEmpty { logger.warning("exiting with \(session.unacked.count) unacknowledged reports") }
        // The last word is sent as the socket closes, not dropped; it says nothing the
        // coordinator needs (a drained worker whose reports are acknowledged has left), so
        // on this machine (ipc://) the process does not wait long for it: 1 run in 4 of
        // `tessera run` spent 500 ms here, the bye undelivered.
        try? dealer.setLinger(milliseconds: config.endpoint.hasPrefix("ipc://") ? 50 : 500)
        _ = try? dealer.send(Envelope(MessageType.bye, json: WorkerBye(returned: [])).frames, dontWait: true)
        logger.info("drained after \(completedCount) tasks")
        return true
    }

    /// Heartbeat (what runs and waits here), and the reports not yet acknowledged again
    /// (the coordinator dedupes).
    private func heartbeat(_ dealer: ZMQSocket, now: Double) {
        lock.lock()
        // Tasks waiting for their commit's answer count as running: the coordinator must not
        // take one for an unstarted task (this heartbeat may go out before its commit).
        var hb = WorkerHeartbeat(running: Array(running) + Array(publishing.keys), queued: queue.map { $0.0.ref })
        lock.unlock()
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        hb.rssBytes = ResourceAccounting.currentResident()
        hb.cpuSeconds = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        send(dealer, Envelope(MessageType.heartbeat, json: hb), now: now)
        let stale = session.stale(now: now, after: config.resendAfter)
        if !stale.isEmpty { send(dealer, TaskReport.envelope(stale), now: now) }
    }

    /// What a message asks of the loop.
    private enum Next { case carryOn, drain }

    /// One message from the coordinator: the session decides, the loop carries it out.
    private func handle(_ frames: [[UInt8]], _ dealer: ZMQSocket, now: Double) throws -> Next {
        let e: Envelope
        do { e = try Envelope(frames: frames) } catch {
            logger.error("bad message from coordinator: \(error)")
            return .carryOn
        }
        lock.lock()
        let leaving = drainRequested
        lock.unlock()
        var next = Next.carryOn
        for effect in try session.receive(e, now: now, draining: leaving) {
            switch effect {
            case .accept(let t, _) where leaving:
                // Sent before the coordinator heard this worker's goodbye (the next task goes out
                // with a commit's grant): handed straight back, never queued behind the drain.
                send(dealer, Envelope(MessageType.bye, json: WorkerBye(returned: [t.ref])), now: now)
            case .accept(let t, let job):
                accept(t, job, dealer, now: now)
            case .forgetQueued:
                // Queued tasks are dropped, not run; the commits still waiting are asked
                // again (a restarted coordinator re-attaches those tasks and may grant them).
                lock.lock()
                let dropped = queue.count
                for (t, _, _) in queue { prefetcher?.discard(Worker.key(t.ref)) }
                queue.removeAll()
                commitOutbox = Array(awaitingCommit.filter { commitAnswers[$0] == nil })
                lock.unlock()
                if dropped > 0 { logger.warning("coordinator lost track of this worker: dropped \(dropped) queued tasks") }
            case .hello:
                try sendHello(dealer)
            case .committed(let refs):
                lock.lock()
                let granted = refs.compactMap { publishing.removeValue(forKey: $0) }
                for p in granted { awaitingCommit.remove(p.task.ref) }
                for ref in refs where awaitingCommit.contains(ref) { commitAnswers[ref] = true }
                lock.broadcast()
                lock.unlock()
                for p in granted { settle(p, granted: true) }
            case .revoke(let refs):
                lock.lock()
                queue.removeAll { refs.contains($0.0.ref) }
                for ref in refs { prefetcher?.discard(Worker.key(ref)) }
                let refused = refs.compactMap { publishing.removeValue(forKey: $0) }
                for p in refused { awaitingCommit.remove(p.task.ref) }
                for ref in refs where awaitingCommit.contains(ref) { commitAnswers[ref] = false }
                revokedRunning.formUnion(refs.intersection(running))
                lock.broadcast()
                lock.unlock()
                for p in refused { settle(p, granted: false) }
            case .drain:
                next = .drain
            case .log(.info, let message):
                logger.info("\(message)")
            case .log(.warning, let message):
                logger.warning("\(message)")
            case .log(.error, let message):
                logger.error("\(message)")
            }
        }
        return next
    }

    /// Queues a task, or asks for its bytes when the path is not readable here.
    private func accept(_ t: TaskAssignment, _ job: ExecutableJob, _ dealer: ZMQSocket, now: Double) {
        if let marker = config.crashOnReceiving, t.input.path.contains(marker) {
            logger.critical("fault injection: crashing on receiving \(Paths.display(t.input.name))")
            abort()
        }
        let remote = Location.isRemote(t.input.path)
        if t.inlineInput == nil && job.kind != .noop && !remote && Paths.withCString(t.input.path, { access($0, R_OK) }) != 0 {
            session.awaitBytes(t)
            send(dealer, Envelope(MessageType.needBytes, body: TaskRef.encode([t.ref])), now: now)
            return
        }
        session.queued(t.ref)
        // A URL input is downloaded while the task waits for an executor (unless a rerun
        // may skip it by its version without downloading).
        if remote && t.inlineInput == nil && job.kind != .noop, let prefetcher,
           !(job.options.incremental && t.expectedHash != nil && t.input.etag != nil) {
            let storage = stores.storage(job.storage, sources: job.access?.sources), input = t.input
            let limit = job.options.renderOptions.limits.maxInputBytes
            prefetcher.start(Worker.key(t.ref)) {
                let clock = Stopwatch()
                var f = try storage.fetch(input.path, knownETag: input.etag, limit: limit)
                f.seconds = clock.seconds
                return f
            }
        }
        lock.lock()
        queue.append((t, job, now))
        lock.signal()
        lock.unlock()
    }

    private func sendHello(_ dealer: ZMQSocket) throws {
        lock.lock()
        let holding = Array(running) + Array(publishing.keys) + queue.map { $0.0.ref }
        lock.unlock()
        let hello = WorkerHello(worker: config.id, host: host, pid: getpid(), concurrency: config.concurrency,
                                credit: credit, inline: config.inline,
                                holding: holding + session.helloSent(now: Monotonic.seconds()))
        send(dealer, Envelope(MessageType.hello, json: hello), now: Monotonic.seconds())
    }

    private func send(_ dealer: ZMQSocket, _ e: Envelope, now: Double) {
        do {
            // Never block the loop: with no connection the message is dropped, and
            // heartbeats, hellos and unacknowledged reports are sent again anyway.
            if try dealer.send(e.frames, dontWait: true) { lastSent = now }
        } catch {
            logger.error("send failed: \(error)")
        }
    }

    private func flushOutbox(_ dealer: ZMQSocket, now: Double) {
        lock.lock()
        let reports = outbox
        outbox.removeAll(keepingCapacity: true)
        let started = startedOutbox
        startedOutbox.removeAll(keepingCapacity: true)
        let commits = commitOutbox
        commitOutbox.removeAll(keepingCapacity: true)
        lock.unlock()
        // Before anything else: if this process dies in a task, the coordinator knows which.
        if !started.isEmpty { send(dealer, Envelope(MessageType.started, body: TaskRef.encode(started)), now: now) }
        if !commits.isEmpty { send(dealer, Envelope(MessageType.commit, body: TaskRef.encode(commits)), now: now) }
        guard !reports.isEmpty else { return }
        session.sent(reports, now: now)
        for r in reports { peakMemory = r.peakMemory?.max(peakMemory) ?? peakMemory }
        for r in reports {
            taskCounters[r.status]?.increment()
            taskDuration?.recordNanoseconds(Int64(r.timings.total * 1e6))
        }
        completedCount += reports.count
        // Batches keep messages few when tasks are short.
        var i = 0
        while i < reports.count {
            let chunk = Array(reports[i..<min(reports.count, i + 256)])
            send(dealer, TaskReport.envelope(chunk), now: now)
            i += 256
        }
    }

    // MARK: Executors

    private func executorLoop() {
        let poke = try? ZMQSocket(context, .push)
        try? poke?.connect(resultsEndpoint)
        defer { poke?.close() }
        while true {
            lock.lock()
            while queue.isEmpty && !stopping { lock.wait() }
            if stopping {
                lock.unlock()
                return
            }
            // Too many finished tasks wait for their commit's answer: wait with them.
            while publishing.count >= publishingLimit && !stopping { lock.wait() }
            if stopping || queue.isEmpty {
                lock.unlock()
                if stopping { return }
                continue
            }
            let (task, job, queuedAt) = queue.removeFirst()
            let measureMemory = job.kind != .noop
            let alone = running.isEmpty
            running.insert(task.ref)
            if measureMemory && alone { _ = ResourceAccounting.resetPeak() }
            if job.kind != .noop { startedOutbox.append(task.ref) }
            lock.unlock()
            if job.kind != .noop { _ = try? poke?.send([[1]], dontWait: true) }

            let wait = Monotonic.seconds() - queuedAt
            if let marker = config.crashOnInputContaining, task.input.path.contains(marker) {
                // The loop sends the notice within a turn (100 ms at most); libzmq's I/O
                // thread writes it. Aborting before that crashed "before started", and the
                // death then counted against every task this worker held (a flaky test).
                for _ in 0..<100 {
                    lock.lock()
                    let pending = startedOutbox.contains(task.ref)
                    lock.unlock()
                    if !pending { break }
                    usleep(10_000)
                }
                usleep(200_000)
                logger.critical("fault injection: crashing on \(Paths.display(task.input.name))")
                abort()
            }
            let ref = task.ref
            let fence = Fence(task: ref.task, attempt: ref.attempt, deferred: true) { [weak self, poke] in
                self?.awaitCommit(ref, poke: poke) ?? false
            }
            var renderOptions = job.options.renderOptions
            if let budget = config.taskMemoryBudget { renderOptions.limits.maxMemoryBytes = budget }
            let outcome = TaskExecutor.run(job, input: task.input, inlineInput: task.inlineInput,
                                           expectedHash: task.expectedHash, expectedOutputs: task.expectedOutputs,
                                           // Without shared storage, outputs for a directory root come back inline
                                           // (also when the input was a URL the worker fetched itself).
                                           returnInline: task.inlineInput != nil || (config.inline && !Location.isRemote(job.outputRoot)),
                                           renderOptions: renderOptions, fence: task.inlineInput == nil ? fence : nil,
                                           stores: stores, prefetched: prefetcher?.take(Worker.key(task.ref)))
            let peak = measureMemory ? ResourceAccounting.peakResident() : 0
            let peakMemory = peak > 0 ? PeakMemory(bytes: peak, isUpperBound: !alone) : nil
            if let pending = outcome.pendingCommit {
                // Its outputs are staged: the commit is asked and this executor goes on; the
                // loop publishes them and sends the report when the answer comes.
                let waiting = Publishing(task: task, pending: pending, queueWait: wait, peak: peakMemory,
                                         askedAt: Monotonic.seconds())
                lock.lock()
                running.remove(ref)
                let refused = revokedRunning.remove(ref) != nil || stopping
                if !refused {
                    awaitingCommit.insert(ref)
                    commitOutbox.append(ref)
                    publishing[ref] = waiting
                }
                lock.unlock()
                // Revoked while it ran, or the worker is stopping: discarded and handed back now.
                if refused { settle(waiting, granted: false) }
                _ = try? poke?.send([[1]], dontWait: true)
                continue
            }
            let report = makeReport(task, outcome, queueWait: wait, peak: peakMemory)

            lock.lock()
            running.remove(task.ref)
            revokedRunning.remove(task.ref)
            // A superseded attempt published nothing and reports nothing: the coordinator
            // already gave its task to another attempt.
            if outcome.superseded {
                outbox.append(returnedReport(task, outcome, queueWait: wait, peak: peakMemory,
                                             unanswered: unanswered.remove(task.ref) != nil))
            } else {
                outbox.append(report)
            }
            lock.unlock()
            _ = try? poke?.send([[1]], dontWait: true)
        }
    }

    /// A superseded attempt published nothing and is handed back: the coordinator requeues it
    /// if this was still its current attempt (no answer in time), else ignores it.
    private func returnedReport(_ t: TaskAssignment, _ o: TaskOutcome, queueWait: Double, peak: PeakMemory?,
                                unanswered: Bool) -> TaskReport {
        if unanswered {
            logger.warning("task \(t.ref.task): no answer to its commit in \(Int(config.commitTimeout)) s; outputs discarded, task handed back")
        } else {
            logger.info("task \(t.ref.task) attempt \(t.ref.attempt) was superseded: outputs discarded")
        }
        var back = makeReport(t, o, queueWait: queueWait, peak: peak)
        back.status = .returned
        return back
    }

    /// The loop thread: a waiting task's answer came (or never will): its outputs are
    /// published or discarded, and its report goes out with this turn's.
    private func settle(_ p: Publishing, granted: Bool, unanswered: Bool = false) {
        let outcome = p.pending.finish(granted: granted)
        let report = outcome.superseded
            ? returnedReport(p.task, outcome, queueWait: p.queueWait, peak: p.peak, unanswered: unanswered)
            : makeReport(p.task, outcome, queueWait: p.queueWait, peak: p.peak)
        lock.lock()
        outbox.append(report)
        lock.unlock()
    }

    /// Waiting tasks whose commit got no answer in `commitTimeout` seconds: discarded and handed back.
    private func settleUnanswered(now: Double) {
        lock.lock()
        let late = publishing.values.filter { now - $0.askedAt > config.commitTimeout }
        for p in late {
            publishing.removeValue(forKey: p.task.ref)
            awaitingCommit.remove(p.task.ref)
        }
        if !late.isEmpty { lock.broadcast() }
        lock.unlock()
        for p in late { settle(p, granted: false, unanswered: true) }
    }

    /// Asks the coordinator (through the loop) whether attempt `ref` may publish; waits up
    /// to `commitTimeout` seconds for the answer (no answer: it may not).
    private func awaitCommit(_ ref: TaskRef, poke: ZMQSocket?) -> Bool {
        lock.lock()
        if revokedRunning.contains(ref) {
            lock.unlock()
            return false
        }
        awaitingCommit.insert(ref)
        commitOutbox.append(ref)
        lock.unlock()
        _ = try? poke?.send([[1]], dontWait: true)
        let deadline = Date().addingTimeInterval(config.commitTimeout)
        lock.lock()
        defer { lock.unlock() }
        while commitAnswers[ref] == nil && !stopping && Date() < deadline { _ = lock.wait(until: deadline) }
        awaitingCommit.remove(ref)
        guard let answer = commitAnswers.removeValue(forKey: ref) else {
            unanswered.insert(ref)  // no word from the coordinator: the task is handed back
            return false
        }
        return answer
    }

    private func makeReport(_ t: TaskAssignment, _ o: TaskOutcome, queueWait: Double, peak: PeakMemory?) -> TaskReport {
        var record = o.record
        record.timings.queueWait = queueWait * 1000
        record.peakMemory = peak
        record.worker = "\(config.id)@\(host)"
        let status = TaskReport.Status(record.status)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(record)).map(Array.init) ?? []
        return TaskReport(
            ref: t.ref, status: status, retryable: o.retryable, timings: record.timings, peakMemory: peak, inputHash: o.inputHash,
            errorCode: record.error?.code ?? "", errorMessage: record.error?.message ?? "", record: json,
            inlineOutputs: o.inlineOutputs)
    }
}

/// The worker could not start (threads, endpoint).
public struct WorkerStartError: Error, CustomStringConvertible {
    public let reason: String
    public var description: String { reason }
}
