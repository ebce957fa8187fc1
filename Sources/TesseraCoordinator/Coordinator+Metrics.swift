import Foundation
import TesseraWire

extension Coordinator {
    /// Prometheus text exposition of the coordinator's state (rendered on the loop
    /// thread every half second; the HTTP thread serves the latest text).
    func renderMetrics() -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func label(_ s: String) -> String {
            s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: " ")
        }
        var queued = 0
        family("tessera_queue_depth", "gauge", "Tasks of a job waiting to be dispatched, by job and priority.")
        for job in jobs {
            let waiting = job.tasks.count - job.done - job.running
            queued += waiting
            out += "tessera_queue_depth{job=\"\(job.id)\",name=\"\(label(job.spec.name))\",priority=\"\(job.spec.priority)\"} \(waiting)\n"
        }
        family("tessera_queue_depth_total", "gauge", "Tasks waiting to be dispatched, all jobs (what an autoscaler reads).")
        out += "tessera_queue_depth_total \(queued)\n"
        family("tessera_tasks", "gauge", "Tasks of active jobs by state.")
        out += "tessera_tasks{state=\"pending\"} \(queued)\n"
        out += "tessera_tasks{state=\"running\"} \(jobs.reduce(0) { $0 + $1.running })\n"
        family("tessera_tasks_completed_total", "counter", "Tasks finished since the coordinator started, by outcome.")
        for (i, s) in ["succeeded", "failed", "skipped", "cancelled"].enumerated() {
            out += "tessera_tasks_completed_total{status=\"\(s)\"} \(metrics.completed[i])\n"
        }
        family("tessera_task_failures_total", "counter", "Failed task reports by error code.")
        for (code, n) in metrics.failuresByCode.sorted(by: { $0.key < $1.key }) {
            out += "tessera_task_failures_total{code=\"\(label(code))\"} \(n)\n"
        }
        family("tessera_jobs_active", "gauge", "Jobs with unfinished tasks.")
        out += "tessera_jobs_active \(jobs.count)\n"
        for (name, value, help) in [("tessera_tasks_dispatched_total", metrics.dispatched, "Task dispatches (attempts)."),
                                    ("tessera_task_retries_total", metrics.retries, "Retries scheduled after retryable failures."),
                                    ("tessera_tasks_requeued_total", metrics.requeued, "Tasks requeued from lost or hung workers."),
                                    ("tessera_tasks_poisoned_total", metrics.poisoned, "Tasks failed by the poison rule."),
                                    ("tessera_workers_lost_total", metrics.workersLost, "Workers declared lost."),
                                    ("tessera_auth_refused_total", metrics.zapRefused, "Connections refused by CURVE authentication."),
                                    ("tessera_messages_malformed_total", metrics.malformed, "Messages that did not parse.")] {
            family(name, "counter", help)
            out += "\(name) \(value)\n"
        }
        family("tessera_workers_connected", "gauge", "Workers connected now.")
        out += "tessera_workers_connected \(workers.count)\n"
        family("tessera_worker_capacity", "gauge", "Tasks each worker can hold, and holds now.")
        family("tessera_worker_peak_rss_bytes", "gauge", "Peak resident memory a worker reported for a task.")
        for w in workers.values.sorted(by: { $0.id < $1.id }) {
            let l = "worker=\"\(label(w.id))\",host=\"\(label(w.host))\""
            out += "tessera_worker_capacity{\(l),kind=\"capacity\"} \(w.capacity)\n"
            out += "tessera_worker_capacity{\(l),kind=\"held\"} \(w.held.count)\n"
            out += "tessera_worker_peak_rss_bytes{\(l)} \(w.peakRSS)\n"
        }
        func histogram(_ name: String, _ labels: String, _ b: CoordinatorMetrics.Buckets) {
            let sep = labels.isEmpty ? "" : ","
            var cumulative = 0
            for (i, bound) in CoordinatorMetrics.Buckets.bounds.enumerated() {
                cumulative += b.counts[i]
                out += "\(name)_bucket{\(labels)\(sep)le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "\(name)_bucket{\(labels)\(sep)le=\"+Inf\"} \(b.count)\n"
            out += labels.isEmpty ? "\(name)_sum \(b.sum)\n\(name)_count \(b.count)\n"
                : "\(name)_sum{\(labels)} \(b.sum)\n\(name)_count{\(labels)} \(b.count)\n"
        }
        family("tessera_task_duration_milliseconds", "histogram", "Task time on the worker, milliseconds.")
        histogram("tessera_task_duration_milliseconds", "", metrics.stages["total"] ?? CoordinatorMetrics.Buckets())
        family("tessera_stage_duration_milliseconds", "histogram", "Time per stage of a task, milliseconds.")
        for stage in CoordinatorMetrics.stageNames where stage != "total" {
            histogram("tessera_stage_duration_milliseconds", "stage=\"\(stage)\"", metrics.stages[stage] ?? CoordinatorMetrics.Buckets())
        }
        return out
    }
}
