import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import XCTest

/// `tessera run` stopped by SIGINT/SIGTERM, killed, or left without its coordinator:
/// real processes, real signals.
final class StopTests: XCTestCase {
    /// Starts `tessera run` with its output captured.
    func startRun(_ args: [String], in c: Cluster) throws -> (Process, out: String, err: String) {
        let p = Process()
        p.executableURL = Cluster.binary
        p.arguments = ["run"] + args
        let out = c.dir + "/run-\(UUID().uuidString.prefix(6)).out", err = out + ".err"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return (p, out, err)
    }

    /// Worker processes started by `tessera run` with pid `parent` (found by their command line).
    static func workers(of parent: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard let i = args.firstIndex(of: "--parent-pid"), i + 1 < args.count else { return false }
            return args[i + 1] == String(parent) && args.contains("worker")
        }
    }

    /// `count` inputs: a few distinct photos-sized JPEGs, copied (tasks of tens of milliseconds).
    static func makeInputs(_ c: Cluster, count: Int) throws -> [String] {
        var sources: [[UInt8]] = []
        for seed in UInt64(0)..<4 {
            sources.append(try Codec.encodeJPEG(TilePoolTests.scene(1800, 1200, seed: seed), quality: 85))
        }
        return try (0..<count).map { i in
            let path = c.dir + "/in/photo\(String(format: "%03d", i)).jpg"
            try Data(sources[i % sources.count]).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    func outputCount(_ dir: String) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".jpg") }.count
    }

    /// SIGINT, then SIGTERM, mid-job: each run is gone within 5 s with 130/143 and one line
    /// saying what is done and left, no worker survives, and a third run does only the rest.
    func testSignalsStopARunAndTheRerunFinishesOnlyTheRest() throws {
        let c = try Cluster()
        let inputs = try Self.makeInputs(c, count: 150)
        let job = c.dir + "/job.yaml"
        try "name: stop\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}, {preset: favicon}]\n"
            .write(toFile: job, atomically: true, encoding: .utf8)
        var doneBefore = 0
        for sig in [SIGINT, SIGTERM] {
            let (p, out, err) = try startRun([job, "--workers", "2", "--json"], in: c)
            let deadline = Date().addingTimeInterval(60)
            while outputCount(c.dir + "/out") < 2 * (doneBefore + 3) && Date() < deadline && p.isRunning { usleep(20_000) }
            XCTAssertTrue(p.isRunning, "the job ended before the signal: make the inputs slower")
            let workers = Self.workers(of: p.processIdentifier)
            XCTAssertEqual(workers.count, 2, "the run's two workers")
            let sent = Date()
            let outputsAtSignal = outputCount(c.dir + "/out")
            kill(p.processIdentifier, sig)
            p.waitUntilExit()
            let took = Date().timeIntervalSince(sent)
            XCTAssertLessThan(took, 5, "exit within 5 s of the signal")
            XCTAssertEqual(p.terminationReason, .exit)
            XCTAssertEqual(p.terminationStatus, 128 + sig)
            let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
            let stderr = try String(contentsOfFile: err, encoding: .utf8)
            let lastLine = try XCTUnwrap(lines.last, stderr)
            let last = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(lastLine.utf8)) as? [String: Any], stderr)
            XCTAssertEqual(last["type"] as? String, "interrupted")
            XCTAssertEqual(last["signal"] as? String, sig == SIGINT ? "SIGINT" : "SIGTERM")
            let done = try XCTUnwrap(last["done"] as? Int), left = try XCTUnwrap(last["left"] as? Int)
            XCTAssertEqual(done + left, inputs.count)
            XCTAssertGreaterThan(done, doneBefore, "work was done before the signal")
            XCTAssertGreaterThan(left, 0)
            // No task starts after the signal: what finishes is what the two workers held
            // (one running and one queued each) and reports in flight. (The dispatch used to
            // stop only when the progress loop next looked, up to a second later: 30-40 more.)
            XCTAssertLessThanOrEqual(done, outputsAtSignal / 2 + 8, "tasks done after the signal")
            XCTAssertTrue(stderr.contains("stopping: no new tasks"), stderr)
            usleep(200_000)
            XCTAssertEqual(Self.workers(of: p.processIdentifier), [], "no worker outlives the run")
            for w in workers { XCTAssertNotEqual(kill(w, 0), 0, "worker \(w) is gone") }
            doneBefore = done
        }
        // The rerun resumes the same job: the earlier runs' tasks are not done again.
        let (p, out, err) = try startRun([job, "--workers", "2", "--json", "--report", c.dir + "/report"], in: c)
        p.waitUntilExit()
        let stderr = try String(contentsOfFile: err, encoding: .utf8)
        XCTAssertEqual(p.terminationStatus, 0, stderr)
        XCTAssertTrue(stderr.contains("resuming"), stderr)
        let summaryLine = try XCTUnwrap(try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").last)
        let summary = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(summaryLine.utf8)) as? [String: Any])
        XCTAssertEqual(summary["type"] as? String, "summary")
        XCTAssertEqual(summary["tasks"] as? Int, inputs.count)
        XCTAssertEqual(summary["succeeded"] as? Int, inputs.count)
        XCTAssertEqual(summary["skipped"] as? Int, 0, "resumed, not resubmitted and skipped")
        XCTAssertEqual(summary["resumedTasks"] as? Int, doneBefore, "only the rest was done")
        let records = try String(contentsOfFile: c.dir + "/report.jsonl", encoding: .utf8).split(separator: "\n")
            .filter { !$0.contains("\"type\":\"summary\"") }.map { try JSONDecoder().decode(TaskRecord.self, from: Data($0.utf8)) }
        try c.assertExactlyOnce(records, inputs: inputs)
        XCTAssertEqual(outputCount(c.dir + "/out"), 2 * inputs.count)
    }

    /// SIGKILL of `tessera run` takes its workers with it (parent-death signal).
    func testKilledRunLeavesNoOrphans() throws {
        let c = try Cluster()
        _ = try Self.makeInputs(c, count: 60)
        let job = c.dir + "/job.yaml"
        try "name: kill\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}]\n".write(toFile: job, atomically: true, encoding: .utf8)
        let (p, _, _) = try startRun([job, "--workers", "2"], in: c)
        let deadline = Date().addingTimeInterval(30)
        while Self.workers(of: p.processIdentifier).count < 2 && Date() < deadline { usleep(20_000) }
        let workers = Self.workers(of: p.processIdentifier)
        XCTAssertEqual(workers.count, 2)
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        // A dead worker stays a zombie until whoever adopted it reaps it: that counts as gone.
        func alive(_ pid: pid_t) -> Bool {
            guard kill(pid, 0) == 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            return !stat[close...].hasPrefix(") Z") && !stat[close...].hasPrefix(") X")
        }
        let gone = Date().addingTimeInterval(5)
        while workers.contains(where: alive) && Date() < gone { usleep(10_000) }
        for w in workers { XCTAssertFalse(alive(w), "worker \(w) outlived its killed parent") }
    }

    /// The workers start before the coordinator (their start-up overlaps its own): when the
    /// coordinator then cannot start (a journal that is not a database), the run says why,
    /// exits 3 at once, and leaves no worker behind.
    func testACoordinatorThatCannotStartLeavesNoWorkers() throws {
        let c = try Cluster()
        _ = try Self.makeInputs(c, count: 4)
        let journal = c.dir + "/garbage.journal"
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }).write(to: URL(fileURLWithPath: journal))
        let job = c.dir + "/job.yaml"
        try "name: nojournal\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}]\n"
            .write(toFile: job, atomically: true, encoding: .utf8)
        let started = Date()
        let (p, _, err) = try startRun([job, "--workers", "2", "--journal", journal], in: c)
        let deadline = Date().addingTimeInterval(30)
        while p.isRunning && Date() < deadline { usleep(20_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        let stderr = try String(contentsOfFile: err, encoding: .utf8)
        XCTAssertEqual(p.terminationStatus, 3, stderr)
        XCTAssertTrue(stderr.contains("cannot start the coordinator") && stderr.contains("not a database"), stderr)
        XCTAssertEqual(Self.workers(of: p.processIdentifier), [])
        let made = (FileManager.default.enumerator(atPath: c.dir + "/out")?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".jpg") }
        XCTAssertEqual(made, [], "no task ran")
    }

    /// The journal's filesystem fills: the coordinator dies, and the run says so and exits 3
    /// within seconds instead of waiting forever. Needs root (a 1 MB tmpfs).
    func testFullJournalFilesystemEndsTheRun() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a 1 MB tmpfs") }
        let c = try Cluster()
        _ = try Self.makeInputs(c, count: 40)
        let mount = c.dir + "/full"
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        let m = Process()
        m.executableURL = URL(fileURLWithPath: "/bin/mount")
        m.arguments = ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mount]
        try m.run()
        m.waitUntilExit()
        guard m.terminationStatus == 0 else { throw XCTSkip("cannot mount tmpfs here") }
        defer {
            let u = Process()
            u.executableURL = URL(fileURLWithPath: "/bin/umount")
            u.arguments = ["-l", mount]
            try? u.run()
            u.waitUntilExit()
        }
        let job = c.dir + "/job.yaml"
        try "name: full\ninputs: [in]\noutput: full/out\noutputs: [{preset: thumbnail}, {preset: favicon}]\n"
            .write(toFile: job, atomically: true, encoding: .utf8)
        let started = Date()
        let (p, _, err) = try startRun([job, "--workers", "2"], in: c)
        let deadline = Date().addingTimeInterval(30)
        while p.isRunning && Date() < deadline { usleep(20_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        let stderr = try String(contentsOfFile: err, encoding: .utf8)
        XCTAssertEqual(p.terminationStatus, 3, stderr)
        XCTAssertTrue(stderr.contains("the coordinator stopped"), stderr)
        XCTAssertTrue(stderr.contains("disk is full") || stderr.contains("No space left"), stderr)
        XCTAssertTrue(stderr.contains("[coordinator-failed]"), stderr)
        XCTAssertEqual(Self.workers(of: p.processIdentifier), [])
    }
}
