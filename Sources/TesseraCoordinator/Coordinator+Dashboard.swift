import Foundation
import TesseraExecution
import TesseraImaging
import TesseraService
import TesseraTasks
import TesseraWire

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

/// One worker as the dashboard lists it.
struct WorkerView: Codable {
    var id: String
    var host: String
    var state: String
    var running: Int
    var completed: Int
    var peakRSSBytes: UInt64
    var rssBytes: UInt64?
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
        for (id, acc) in board.accumulators.reversed() {
            if let job = active[id] {
                views.append(acc.view(id: id, name: job.spec.name, kind: job.spec.kind.rawValue, state: job.state.rawValue,
                                      total: job.total, running: job.running, elapsed: wall - job.submitted))
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
                       running: w.running.count, completed: w.completed, peakRSSBytes: w.peakMemory?.bytes ?? 0)
        }
        for l in board.lost {
            workerViews.append(WorkerView(id: l["id"] ?? "", host: l["host"] ?? "", state: "lost", running: 0,
                                          completed: Int(l["completed"] ?? "") ?? 0, peakRSSBytes: 0))
        }
        if let data = try? JSONEncoder().encode(DashboardSnapshot(jobs: views, workers: workerViews, generated: wall)) {
            board.publish(data)
        }
    }

    func noteLostForDashboard(_ w: WorkerConn, reason: String) {
        guard let board = dashboard else { return }
        board.lost.insert(["id": w.id, "host": w.host, "reason": reason, "completed": String(w.completed)], at: 0)
        if board.lost.count > 20 { board.lost.removeLast() }
    }

    /// `/` (the page), `/api/state` (the snapshot), `/api/events` (snapshots as Server-Sent Events).
    static func dashboardRoutes(_ board: DashboardBoard) -> (routes: [String: HTTPService.Handler], events: [String: HTTPService.EventSource]) {
        let page = Array(DashboardPage.live.utf8)
        let routes: [String: HTTPService.Handler] = [
            "/": { _, _ in HTTPReply(contentType: "text/html; charset=utf-8", body: page) },
            "/api/state": { _, _ in
                HTTPReply(contentType: "application/json", body: Array(board.current.0))
            },
        ]
        let events: [String: HTTPService.EventSource] = [
            "/api/events": { _ in
                let seen = LockedBox(-1)
                return {
                    // Each new snapshot, at most one per publish; a keep-alive comment would do, but a
                    // repeated snapshot every 15 s also heals a client that missed one.
                    let last = seen.value
                    let (data, version) = await board.next(after: last, timeout: 15)
                    seen.value = version
                    return String(decoding: data, as: UTF8.self)
                }
            },
        ]
        return (routes, events)
    }
}

/// A value behind a lock, for closures that outlive their caller.
final class LockedBox<T>: @unchecked Sendable {
    private var stored: T
    private let lock = NSLock()
    init(_ value: T) { stored = value }
    var value: T {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}
