import CoreMetrics
import Foundation
import TesseraService
import XCTest

/// The HTTP service and the metrics exporter, in process.
final class HTTPServiceTests: XCTestCase {
    func get(_ port: Int, _ path: String, method: String = "GET") throws -> (status: Int, headers: String, body: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else { throw POSIXError(.ECONNREFUSED) }
        let request = Array("\(method) \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            response += buffer[..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        let split = text.range(of: "\r\n\r\n")
        let head = split.map { String(text[..<$0.lowerBound]) } ?? text
        return (Int(head.split(separator: " ")[1]) ?? 0, head, split.map { String(text[$0.upperBound...]) } ?? "")
    }

    func testRoutesStatusesAndMethods() throws {
        let service = try HTTPService(address: "127.0.0.1", port: 0, routes: [
            "/hello": { _, query in .text("hello \(query["name"] ?? "?")\n") },
            "/down": { _, _ in .text("no\n", status: 503) },
        ])
        defer { service.stop() }
        XCTAssertGreaterThan(service.port, 0, "port 0 picks a free port")
        let hello = try get(service.port, "/hello?name=tessera")
        XCTAssertEqual(hello.status, 200)
        XCTAssertEqual(hello.body, "hello tessera\n")
        XCTAssertTrue(hello.headers.lowercased().contains("content-type: text/plain"), hello.headers)
        XCTAssertEqual(try get(service.port, "/down").status, 503)
        XCTAssertEqual(try get(service.port, "/nope").status, 404)
        XCTAssertEqual(try get(service.port, "/hello", method: "POST").status, 405)
        let head = try get(service.port, "/hello", method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.body, "")
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
