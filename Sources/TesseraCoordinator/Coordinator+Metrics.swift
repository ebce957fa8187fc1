import CoreMetrics
import Foundation
import TesseraService
import TesseraWire
import TesseraModel

/// What the coordinator records, through swift-metrics (the exporter is the caller's
/// choice: Prometheus in the `tessera` command). Events are tallied on the loop thread and
/// published with the gauges twice a second, so one scrape sees one instant (completions
/// and queue depth agree); per-job and per-worker series are destroyed when the job ends
/// or the worker leaves.
package final class CoordinatorMetrics {
    /// Every metric the coordinator records, with its help line.
    static let catalog: [MetricInfo] = [
        MetricInfo("tessera_queue_depth", "Tasks waiting to be dispatched, all jobs (what an autoscaler reads)."),
        MetricInfo("tessera_job_queue_depth", "Tasks of one active job waiting to be dispatched."),
        MetricInfo("tessera_tasks_running", "Tasks dispatched to workers and not yet reported."),
        MetricInfo("tessera_tasks_delayed", "Tasks waiting for their retry backoff."),
        MetricInfo("tessera_jobs_active", "Jobs with unfinished tasks."),
        MetricInfo("tessera_tasks_completed_total", "Tasks finished since the coordinator started, by outcome."),
        MetricInfo("tessera_task_failures_total", "Failed task reports, by error code."),
        MetricInfo("tessera_task_dispatches_total", "Task dispatches (attempts) sent to workers."),
        MetricInfo("tessera_task_retries_total", "Retries scheduled after retryable failures."),
        MetricInfo("tessera_tasks_requeued_total", "Tasks requeued from lost or hung workers."),
        MetricInfo("tessera_tasks_poisoned_total", "Tasks failed by the poison rule."),
        MetricInfo("tessera_workers_lost_total", "Workers declared lost."),
        MetricInfo("tessera_workers_connected", "Workers connected now."),
        MetricInfo("tessera_worker_capacity_tasks", "Tasks a worker said it can hold."),
        MetricInfo("tessera_worker_held_tasks", "Tasks a worker holds now."),
        MetricInfo("tessera_worker_peak_rss_bytes", "Highest peak resident memory a worker reported for a task."),
        MetricInfo("tessera_auth_refused_total", "Connections refused by CURVE authentication."),
        MetricInfo("tessera_messages_malformed_total", "Messages that did not parse."),
        MetricInfo("tessera_messages_refused_total", "Messages refused: wrong role, revoked key, a task not the sender's current attempt."),
        MetricInfo("tessera_task_duration_seconds", "Task time on the worker."),
        MetricInfo("tessera_stage_duration_seconds", "Time per stage of a task on the worker."),
    ]

    /// A counter counted on the loop thread, published by `refresh`.
    final class Tally {
        let counter: CoreMetrics.Counter
        private(set) var value = 0
        private var published = 0
        init(_ counter: CoreMetrics.Counter) { self.counter = counter }
        func increment(by n: Int = 1) { value += n }
        func publish() {
            if value > published { counter.increment(by: value - published) }
            published = value
        }
    }

    let factory: MetricsFactory
    let dispatched: Tally
    let retries: Tally
    let requeued: Tally
    let poisoned: Tally
    let workersLost: Tally
    let authRefused: Tally
    let malformed: Tally
    private let completed: [Tally]  // by Outcome raw value
    let refusedMessages: Tally
    private var failures: [String: Tally] = [:]
    private let taskDuration: CoreMetrics.Timer
    private let stageDurations: [(Stage, CoreMetrics.Timer)]
    private let queueDepth: Gauge
    private let running: Gauge
    private let delayed: Gauge
    private let jobsActive: Gauge
    private let workersConnected: Gauge
    private var jobSeries: [String: Gauge] = [:]
    private var workerSeries: [String: (capacity: Gauge, held: Gauge, peak: Gauge)] = [:]
    /// Reports received (also counted by outcome).
    var reports = 0

    /// Metrics recorded nowhere (tests, and coordinators without a metrics port).
    package static func discarding() -> CoordinatorMetrics { CoordinatorMetrics(factory: NOOPMetricsHandler.instance) }

    init(factory: MetricsFactory) {
        self.factory = factory
        func counter(_ name: String, _ dims: [(String, String)] = []) -> Tally {
            Tally(CoreMetrics.Counter(label: name, dimensions: dims, factory: factory))
        }
        dispatched = counter("tessera_task_dispatches_total")
        retries = counter("tessera_task_retries_total")
        requeued = counter("tessera_tasks_requeued_total")
        poisoned = counter("tessera_tasks_poisoned_total")
        workersLost = counter("tessera_workers_lost_total")
        authRefused = counter("tessera_auth_refused_total")
        malformed = counter("tessera_messages_malformed_total")
        refusedMessages = counter("tessera_messages_refused_total")
        completed = Outcome.allCases.map { counter("tessera_tasks_completed_total", [("status", $0.name)]) }
        taskDuration = CoreMetrics.Timer(label: "tessera_task_duration_seconds", factory: factory)
        stageDurations = Stage.allCases.filter { $0 != .total }.map {
            ($0, CoreMetrics.Timer(label: "tessera_stage_duration_seconds", dimensions: [("stage", $0.snakeName)], factory: factory))
        }
        queueDepth = Gauge(label: "tessera_queue_depth", factory: factory)
        running = Gauge(label: "tessera_tasks_running", factory: factory)
        delayed = Gauge(label: "tessera_tasks_delayed", factory: factory)
        jobsActive = Gauge(label: "tessera_jobs_active", factory: factory)
        workersConnected = Gauge(label: "tessera_workers_connected", factory: factory)
    }

    func completed(_ status: Outcome, count: Int = 1) { completed[status.rawValue].increment(by: count) }

    func refused(_ reason: String) { refusedMessages.increment() }

    /// A report's timings (milliseconds per stage) and failure code.
    func observe(_ r: TaskReport) {
        reports += 1
        for (stage, timer) in stageDurations { timer.recordNanoseconds(Int64(r.timings[stage] * 1e6)) }
        taskDuration.recordNanoseconds(Int64(r.timings.total * 1e6))
        if r.status == .failed {
            let code = r.errorCode.isEmpty ? "unknown" : r.errorCode
            if failures[code] == nil {
                failures[code] = Tally(CoreMetrics.Counter(label: "tessera_task_failures_total", dimensions: [("code", code)],
                                                           factory: factory))
            }
            failures[code]?.increment()
        }
    }

    /// Publishes the tallies and sets the gauges from the coordinator's state (loop thread).
    func refresh(jobs: [ActiveJob], workers: [WorkerConn]) {
        for t in [dispatched, retries, requeued, poisoned, workersLost, authRefused, malformed, refusedMessages] + completed {
            t.publish()
        }
        for t in failures.values { t.publish() }
        var queued = 0, runningNow = 0, delayedNow = 0
        var seen = Set<String>()
        for job in jobs {
            let waiting = max(0, job.total - job.done - job.running - job.delayed.count)
            queued += waiting
            runningNow += job.running
            delayedNow += job.delayed.count
            seen.insert(job.id)
            if jobSeries[job.id] == nil {
                jobSeries[job.id] = Gauge(label: "tessera_job_queue_depth",
                                          dimensions: [("job_id", job.id), ("job_name", job.spec.name),
                                                       ("priority", String(job.spec.priority))], factory: factory)
            }
            jobSeries[job.id]?.record(waiting)
        }
        for (id, gauge) in jobSeries where !seen.contains(id) {
            gauge.destroy()
            jobSeries.removeValue(forKey: id)
        }
        queueDepth.record(queued)
        running.record(runningNow)
        delayed.record(delayedNow)
        jobsActive.record(jobs.count)
        workersConnected.record(workers.count)
        var present = Set<String>()
        for w in workers {
            present.insert(w.id)
            if workerSeries[w.id] == nil {
                let dims = [("worker_id", w.id), ("host", w.host)]
                workerSeries[w.id] = (Gauge(label: "tessera_worker_capacity_tasks", dimensions: dims, factory: factory),
                                      Gauge(label: "tessera_worker_held_tasks", dimensions: dims, factory: factory),
                                      Gauge(label: "tessera_worker_peak_rss_bytes", dimensions: dims, factory: factory))
            }
            let s = workerSeries[w.id]!
            s.capacity.record(w.capacity)
            s.held.record(w.held.count)
            s.peak.record(Double(w.peakMemory?.bytes ?? 0))
        }
        for (id, s) in workerSeries where !present.contains(id) {
            s.capacity.destroy()
            s.held.destroy()
            s.peak.destroy()
            workerSeries.removeValue(forKey: id)
        }
    }
}
