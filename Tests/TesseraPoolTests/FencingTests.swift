import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import XCTest

/// Fenced attempts (issue 13, item 2): a worker frozen past its lease or its heartbeat
/// timeout, then thawed after the job ended, changes no file — neither for the task it
/// was running nor for the ones it had queued.
final class FencingTests: XCTestCase {
    /// Every file under `root` but the journal's directory: path -> (inode, mtime ns, size).
    static func snapshot(_ root: String) -> [String: [Int]] {
        var out: [String: [Int]] = [:]
        for path in (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [] where !path.hasPrefix(".tessera") {
            var st = stat()
            guard lstat(root + "/" + path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            out[path] = [Int(st.st_ino), st.st_mtim.tv_sec * 1_000_000_000 + st.st_mtim.tv_nsec, Int(st.st_size)]
        }
        return out
    }

    func frozenWorkerChangesNothing(workerTimeout: Double, lease: Double) throws {
        let c = try Cluster(coordinatorArguments: ["--worker-timeout", String(workerTimeout)])
        let inputs = try StopTests.makeInputs(c, count: 40)
        try c.startCoordinator()
        let frozen = try c.startWorker(["--concurrency", "1", "--prefetch", "3"])
        let job = try c.client.submit(try c.job(presets: ["thumbnail", "favicon"]) { $0.options.timeout = lease }).job
        _ = try c.waitFor(job) { $0.done >= 3 }
        kill(frozen.processIdentifier, SIGSTOP)
        try c.startWorker()
        let end = try c.client.wait(job: job, within: 300)
        XCTAssertEqual(end.succeeded, inputs.count, c.logs().suffix(3000).description)
        try c.assertExactlyOnce(try c.records(job), inputs: inputs)
        let finished = Self.snapshot(c.dir + "/out")
        XCTAssertEqual(finished.count, 2 * inputs.count)
        // Thaw it: it finishes what it was running and would start what it had queued.
        kill(frozen.processIdentifier, SIGCONT)
        sleep(6)
        XCTAssertEqual(Self.snapshot(c.dir + "/out"), finished, "no file written, replaced or added after the job ended")
        let staging = (try? FileManager.default.subpathsOfDirectory(atPath: c.dir + "/out/.tessera/staging")) ?? []
        XCTAssertEqual(staging.filter { !$0.isEmpty }, [], "nothing left staged")
        let log = try String(contentsOfFile: c.dir + "/worker-0.log", encoding: .utf8)
        XCTAssertTrue(log.contains("superseded") || log.contains("dropped"), log)
        XCTAssertEqual(try c.records(job).count, inputs.count, "its late results were not counted")
        // Only the task it was running is charged; the ones it had queued are innocent.
        let charged = Int(try sqliteValue(c.journal, "select count(*) from tasks where crashes > 0")) ?? -1
        XCTAssertTrue((0...1).contains(charged), "tasks charged a crash or hang: \(charged)")
    }

    /// Lease expiry: the coordinator still hears the frozen worker's connection (ZMTP
    /// heartbeats are the kernel's), but its task lease runs out.
    func testFrozenPastItsLeaseChangesNoFile() throws {
        try frozenWorkerChangesNothing(workerTimeout: 600, lease: 2)
    }

    /// Heartbeat loss: the worker is given up and its tasks requeued.
    func testFrozenPastItsHeartbeatChangesNoFile() throws {
        try frozenWorkerChangesNothing(workerTimeout: 2, lease: 120)
    }
}
