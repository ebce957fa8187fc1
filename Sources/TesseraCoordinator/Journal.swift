import Foundation
import GRDB
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraModel

/// The coordinator's durable state: jobs, tasks and results in one SQLite file
/// (GRDB, WAL). A task is finished exactly when it has a row in `results` (primary
/// key: one result per task, ever), so a coordinator killed at any instant and
/// restarted knows every finished task and redoes none of them.
///
/// Writes are batched: the event loop queues operations and commits them in one
/// transaction every few milliseconds, acknowledging reports only after commit.
package final class Journal {
    private let db: DatabaseQueue
    /// The journal's one holder (this process) for as long as it is open.
    private let lock: JournalLock
    private(set) var pending: [Op] = []

    /// A task's pyramid part from its `part` column ("" for a whole file).
    static func part(_ text: String) -> PyramidPart? { text.isEmpty ? nil : PyramidPart(text) }

    package enum Op {
        case result(task: UInt64, job: String, status: Outcome, record: [UInt8])
        case retry(task: UInt64, attempts: Int, crashes: Int, notBefore: Double, error: String)
        case rendition(path: String, recipe: UInt64, inputHash: UInt64, outputs: [String])
        case jobState(job: String, state: JobStatus.State, finished: Double?, counts: OutcomeCounts)
        /// Files a task wrote (local paths), as they were when its result came: what a
        /// confined job may replace later, and what an incremental rerun checks them against.
        case outputs(task: UInt64, files: [WrittenFile])
    }

    package struct JobRow {
        package var id: String
        package var seq: Int
        package var spec: JobSpec
        package var state: JobStatus.State
        package var total: Int
        package var firstTask: UInt64
        package var submitted: Double
        package var finished: Double?
        package var counts: OutcomeCounts
        package var owner: String
        /// What the coordinator let the job reach (nil: not confined).
        package var access: JobAccess?
    }

    package struct TaskRow {
        package var id: UInt64
        package var path: String
        package var root: String
        package var part: String
        package var etag: String
        package var attempts: Int
        package var crashes: Int
        package var notBefore: Double
        package var result: Outcome?
        package var input: InputFile { InputFile(path: path, root: root, part: Journal.part(part), etag: etag.isEmpty ? nil : etag) }
    }

    /// Opens (or creates) the journal at `path`, taking its lock first: throws `JournalBusy`
    /// when another process holds it (`wait`: blocks until it lets go, while `stop()` is false).
    package init(path: String, wait: Bool = false, stop: () -> Bool = { false }) throws {
        lock = try JournalLock(journal: path, wait: wait, stop: stop)
        // The journal holds what workers must fetch, presigned URLs with their signatures
        // included: readable by its owner only (SQLite gives its -wal and -shm files the
        // database's mode).
        let fd = Paths.withCString(path) { open($0, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        if fd >= 0 {
            fchmod(fd, 0o600)
            close(fd)
        }
        var config = Configuration()
        config.journalMode = .wal
        config.prepareDatabase { db in
            // WAL + NORMAL: a committed transaction survives the process being killed
            // (it is in the WAL in the OS cache); only power loss can undo the last ones.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        db = try DatabaseQueue(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE jobs (
                  id TEXT PRIMARY KEY, seq INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
                  priority INTEGER NOT NULL, spec BLOB NOT NULL, state TEXT NOT NULL, total INTEGER NOT NULL,
                  first_task INTEGER NOT NULL, submitted REAL NOT NULL, finished REAL,
                  succeeded INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
                  skipped INTEGER NOT NULL DEFAULT 0, cancelled INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE tasks (
                  id INTEGER PRIMARY KEY, job TEXT NOT NULL, path TEXT NOT NULL, root TEXT NOT NULL,
                  attempts INTEGER NOT NULL DEFAULT 0, crashes INTEGER NOT NULL DEFAULT 0,
                  not_before REAL NOT NULL DEFAULT 0, last_error TEXT);
                CREATE INDEX tasks_job ON tasks(job, id);
                CREATE TABLE results (
                  task INTEGER PRIMARY KEY, job TEXT NOT NULL, status INTEGER NOT NULL, record BLOB NOT NULL);
                CREATE INDEX results_job ON results(job, task);
                CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
                INSERT INTO meta VALUES ('epoch', 0);
                CREATE TABLE renditions (
                  path TEXT NOT NULL, recipe INTEGER NOT NULL, input_hash INTEGER NOT NULL, outputs TEXT NOT NULL,
                  PRIMARY KEY (path, recipe)) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2-parts") { db in
            // Tile tasks: the piece of the input a task makes (a pyramid part).
            try db.execute(sql: "ALTER TABLE tasks ADD COLUMN part TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v3-owner") { db in
            // The CURVE key that submitted a job ("" without CURVE): only it (or an admin) may cancel.
            try db.execute(sql: "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v4-etag") { db in
            // Objects listed from a store: their version (ETag), which reruns and caches key on.
            try db.execute(sql: "ALTER TABLE tasks ADD COLUMN etag TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v5-access") { db in
            // What a confined job may reach (JSON of JobAccess; "" when not confined), and every
            // file Tessera wrote (a confined job replaces no other existing file).
            try db.execute(sql: """
                ALTER TABLE jobs ADD COLUMN access TEXT NOT NULL DEFAULT '';
                CREATE TABLE outputs (path TEXT PRIMARY KEY, task INTEGER NOT NULL, size INTEGER NOT NULL,
                                      mtime REAL NOT NULL, hash INTEGER NOT NULL) WITHOUT ROWID;
                """)
        }
        try migrator.migrate(db)
    }

    /// The files of queued results (not yet committed): what a failing journal leaves published
    /// but unrecorded, unless they are removed.
    package var pendingOutputs: [String] {
        pending.flatMap { op -> [String] in
            if case .outputs(_, let files) = op { return files.map(\.path) }
            return []
        }
    }

    /// A file Tessera wrote, as it was on disk when its task's result came.
    package struct WrittenFile: Equatable {
        package var path: String
        package var size: Int
        /// Seconds since 1970 (nanoseconds kept).
        package var mtime: Double
        /// XXH64 of its bytes (0: not known).
        package var hash: UInt64

        package init(path: String, size: Int, mtime: Double, hash: UInt64) {
            (self.path, self.size, self.mtime, self.hash) = (path, size, mtime, hash)
        }
    }

    /// How the file at `path` was when Tessera wrote it, if it did.
    package func written(_ path: String) throws -> WrittenFile? {
        for case .outputs(_, let files) in pending.reversed() {
            if let f = files.first(where: { $0.path == path }) { return f }
        }
        return try db.read { db in
            try Row.fetchOne(db, sql: "SELECT size, mtime, hash FROM outputs WHERE path = ?", arguments: [path]).map {
                WrittenFile(path: path, size: $0[0], mtime: $0[1], hash: UInt64(bitPattern: $0[2] as Int64))
            }
        }
    }

    /// Lets the journal grow by at most `pages` more pages (SQLite's `max_page_count`): past
    /// them every write fails `SQLITE_FULL`, as on a full disk (a test's fault injection).
    package func limitGrowth(pages: Int) throws {
        try db.write { db in
            let current = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            _ = try Int.fetchOne(db, sql: "PRAGMA max_page_count = \(current + max(1, pages))")
        }
    }

    /// Whether the journal at `journalPath` (another one: a `tessera run`'s, in an output
    /// root's `.tessera/`) records the file at a path as one Tessera wrote. Read only; nil when
    /// there is no such journal or it records no outputs.
    package static func recordedOutputs(in journalPath: String) -> ((String) -> Bool)? {
        guard Paths.exists(journalPath) else { return nil }
        var config = Configuration()
        config.readonly = true
        guard let db = try? DatabaseQueue(path: journalPath, configuration: config),
              (try? db.read({ try $0.tableExists("outputs") })) == true else { return nil }
        return { path in (try? db.read { try Bool.fetchOne($0, sql: "SELECT 1 FROM outputs WHERE path = ?", arguments: [path]) }) ?? false }
    }

    /// Whether Tessera wrote the file at `path` (a result journaled it; queued writes included).
    package func wroteOutput(_ path: String) throws -> Bool { try written(path) != nil }

    /// Increments and returns the coordinator epoch (one per start): attempt numbers
    /// carry it, so attempts made after a restart never collide with earlier ones.
    package func nextEpoch() throws -> UInt32 {
        try db.write { db in
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'epoch'")
            return UInt32(truncatingIfNeeded: try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'epoch'") ?? 1)
        }
    }

    // MARK: Jobs

    /// Journals a job and streams its tasks in: `plan` calls `add` once per task, and the
    /// tasks go to the journal `batch` at a time (one transaction each), so planning a
    /// million inputs never holds them all in memory. Inputs are deduplicated by `key`
    /// (a hash in memory, the text compared from the journal on a hash match). The job is
    /// `planning` until its last task is in; a coordinator killed before that forgets it
    /// at the next start (its client never got an answer). Returns the job's numbers.
    ///
    /// With `claims`, every task's planned outputs are checked as it comes in (`OutputClaims`):
    /// an output that would replace an input refuses the job (the error is thrown); tasks
    /// whose outputs collide are journaled as failed with their error, and returned.
    package func insertJob(id: String, spec: JobSpec, submitted: Double, owner: String = "", access: JobAccess? = nil,
                   batch: Int = 20_000, claims: Bool = false,
                   plan: (_ add: (InputFile) throws -> Void) throws -> Void)
        throws -> (seq: Int, firstTask: UInt64, total: Int, failed: [(task: UInt64, record: [UInt8])]) {
        let specJSON = try JSONEncoder().encode(spec)
        let accessJSON = try access.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) } ?? ""
        let (seq, first) = try db.write { db -> (Int, UInt64) in
            let seq = (try Int.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs")) ?? 1
            let first = UInt64((try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(id), 0) + 1 FROM tasks")) ?? 1)
            try db.execute(sql: """
                INSERT INTO jobs (id, seq, name, kind, priority, spec, state, total, first_task, submitted, owner, access)
                VALUES (?, ?, ?, ?, ?, ?, 'planning', 0, ?, ?, ?, ?)
                """, arguments: [id, seq, spec.name, spec.kind.rawValue, spec.priority, specJSON, Int64(first), submitted, owner,
                                 accessJSON])
            return (seq, first)
        }
        var next = first
        var rows: [InputFile] = []
        rows.reserveCapacity(batch)
        // key hash -> task id of the first task with that hash (the common case: one).
        var seen: [UInt64: UInt64] = [:]
        func write() throws {
            guard !rows.isEmpty else { return }
            let start = next - UInt64(rows.count)
            try db.write { db in
                let insert = try db.cachedStatement(sql: "INSERT INTO tasks (id, job, path, root, part, etag) VALUES (?, ?, ?, ?, ?, ?)")
                for (k, input) in rows.enumerated() {
                    try insert.execute(arguments: [Int64(start) + Int64(k), id, input.path, input.root, input.part?.description ?? "",
                                                         input.etag ?? ""])
                }
            }
            rows.removeAll(keepingCapacity: true)
        }
        /// The input of task `task`, from this batch or the journal.
        func input(of task: UInt64) throws -> InputFile? {
            let start = next - UInt64(rows.count)
            if task >= start { return task < next ? rows[Int(task - start)] : nil }
            return try db.read { db in
                try Row.fetchOne(db, sql: "SELECT path, root, part, etag FROM tasks WHERE id = ?", arguments: [Int64(task)]).map { r in
                    let etag: String = r["etag"]
                    return InputFile(path: r["path"], root: r["root"], part: Journal.part(r["part"]), etag: etag.isEmpty ? nil : etag)
                }
            }
        }
        func key(of task: UInt64) throws -> String { try input(of: task)?.key ?? "" }
        var outputClaims = claims ? OutputClaims(job: spec.executable) { try? input(of: $0) } : nil
        var collisions: [UInt64: [UInt64]] = [:]  // the rare other tasks sharing a hash
        do {
            try plan { input in
                let k = input.key
                var utf8Key = k
                let h = utf8Key.withUTF8 { XXH64.hash(UnsafeRawBufferPointer($0)) }
                if let earlier = seen[h] {
                    for t in [earlier] + (collisions[h] ?? []) where try key(of: t) == k { return }
                    collisions[h, default: []].append(next)
                } else {
                    seen[h] = next
                }
                rows.append(input)
                next += 1
                try outputClaims?.add(input, task: next - 1)
                if rows.count >= batch { try write() }
            }
            try write()
            // An input under the output root came after tasks it was not compared with.
            if var claims = outputClaims, claims.needsRecheck {
                try db.read { db in
                    let cursor = try Row.fetchCursor(db, sql: "SELECT id, path, root, part, etag FROM tasks WHERE id >= ? AND id < ? ORDER BY id",
                                                     arguments: [Int64(first), Int64(next)])
                    while let r = try cursor.next() {
                        let etag: String = r[4]
                        try claims.recheck(InputFile(path: r[1], root: r[2], part: Journal.part(r[3]), etag: etag.isEmpty ? nil : etag),
                                           task: UInt64(r[0] as Int64))
                    }
                }
            }
            // Colliding tasks fail now, each naming the other; the rest of the job runs.
            let failed = (outputClaims?.collisions ?? [:]).sorted { $0.key < $1.key }.map { task, error in
                let record = TaskRecord(failing: (try? input(of: task)) ?? InputFile(path: "", root: ""), with: error)
                return (task: task, record: Array((try? JSONEncoder().encode(record)) ?? Data()))
            }
            try db.write { db in
                let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO results (task, job, status, record) VALUES (?, ?, ?, ?)")
                for f in failed { try insert.execute(arguments: [Int64(f.task), id, Outcome.failed.rawValue, Data(f.record)]) }
                try db.execute(sql: "UPDATE jobs SET state = 'queued', total = ? WHERE id = ?",
                               arguments: [Int64(next - first), id])
            }
            return (seq, first, Int(next - first), failed)
        } catch {
            try? forget(job: id, first: first)
            throw error
        }
    }

    /// Removes a job that never finished planning, and its tasks.
    package func forget(job: String, first: UInt64) throws {
        try db.write { db in
            try db.execute(sql: "DELETE FROM tasks WHERE id >= ? AND job = ?", arguments: [Int64(first), job])
            try db.execute(sql: "DELETE FROM jobs WHERE id = ?", arguments: [job])
        }
    }

    /// Jobs a killed coordinator was still planning: forgotten (their clients got no answer).
    package func forgetUnplannedJobs() throws -> [String] {
        let rows = try db.read { db in
            try Row.fetchAll(db, sql: "SELECT id, first_task FROM jobs WHERE state = 'planning'")
        }
        for r in rows { try forget(job: r["id"], first: UInt64(r["first_task"] as Int64)) }
        return rows.map { $0["id"] }
    }

    /// Takes back the failed results of a finished job (not its cancelled ones): those
    /// tasks are unfinished again, their attempts reset, the job running. Returns how many.
    package func reopenFailed(job: String) throws -> Int {
        try flush()
        return try db.write { db in
            try db.execute(sql: """
                UPDATE tasks SET attempts = 0, crashes = 0, not_before = 0, last_error = NULL
                WHERE id IN (SELECT task FROM results WHERE job = ? AND status = ?)
                """, arguments: [job, Outcome.failed.rawValue])
            try db.execute(sql: "DELETE FROM results WHERE job = ? AND status = ?", arguments: [job, Outcome.failed.rawValue])
            let n = db.changesCount
            if n > 0 { try db.execute(sql: "UPDATE jobs SET state = 'running', finished = NULL WHERE id = ?", arguments: [job]) }
            return n
        }
    }

    package func unfinishedJobs() throws -> [JobRow] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM jobs WHERE state IN ('queued', 'running') ORDER BY seq").map(jobRow)
        }
    }

    package func job(_ id: String) throws -> JobRow? {
        try db.read { db in try Row.fetchOne(db, sql: "SELECT * FROM jobs WHERE id = ?", arguments: [id]).map(jobRow) }
    }

    /// A page of jobs, the most recent first: only `owner`'s and in one of `states` when given
    /// (the journal says `queued` of a job until it ends; the scheduler knows it runs).
    package func jobs(owner: String?, states: [String]?, limit: Int, offset: Int) throws -> [JobRow] {
        var clauses: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let owner {
            clauses.append("owner = ?")
            arguments.append(owner)
        }
        if let states, !states.isEmpty {
            clauses.append("state IN (" + states.map { _ in "?" }.joined(separator: ", ") + ")")
            arguments += states.map { $0 }
        }
        let filter = clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
        arguments += [limit, offset]
        return try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM jobs\(filter) ORDER BY seq DESC LIMIT ? OFFSET ?",
                             arguments: StatementArguments(arguments)).map(jobRow)
        }
    }

    package func recentJobs(limit: Int) throws -> [JobRow] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM jobs ORDER BY seq DESC LIMIT ?", arguments: [limit]).map(jobRow)
        }
    }

    private func jobRow(_ r: Row) throws -> JobRow {
        let specData: Data = r["spec"]
        return JobRow(id: r["id"], seq: r["seq"], spec: try JSONDecoder().decode(JobSpec.self, from: specData),
                      state: JobStatus.State(rawValue: r["state"]) ?? .queued, total: r["total"],
                      firstTask: UInt64(r["first_task"] as Int64), submitted: r["submitted"], finished: r["finished"],
                      counts: OutcomeCounts(succeeded: r["succeeded"], failed: r["failed"], skipped: r["skipped"], cancelled: r["cancelled"]),
                      owner: r["owner"], access: Self.access(r["access"]))
    }

    private static func access(_ text: String) -> JobAccess? {
        text.isEmpty ? nil : try? JSONDecoder().decode(JobAccess.self, from: Data(text.utf8))
    }

    /// Every task of a job with its result status (nil: unfinished): for the pyramid
    /// rule of tiles jobs (a few parts per image), never for a whole large job.
    package func tasks(first: UInt64, total: Int) throws -> [TaskRow] {
        try db.read { db in
            var rows: [TaskRow] = []
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT t.id, t.path, t.root, t.attempts, t.crashes, t.not_before, r.status, t.part, t.etag
                FROM tasks t LEFT JOIN results r ON r.task = t.id WHERE t.id >= ? AND t.id < ? ORDER BY t.id
                """, arguments: [Int64(first), Int64(first) + Int64(total)])
            while let r = try cursor.next() {
                let status: Int? = r[6]
                rows.append(TaskRow(id: UInt64(r[0] as Int64), path: r[1], root: r[2], part: r[7], etag: r[8], attempts: r[3], crashes: r[4],
                                    notBefore: r[5], result: status.flatMap(Outcome.init(rawValue:))))
            }
            return rows
        }
    }

    /// A page of a job's unfinished tasks: ids in `from..<end`, in order, at most `limit`,
    /// with the rendition an incremental job may skip them by (`recipe`).
    package func unfinishedTasks(from: UInt64, end: UInt64, limit: Int, recipe: UInt64?) throws -> [PageRow] {
        try db.read { db in
            var rows: [PageRow] = []
            rows.reserveCapacity(limit)
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT t.id, t.path, t.root, t.part, t.attempts, t.crashes, d.input_hash, d.outputs, t.etag
                FROM tasks t LEFT JOIN renditions d
                  ON ? AND d.recipe = ? AND d.path = (CASE WHEN t.part = '' THEN t.path ELSE t.path || '#' || t.part END)
                WHERE t.id >= ? AND t.id < ? AND NOT EXISTS (SELECT 1 FROM results r WHERE r.task = t.id)
                ORDER BY t.id LIMIT ?
                """, arguments: [recipe != nil, Int64(bitPattern: recipe ?? 0), Int64(from), Int64(end), limit])
            while let r = try cursor.next() {
                let hash: Int64? = r[6]
                let outputs: String? = r[7]
                let etag: String = r[8]
                rows.append(PageRow(id: UInt64(r[0] as Int64),
                                    input: InputFile(path: r[1], root: r[2], part: Journal.part(r[3]), etag: etag.isEmpty ? nil : etag),
                                    attempts: r[4], crashes: r[5],
                                    rendition: hash.map { Rendition(inputHash: UInt64(bitPattern: $0),
                                                                    outputs: outputs?.split(separator: "\n").map(String.init) ?? []) }))
            }
            return rows
        }
    }

    package struct PageRow {
        package var id: UInt64
        package var input: InputFile
        package var attempts: Int
        package var crashes: Int
        package var rendition: Rendition?
    }

    /// What an incremental job may skip an input by: the input's hash when its outputs
    /// were last made with this recipe, and those outputs (which must still exist).
    package struct Rendition: Equatable {
        package var inputHash: UInt64
        package var outputs: [String]
    }

    /// Results of a job so far, by outcome.
    package func resultCounts(job: String) throws -> OutcomeCounts {
        try db.read { db in
            var counts = OutcomeCounts()
            for r in try Row.fetchAll(db, sql: "SELECT status, COUNT(*) FROM results WHERE job = ? GROUP BY status",
                                      arguments: [job]) {
                let s: Int = r[0], n: Int = r[1]
                if let outcome = Outcome(rawValue: s) { counts[outcome] = n }
            }
            return counts
        }
    }

    /// Gives every unfinished task of a job in `from..<end` the result `record(input)`,
    /// status cancelled, in one transaction (queued writes are committed first). Returns how many.
    package func cancelUnfinished(job: String, from: UInt64, end: UInt64, record: (InputFile) -> [UInt8]) throws -> Int {
        try flush()
        return try db.write { db in
            let insert = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO results (task, job, status, record) VALUES (?, ?, ?, ?)")
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT t.id, t.path, t.root, t.part FROM tasks t
                WHERE t.id >= ? AND t.id < ? AND NOT EXISTS (SELECT 1 FROM results r WHERE r.task = t.id) ORDER BY t.id
                """, arguments: [Int64(from), Int64(end)])
            var ids: [(Int64, [UInt8])] = []
            var n = 0
            while let r = try cursor.next() {
                ids.append((r[0], record(InputFile(path: r[1], root: r[2], part: Journal.part(r[3])))))
                if ids.count >= 10_000 {
                    for (t, rec) in ids { try insert.execute(arguments: [t, job, Outcome.cancelled.rawValue, Data(rec)]) }
                    n += ids.count
                    ids.removeAll(keepingCapacity: true)
                }
            }
            for (t, rec) in ids { try insert.execute(arguments: [t, job, Outcome.cancelled.rawValue, Data(rec)]) }
            return n + ids.count
        }
    }

    // MARK: Results

    /// Result records of a job in task order, after `after`, at most `limit` (only those
    /// with `status`, when given).
    package func results(job: String, after: UInt64, limit: Int, status: Outcome? = nil) throws -> [(task: UInt64, record: [UInt8])] {
        try db.read { db in
            let filter = status == nil ? "" : " AND status = \(status!.rawValue)"
            return try Row.fetchAll(db, sql: "SELECT task, record FROM results WHERE job = ? AND task > ?\(filter) ORDER BY task LIMIT ?",
                                    arguments: [job, Int64(after), limit]).map { r in
                let d: Data = r["record"]
                return (UInt64(r["task"] as Int64), [UInt8](d))
            }
        }
    }

    // MARK: Batched writes

    package func append(_ op: Op) { pending.append(op) }

    package var hasPending: Bool { !pending.isEmpty }

    /// Commits every queued operation in one transaction.
    package func flush() throws {
        guard !pending.isEmpty else { return }
        let ops = pending
        try db.write { db in
            let insertResult = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO results (task, job, status, record) VALUES (?, ?, ?, ?)")
            let retry = try db.cachedStatement(
                sql: "UPDATE tasks SET attempts = ?, crashes = ?, not_before = ?, last_error = ? WHERE id = ?")
            let rendition = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO renditions (path, recipe, input_hash, outputs) VALUES (?, ?, ?, ?)")
            let output = try db.cachedStatement(sql: "INSERT OR REPLACE INTO outputs (path, task, size, mtime, hash) VALUES (?, ?, ?, ?, ?)")
            let jobState = try db.cachedStatement(sql: """
                UPDATE jobs SET state = ?, finished = ?, succeeded = ?, failed = ?, skipped = ?, cancelled = ? WHERE id = ?
                """)
            for op in ops {
                switch op {
                case .result(let task, let job, let status, let record):
                    try insertResult.execute(arguments: [Int64(task), job, status.rawValue, Data(record)])
                case .retry(let task, let attempts, let crashes, let notBefore, let error):
                    try retry.execute(arguments: [attempts, crashes, notBefore, error, Int64(task)])
                case .rendition(let path, let recipe, let hash, let outputs):
                    try rendition.execute(arguments: [path, Int64(bitPattern: recipe), Int64(bitPattern: hash),
                                                      outputs.joined(separator: "\n")])
                case .jobState(let job, let state, let finished, let c):
                    try jobState.execute(arguments: [state.rawValue, finished, c[.succeeded], c[.failed], c[.skipped], c[.cancelled], job])
                case .outputs(let task, let files):
                    for f in files {
                        try output.execute(arguments: [f.path, Int64(task), f.size, f.mtime, Int64(bitPattern: f.hash)])
                    }
                }
            }
        }
        pending.removeFirst(ops.count)
    }
}
