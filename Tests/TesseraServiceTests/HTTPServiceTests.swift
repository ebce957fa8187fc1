import CoreMetrics
import Foundation
@testable import TesseraService
import TesseraTestSupport
import XCTest

/// The HTTP service and the metrics exporter, in process.
final class HTTPServiceTests: XCTestCase {
    func testRoutesStatusesAndMethods() throws {
        let service = try HTTPService(address: "127.0.0.1", port: 0, routes: [
            "/hello": { _, query in .text("hello \(query["name"] ?? "?")\n") },
            "/down": { _, _ in .text("no\n", status: 503) },
        ])
        defer { service.stop() }
        XCTAssertGreaterThan(service.port, 0, "port 0 picks a free port")
        let hello = try httpRequest(service.port, "/hello?name=tessera")
        XCTAssertEqual(hello.status, 200)
        XCTAssertEqual(hello.body, "hello tessera\n")
        XCTAssertTrue(hello.headers.lowercased().contains("content-type: text/plain"), hello.headers)
        XCTAssertEqual(try httpRequest(service.port, "/down").status, 503)
        XCTAssertEqual(try httpRequest(service.port, "/nope").status, 404)
        XCTAssertEqual(try httpRequest(service.port, "/hello", method: "POST").status, 405)
        let head = try httpRequest(service.port, "/hello", method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.body, "")
    }

    // MARK: Raw clients

    func connectTo(_ port: Int) throws -> Int32 {
        guard let fd = loopbackConnection(port) else { throw POSIXError(.ECONNREFUSED) }
        return fd
    }

    @discardableResult
    func sendAll(_ fd: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    func server(_ limits: HTTPLimits = HTTPLimits()) throws -> PollHTTPServer {
        try PollHTTPServer(address: "127.0.0.1", port: 0, limits: limits) { request in
            .reply(.text("\(request.method) \(request.path) \(request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))\n"))
        }
    }

    // MARK: Hostile and unusual clients

    /// Keep-alive: several requests on one connection, pipelined, answered in order; the
    /// query is decoded; HTTP/1.0 closes after its reply.
    func testKeepAlivePipeliningAndQueryDecoding() throws {
        let s = try server()
        defer { s.stop() }
        let fd = try connectTo(s.port)
        defer { close(fd) }
        sendAll(fd, "GET /a?x=1&name=two+words%21 HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let all = readAll(fd)
        XCTAssertEqual(all.components(separatedBy: "HTTP/1.1 200 OK").count - 1, 3, all)
        let a = try XCTUnwrap(all.range(of: "GET /a name=two words!,x=1\n")), b = try XCTUnwrap(all.range(of: "GET /b \n"))
        let c = try XCTUnwrap(all.range(of: "GET /c \n"))
        XCTAssertTrue(a.lowerBound < b.lowerBound && b.lowerBound < c.lowerBound, all)
        let old = try connectTo(s.port)
        defer { close(old) }
        sendAll(old, "GET /old HTTP/1.0\r\n\r\n")
        XCTAssertTrue(readAll(old).hasSuffix("GET /old \n"), "HTTP/1.0: the reply, then the server closes")
    }

    /// A request head past the limit is refused with 431 at once — a client streaming an
    /// endless header line costs its bytes up to the limit, not the server's attention.
    func testOversizedHeadsAndBodiesAreRefused() throws {
        let s = try server()
        defer { s.stop() }
        let long = try connectTo(s.port)
        defer { close(long) }
        sendAll(long, "GET / HTTP/1.1\r\nX-Long: ")
        for _ in 0..<40 {  // 160 kB, or until the server has answered and closed
            guard sendAll(long, String(repeating: "a", count: 4096)) else { break }
        }
        let refused = readAll(long)
        XCTAssertTrue(refused.hasPrefix("HTTP/1.1 431 "), refused)
        XCTAssertTrue(refused.contains("limited to 16384 bytes"), refused)

        func answer(_ request: String) throws -> String {
            let fd = try connectTo(s.port)
            defer { close(fd) }
            sendAll(fd, request)
            return readAll(fd)
        }
        XCTAssertTrue(try answer("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n").hasPrefix("HTTP/1.1 413 "))
        XCTAssertTrue(try answer("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n").hasPrefix("HTTP/1.1 200 "))
        XCTAssertTrue(try answer("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd").hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(try answer("\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\r\n\r\n").hasPrefix("HTTP/1.1 400 "), "TLS to a plain port")
        XCTAssertTrue(try answer("GET / HTTP/1.1\r\n bad fold\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(try answer("GET / HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 101) + "\r\n").hasPrefix("HTTP/1.1 431 "))
        // A body within the limit is read and dropped; the next request on the connection is answered.
        let fd = try connectTo(s.port)
        defer { close(fd) }
        sendAll(fd, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let both = readAll(fd)
        XCTAssertTrue(both.contains("POST /p \n") && both.contains("GET /q \n"), both)
    }

    /// A client trickling its request gets 408 at the deadline; an idle one is closed after
    /// the idle time; past the connection limit the idlest connection makes room, so a probe
    /// is answered while the limit is full.
    func testDeadlinesAndTheConnectionLimit() throws {
        var limits = HTTPLimits()
        (limits.headSeconds, limits.requestSeconds, limits.idleSeconds, limits.maxConnections) = (0.6, 0.6, 1.0, 8)
        let s = try server(limits)
        defer { s.stop() }
        let slow = try connectTo(s.port)
        defer { close(slow) }
        let started = Date()
        sendAll(slow, "GET / HTTP/1.1\r\nHost: x\r\n")
        let timedOut = readAll(slow)
        XCTAssertTrue(timedOut.hasPrefix("HTTP/1.1 408 "), timedOut)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2.0)

        let idle = (0..<8).compactMap { _ in try? connectTo(s.port) }
        defer { idle.forEach { close($0) } }
        XCTAssertEqual(idle.count, 8)
        usleep(100_000)
        let probe = try connectTo(s.port)
        defer { close(probe) }
        sendAll(probe, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(readAll(probe).hasPrefix("HTTP/1.1 200 "), "answered with the connection limit full")
        var closed = 0
        for fd in idle {
            var byte: UInt8 = 0
            if read(fd, &byte, 1) == 0 { closed += 1 }  // every idle one is closed by the idle deadline
        }
        XCTAssertEqual(closed, 8)
    }

    /// RFC 9112 framing with nothing two parsers could read differently (request smuggling):
    /// each case is refused with its status and the connection closed; what is well formed
    /// (a chunked body, a repeated equal Content-Length) is read. Every refusal here was
    /// accepted before (issue 50): a space before the colon took `Transfer-Encoding :
    /// chunked` for another header and framed the body by Content-Length.
    func testFramingIsStrict() throws {
        let echo = try PollHTTPServer(address: "127.0.0.1", port: 0) { request in
            .reply(.text("\(request.method) \(request.path) body=\(String(decoding: request.body, as: UTF8.self))\n"))
        }
        defer { echo.stop() }
        func answer(_ request: String) throws -> String {
            let fd = try connectTo(echo.port)
            defer { close(fd) }
            sendAll(fd, request)
            return readAll(fd)
        }
        func status(_ request: String) throws -> Int {
            let text = try answer(request)
            return Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        let cases: [(String, Int, String)] = [
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\nabc", 400, "space before the colon"),
            ("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\n\r\n", 400, "NUL in a value"),
            ("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{1b}[31mb\r\n\r\n", 400, "ESC in a value"),
            ("GET / HTTP/1.1\nHost: x\n\n", 400, "bare LF line ends"),
            ("GET / HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", 400, "a bare LF inside the head"),
            ("GET / HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", 400, "a bare CR"),
            ("GET / HTTP/1.1\r\nHo st: x\r\n\r\n", 400, "a header name that is no token"),
            ("GET / HTTP/1.1\r\n\r\n", 400, "no Host"),
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "two Hosts"),
            ("GET /  HTTP/1.1\r\nHost: x\r\n\r\n", 400, "two spaces in the request line"),
            ("GET /\u{7f} HTTP/1.1\r\nHost: x\r\n\r\n", 400, "DEL in the target"),
            ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "another version"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", 400, "both framings"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "a coding other than chunked"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400, "chunked not last"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", 400, "not chunked at all"),
            ("POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "chunked in HTTP/1.0"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", 400, "a signed Content-Length"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc", 400, "a list as Content-Length"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nz\r\nabc\r\n0\r\n\r\n", 400, "a bad chunk size"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", 400, "a chunk longer than said"),
            ("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n", 400, "bare LF in the chunks"),
        ]
        for (request, expected, what) in cases {
            XCTAssertEqual(try status(request), expected, what)
        }
        // What is well formed is read: a chunked body with an extension and a trailer, a
        // repeated equal Content-Length, HTTP/1.0 without Host.
        XCTAssertTrue(try answer("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n")
                        .contains("POST /c body=abcde"))
        XCTAssertTrue(try answer("POST /l HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                        .contains("POST /l body=ok"))
        XCTAssertTrue(try answer("GET /old HTTP/1.0\r\n\r\n").contains("GET /old body="))
        // A chunked body over the limit is refused as it comes.
        XCTAssertEqual(try status("POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10001\r\n"), 413)
    }

    /// Slowloris: connections that trickle a request head are closed at the head deadline,
    /// one address's incomplete connections are bounded (its oldest makes room), and a probe
    /// always gets in and is answered at once, whatever fills the table.
    func testSlowHeadsCannotStarveProbes() throws {
        var limits = HTTPLimits()
        (limits.headSeconds, limits.maxConnections, limits.maxIncompletePerAddress) = (1.0, 64, 16)
        let s = try server(limits)
        defer { s.stop() }
        var slow: [Int32] = []
        defer { slow.forEach { close($0) } }
        for _ in 0..<100 {
            guard let fd = loopbackConnection(s.port, receiveTimeout: 3) else { continue }
            sendAll(fd, "GET / HTTP/1.1\r\nHo")
            slow.append(fd)
        }
        usleep(200_000)
        var answered = 0, worst = 0.0
        for _ in 0..<20 {
            let probe = try httpRequest(s.port, "/healthz")
            if probe.status == 200 { answered += 1 }
            worst = max(worst, probe.seconds)
        }
        XCTAssertEqual(answered, 20, "every probe answered with 100 slow heads open")
        XCTAssertLessThan(worst, 0.5)
        // Only the newest 16 of one address stayed (less the one the first probe, from the
        // same address, displaced); they are closed with 408 at the deadline.
        usleep(1_500_000)
        var timedOut = 0, closedEarly = 0
        for fd in slow {
            let text = readAll(fd)
            if text.hasPrefix("HTTP/1.1 408 ") { timedOut += 1 } else if text.isEmpty { closedEarly += 1 }
        }
        XCTAssertEqual(timedOut, 15, "the newest incomplete connections of the address reach the head deadline")
        XCTAssertEqual(closedEarly + timedOut, 100)
    }

    /// Server-Sent Events: each event as `data:` lines; a client that goes away stops the source.
    func testEventStreamsStopWhenTheClientLeaves() throws {
        let calls = Locked(0)
        let service = try HTTPService(address: "127.0.0.1", port: 0, routes: [:], events: [
            "/events": { _ in
                { () async -> String? in
                    let n = calls.update { $0 += 1; return $0 }
                    try? await Task.sleep(nanoseconds: 20_000_000)
                    return n <= 1000 ? "event \(n)" : nil
                }
            },
        ])
        defer { service.stop() }
        let fd = try connectTo(service.port)
        sendAll(fd, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = readAll(fd, until: "event 3\n\n")
        XCTAssertTrue(first.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"), first)
        XCTAssertTrue(first.contains("\r\n\r\ndata: event 1\n\ndata: event 2\n\n"), first)
        close(fd)
        usleep(300_000)
        let after = calls.current
        usleep(300_000)
        XCTAssertLessThanOrEqual(calls.current, after + 1, "the source is not called after the client left")
        XCTAssertLessThan(calls.current, 100)
    }

    func testPortInUseAndBadAddressAreErrors() throws {
        let first = try HTTPService(address: "127.0.0.1", port: 0, routes: [:])
        defer { first.stop() }
        XCTAssertThrowsError(try HTTPService(address: "127.0.0.1", port: first.port, routes: [:])) {
            XCTAssertTrue("\($0)".contains("in use"), "\($0)")
        }
        XCTAssertThrowsError(try HTTPService(address: "localhost-ish", port: 0, routes: [:])) {
            XCTAssertTrue("\($0)".contains("not an IPv4 or IPv6 address"), "\($0)")
        }
    }

    /// Every family has a help line; durations are seconds; process metrics and build info are there.
    func testExporterWritesHelpSecondsAndProcessMetrics() throws {
        let exporter = MetricsExporter(metrics: [MetricInfo("t_jobs_total", "Jobs done."), MetricInfo("t_wait_seconds", "Waits.")],
                                       role: "test", version: "9.9")
        CoreMetrics.Counter(label: "t_jobs_total", dimensions: [("status", "ok")], factory: exporter).increment(by: 3)
        CoreMetrics.Timer(label: "t_wait_seconds", factory: exporter).recordMilliseconds(250)
        let gauge = Gauge(label: "t_gone", dimensions: [("id", "x")], factory: exporter)
        gauge.record(1)
        gauge.destroy()
        let text = String(decoding: exporter.exposition(), as: UTF8.self)
        XCTAssertTrue(text.contains("# HELP t_jobs_total Jobs done.\n"), text)
        XCTAssertTrue(text.contains("t_jobs_total{status=\"ok\"} 3\n"), text)
        XCTAssertTrue(text.contains("t_wait_seconds_bucket{le=\"0.5\"} 1\n"), text)
        XCTAssertTrue(text.contains("t_wait_seconds_bucket{le=\"0.2\"} 0\n"), text)
        XCTAssertTrue(text.contains("t_wait_seconds_sum 0.25\n"), text)
        XCTAssertFalse(text.contains("t_gone{"), "destroyed series are gone\n" + text)
        XCTAssertTrue(text.contains("tessera_build_info{version=\"9.9\",role=\"test\"} 1"), text)
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_max_fds",
                     "process_start_time_seconds", "process_virtual_memory_bytes"] {
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            let value = try XCTUnwrap(line.flatMap { Double($0.split(separator: " ")[1]) }, name)
            if name != "process_cpu_seconds_total" { XCTAssertGreaterThan(value, 0, name) }
        }
        let rss = text.split(separator: "\n").first { $0.hasPrefix("process_resident_memory_bytes ") }!
        XCTAssertGreaterThan(Double(rss.split(separator: " ")[1])!, 1_000_000, "resident memory in bytes, not pages")
    }
}
