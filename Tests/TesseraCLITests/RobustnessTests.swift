import Foundation
import TesseraImaging
import TesseraModel
import TesseraTestSupport
import XCTest

/// Runs that never ended, lines cut or spliced, outputs wrong yet "unchanged", files made
/// before a job was valid, and messages that misled (issue 51): each as a user met it, against
/// the built binary. Every case failed on the main of that day.
final class RobustnessTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "tessera-robust-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/in", withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    /// `count` distinct JPEGs of `side`² in `in/`.
    @discardableResult
    func images(_ count: Int, side: Int = 160, folder: String = "in") throws -> [String] {
        try FileManager.default.createDirectory(atPath: dir + "/" + folder, withIntermediateDirectories: true)
        return try (0..<count).map { i in
            let image = PixelBuffer(width: side, height: side * 3 / 4, layout: .rgb)
            image.fill([UInt8(i * 37 & 255), UInt8(i * 11 & 255), 90])
            let path = dir + "/\(folder)/img\(String(format: "%04d", i)).jpg"
            try Data(try Codec.encodeJPEG(image, quality: 85)).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    func job(_ name: String = "j", input: String = "in", output: String = "out", extra: String = "") throws -> String {
        let path = dir + "/\(name).yaml"
        try "name: \(name)\ninputs: [\(dir)/\(input)]\noutput: \(dir)/\(output)\noutputs: [{preset: favicon}, {preset: compressedFavicon}]\n\(extra)"
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A `tessera` process whose stdout and stderr go to `log` (one file, or two).
    func spawn(_ args: [String], stdout: String, stderr: String? = nil, environment: [String: String] = [:]) throws -> Process {
        let p = Process()
        p.executableURL = tesseraBinary
        p.arguments = args
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        FileManager.default.createFile(atPath: stdout, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: stdout))
        p.standardOutput = out
        if let stderr {
            FileManager.default.createFile(atPath: stderr, contents: nil)
            p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderr))
        } else {
            p.standardError = out
        }
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return p
    }

    func lines(_ path: String) -> [String] {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    // MARK: Stuck

    /// Two runs (or coordinators) on one journal both dispatched its jobs; one died with
    /// "database is locked" and the other waited for ever. Now the second is refused at once,
    /// naming the holder, exit 2.
    func testOneHolderPerJournal() throws {
        try images(300, side: 320)
        let first = try spawn(["run", try job(), "-w", "1"], stdout: dir + "/first.log")
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        // The first run holds the journal once it exists.
        let lock = dir + "/out/.tessera/journal.sqlite.lock"
        let deadline = Date().addingTimeInterval(20)
        while !(FileManager.default.contents(atPath: lock).map { !$0.isEmpty } ?? false) && Date() < deadline { usleep(20_000) }
        let started = Date()
        let second = try tessera(["run", try job(), "-w", "1"])
        XCTAssertEqual(second.status, 2, second.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "refused at once")
        XCTAssertTrue(second.stderr.contains("is in use by tessera run pid \(first.processIdentifier)"), second.stderr)
        XCTAssertTrue(second.stderr.contains("[journal-in-use]"), second.stderr)
        let coordinator = try tessera(["coordinator", "--bind", "ipc://\(dir)/c.sock", "--journal", dir + "/out/.tessera/journal.sqlite"])
        XCTAssertEqual(coordinator.status, 2, coordinator.stderr)
        XCTAssertTrue(coordinator.stderr.contains("in use by tessera run"), coordinator.stderr)
        first.waitUntilExit()
        XCTAssertEqual(first.terminationStatus, 0, lines(dir + "/first.log").joined(separator: "\n"))
        // Its lock gone with it: the same command runs again (everything unchanged).
        let again = try tessera(["run", try job(), "-w", "1"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("300 skipped (unchanged)"), again.stdout)
    }

    /// With a cluster's client keys exported (as the README's tour does), `tessera run`'s
    /// local workers tried CURVE against its plain coordinator and retried for ever. A worker
    /// given keys for a coordinator without CURVE now says so and exits 4 within seconds.
    func testALocalRunIgnoresAClustersKeys() throws {
        try images(5)
        XCTAssertEqual(try tessera(["keygen", "alice", "-o", dir + "/keys"]).status, 0)
        XCTAssertEqual(try tessera(["keygen", "coordinator", "-o", dir + "/keys"]).status, 0)
        let environment = ["TESSERA_CURVE_SECRET": dir + "/keys/alice.secret", "TESSERA_SERVER_KEY": dir + "/keys/coordinator.pub"]
        let started = Date()
        let run = try tessera(["run", try job(), "-w", "2"], environment: environment)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        XCTAssertTrue(run.stdout.contains("5 ok"), run.stdout)
        // A worker with keys against a coordinator without CURVE: exit 4, the reason said.
        let coordinator = try spawn(["coordinator", "--bind", "ipc://\(dir)/plain.sock", "--journal", dir + "/plain.sqlite"],
                                    stdout: dir + "/plain.log")
        defer { kill(coordinator.processIdentifier, SIGKILL) }
        usleep(300_000)
        let worker = try spawn(["worker", "--connect", "ipc://\(dir)/plain.sock"], stdout: dir + "/worker.log", environment: environment)
        let deadline = Date().addingTimeInterval(10)
        while worker.isRunning && Date() < deadline { usleep(50_000) }
        XCTAssertFalse(worker.isRunning, "the worker exits within seconds")
        if worker.isRunning { kill(worker.processIdentifier, SIGKILL) }
        worker.waitUntilExit()
        XCTAssertEqual(worker.terminationStatus, 4)
        XCTAssertTrue(lines(dir + "/worker.log").contains { $0.contains("does not use CURVE (mechanism mismatch)") },
                      lines(dir + "/worker.log").joined(separator: "\n"))
    }

    /// Clean reruns printed "refused report … not this worker's current attempt" (a task
    /// taken back for an idle worker as it ended) and "worker pid N did not finish in time"
    /// (a worker still starting when the run ended). A clean run prints no warning.
    func testCleanRerunsPrintNoWarning() throws {
        try images(4)
        let file = try job()
        for i in 0..<15 {
            let r = try tessera(["run", file, "-w", "2"])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertFalse(r.stderr.contains("warning") || r.stderr.contains("refused"), "run \(i): \(r.stderr)")
        }
    }

    // MARK: Cut

    /// SIGINT in the middle of a `render --json`: whole lines, a summary, exit 130; a second
    /// SIGINT right after: exit 130 at once, still no cut line.
    func testRenderStopsCleanlyOnSignals() throws {
        let one = try images(1, side: 1600)[0]
        let bytes = try Data(contentsOf: URL(fileURLWithPath: one))
        for i in 1..<400 { try bytes.write(to: URL(fileURLWithPath: dir + "/in/copy\(i).jpg")) }
        for (round, signals) in [(0, 1), (1, 2)] {
            let log = dir + "/render\(round).log"
            let p = try spawn(["render", dir + "/in", "-o", dir + "/out\(round)", "-s", "1200", "--json", "-t", "2"], stdout: log,
                              stderr: dir + "/render\(round).err")
            let deadline = Date().addingTimeInterval(30)
            while lines(log).count < 20 && Date() < deadline { usleep(20_000) }
            for _ in 0..<signals { kill(p.processIdentifier, SIGINT); usleep(20_000) }
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 130, "round \(round)")
            let out = lines(log).filter { !$0.isEmpty }
            XCTAssertGreaterThan(out.count, 5)
            XCTAssertLessThan(out.count, 400, "stopped before the end")
            for line in out {
                XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(line.utf8)), "a whole JSON line: \(line.prefix(120))")
            }
            if signals == 1 {
                XCTAssertTrue(out.last?.contains("\"type\":\"summary\"") ?? false, "the summary comes last")
                XCTAssertTrue(lines(dir + "/render0.err").contains { $0.hasPrefix("interrupted by SIGINT:") && $0.contains("not started") })
            }
        }
    }

    /// `render DIR > log 2>&1` spliced an `error:` line into an `ok` line: every line whole.
    func testLinesOfBothStreamsNeverSplice() throws {
        try images(120)
        for i in 0..<60 { try Data("not an image \(i)".utf8).write(to: URL(fileURLWithPath: dir + "/in/bad\(i).jpg")) }
        for round in 0..<3 {
            let log = dir + "/both\(round).log"
            let p = try spawn(["render", dir + "/in", "-o", dir + "/out\(round)", "-s", "64", "-t", "4"], stdout: log)
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 1)
            let all = lines(log).filter { !$0.isEmpty }
            XCTAssertEqual(all.filter { $0.hasPrefix("ok   ") }.count, 120)
            XCTAssertEqual(all.filter { $0.hasPrefix("error: ") }.count, 60)
            for line in all {
                let known = ["ok   ", "error: ", "180 images", "failures: "].contains { line.hasPrefix($0) }
                XCTAssertTrue(known, "a spliced line: \(line)")
                XCTAssertFalse(line.dropFirst(3).contains("error: ") || line.dropFirst(3).contains("ok   "), "a spliced line: \(line)")
            }
        }
    }

    /// A journal that fills up (SQLite's `max_page_count`, as a full disk): exit 3, staging
    /// empty, and every output that stayed is one the journal records (a rerun does the rest).
    func testAFullJournalLeavesNothingUnrecorded() throws {
        try images(300, side: 320)
        let r = try tessera(["run", try job(), "-w", "2", "--journal-growth-pages", "8"])
        XCTAssertEqual(r.status, 3, r.stderr)
        XCTAssertTrue(r.stderr.contains("[coordinator-failed]"), r.stderr)
        let staging = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/out/.tessera/staging")) ?? []
        XCTAssertEqual(staging, [], "nothing left staged")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir + "/out").filter { !$0.hasPrefix(".") }
        let journaled = try runProcess("python3", ["-c", """
            import sqlite3, sys
            print("\\n".join(r[0] for r in sqlite3.connect(sys.argv[1]).execute("SELECT path FROM outputs")))
            """, dir + "/out/.tessera/journal.sqlite"]).stdout.split(separator: "\n").map(String.init)
        XCTAssertLessThan(files.count, 600, "the journal filled before the end")
        XCTAssertEqual(Set(files.map { dir + "/out/" + $0 }).subtracting(journaled), [], "every output journaled")
        // With room again, the rerun finishes the job.
        let rerun = try tessera(["run", try job(), "-w", "2"])
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/out").filter { !$0.hasPrefix(".") }.count, 600)
    }

    // MARK: Stale

    /// Reruns only checked that outputs existed: one truncated to 100 bytes and one overwritten
    /// with garbage were "skipped (unchanged)". Now: size and time from the journal, the hash
    /// when they differ; `--verify` hashes every output.
    func testIncrementalRerunsNoticeChangedOutputs() throws {
        try images(4)
        let file = try job()
        XCTAssertEqual(try tessera(["run", file, "-w", "1"]).status, 0)
        let a = dir + "/out/img0000-favicon.jpg", b = dir + "/out/img0001-compressedFavicon.jpg"
        let c = dir + "/out/img0002-favicon.jpg", d = dir + "/out/img0003-favicon.jpg"
        let good = try Data(contentsOf: URL(fileURLWithPath: a))
        truncate(a, 100)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: b))
        // Touched only (same bytes, another time): read, found unchanged.
        utimes(c, nil)
        var rerun = try tessera(["run", file, "-w", "1"])
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertTrue(rerun.stdout.contains("2 ok, 2 skipped (unchanged)"), rerun.stdout)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: a)), good, "rendered again, whole")
        // The same size, another byte, its time put back: only --verify finds it.
        var st = stat()
        stat(d, &st)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: d)))
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: d))
        var times = [timespec(tv_sec: st.st_atim.tv_sec, tv_nsec: st.st_atim.tv_nsec), timespec(tv_sec: st.st_mtim.tv_sec, tv_nsec: st.st_mtim.tv_nsec)]
        utimensat(AT_FDCWD, d, &times, 0)
        rerun = try tessera(["run", file, "-w", "1"])
        XCTAssertTrue(rerun.stdout.contains("0 ok, 4 skipped (unchanged)"), rerun.stdout)
        rerun = try tessera(["run", file, "-w", "1", "--verify"])
        XCTAssertTrue(rerun.stdout.contains("1 ok, 3 skipped (unchanged)"), rerun.stdout)
    }

    /// Nothing is made before a job is valid: a missing input made the journal; a template
    /// with `..` and an output that fails its byte budget left an empty output root.
    func testNothingIsCreatedBeforeAJobIsValid() throws {
        try images(2)
        let missing = try job("m", input: "nothing-here", output: "out-missing")
        let run = try tessera(["run", missing])
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("no such file or directory [input-not-found]"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out-missing"))
        let template = try tessera(["render", dir + "/in", "-s", "64", "-o", dir + "/out-template", "--template", "../{stem}.{ext}"])
        XCTAssertEqual(template.status, 2, "a usage error, as {nope} is")
        XCTAssertTrue(template.stderr.contains("--template must not contain \"..\""), template.stderr)
        XCTAssertEqual(try tessera(["render", dir + "/in", "-s", "64", "-o", dir + "/out-template", "--template", "{nope}.{ext}"]).status, 2)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out-template"))
        let budget = try tessera(["render", dir + "/in", "-s", "400", "-o", dir + "/out-budget", "--max-bytes", "100"])
        XCTAssertEqual(budget.status, 1, budget.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out-budget"), "every file failed: no empty root")
    }

    // MARK: Messages

    func testMessagesSayWhatHappened() throws {
        let mistyped = try tessera(["rendr", dir + "/in", "-o", dir + "/x"])
        XCTAssertEqual(mistyped.status, 2)
        XCTAssertTrue(mistyped.stderr.contains("unknown command 'rendr' — did you mean 'render'?"), mistyped.stderr)
        try images(1, side: 400)
        let webp = try tessera(["render", dir + "/in", "-o", dir + "/formats", "-s", "100", "--format", "avif,webp"])
        XCTAssertEqual(webp.status, 0, webp.stderr)
        XCTAssertTrue(webp.stdout.contains(" avif ") && webp.stdout.contains(" webp "), "each output's format: \(webp.stdout)")
    }

    /// `--at`: the range named, seconds before the end taken, a time past the end clamped with a warning.
    func testPosterTimesAreCheckedAndClampedAloud() throws {
        guard let ffmpeg = which("ffmpeg") else { throw XCTSkip("ffmpeg (Debian's) is not installed") }
        let clip = dir + "/clip.mp4"
        let made = try runProcess(ffmpeg, ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=s=160x120:d=5", "-pix_fmt", "yuv420p", clip])
        XCTAssertEqual(made.status, 0, made.stderr)
        let over = try tessera(["render", clip, "-o", dir + "/v", "-s", "64", "--at", "150%"])
        XCTAssertEqual(over.status, 2)
        XCTAssertTrue(over.stderr.contains("a percentage of the video is 0% to 100%, got 150%"), over.stderr)
        let fromEnd = try tessera(["render", clip, "-o", dir + "/v", "-s", "64", "--at", "-1", "--json"])
        XCTAssertEqual(fromEnd.status, 0, fromEnd.stderr)
        XCTAssertTrue(fromEnd.stdout.contains("@4.00s"), "1 s before the end of 5 s: \(fromEnd.stdout)")
        let past = try tessera(["render", clip, "-o", dir + "/v", "-s", "64", "--at", "99"])
        XCTAssertEqual(past.status, 0, past.stderr)
        XCTAssertTrue(past.stderr.contains("warning: \(clip): the poster time 99.0s is past the end of the 5.00 s video"), past.stderr)
        let json = try tessera(["render", clip, "-o", dir + "/v", "-s", "64", "--at", "99", "--json"])
        XCTAssertTrue(json.stdout.contains("\"warnings\":[\"the poster time 99.0s is past the end"), json.stdout)
    }
}
