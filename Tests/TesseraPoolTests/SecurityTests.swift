import Foundation
import TesseraTasks
import TesseraTestSupport
import XCTest

/// What a submitter may reach (issue 50), against a real coordinator and workers with
/// client and admin tokens: roots for reading and writing (judged after symbolic links,
/// manifests and overlays included), no output replacing a file Tessera did not write, no
/// fetch of loopback, link-local or private addresses (redirects and DNS names included),
/// log lines no name can forge, and probes that answer under a slowloris load. Every case
/// here was reproduced on the main of that day: each one was accepted then.
final class SecurityTests: APITestCase {
    /// A coordinator with the API on, tokens alice (client) and root (admin), roots in/ and out/.
    func confinedCluster(_ extra: [String] = []) throws -> (Cluster, alice: String, root: String) {
        let port = freePort()
        base = "http://127.0.0.1:\(port)"
        let cluster = try Cluster()
        for sub in ["/tokens", "/out"] { try FileManager.default.createDirectory(atPath: cluster.dir + sub, withIntermediateDirectories: true) }
        let alice = try token(cluster, "alice"), root = try token(cluster, "root", role: "admin")
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--api-tokens", cluster.dir + "/tokens",
                                        "--allow-read", cluster.dir + "/in", "--allow-write", cluster.dir + "/out"] + extra
        try cluster.startCoordinator()
        try waitReady(port)
        return (cluster, alice, root)
    }

    func job(_ name: String, inputs: [String], output: String, path: String? = nil, more: String = "") -> String {
        let list = inputs.map { "\"\($0)\"" }.joined(separator: ", ")
        let template = path.map { ", \"path\": \"\($0)\"" } ?? ""
        return #"{"name": "\#(name)", "inputs": [\#(list)], "output": "\#(output)", "outputs": [{"preset": "favicon"\#(template)}]\#(more)}"#
    }

    func error(_ r: Reply) -> (code: String, message: String) {
        let e = r.json["error"] as? [String: Any] ?? [:]
        return (e["code"] as? String ?? "", e["message"] as? String ?? "")
    }

    func testJobsStayInTheirRoots() throws {
        let (cluster, alice, root) = try confinedCluster()
        let d = cluster.dir
        _ = try cluster.makeImages(4, width: 160, height: 120)
        let fm = FileManager.default
        for sub in ["elsewhere", "secret"] { try fm.createDirectory(atPath: d + "/" + sub, withIntermediateDirectories: true) }
        try fm.copyItem(atPath: d + "/in/img0001.jpg", toPath: d + "/secret/private.jpg")
        try fm.createSymbolicLink(atPath: d + "/in/peek", withDestinationPath: d + "/secret")
        try fm.createSymbolicLink(atPath: d + "/out/escape", withDestinationPath: d + "/elsewhere")
        try "\(d)/in/img0001.jpg\n\(d)/secret/private.jpg\n".write(toFile: d + "/in/list.txt", atomically: true, encoding: .utf8)

        /// Refused, naming `path` (or where its links lead: a job's paths may be resolved as they are read).
        func refused(_ body: String, by token: String = alice, _ status: Int = 403, naming path: String, or resolved: String? = nil,
                     file: StaticString = #filePath, line: UInt = #line) throws {
            let r = try call("POST", "/api/v1/jobs", token: token, body: body)
            XCTAssertEqual(r.status, status, r.body, file: file, line: line)
            let e = error(r)
            XCTAssertEqual(e.code, status == 409 ? "output-exists" : "forbidden", r.body, file: file, line: line)
            XCTAssertTrue(e.message.hasPrefix(path + ":") || resolved.map { e.message.hasPrefix($0 + ":") } == true,
                          "the message names \(path): \(e.message)", file: file, line: line)
        }
        // Writing outside the roots: an output root elsewhere, through a symlinked root, a
        // template through a symbolic link inside the root; nothing is created.
        try refused(job("w1", inputs: [d + "/in"], output: d + "/elsewhere/probe"), naming: d + "/elsewhere/probe")
        try refused(job("w2", inputs: [d + "/in"], output: "/etc/tessera_probe"), naming: "/etc/tessera_probe")
        try refused(job("w3", inputs: [d + "/in"], output: d + "/out/escape"), naming: d + "/out/escape", or: d + "/elsewhere")
        try refused(job("w4", inputs: [d + "/in/img0001.jpg"], output: d + "/out", path: "escape/{stem}.{ext}"),
                    naming: d + "/out/escape/img0001.jpg")
        XCTAssertFalse(fm.fileExists(atPath: d + "/elsewhere/probe"))
        XCTAssertFalse(fm.fileExists(atPath: "/etc/tessera_probe"))
        XCTAssertEqual(try fm.contentsOfDirectory(atPath: d + "/elsewhere"), [])
        // Reading outside the roots: the file system's root, another folder, a symbolic
        // link inside the root that leads out, a manifest's entry, an overlay.
        try refused(job("r1", inputs: ["/"], output: d + "/out"), naming: "/")
        try refused(job("r2", inputs: [d + "/secret"], output: d + "/out"), naming: d + "/secret")
        try refused(job("r3", inputs: [d + "/in/peek/private.jpg"], output: d + "/out"), naming: d + "/in/peek/private.jpg",
                    or: d + "/secret/private.jpg")
        try refused(job("r4", inputs: [d + "/in"], output: d + "/out"), naming: d + "/in/peek/private.jpg")
        try refused(#"{"name": "r5", "inputs": [{"manifest": "\#(d)/in/list.txt"}], "output": "\#(d)/out", "outputs": [{"preset": "favicon"}]}"#,
                    naming: d + "/secret/private.jpg")
        try refused(#"{"name": "r6", "inputs": ["\#(d)/in/img0001.jpg"], "output": "\#(d)/out", "outputs": [{"name": "w", "recipe": {"operations": [{"op": "resize", "width": 64}, {"op": "overlay", "path": "\#(d)/secret/private.jpg"}]}}]}"#,
                    naming: d + "/secret/private.jpg")
        // An admin is held to the roots too.
        try refused(job("a1", inputs: [d + "/secret"], output: d + "/out"), by: root, naming: d + "/secret")
        // The link out of in/ removed: the folder renders.
        try fm.removeItem(atPath: d + "/in/peek")
        try fm.removeItem(atPath: d + "/in/list.txt")
        try cluster.startWorker()
        let ok = try call("POST", "/api/v1/jobs", token: alice, body: job("ok", inputs: [d + "/in"], output: d + "/out"))
        XCTAssertEqual(ok.status, 201, ok.body)
        let okID = try XCTUnwrap(ok.json["job"] as? String)
        XCTAssertEqual(try cluster.waitFor(okID) { $0.isTerminal }.succeeded, 4)

        // Replacing files: one Tessera did not write is refused (and left as it was); the
        // job's own outputs from before are replaced; `overwrite: true` replaces any.
        try "secret".write(toFile: d + "/out/img0001.conf", atomically: true, encoding: .utf8)
        try refused(job("x1", inputs: [d + "/in/img0001.jpg"], output: d + "/out", path: "{stem}.conf"), 409,
                    naming: d + "/out/img0001.conf")
        XCTAssertEqual(try String(contentsOfFile: d + "/out/img0001.conf", encoding: .utf8), "secret")
        let rerun = try call("POST", "/api/v1/jobs", token: alice,
                             body: job("again", inputs: [d + "/in"], output: d + "/out", more: #", "options": {"incremental": false}"#))
        XCTAssertEqual(rerun.status, 201, "Tessera's own outputs may be replaced: \(rerun.body)")
        XCTAssertEqual(try cluster.waitFor(try XCTUnwrap(rerun.json["job"] as? String)) { $0.isTerminal }.succeeded, 4)
        let forced = try call("POST", "/api/v1/jobs", token: alice,
                              body: job("x2", inputs: [d + "/in/img0001.jpg"], output: d + "/out", path: "{stem}.conf",
                                        more: #", "options": {"overwrite": true}"#))
        XCTAssertEqual(forced.status, 201, forced.body)
        XCTAssertEqual(try cluster.waitFor(try XCTUnwrap(forced.json["job"] as? String)) { $0.isTerminal }.succeeded, 1)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: d + "/out/img0001.conf")).prefix(2)), [0xFF, 0xD8])

        // A token's own roots file narrows the coordinator's: alice may read in/sub only.
        try "read \(d)/in/sub\nwrite \(d)/out/alice\n".write(toFile: d + "/tokens/clients/alice.roots", atomically: true, encoding: .utf8)
        try refused(job("n1", inputs: [d + "/in"], output: d + "/out/alice"), naming: d + "/in")
        try refused(job("n2", inputs: [d + "/in/sub"], output: d + "/out"), naming: d + "/out")
        let narrowed = try call("POST", "/api/v1/jobs", token: alice, body: job("n3", inputs: [d + "/in/sub"], output: d + "/out/alice"))
        XCTAssertEqual(narrowed.status, 201, narrowed.body)
    }

    /// A coordinator with tokens and no roots takes no local path from a client and says how
    /// to configure roots; an admin is not confined to roots.
    func testWithoutRootsClientsNameNoLocalPath() throws {
        let port = freePort()
        base = "http://127.0.0.1:\(port)"
        let cluster = try Cluster()
        try FileManager.default.createDirectory(atPath: cluster.dir + "/tokens", withIntermediateDirectories: true)
        let alice = try token(cluster, "alice"), root = try token(cluster, "root", role: "admin")
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--api-tokens", cluster.dir + "/tokens"]
        try cluster.startCoordinator()
        try waitReady(port)
        _ = try cluster.makeImages(2, width: 64, height: 64)
        let r = try call("POST", "/api/v1/jobs", token: alice, body: job("c", inputs: [cluster.dir + "/in"], output: cluster.dir + "/out"))
        XCTAssertEqual(r.status, 403, r.body)
        XCTAssertTrue(error(r).message.contains("--allow-read DIR and --allow-write DIR"), r.body)
        let admin = try call("POST", "/api/v1/jobs", token: root, body: job("a", inputs: [cluster.dir + "/in"], output: cluster.dir + "/out"))
        XCTAssertEqual(admin.status, 201, admin.body)
    }

    /// Fetches of confined jobs never reach loopback, link-local or private addresses:
    /// not directly, not by a name that resolves there, not through a redirect from an
    /// allowed host; the refusal reads the same whether anything listens there or not.
    func testFetchesCannotReachInternalAddresses() throws {
        let files = TemporaryDirectory()
        let inner = try HTTPFileServer(directory: files.path)
        let redirector = try Redirector(to: "http://127.0.0.1:\(inner.port)/img.jpg", serving: files.path + "/img.jpg")
        let (cluster, alice, root) = try confinedCluster(["--allow-url-hosts", "127.0.0.1:\(redirector.port)"])
        let image = try cluster.makeImages(1, width: 160, height: 120)[0]
        try FileManager.default.copyItem(atPath: image, toPath: files.path + "/img.jpg")
        try cluster.startWorker()
        let closed = freePort()
        let cases: [(String, Bool)] = [
            ("http://127.0.0.1:\(redirector.port)/img.jpg", true),  // the allowed host itself
            ("http://127.0.0.1:\(inner.port)/img.jpg", false),  // loopback, open port
            ("http://127.0.0.1:\(closed)/img.jpg", false),  // loopback, closed port: the same refusal
            ("http://localhost:\(inner.port)/img.jpg", false),  // a name resolving to loopback
            ("http://169.254.169.254/latest/meta-data/", false),  // the cloud metadata service
            ("http://[::ffff:127.0.0.1]:\(inner.port)/img.jpg", false),  // IPv4-mapped loopback
            ("http://10.1.2.3:81/x.jpg", false),  // a private address
            ("http://127.0.0.1:\(redirector.port)/go", false),  // an allowed host redirecting to loopback
        ]
        var messages = Set<String>()
        for (i, (url, allowed)) in cases.enumerated() {
            let r = try call("POST", "/api/v1/jobs", token: i % 2 == 0 ? alice : root,
                             body: job("u\(i)", inputs: [url], output: cluster.dir + "/out/u\(i)"))
            XCTAssertEqual(r.status, 201, r.body)
            let id = try XCTUnwrap(r.json["job"] as? String)
            _ = try cluster.waitFor(id, timeout: 60) { $0.isTerminal }
            let record = try XCTUnwrap(try cluster.records(id).first)
            if allowed {
                XCTAssertEqual(record.status, .succeeded, "\(url): \(record.error?.message ?? "")")
            } else {
                XCTAssertEqual(record.error?.code, "forbidden-source", "\(url): \(record.error?.message ?? "succeeded")")
                messages.insert((record.error?.message ?? "").replacingOccurrences(of: url, with: "URL"))
            }
        }
        XCTAssertEqual(messages.count, 1, "one refusal for every address, open or closed: \(messages)")
        XCTAssertFalse(redirector.requests.isEmpty)
        // A manifest fetched at planning is judged too: refused at submission.
        try "img.jpg\n".write(toFile: files.path + "/list.txt", atomically: true, encoding: .utf8)
        let manifest = try call("POST", "/api/v1/jobs", token: alice,
                                body: #"{"name": "m", "inputs": [{"manifest": "http://127.0.0.1:\#(inner.port)/list.txt"}], "output": "\#(cluster.dir)/out", "outputs": [{"preset": "favicon"}]}"#)
        XCTAssertEqual(manifest.status, 403, manifest.body)
        XCTAssertEqual(error(manifest).code, "forbidden-source", manifest.body)
    }

    /// What a user sends never becomes a log line of its own: names with newlines, ESC,
    /// C1 controls, bidirectional overrides and a million characters (as much as a job body
    /// may hold) are escaped and cut in text
    /// logs, and JSON logs stay one valid object per line.
    func testLogLinesCannotBeForged() throws {
        for format in ["text", "json"] {
            let (cluster, alice, _) = try confinedCluster(["--log-format", format])
            _ = try cluster.makeImages(1, width: 64, height: 64)
            try cluster.startWorker(["--log-format", format])
            let names = ["a\\ncritical FORGED admin token rotated", "esc\\u001b[2J\\u001b[31mred", "c1\\u0085next\\u2028line\\u202egnp.exe",
                         "cr\\rover", String(repeating: "x", count: 1_000_000)]
            for name in names {
                let r = try call("POST", "/api/v1/jobs", token: alice,
                                 body: #"{"name": "\#(name)", "inputs": ["\#(cluster.dir)/in"], "output": "\#(cluster.dir)/out", "outputs": [{"preset": "favicon"}], "options": {"incremental": false}}"#)
                XCTAssertEqual(r.status, 201, String(r.body.prefix(300)))
                _ = try cluster.waitFor(try XCTUnwrap(r.json["job"] as? String)) { $0.isTerminal }
            }
            // Invalid UTF-8 in a YAML body is data too.
            var yaml = Array("name: bad-\u{FFFD}".utf8.dropLast(3)) + [0xFF, 0xFE, 0x0A]
            yaml += Array("inputs: [\(cluster.dir)/in]\noutput: \(cluster.dir)/out\noutputs: [{preset: favicon}]\n".utf8)
            let yamlFile = cluster.dir + "/bad.yaml"
            try Data(yaml).write(to: URL(fileURLWithPath: yamlFile))
            _ = try call("POST", "/api/v1/jobs", token: alice, type: "application/yaml", extra: ["--data-binary", "@" + yamlFile,
                                                                                               "-H", "Content-Type: application/yaml"])
            usleep(300_000)
            let log = try Data(contentsOf: URL(fileURLWithPath: try XCTUnwrap(
                try FileManager.default.contentsOfDirectory(atPath: cluster.dir).first { $0.hasPrefix("coordinator-") }.map { cluster.dir + "/" + $0 })))
            XCTAssertFalse(log.contains(0x1B), "no raw ESC")
            XCTAssertFalse(log.contains(0x0D), "no raw CR")
            let lines = log.split(separator: 0x0A)
            XCTAssertGreaterThan(lines.count, 5)
            for line in lines {
                XCTAssertLessThan(line.count, 20_000, "a line is bounded")
                let text = String(decoding: line, as: UTF8.self)
                XCTAssertFalse(text.contains("\u{85}") || text.contains("\u{2028}") || text.contains("\u{202E}"), text)
                if format == "json" {
                    let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
                    XCTAssertNotNil(object?["message"], "one JSON object per line: \(text.prefix(200))")
                } else {
                    XCTAssertTrue(text.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} \w+ tessera\."#, options: .regularExpression) != nil,
                                  "every line is a log line of its own: \(text.prefix(200))")
                }
            }
            let all = String(decoding: log, as: UTF8.self)
            XCTAssertTrue(all.contains("… (1000000 bytes)"), "the long name is cut, its length stated")
            XCTAssertTrue(all.contains(format == "json" ? #"a\\ncritical FORGED"# : #"a\ncritical FORGED"#), "the newline shown escaped")
        }
    }

    /// 600 connections from one address trickling their heads and 200 event streams: every
    /// `/healthz` and `/metrics` probe is answered, at once.
    func testProbesAnswerUnderSlowloris() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = min(limit.rlim_max, 8192)
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let (cluster, alice, _) = try confinedCluster()
        _ = try cluster.makeImages(1, width: 64, height: 64)
        let port = Int(base.split(separator: ":").last!)!
        let created = try call("POST", "/api/v1/jobs", token: alice,
                               body: job("queued", inputs: [cluster.dir + "/in"], output: cluster.dir + "/out"))
        let id = try XCTUnwrap(created.json["job"] as? String)
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for _ in 0..<200 {
            guard let fd = loopbackConnection(port, receiveTimeout: 1) else { continue }
            let request = "GET /api/v1/jobs/\(id)/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(alice)\r\n\r\n"
            _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            sockets.append(fd)
        }
        var slow: [Int32] = []
        for _ in 0..<600 {
            guard let fd = loopbackConnection(port, receiveTimeout: 1) else { continue }
            _ = Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-".utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            slow.append(fd)
        }
        sockets += slow
        var latencies: [Double] = [], failures = 0
        let end = Date().addingTimeInterval(8)
        var round = 0
        while Date() < end {
            round += 1
            // The slow clients keep trickling (a byte every 2 s).
            if round % 20 == 0 {
                for fd in slow { _ = [UInt8(ascii: "a")].withUnsafeBytes { send(fd, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) } }
            }
            for path in ["/healthz", "/metrics"] {
                let r = try httpRequest(port, path)
                if r.status == 200 { latencies.append(r.seconds * 1000) } else { failures += 1 }
            }
            usleep(100_000)
        }
        latencies.sort()
        let median = latencies[latencies.count / 2], worst = latencies.last ?? 0
        print("slowloris probes: \(latencies.count) answered, \(failures) failed, median \(String(format: "%.1f", median)) ms, max \(String(format: "%.1f", worst)) ms")
        XCTAssertEqual(failures, 0)
        XCTAssertLessThan(median, 50)
        XCTAssertLessThan(worst, 500, "every probe at once (CI machines are noisy: the median holds the 50 ms target)")
    }
}

/// An HTTP server on loopback that answers `/go` with a redirect to `target` and anything
/// else with the file `image`, logging each request path.
final class Redirector {
    let port: Int
    private let server: ServerProcess
    private let log: String

    init(to target: String, serving image: String) throws {
        port = freePort()
        let base = NSTemporaryDirectory() + "tessera-redirect-\(port)"
        log = base + ".requests"
        let script = #"""
        import sys
        from http.server import BaseHTTPRequestHandler, HTTPServer
        port, target, image, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_GET(self):
                open(log, "a").write(self.path + "\n")
                if self.path == "/go":
                    self.send_response(302); self.send_header("Location", target); self.send_header("Content-Length", "0"); self.end_headers()
                else:
                    data = open(image, "rb").read()
                    self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
        HTTPServer(("127.0.0.1", port), H).serve_forever()
        """#
        try script.write(toFile: base + ".py", atomically: true, encoding: .utf8)
        server = try ServerProcess("/usr/bin/python3", [base + ".py", String(port), target, image, log], log: base + ".err")
        guard waitForPort(port) else { throw TestServerError("the redirector did not start") }
    }

    var requests: [String] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}
