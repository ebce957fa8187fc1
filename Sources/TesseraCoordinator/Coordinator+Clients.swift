import Foundation
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraModel

extension Coordinator {
    /// `submit`: plan the job (expand inputs), journal it with all its tasks, queue it.
    func submit(_ identity: [UInt8], _ e: Envelope, owner: String, submitter: Submitter, now: Double) throws {
        let request: SubmitRequest
        do { request = try JSONDecoder().decode(SubmitRequest.self, from: Data(e.body)) } catch let error as DecodingError {
            throw ErrorReply(code: "invalid-job", message: "submit: \(describeDecoding(error, data: Data(e.body)))")
        } catch let error as JobError {
            throw ErrorReply(code: "invalid-job", message: "submit: job: \(error.reason)")
        }
        let spec = request.job
        // The same validation as a job file's (ranges, templates, recipes): scripts get the same errors.
        do { try spec.validate() } catch let e as JobError {
            throw ErrorReply(code: "invalid-job", message: "submit: job: \(e.reason)")
        }
        // What the submitter may reach: judged before anything is walked, listed or fetched.
        let (check, access) = try confinement(of: submitter, spec: spec)
        do { try check?.check(spec) } catch let error as JobError {
            throw ErrorReply(code: error.code.rawValue, message: (error.file.map { Paths.display($0) + ": " } ?? "") + error.reason)
        }
        if check != nil { try journal.flush() }  // the outputs the last results recorded
        let executable = spec.executable
        let clock = Stopwatch()
        let id = "j-" + String(UInt64.random(in: 0...UInt64.max) & 0xFFFF_FFFF_FFFF, radix: 36)
        let submitted = Date().timeIntervalSince1970
        // Tiles jobs: every input becomes the parts (bands, tail) of its pyramid; the
        // pyramid rule starts from the plan (tiles jobs are small: parts per image).
        var parts: [(input: InputFile, finished: Bool, failed: Bool)] = []
        var seenSources = Set<String>()
        let skipped = SkippedFiles()
        let planned: (seq: Int, firstTask: UInt64, total: Int, failed: [(task: UInt64, record: [UInt8])])
        do {
            planned = try journal.insertJob(id: id, spec: spec, submitted: submitted, owner: owner, access: access,
                                            claims: true) { add in
                try JobPlanner.forEachInput(of: spec, sources: access?.sources, skipped: skipped) { input in
                    try check?.check(input)
                    guard spec.kind == .tiles else {
                        try check?.checkOutputs(of: input, in: executable)
                        return try add(input)
                    }
                    guard seenSources.insert(input.path).inserted else { return }
                    for part in TilePlanner.plan(spec, inputs: [input], sources: access?.sources) {
                        try check?.checkOutputs(of: part, in: executable)
                        parts.append((part, false, false))
                        try add(part)
                    }
                }
            }
        } catch let error as JobError {
            // The code travels beside the message (ErrorReply shows it once).
            throw ErrorReply(code: error.code.rawValue, message: (error.file.map { Paths.display($0) + ": " } ?? "") + error.reason)
        }
        if let pages = config.journalGrowthPages { try journal.limitGrowth(pages: pages) }
        let job = ActiveJob(id: id, seq: planned.seq, spec: spec, firstTask: planned.firstTask, total: planned.total,
                            submitted: submitted, access: access)
        job.owner = owner
        if spec.kind == .tiles { job.gate = PyramidGate(tasks: parts) }
        // Tasks whose outputs collide failed at planning (journaled with the job).
        scheduler.failedAtPlanning(job, planned.failed)
        scheduler.add(job)
        let ms = clock.milliseconds
        logger.info("job \(id) (\(LogText.field(spec.name))): \(planned.total) tasks planned in \(String(format: "%.0f", ms)) ms")
        if let line = SkippedFiles.line(skipped.byExtension) { logger.info("job \(id): \(line)") }
        reply(identity, Envelope(MessageType.submitted, json: SubmitReply(job: id, tasks: planned.total, planMilliseconds: ms,
                                                                           skippedFiles: skipped.total > 0 ? skipped.byExtension : nil)))
    }

    func jobStatus(_ id: String) throws -> JobStatus? {
        if let job = scheduler.jobsByID[id] { return job.status() }
        if let s = scheduler.finishedJobs[id] { return s }
        guard let row = try journal.job(id) else { return nil }
        return JobStatus(id: row.id, name: row.spec.name, kind: row.spec.kind, priority: row.spec.priority,
                         state: row.state, total: row.total, pending: 0, running: 0, succeeded: row.counts[.succeeded],
                         failed: row.counts[.failed], skipped: row.counts[.skipped], cancelled: row.counts[.cancelled],
                         submitted: row.submitted, finished: row.finished)
    }

    /// Throws unless `peer` may see and act on job `id`: a client its own jobs, an admin or
    /// a local peer any (the API's rule, `checkAccess`, for ZeroMQ clients).
    func checkOwner(_ id: String, peer: Peer, identity: [UInt8], doing what: String) throws {
        guard !peer.isLocal && peer.role != .admin else { return }
        let owner = try scheduler.jobsByID[id]?.owner ?? journal.job(id)?.owner
        if let owner, owner != peer.key {
            refuse(what, from: identity, reason: "job \(id) belongs to another client")
            throw ErrorReply(code: "forbidden", message: "job \(id) was submitted by another client; only it or an admin may \(what) it")
        }
    }

    func status(_ identity: [UInt8], _ e: Envelope, peer: Peer) throws {
        let q = e.body.isEmpty ? JobQuery() : try e.decode(JobQuery.self)
        var list: [JobStatus] = []
        if let id = q.job {
            try checkOwner(id, peer: peer, identity: identity, doing: "see")
            guard let s = try jobStatus(id) else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
            list = [s]
        } else {
            // A client lists its own jobs; an admin or a local peer every job.
            let mine: (String) -> Bool = { owner in peer.isLocal || peer.role == .admin || owner == peer.key }
            let active = jobs.filter { mine($0.owner) }.map { $0.status() }
            let recent = try journal.recentJobs(limit: q.limit ?? 50).compactMap { row -> JobStatus? in
                scheduler.jobsByID[row.id] != nil || !mine(row.owner) ? nil : try jobStatus(row.id)
            }
            list = active + recent
        }
        reply(identity, Envelope(MessageType.status, json: StatusReply(jobs: list, workers: workers.count)))
    }

    /// `wait`: answered with `done` when the job ends (at once if it has).
    func wait(_ identity: [UInt8], _ e: Envelope, peer: Peer) throws {
        let q = try e.decode(JobQuery.self)
        guard let id = q.job else { throw ErrorReply(code: "invalid-request", message: "wait needs a job") }
        try checkOwner(id, peer: peer, identity: identity, doing: "see")
        if let job = scheduler.jobsByID[id] {
            job.waiters.append(identity)
            return
        }
        guard let s = try jobStatus(id) else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
        reply(identity, Envelope(MessageType.done, json: s))
    }

    func cancel(_ identity: [UInt8], _ e: Envelope, peer: Peer, now: Double) throws {
        let q = try e.decode(JobQuery.self)
        guard let id = q.job else { throw ErrorReply(code: "invalid-request", message: "cancel needs a job") }
        try checkOwner(id, peer: peer, identity: identity, doing: "cancel")
        guard let job = scheduler.jobsByID[id] else {
            guard let s = try jobStatus(id) else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
            reply(identity, Envelope(MessageType.cancelled, json: s))  // already over
            return
        }
        try scheduler.cancel(job)
        applyEffects()
        reply(identity, Envelope(MessageType.cancelled, json: try jobStatus(id) ?? job.status()))
    }

    func results(_ identity: [UInt8], _ e: Envelope, peer: Peer) throws {
        let q = try e.decode(JobQuery.self)
        guard let id = q.job else { throw ErrorReply(code: "invalid-request", message: "results needs a job") }
        try checkOwner(id, peer: peer, identity: identity, doing: "see")
        guard try jobStatus(id) != nil else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
        try journal.flush()  // include what this iteration decided
        let limit = max(1, min(q.limit ?? 1000, 10_000))
        let rows = try journal.results(job: id, after: q.after ?? 0, limit: limit)
        let next = rows.count == limit ? rows.last?.task : nil
        reply(identity, ResultsReply(records: rows.map(\.record), next: next).envelope)
    }
}
