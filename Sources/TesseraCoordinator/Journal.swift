import Foundation
import GRDB
import TesseraJobs
import TesseraWire

/// The coordinator's durable state: jobs, tasks and results in one SQLite file
/// (GRDB, WAL). A task is finished exactly when it has a row in `results` (primary
/// key: one result per task, ever), so a coordinator killed at any instant and
/// restarted knows every finished task and redoes none of them.
///
/// Writes are batched: the event loop queues operations and commits them in one
/// transaction every few milliseconds, acknowledging reports only after commit.
final class Journal {
    private let db: DatabaseQueue
    private(set) var pending: [Op] = []

    enum ResultStatus: Int {
        case succeeded = 0, failed = 1, skipped = 2, cancelled = 3
    }

    enum Op {
        case result(task: UInt64, job: String, status: ResultStatus, record: [UInt8])
        case retry(task: UInt64, attempts: Int, crashes: Int, notBefore: Double, error: String)
        case rendition(path: String, recipe: UInt64, inputHash: UInt64, outputs: [String])
        case jobState(job: String, state: JobStatus.State, finished: Double?, counts: [Int])
    }

    struct JobRow {
        var id: String
        var seq: Int
        var spec: JobSpec
        var state: JobStatus.State
        var total: Int
        var firstTask: UInt64
        var submitted: Double
        var finished: Double?
        var counts: [Int]  // succeeded, failed, skipped, cancelled
        var owner: String
    }

    struct TaskRow {
        var id: UInt64
        var path: String
        var root: String
        var part: String
        var attempts: Int
        var crashes: Int
        var notBefore: Double
        var result: ResultStatus?
    }

    init(path: String) throws {
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
        try migrator.migrate(db)
    }

    /// Increments and returns the coordinator epoch (one per start): attempt numbers
    /// carry it, so attempts made after a restart never collide with earlier ones.
    func nextEpoch() throws -> UInt32 {
        try db.write { db in
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'epoch'")
            return UInt32(truncatingIfNeeded: try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'epoch'") ?? 1)
        }
    }

    // MARK: Jobs

    /// Inserts a job and its tasks in one transaction; returns the first task id.
    func insertJob(id: String, spec: JobSpec, inputs: [InputFile], submitted: Double,
                   owner: String = "") throws -> (seq: Int, firstTask: UInt64) {
        let specJSON = try JSONEncoder().encode(spec)
        return try db.write { db in
            let seq = (try Int.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs")) ?? 1
            let first = UInt64((try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(id), 0) + 1 FROM tasks")) ?? 1)
            try db.execute(sql: """
                INSERT INTO jobs (id, seq, name, kind, priority, spec, state, total, first_task, submitted, owner)
                VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)
                """, arguments: [id, seq, spec.name, spec.kind.rawValue, spec.priority, specJSON, inputs.count,
                                 Int64(first), submitted, owner])
            let insert = try db.cachedStatement(sql: "INSERT INTO tasks (id, job, path, root, part) VALUES (?, ?, ?, ?, ?)")
            for (i, input) in inputs.enumerated() {
                try insert.execute(arguments: [Int64(first) + Int64(i), id, input.path, input.root, input.part])
            }
            return (seq, first)
        }
    }

    func unfinishedJobs() throws -> [JobRow] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM jobs WHERE state IN ('queued', 'running') ORDER BY seq").map(jobRow)
        }
    }

    func job(_ id: String) throws -> JobRow? {
        try db.read { db in try Row.fetchOne(db, sql: "SELECT * FROM jobs WHERE id = ?", arguments: [id]).map(jobRow) }
    }

    func recentJobs(limit: Int) throws -> [JobRow] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM jobs ORDER BY seq DESC LIMIT ?", arguments: [limit]).map(jobRow)
        }
    }

    private func jobRow(_ r: Row) throws -> JobRow {
        let specData: Data = r["spec"]
        return JobRow(id: r["id"], seq: r["seq"], spec: try JSONDecoder().decode(JobSpec.self, from: specData),
                      state: JobStatus.State(rawValue: r["state"]) ?? .queued, total: r["total"],
                      firstTask: UInt64(r["first_task"] as Int64), submitted: r["submitted"], finished: r["finished"],
                      counts: [r["succeeded"], r["failed"], r["skipped"], r["cancelled"]], owner: r["owner"])
    }

    /// Every task of a job with its result status (nil: unfinished).
    func tasks(ofJob job: String) throws -> [TaskRow] {
        try db.read { db in
            var rows: [TaskRow] = []
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT t.id, t.path, t.root, t.attempts, t.crashes, t.not_before, r.status, t.part
                FROM tasks t LEFT JOIN results r ON r.task = t.id WHERE t.job = ? ORDER BY t.id
                """, arguments: [job])
            while let r = try cursor.next() {
                let status: Int? = r[6]
                rows.append(TaskRow(id: UInt64(r[0] as Int64), path: r[1], root: r[2], part: r[7], attempts: r[3], crashes: r[4],
                                    notBefore: r[5], result: status.flatMap(ResultStatus.init(rawValue:))))
            }
            return rows
        }
    }

    // MARK: Results

    /// Result records of a job in task order, after `after`, at most `limit`.
    func results(job: String, after: UInt64, limit: Int) throws -> [(task: UInt64, record: [UInt8])] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT task, record FROM results WHERE job = ? AND task > ? ORDER BY task LIMIT ?",
                             arguments: [job, Int64(after), limit]).map { r in
                let d: Data = r["record"]
                return (UInt64(r["task"] as Int64), [UInt8](d))
            }
        }
    }

    /// Input hash and outputs of every rendition made with `recipe`.
    func renditions(recipe: UInt64) throws -> [String: (hash: UInt64, outputs: [String])] {
        try db.read { db in
            var out: [String: (UInt64, [String])] = [:]
            let cursor = try Row.fetchCursor(db, sql: "SELECT path, input_hash, outputs FROM renditions WHERE recipe = ?",
                                             arguments: [Int64(bitPattern: recipe)])
            while let r = try cursor.next() {
                let outputs: String = r[2]
                out[r[0]] = (UInt64(bitPattern: r[1] as Int64), outputs.split(separator: "\n").map(String.init))
            }
            return out
        }
    }

    // MARK: Batched writes

    func append(_ op: Op) { pending.append(op) }

    var hasPending: Bool { !pending.isEmpty }

    /// Commits every queued operation in one transaction.
    func flush() throws {
        guard !pending.isEmpty else { return }
        let ops = pending
        try db.write { db in
            let insertResult = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO results (task, job, status, record) VALUES (?, ?, ?, ?)")
            let retry = try db.cachedStatement(
                sql: "UPDATE tasks SET attempts = ?, crashes = ?, not_before = ?, last_error = ? WHERE id = ?")
            let rendition = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO renditions (path, recipe, input_hash, outputs) VALUES (?, ?, ?, ?)")
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
                    try jobState.execute(arguments: [state.rawValue, finished, c[0], c[1], c[2], c[3], job])
                }
            }
        }
        pending.removeFirst(ops.count)
    }
}
