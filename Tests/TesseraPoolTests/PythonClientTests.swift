import Foundation
import TesseraWire
import TesseraTestSupport
import XCTest

/// Any script can drive the queue: the pyzmq example submits a job and waits for it.
final class PythonClientTests: XCTestCase {
    func python(_ args: [String]) throws -> (status: Int32, out: String) {
        let r = try runProcess("python3", args)
        return (r.status, r.stdout + r.stderr)
    }

    var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("examples/submit_and_wait.py").path
    }

    func testPyzmqClientSubmitsAndWaits() throws {
        if try python(["-c", "import zmq"]).status != 0 {
            if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("pyzmq missing in CI (.ci/run installs it)") }
            throw XCTSkip("pyzmq not installed")
        }
        let c = try Cluster()
        let inputs = try c.makeImages(10, width: 400, height: 300)
        try Data("broken".utf8).write(to: URL(fileURLWithPath: c.dir + "/in/broken.jpg"))
        try c.startCoordinator()
        try c.startWorker()
        // A JSON job with the same shorthand as job files.
        let job: [String: Any] = ["name": "from python", "inputs": [c.dir + "/in"], "output": c.dir + "/out",
                                  "outputs": [["preset": "favicon"], ["preset": "widget", "path": "{dir}/{stem}-w.{ext}"]]]
        let jobFile = c.dir + "/job.json"
        try JSONSerialization.data(withJSONObject: job).write(to: URL(fileURLWithPath: jobFile))
        let run = try python([script, "--coordinator", c.endpoint, jobFile])
        XCTAssertEqual(run.status, 1, "one input is broken: exit 1\n\(run.out)")
        XCTAssertTrue(run.out.contains("submitted j-"), run.out)
        XCTAssertTrue(run.out.contains("failed: 10 ok, 1 failed"), run.out)
        XCTAssertTrue(run.out.contains("failed    \(c.dir)/in/broken.jpg: not a JPEG, PNG, WebP, HEIF, AVIF, TIFF, GIF, JPEG XL, camera raw or video file"), run.out)
        XCTAssertEqual(run.out.components(separatedBy: "succeeded ").count - 1, inputs.count)
        XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/sub/img0000-w.jpg"))
        // Without a job file, a preset over a directory; an unknown preset is a clear error.
        let bad = try python([script, "--coordinator", c.endpoint, "--input", c.dir + "/in", "--output", c.dir + "/o2",
                              "--preset", "nope"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.out.contains("unknown preset \"nope\""), bad.out)
    }

    /// A YAML job file is read (with PyYAML) or refused in one line with exit 2, never a
    /// traceback: the example's own tests, and a YAML job through a real coordinator.
    func testPythonClientReadsYAMLJobsCleanly() throws {
        let tests = URL(fileURLWithPath: script).deletingLastPathComponent().appendingPathComponent("test_submit_and_wait.py").path
        let unit = try python([tests])
        XCTAssertEqual(unit.status, 0, unit.out)
        XCTAssertTrue(unit.out.contains(" passed, 0 failed"), unit.out)
        guard try python(["-c", "import zmq, yaml"]).status == 0 else { throw XCTSkip("pyzmq or PyYAML not installed") }
        let c = try Cluster()
        _ = try c.makeImages(3, width: 200, height: 150)
        try c.startCoordinator()
        try c.startWorker()
        let jobFile = c.dir + "/job.yaml"
        try "name: yaml from python\ninputs: [in]\noutput: out\noutputs:\n  - preset: favicon\n".write(toFile: jobFile, atomically: true, encoding: .utf8)
        let run = try python([script, "--coordinator", c.endpoint, jobFile])
        XCTAssertEqual(run.status, 0, run.out)
        XCTAssertFalse(run.out.contains("Traceback"), run.out)
        XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/img0001.jpg"), run.out)
    }

    /// With `tessera keygen` files the script talks CURVE, as the README's cluster setup needs.
    func testPyzmqClientUsesCurveKeys() throws {
        if try python(["-c", "import zmq"]).status != 0 {
            if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("pyzmq missing in CI (.ci/run installs it)") }
            throw XCTSkip("pyzmq not installed")
        }
        let c = try Cluster()
        _ = try c.makeImages(4, width: 400, height: 300)
        let keys = c.dir + "/keys", allow = c.dir + "/allow"
        for name in ["coordinator", "worker", "alice", "mallory"] {
            try CurveKeyPair.generate().write(name: name, directory: keys)
        }
        try Cluster.allow(allow, keys: keys, workers: ["worker"], clients: ["alice"])
        let port = freePort()
        let endpoint = "tcp://127.0.0.1:\(port)"
        c.coordinator = try Cluster.spawn(["coordinator", "--bind", endpoint, "--journal", c.journal,
                                           "--curve-secret", keys + "/coordinator.secret", "--allow", allow,
                                           "--allow-read", c.dir, "--allow-write", c.dir],
                                          log: c.dir + "/coordinator.log")
        c.workers.append(try Cluster.spawn(["worker", "--connect", endpoint, "--curve-secret", keys + "/worker.secret",
                                            "--server-key", keys + "/coordinator.pub"], log: c.dir + "/worker.log"))
        let ok = try python([script, "--coordinator", endpoint, "--curve-secret", keys + "/alice.secret",
                             "--server-key", keys + "/coordinator.pub", "--input", c.dir + "/in", "--output", c.dir + "/out",
                             "--preset", "favicon"])
        XCTAssertEqual(ok.status, 0, ok.out + c.logs())
        XCTAssertTrue(ok.out.contains("succeeded: 4 ok, 0 failed"), ok.out)
        // A key that is not allowed gets no answer (the handshake is refused).
        let refused = try python([script, "--coordinator", endpoint, "--curve-secret", keys + "/mallory.secret",
                                  "--server-key", keys + "/coordinator.pub", "--timeout", "2",
                                  "--input", c.dir + "/in", "--output", c.dir + "/out2"])
        XCTAssertEqual(refused.status, 2, refused.out)
        XCTAssertTrue(refused.out.contains("no answer"), refused.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + "/out2"))
    }
}
