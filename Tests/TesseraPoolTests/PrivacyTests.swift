import Foundation
import TesseraTasks
import TesseraWire
import TesseraTestSupport
import XCTest

/// A presigned URL's query string is a credential: it reaches no record, log line, CSV,
/// report, dashboard state or metric — only the journal, which must fetch it.
final class PresignedURLPrivacyTests: XCTestCase {
    /// Answers 404 under /missing, 403 under /forbidden.
    static let server = #"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(403 if self.path.startswith("/forbidden") else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_HEAD = do_GET
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""#

    func testTheSignatureOfAPresignedURLStaysOutOfEveryChannel() throws {
        let c = try Cluster()
        let port = freePort(), refused = freePort(), metrics = freePort()
        try Self.server.write(toFile: c.dir + "/server.py", atomically: true, encoding: .utf8)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", c.dir + "/server.py", String(port)]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        guard waitForPort(port) else { return XCTFail("the HTTP server did not start") }
        let secret = "SIGNATURE0123456789abcdefSECRET"
        let query = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261125&X-Amz-Signature=\(secret)"
        let urls = ["http://127.0.0.1:\(port)/missing/a.jpg", "http://127.0.0.1:\(port)/forbidden/b.jpg",
                    "http://127.0.0.1:\(refused)/refused/c.jpg"].map { $0 + query }
        try urls.joined(separator: "\n").write(toFile: c.dir + "/manifest.txt", atomically: true, encoding: .utf8)
        c.coordinatorArguments = ["--metrics-port", "\(metrics)", "--dashboard", "--log-level", "debug"]
        try c.startCoordinator()
        try c.startWorker(["--log-level", "debug"])
        var spec = try c.job(presets: ["thumbnail"])
        spec.inputs = [.manifest(c.dir + "/manifest.txt")]
        spec.options.maxAttempts = 2
        let job = try c.client.submit(spec).job
        let end = try c.client.wait(job: job, within: 300)
        XCTAssertEqual(end.failed, 3)
        let records = try c.client.results(job: job).map { String(decoding: $0, as: UTF8.self) }
        XCTAssertEqual(records.count, 3)
        let csv = try tessera(["results", job, "--csv", "--coordinator", c.endpoint])
        let html = c.dir + "/report.html"
        XCTAssertEqual(try tessera(["results", job, "--html", html, "--coordinator", c.endpoint]).status, 0)
        let state = try httpRequest(metrics, "/api/state").body
        let scrape = try httpRequest(metrics, "/metrics").body
        let channels: [(String, String)] = [
            ("records", records.joined(separator: "\n")), ("CSV", csv.out), ("HTML report", (try? String(contentsOfFile: html, encoding: .utf8)) ?? ""),
            ("dashboard state", state), ("metrics", scrape), ("logs", c.logs()),
        ]
        for (name, text) in channels {
            XCTAssertFalse(text.isEmpty, "\(name) is empty: nothing was checked")
            XCTAssertFalse(text.contains(secret), "\(name) holds the signature:\n\(text.prefix(3000))")
            XCTAssertFalse(text.contains("X-Amz-Credential"), "\(name) holds the credential")
        }
        // What the failures say, named by the URL without its query.
        let named = records.joined().replacingOccurrences(of: "\\/", with: "/")
        XCTAssertTrue(named.contains("http://127.0.0.1:\(port)/missing/a.jpg: GET: HTTP 404 [not-found]"), named)
        XCTAssertTrue(named.contains("http://127.0.0.1:\(port)/forbidden/b.jpg: GET: HTTP 403 [access-denied]"), named)
        XCTAssertTrue(c.logs().contains("retrying http://127.0.0.1:\(refused)/refused/c.jpg in"), c.logs().suffix(3000).description)
        // The journal keeps the query (the worker must fetch the URL), readable by its owner only.
        XCTAssertEqual(try sqliteValue(c.journal, "SELECT COUNT(*) FROM tasks WHERE path LIKE ?", ["%" + secret]), "3")
        let mode = try FileManager.default.attributesOfItem(atPath: c.journal)[.posixPermissions] as? Int
        XCTAssertEqual((mode ?? 0o777) & 0o077, 0, "the journal is not readable by others")
    }
}
