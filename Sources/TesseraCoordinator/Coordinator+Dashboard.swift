import Foundation
import TesseraService
import TesseraTasks
import TesseraWire
import TesseraModel
import TesseraReports

/// What the dashboard shows, published by the event loop every half second as one JSON
/// snapshot (bounded: views of the active jobs and the 20 latest finished ones, the
/// workers), and read by the HTTP handlers under a lock: a million-task job costs the
/// page what a hundred-task one does.
final class DashboardBoard: @unchecked Sendable {
    private let lock = NSLock()
    private var snapshot = Data("{\"jobs\":[],\"workers\":[]}".utf8)
    private var version = 0
    /// Accumulators by job, in submission order (finished ones kept while among the latest 20).
    var accumulators: [(id: String, accumulator: JobView.Accumulator)] = []
    /// Workers given up, newest first (at most 20).
    var lost: [[String: String]] = []
    /// Output roots by job (previews are served only from under these).
    private var roots: [String: String] = [:]
    /// Actions asked for over HTTP, run by the event loop.
    private var actions: [(DashboardAction, CheckedContinuation<HTTPReply, Never>)] = []

    func setRoots(_ r: [String: String]) {
        lock.lock()
        roots = r
        lock.unlock()
    }

    func root(of job: String) -> String? {
        lock.lock()
        defer { lock.unlock() }
        return roots[job]
    }

    /// Queues `action` for the event loop and waits for its answer.
    func perform(_ action: DashboardAction) async -> HTTPReply {
        await withCheckedContinuation { continuation in
            lock.lock()
            actions.append((action, continuation))
            lock.unlock()
        }
    }

    func takeActions() -> [(DashboardAction, CheckedContinuation<HTTPReply, Never>)] {
        lock.lock()
        defer { lock.unlock() }
        let all = actions
        actions = []
        return all
    }

    func accumulator(for id: String) -> JobView.Accumulator {
        if let a = accumulators.first(where: { $0.id == id }) { return a.accumulator }
        let a = JobView.Accumulator()
        accumulators.append((id, a))
        return a
    }

    func publish(_ data: Data) {
        lock.lock()
        snapshot = data
        version += 1
        lock.unlock()
    }

    /// The snapshot and its version.
    var current: (Data, Int) {
        lock.lock()
        defer { lock.unlock() }
        return (snapshot, version)
    }

    /// The snapshot newer than `after`, polled without holding a thread (handlers share
    /// Swift's small cooperative pool), or the current one after `timeout` seconds.
    func next(after: Int, timeout: Double) async -> (Data, Int) {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let (data, version) = current
            if version > after || Date() >= deadline { return (data, version) }
            try? await Task.sleep(nanoseconds: 200_000_000)
        }
    }
}

/// What the dashboard may ask the coordinator to do (with the token).
enum DashboardAction {
    case cancel(job: String)
    /// Every failed task of a finished job runs again (its failed results are taken back).
    case retryFailed(job: String)
    /// A running task's attempt is given up and the task queued again (a stuck task).
    case requeue(job: String, task: UInt64)
}

/// One worker as the dashboard lists it.
struct WorkerView: Codable {
    var id: String
    var host: String
    var state: String
    var running: Int
    var completed: Int
    var peakRSSBytes: UInt64
    var rssBytes: UInt64?
    /// What it is running now (inputs, at most 4).
    var current: [String] = []
    /// The last minute, a sample a second: resident bytes and CPU % of a core.
    var rssHistory: [UInt64] = []
    var cpuHistory: [Double] = []
}

struct DashboardSnapshot: Codable {
    var jobs: [JobView]
    var workers: [WorkerView]
    var generated: Double
}

extension Coordinator {
    /// Adds a final result's record to its job's view (only with the dashboard on: records
    /// are decoded here, which the no-op fast path otherwise never does).
    static func observe(_ board: DashboardBoard, _ job: ActiveJob, record: [UInt8]) {
        guard let r = try? JSONDecoder().decode(TaskRecord.self, from: Data(record)) else { return }
        board.accumulator(for: job.id).add(r, at: Monotonic.seconds())
    }

    /// Publishes the snapshot (every half second, from the loop).
    func publishDashboard() {
        guard let board = dashboard else { return }
        let wall = Date().timeIntervalSince1970
        let active = Dictionary(uniqueKeysWithValues: jobs.map { ($0.id, $0) })
        // Keep the active jobs and the 20 latest finished ones.
        var finishedSeen = 0
        board.accumulators = board.accumulators.reversed().filter { entry in
            if active[entry.id] != nil { return true }
            finishedSeen += 1
            return finishedSeen <= 20
        }.reversed()
        var views: [JobView] = []
        let now = Monotonic.seconds()
        for (id, acc) in board.accumulators.reversed() {
            if let job = active[id] {
                var v = acc.view(id: id, name: job.spec.name, kind: job.spec.kind.rawValue, state: job.state.rawValue,
                                 total: job.total, running: job.running, elapsed: wall - job.submitted)
                v.stuck = stuckTasks(job, p95: v.p95TaskMilliseconds, now: now)
                v.priority = job.spec.priority
                v.queued = max(0, job.total - job.done - job.running)
                views.append(v)
            } else if let s = scheduler.finishedJobs[id] {
                views.append(acc.view(id: id, name: s.name, kind: s.kind.rawValue, state: s.state.rawValue, total: s.total,
                                      running: 0, elapsed: (s.finished ?? wall) - s.submitted))
            }
        }
        // Jobs submitted before any of their tasks reported still show.
        for job in jobs where !board.accumulators.contains(where: { $0.id == job.id }) {
            views.insert(board.accumulator(for: job.id).view(id: job.id, name: job.spec.name, kind: job.spec.kind.rawValue,
                                                              state: job.state.rawValue, total: job.total, running: job.running,
                                                              elapsed: wall - job.submitted), at: 0)
        }
        var workerViews = workers.values.sorted { $0.id < $1.id }.map { w in
            WorkerView(id: w.id, host: w.host, state: w.draining ? "draining" : w.running.isEmpty ? "idle" : "busy",
                       running: w.running.count, completed: w.completed, peakRSSBytes: w.peakMemory?.bytes ?? 0,
                       rssBytes: w.rssHistory.last,
                       current: w.running.prefix(4).compactMap { ref in w.held[ref]?.live[ref.task].map { Paths.display($0.input.name) } },
                       rssHistory: w.rssHistory, cpuHistory: w.cpuHistory.map { ($0 * 10).rounded() / 10 })
        }
        for l in board.lost {
            workerViews.append(WorkerView(id: l["id"] ?? "", host: l["host"] ?? "", state: "lost", running: 0,
                                          completed: Int(l["completed"] ?? "") ?? 0, peakRSSBytes: 0))
        }
        for i in views.indices { views[i].actions = config.dashboardToken != nil }
        // Output roots of the jobs shown (previews): active jobs', then kept; a job that ended
        // before a publish saw it is looked up once in the journal.
        var roots = [String: String]()
        for job in jobs { finishedRoots[job.id] = job.spec.output }
        for (id, _) in board.accumulators {
            if finishedRoots[id] == nil { finishedRoots[id] = (try? journal.job(id))??.spec.output }
            if let r = finishedRoots[id] { roots[id] = r }
        }
        finishedRoots = roots
        board.setRoots(roots)
        if let data = try? JSONEncoder().encode(DashboardSnapshot(jobs: views, workers: workerViews, generated: wall)) {
            board.publish(data)
        }
    }

    /// Running tasks past max(10 s, 3× the job's p95), or on a worker silent for 3 heartbeats.
    func stuckTasks(_ job: ActiveJob, p95: Double, now: Double) -> [JobView.StuckTask] {
        let limit = max(10, 3 * p95 / 1000)
        var out: [JobView.StuckTask] = []
        for (id, slot) in job.live where slot.state == .dispatched {
            guard let w = slot.worker else { continue }
            let age = now - slot.dispatchedAt
            let silent = now - w.lastSeen > 3 * config.heartbeatInterval
            guard age > limit || silent else { continue }
            out.append(.init(task: id, input: Paths.display(slot.input.name), worker: w.id, seconds: age,
                             reason: silent ? "silent worker" : "slow"))
            if out.count >= 20 { break }
        }
        return out.sorted { $0.seconds > $1.seconds }
    }

    /// Runs the actions asked for over HTTP (on the loop: the scheduler is the loop's).
    func runDashboardActions(now: Double) {
        guard let board = dashboard else { return }
        for (action, answer) in board.takeActions() {
            answer.resume(returning: perform(action, now: now))
        }
    }

    /// Queues the failed tasks of finished job `id` again (their failed results taken back);
    /// how many, nil when there is no such job. The dashboard's and the API's retry.
    func requeueFailed(_ id: String, by who: String) throws -> Int? {
        guard let row = try journal.job(id) else { return nil }
        let n = try journal.reopenFailed(job: id)
        guard n > 0 else { return 0 }
        let job = try activate(row)
        scheduler.finishedJobs.removeValue(forKey: id)
        scheduler.add(job)
        logger.info("\(who): job \(id): \(n) failed tasks queued again")
        return n
    }

    private func perform(_ action: DashboardAction, now: Double) -> HTTPReply {
        func json(_ object: [String: String], status: Int = 200) -> HTTPReply {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return HTTPReply(status: status, contentType: "application/json", body: Array((try? encoder.encode(object)) ?? Data()))
        }
        do {
            switch action {
            case .cancel(let id):
                guard let job = scheduler.jobsByID[id] else { return json(["error": "job \(id) is not running"], status: 409) }
                try scheduler.cancel(job)
                applyEffects()
                logger.info("dashboard: cancelled job \(id)")
                return json(["job": id, "state": "cancelled"])
            case .retryFailed(let id):
                guard scheduler.jobsByID[id] == nil else {
                    return json(["error": "job \(id) is still running: retry its failed tasks when it ends"], status: 409)
                }
                guard let n = try requeueFailed(id, by: "dashboard") else { return json(["error": "no job \(id)"], status: 404) }
                return json(["job": id, "retried": String(n)])
            case .requeue(let id, let task):
                guard let job = scheduler.jobsByID[id], let slot = job.live[task], slot.state == .dispatched else {
                    return json(["error": "task \(task) of job \(id) is not running"], status: 409)
                }
                if let w = slot.worker {
                    scheduler.effects.append(.revoke(worker: w.identity, refs: [TaskRef(task: task, attempt: slot.attempt)]))
                }
                scheduler.crashed(job, task, charge: false, reason: "requeued from the dashboard")
                applyEffects()
                logger.info("dashboard: task \(task) of job \(id) requeued")
                return json(["job": id, "task": String(task), "state": "queued"])
            }
        } catch {
            return json(["error": "\(error)"], status: 500)
        }
    }

    func noteLostForDashboard(_ w: WorkerConn, reason: String) {
        guard let board = dashboard else { return }
        board.lost.insert(["id": w.id, "host": w.host, "reason": reason, "completed": String(w.completed)], at: 0)
        if board.lost.count > 20 { board.lost.removeLast() }
    }

    /// `/` (the page), `/api/state` (the snapshot), `/api/events` (snapshots as Server-Sent
    /// Events), `/api/output` (an output of a job, from under its output root only), and the
    /// actions `POST /api/cancel|retry-failed|requeue` (only with `Authorization: Bearer TOKEN`).
    static func dashboardRoutes(_ board: DashboardBoard, token: String?)
        -> (routes: [String: HTTPService.Handler], events: [String: HTTPService.EventSource], actions: [String: HTTPService.Action]) {
        let page = Array(DashboardPage.live.utf8)
        let routes: [String: HTTPService.Handler] = [
            "/": { _, _ in HTTPReply(contentType: "text/html; charset=utf-8", body: page) },
            "/api/state": { _, _ in
                HTTPReply(contentType: "application/json", body: Array(board.current.0))
            },
            "/api/output": { _, query in
                guard let job = query["job"], let path = query["path"], let root = board.root(of: job) else {
                    return .text("no such output\n", status: 404)
                }
                return preview(path, root: root)
            },
        ]
        @Sendable func authorized(_ headers: [String: String]) -> Bool {
            guard let token, let given = headers["authorization"], given.hasPrefix("Bearer ") else { return false }
            // Compared in constant time.
            let a = Array(given.dropFirst(7).utf8), b = Array(token.utf8)
            return a.count == b.count && zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
        }
        func action(_ make: @escaping @Sendable ([String: String]) -> DashboardAction?) -> HTTPService.Action {
            { query, headers in
                guard token != nil else { return .text("the dashboard is read-only (no --dashboard-token-file)\n", status: 403) }
                guard authorized(headers) else { return .text("a valid token is needed (Authorization: Bearer …)\n", status: 403) }
                guard let a = make(query) else { return .text("bad request\n", status: 400) }
                return await board.perform(a)
            }
        }
        let actions: [String: HTTPService.Action] = [
            "/api/cancel": action { q in q["job"].map { .cancel(job: $0) } },
            "/api/retry-failed": action { q in q["job"].map { .retryFailed(job: $0) } },
            "/api/requeue": action { q in
                guard let job = q["job"], let task = q["task"].flatMap(UInt64.init) else { return nil }
                return .requeue(job: job, task: task)
            },
        ]
        let events: [String: HTTPService.EventSource] = [
            "/api/events": { _ in
                let seen = Locked(-1)
                return {
                    // Each new snapshot, at most one per publish; a keep-alive comment would do, but a
                    // repeated snapshot every 15 s also heals a client that missed one.
                    let (data, version) = await board.next(after: seen.current, timeout: 15)
                    seen.update { $0 = version }
                    return String(decoding: data, as: UTF8.self)
                }
            },
        ]
        return (routes, events, actions)
    }

    /// An output file for a preview: an image under `root` (after resolving symlinks), at most 8 MB.
    static func preview(_ path: String, root: String) -> HTTPReply {
        guard !Location.isRemote(root), path.hasPrefix("/"),
              let realRoot = Paths.realPath(root), let real = Paths.realPath(path),
              real.hasPrefix(realRoot + "/") else {
            return .text("not an output of this job\n", status: 403)
        }
        let type = Location.contentType(forExtension: (real as NSString).pathExtension)
        guard type.hasPrefix("image/"), let bytes = try? FileIO.read(real, limit: 8 << 20) else {
            return .text("not an image output\n", status: 404)
        }
        return HTTPReply(contentType: type, body: bytes)
    }
}
