import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraTestSupport
import XCTest

/// The worker pool with real processes, real ZeroMQ sockets and a real SQLite journal.
final class PoolTests: XCTestCase {
    /// 201 inputs (one corrupt) over 3 workers: every task exactly once, the corrupt
    /// one fails alone with its reason, timings and peak memory reported per task.
    func testJobOverTwoHundredImagesWithThreeWorkers() throws {
        let c = try Cluster()
        var inputs = try c.makeImages(200, width: 320, height: 240)
        let corrupt = c.dir + "/in/corrupt.jpg"
        let good = try Data(contentsOf: URL(fileURLWithPath: inputs[0]))
        try good.prefix(good.count / 2).write(to: URL(fileURLWithPath: corrupt))
        inputs.append(corrupt)
        try c.startCoordinator()
        for _ in 0..<3 { try c.startWorker() }
        let submitted = try c.client.submit(try c.job())
        XCTAssertEqual(submitted.tasks, 201)
        let end = try c.client.wait(job: submitted.job, within: 300)
        XCTAssertEqual(end.state, .failed, "one task failed")
        XCTAssertEqual(end.succeeded, 200)
        XCTAssertEqual(end.failed, 1)
        let records = try c.records(submitted.job)
        try c.assertExactlyOnce(records, inputs: inputs)
        let failed = try XCTUnwrap(records.first { $0.status == .failed })
        XCTAssertEqual(failed.input, corrupt)
        XCTAssertEqual(failed.error?.code, "truncated")
        XCTAssertTrue(failed.error!.message.contains("corrupt.jpg"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + "/out/corrupt-favicon.jpg"))
        let ok = records.filter { $0.status == .succeeded }
        XCTAssertEqual(Set(ok.compactMap(\.worker)).count, 3, "all three workers took tasks")
        for r in ok {
            XCTAssertGreaterThan(r.timings.decode, 0)
            XCTAssertGreaterThan(r.timings.total, 0)
            XCTAssertGreaterThan(r.peakMemory?.bytes ?? 0, 1 << 20)
            XCTAssertEqual(r.outputs.map(\.name), ["favicon", "compressedThumbnail"])
            XCTAssertEqual(r.outputs[0].width, 64)
        }
        // A job's {dir} keeps the input's subdirectory.
        XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/sub/img0000-favicon.jpg"))
    }

    /// SIGKILL a worker mid-job: its tasks are requeued; every task exactly once.
    func testWorkerKilledMidJobLosesNothing() throws {
        let c = try Cluster(coordinatorArguments: ["--worker-timeout", "2"])
        let inputs = try c.makeImages(150, width: 1200, height: 900)
        try c.startCoordinator()
        let victim = try c.startWorker()
        try c.startWorker()
        try c.startWorker()
        let job = try c.client.submit(try c.job(presets: ["thumbnail", "favicon"])).job
        _ = try c.waitFor(job) { $0.done >= 30 }
        kill(victim.processIdentifier, SIGKILL)
        let end = try c.client.wait(job: job, within: 300)
        XCTAssertEqual(end.state, .succeeded, c.logs().suffix(3000).description)
        XCTAssertEqual(end.succeeded, 150)
        try c.assertExactlyOnce(try c.records(job), inputs: inputs)
        let logs = c.logs()
        XCTAssertTrue(logs.contains("lost") || logs.contains("unreachable"), "the coordinator noticed the dead worker")
    }

    /// SIGKILL the coordinator mid-job and start it again on the same journal: the job
    /// completes, nothing is lost, and no task whose success was journaled is redone.
    func testCoordinatorKilledAndRestartedResumesTheJob() throws {
        let c = try Cluster()
        let inputs = try c.makeImages(150, width: 1200, height: 900)
        try c.startCoordinator()
        try c.startWorker()
        try c.startWorker()
        let job = try c.client.submit(try c.job(presets: ["thumbnail"])).job
        _ = try c.waitFor(job) { $0.done >= 40 }
        kill(c.coordinator!.processIdentifier, SIGKILL)
        c.coordinator!.waitUntilExit()
        // What the journal says was finished at the kill, and the inode of each of its outputs.
        let done = try journaledOutputs(c.journal)
        XCTAssertGreaterThanOrEqual(done.count, 40)
        var inodes: [String: UInt64] = [:]
        for path in done {
            var st = stat()
            XCTAssertEqual(stat(path, &st), 0, path)
            inodes[path] = UInt64(st.st_ino)
        }
        usleep(500_000)
        try c.startCoordinator()
        let end = try c.client.wait(job: job, within: 300)
        XCTAssertEqual(end.state, .succeeded, c.logs().suffix(3000).description)
        try c.assertExactlyOnce(try c.records(job), inputs: inputs)
        for (path, inode) in inodes {
            var st = stat()
            XCTAssertEqual(stat(path, &st), 0)
            XCTAssertEqual(UInt64(st.st_ino), inode, "\(path) was rewritten after its success was journaled")
        }
    }

    /// A worker that stops answering mid-task (SIGSTOP) is caught by its lease, not only
    /// by its heartbeat: its tasks are re-dispatched and the job completes.
    func testHungWorkerIsDetectedByItsLease() throws {
        let c = try Cluster(coordinatorArguments: ["--worker-timeout", "600"])
        let inputs = try c.makeImages(60, width: 800, height: 600)
        try c.startCoordinator()
        let hung = try c.startWorker()
        let job = try c.client.submit(try c.job(presets: ["thumbnail"]) { $0.options.timeout = 2 }).job
        _ = try c.waitFor(job) { $0.done >= 3 }
        kill(hung.processIdentifier, SIGSTOP)
        try c.startWorker()
        let end = try c.client.wait(job: job, within: 300)
        kill(hung.processIdentifier, SIGCONT)
        XCTAssertEqual(end.state, .succeeded)
        try c.assertExactlyOnce(try c.records(job), inputs: inputs)
        XCTAssertTrue(c.logs().contains("lease expired"), "detected by the lease")
    }

    /// An input that kills every worker that runs it fails as poison after 3 crashes,
    /// instead of circulating forever; the others succeed. Dead workers are replaced
    /// (as systemd or Kubernetes would).
    func testPoisonTaskFailsAfterKillingThreeWorkers() throws {
        let c = try Cluster(coordinatorArguments: ["--worker-timeout", "2"])
        var inputs = try c.makeImages(20, width: 320, height: 240)
        let poison = c.dir + "/in/poison.jpg"
        try FileManager.default.copyItem(atPath: inputs[1], toPath: poison)
        inputs.append(poison)
        try c.startCoordinator()
        for _ in 0..<2 { try c.startWorker(["--crash-on", "poison"]) }
        let job = try c.client.submit(try c.job(presets: ["favicon"])).job
        let deadline = Date().addingTimeInterval(90)
        var end: JobStatus?
        while Date() < deadline {
            if let s = try? c.client.status(job: job).jobs.first, s.isTerminal {
                end = s
                break
            }
            // Supervisor: keep two workers alive.
            let alive = c.workers.filter(\.isRunning).count
            for _ in alive..<2 { try c.startWorker(["--crash-on", "poison"]) }
            usleep(100_000)
        }
        let s = try XCTUnwrap(end, "job did not finish\n\(c.logs().suffix(3000))")
        XCTAssertEqual(s.succeeded, 20)
        XCTAssertEqual(s.failed, 1)
        let records = try c.records(job)
        try c.assertExactlyOnce(records, inputs: inputs)
        let failed = try XCTUnwrap(records.first { $0.status == .failed })
        XCTAssertEqual(failed.error?.code, "poison")
        XCTAssertTrue(failed.error!.message.contains("3 times"), failed.error!.message)
        // Count the dead, not the started: the third death can end the job before the
        // supervisor loop above sees it and starts a replacement.
        for _ in 0..<40 where c.workers.filter({ !$0.isRunning }).count < 3 { usleep(50_000) }  // the last one reaped
        // Three charged deaths; a heartbeat in flight can leave one uncharged (Scheduler.lose).
        let dead = c.workers.filter { !$0.isRunning }.count
        XCTAssertTrue((3...4).contains(dead), "three workers died on it (and at most one uncharged): \(dead)")
    }

    /// SIGTERM: the worker hands back what it has queued, finishes what it runs, exits 0.
    func testSigtermDrainsAWorker() throws {
        let c = try Cluster()
        let inputs = try c.makeImages(60, width: 1000, height: 750)
        try c.startCoordinator()
        let draining = try c.startWorker(["--prefetch", "8"])
        let job = try c.client.submit(try c.job(presets: ["thumbnail"])).job
        _ = try c.waitFor(job) { $0.done >= 2 }
        kill(draining.processIdentifier, SIGTERM)
        draining.waitUntilExit()
        XCTAssertEqual(draining.terminationStatus, 0)
        XCTAssertTrue(c.logs().contains("handing back"))
        try c.startWorker()
        let end = try c.client.wait(job: job, within: 300)
        XCTAssertEqual(end.state, .succeeded)
        try c.assertExactlyOnce(try c.records(job), inputs: inputs)
    }

    /// Workers without shared storage: bytes go inside the messages both ways.
    func testInlineDataPath() throws {
        let c = try Cluster()
        let inputs = try c.makeImages(12, width: 640, height: 480)
        try c.startCoordinator()
        try c.startWorker(["--inline"])
        let job = try c.client.submit(try c.job(presets: ["favicon"])).job
        let end = try c.client.wait(job: job, within: 300)
        XCTAssertEqual(end.state, .succeeded, c.logs())
        let records = try c.records(job)
        try c.assertExactlyOnce(records, inputs: inputs)
        XCTAssertTrue(records.allSatisfy { $0.outputs.allSatisfy { $0.path.hasPrefix(c.dir + "/out/") } })
    }

    /// Higher priority jobs go first; a cancelled job stops.
    func testPriorityAndCancel() throws {
        let c = try Cluster()
        _ = try c.makeImages(80, width: 1000, height: 750)
        try c.startCoordinator()
        let low = try c.client.submit(try c.job(name: "low", presets: ["thumbnail"])).job
        let high = try c.client.submit(try c.job(name: "high", presets: ["favicon"]) { $0.priority = 10; $0.inputs = [
            .path(c.dir + "/in/sub", patterns: ["img000*.jpg"], recursive: false)] }).job
        try c.startWorker(["--prefetch", "0"])
        let highEnd = try c.client.wait(job: high, within: 300)
        XCTAssertEqual(highEnd.state, .succeeded)
        let lowNow = try XCTUnwrap(c.client.status(job: low).jobs.first)
        XCTAssertLessThan(lowNow.done, 20, "the low-priority job waited")
        let cancelled = try c.client.cancel(job: low)
        XCTAssertEqual(cancelled.state, .cancelled)
        XCTAssertGreaterThan(cancelled.cancelled, 50)
        let records = try c.records(low)
        XCTAssertEqual(records.count, 80)
        XCTAssertEqual(records.filter { $0.error?.code == "cancelled" }.count, cancelled.cancelled)
    }

    /// Paths of outputs whose success is in the journal (read straight from SQLite).
    func journaledOutputs(_ journal: String) throws -> [String] {
        try runProcess("python3", ["-c", """
            import json, sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            for (rec,) in db.execute("SELECT record FROM results WHERE status = 0"):
                for o in json.loads(rec)["outputs"]: print(o["path"])
            """, journal]).stdout.split(separator: "\n").map(String.init)
    }
}
