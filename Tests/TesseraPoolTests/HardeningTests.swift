import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import XCTest

/// Inputs that can't freeze anything, numbers that can't kill workers, names kept as they
/// are (issue 13, items 3, 4 and the smaller ones). Real coordinator and workers.
final class HardeningTests: XCTestCase {
    /// A FIFO listed in a manifest: with and without --inline the job finishes, the FIFO
    /// fails alone as not-a-regular-file, and the coordinator keeps answering.
    func testFIFOInAManifestCannotFreezeThePool() throws {
        for inline in [false, true] {
            let c = try Cluster()
            let inputs = try c.makeImages(4, width: 320, height: 240)
            let fifo = c.dir + "/in/pipe.jpg"
            XCTAssertEqual(mkfifo(fifo, 0o644), 0)
            let manifest = c.dir + "/list.txt"
            try ((inputs + [fifo, "/proc/self/environ"]).joined(separator: "\n") + "\n")
                .write(toFile: manifest, atomically: true, encoding: .utf8)
            try c.startCoordinator()
            try c.startWorker(inline ? ["--inline"] : [])
            var spec = try c.job(presets: ["favicon"])
            spec.inputs = [.manifest(manifest)]
            spec.options.inline = inline
            let started = Date()
            let job = try c.client.submit(spec).job
            let end = try c.waitFor(job, timeout: 30) { $0.isTerminal }
            XCTAssertLessThan(Date().timeIntervalSince(started), 20)
            XCTAssertEqual(end.succeeded, 4, "inline \(inline)")
            XCTAssertEqual(end.failed, 2)
            let failed = try c.records(job).filter { $0.status == .failed }
            XCTAssertEqual(Set(failed.compactMap(\.error?.code)), ["not-a-regular-file"], "\(failed.map(\.error))")
            XCTAssertTrue(failed.contains { $0.error!.message.contains("a FIFO, not a regular file") })
            XCTAssertTrue(failed.contains { $0.error!.message.contains("/proc files are not inputs") })
            XCTAssertNoThrow(try c.client.ping(), "the coordinator answers")
        }
    }

    /// A task whose worker dies on receipt, before saying `started`, is charged: after
    /// `--poison 3` deaths it fails as poison, instead of killing workers forever.
    func testDeathsBeforeStartedCountTowardPoison() throws {
        let c = try Cluster(coordinatorArguments: ["--worker-timeout", "2", "--poison", "3"])
        var inputs = try c.makeImages(4, width: 320, height: 240)
        for name in ["poison-a.jpg", "poison-b.jpg"] {
            try FileManager.default.copyItem(atPath: inputs[0], toPath: c.dir + "/in/" + name)
            inputs.append(c.dir + "/in/" + name)
        }
        try c.startCoordinator()
        let args = ["--crash-on-receive", "poison", "--prefetch", "0"]
        try c.startWorker(args)
        let job = try c.client.submit(try c.job(presets: ["favicon"])).job
        var deaths = 0
        let deadline = Date().addingTimeInterval(120)
        var end: JobStatus?
        while Date() < deadline {
            if let s = try? c.client.status(job: job).jobs.first, s.isTerminal {
                end = s
                break
            }
            let dead = c.workers.filter { !$0.isRunning }.count
            if dead > deaths {
                deaths = dead
                try c.startWorker(args)
            }
            usleep(50_000)
        }
        let s = try XCTUnwrap(end, "job ended\n" + c.logs().suffix(3000))
        XCTAssertEqual(s.succeeded, 4)
        XCTAssertEqual(s.failed, 2)
        // Three charged deaths per poison task; a heartbeat in flight when a task was sent can
        // leave one death uncharged (Scheduler.lose), seen on a loaded machine.
        XCTAssertLessThanOrEqual(deaths, 8, "at most three charged deaths per poison task, and one uncharged")
        let records = try c.records(job)
        try c.assertExactlyOnce(records, inputs: inputs)
        for r in records where r.status == .failed {
            XCTAssertEqual(r.error?.code, "poison")
            XCTAssertTrue(r.input.contains("poison"), r.input)
        }
    }

    /// Numbers out of range are job-file errors with field, range and value — from YAML
    /// and from JSON (a script's submit) alike.
    func testOutOfRangeOptionsAreRefusedAtSubmit() throws {
        let c = try Cluster()
        _ = try c.makeImages(1, width: 64, height: 64)
        try c.startCoordinator()
        let cases: [(String, (inout JobSpec) -> Void, String)] = [
            ("maxMegapixels", { $0.options.maxMegapixels = 1e300 }, "options.maxMegapixels: expected"),
            ("maxInputMB", { $0.options.maxInputMB = -1 }, "options.maxInputMB: expected 1...65536 MB, got -1"),
            ("maxInputMB", { $0.options.maxInputMB = 17_592_186_044_416 }, "options.maxInputMB: expected 1...65536 MB"),
            ("timeout", { $0.options.timeout = .infinity }, "options.timeout"),
            ("maxAttempts", { $0.options.maxAttempts = 0 }, "options.maxAttempts: expected 1...100"),
            ("path", { $0.outputs[0].path = "x\u{0}{stem}.{ext}" }, "outputs[0].path: contains a control character"),
        ]
        for (name, configure, message) in cases {
            let spec = try c.job(presets: ["favicon"], configure: configure)
            XCTAssertThrowsError(try c.client.submit(spec), name) { error in
                XCTAssertEqual((error as? ErrorReply)?.code, "invalid-job", "\(error)")
                XCTAssertTrue("\(error)".contains(message), "\(name): \(error)")
            }
        }
        // The coordinator checks a script's JSON the same way (no client-side check here).
        let raw = """
            {"job": {"name": "raw", "inputs": ["\(c.dir)/in"], "output": "\(c.dir)/out",
                     "outputs": [{"preset": "favicon"}], "options": {"maxMegapixels": 1e300, "maxInputMB": 17592186044416}}}
            """
        XCTAssertThrowsError(try c.client.request(Envelope(MessageType.submit, body: Array(raw.utf8)))) { error in
            XCTAssertEqual((error as? ErrorReply)?.code, "invalid-job", "\(error)")
            XCTAssertTrue("\(error)".contains("options.maxMegapixels: expected"), "\(error)")
        }
        XCTAssertEqual(try c.client.status().jobs.count, 0, "nothing was accepted")
    }

    /// Names: a symlink in a manifest keeps its own name; a file name that is not UTF-8
    /// is read and its output written under the same bytes; a file of text is "text", its
    /// content never echoed.
    func testNamesAndContentInErrors() throws {
        let c = try Cluster()
        let inputs = try c.makeImages(2, width: 320, height: 240)
        // 2 symlinks to one file, in a manifest: two tasks named after the links.
        for link in ["link-a.jpg", "link-b.jpg"] {
            XCTAssertEqual(symlink(inputs[1], c.dir + "/in/" + link), 0)
        }
        // A name with bytes that are not UTF-8.
        let raw: [UInt8] = Array((c.dir + "/in/caf").utf8) + [0xE9, 0xFF] + Array(".jpg".utf8)
        let fd = open(raw.map { CChar(bitPattern: $0) } + [0], O_WRONLY | O_CREAT, 0o644)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: inputs[1]))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        try "root:$6$secretsalt$hash:19000:0:99999:7:::\n".write(toFile: c.dir + "/in/shadow.jpg", atomically: true, encoding: .utf8)
        let manifest = c.dir + "/list.txt"
        try "in/link-a.jpg\nin/link-b.jpg\nin/shadow.jpg\n".write(toFile: manifest, atomically: true, encoding: .utf8)
        try c.startCoordinator()
        try c.startWorker()
        var fromManifest = try c.job(presets: ["favicon"])
        fromManifest.inputs = [.manifest(manifest)]
        let j1 = try c.client.submit(fromManifest).job
        _ = try c.client.wait(job: j1, within: 300)
        let r1 = try c.records(j1)
        XCTAssertEqual(Set(r1.map { ($0.input as NSString).lastPathComponent }), ["link-a.jpg", "link-b.jpg", "shadow.jpg"])
        let written = try FileManager.default.subpathsOfDirectory(atPath: c.dir + "/out")
        XCTAssertTrue(written.contains { $0.hasSuffix("link-a.jpg") } && written.contains { $0.hasSuffix("link-b.jpg") }, written.description)
        let shadow = try XCTUnwrap(r1.first { $0.input.hasSuffix("shadow.jpg") }?.error)
        XCTAssertEqual(shadow.code, "unsupported-format")
        XCTAssertTrue(shadow.message.contains("it looks like text"), shadow.message)
        XCTAssertFalse(shadow.message.contains("root") || shadow.message.contains("secret") || shadow.message.contains("72 6F"), shadow.message)
        // The directory walk finds the non-UTF-8 name and writes its output under the same bytes.
        let j2 = try c.client.submit(try c.job(presets: ["favicon"]) { $0.output = c.dir + "/out2" }).job
        _ = try c.client.wait(job: j2, within: 300)
        let r2 = try c.records(j2)
        let odd = try XCTUnwrap(r2.first { $0.input.contains("caf") })
        XCTAssertEqual(odd.status, .succeeded, odd.error?.message ?? "")
        let out = [UInt8]((c.dir + "/out2/caf").utf8) + [0xE9, 0xFF] + Array(".jpg".utf8)
        var st = stat()
        XCTAssertEqual(stat(out.map { CChar(bitPattern: $0) } + [0], &st), 0, "output written under the same bytes")
        let encoded = try JSONEncoder().encode(odd)
        XCTAssertNotNil(try JSONSerialization.jsonObject(with: encoded), "the record is valid JSON")
    }
}
