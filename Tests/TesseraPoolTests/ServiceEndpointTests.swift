import Foundation
import TesseraService
import TesseraWire
import TesseraTestSupport
import XCTest

/// The HTTP side of the coordinator and the worker: probes that answer under idle
/// connections, Prometheus metrics that promtool accepts, loopback unless told otherwise.
final class ServiceEndpointTests: XCTestCase {
    /// Opens `count` TCP connections that never send a byte.
    static func idleConnections(_ port: Int, count: Int) -> [Int32] {
        (0..<count).compactMap { _ in loopbackConnection(port, receiveTimeout: 0) }
    }

    func waitForHTTP(_ port: Int, timeout: Double = 20) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? httpRequest(port, "/healthz"))?.status == 200 { return }
            usleep(50_000)
        }
        XCTFail("no HTTP on port \(port)")
    }

    /// `promtool check metrics` on a scrape: nothing to report (skipped without promtool).
    func promtool(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        guard let tool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first(where: FileManager.default.isExecutableFile) else {
            throw XCTSkip("promtool not installed (Debian package prometheus)")
        }
        let r = try runProcess(tool, ["check", "metrics"], input: Data(text.utf8))
        let report = r.stdout + r.stderr
        XCTAssertEqual(r.status, 0, report, file: file, line: line)
        XCTAssertEqual(report.trimmingCharacters(in: .whitespacesAndNewlines), "", "promtool: " + report, file: file, line: line)
    }

    /// The queue as an autoscaler reads it, completions, durations in seconds, per-worker
    /// memory; promtool accepts both endpoints.
    func testMetricsShowTheQueueAndPassPromtool() throws {
        let c = try Cluster()
        _ = try c.makeImages(30, width: 800, height: 600)
        let port = freePort(), workerPort = freePort()
        c.coordinatorArguments = ["--metrics-port", "\(port)"]
        try c.startCoordinator()
        let job = try c.client.submit(try c.job(presets: ["thumbnail"])).job
        usleep(700_000)
        let before = try httpRequest(port, "/metrics").body
        XCTAssertTrue(before.contains("\ntessera_queue_depth 30"), before)
        XCTAssertTrue(before.contains("tessera_job_queue_depth{job_id=\"\(job)\",job_name=\"test\",priority=\"0\"} 30"), before)
        try c.startWorker(["--metrics-port", "\(workerPort)"])
        _ = try c.client.wait(job: job, within: 300)
        // At once: a client told the job is done finds the metrics saying so.
        let after = try httpRequest(port, "/metrics").body
        XCTAssertTrue(after.contains("\ntessera_queue_depth 0"), after)
        XCTAssertFalse(after.contains("tessera_job_queue_depth{"), "a finished job's series is gone\n" + after)
        XCTAssertTrue(after.contains("tessera_tasks_completed_total{status=\"succeeded\"} 30"), after)
        XCTAssertTrue(after.contains("tessera_task_duration_seconds_count 30"), after)
        XCTAssertTrue(after.contains("tessera_stage_duration_seconds_bucket{stage=\"decode\",le=\"+Inf\"} 30"), after)
        XCTAssertTrue(after.contains("tessera_worker_peak_rss_bytes{worker_id="), after)
        XCTAssertTrue(after.contains("tessera_build_info{version="), after)
        XCTAssertTrue(after.contains("process_resident_memory_bytes "), after)
        XCTAssertTrue(after.contains("process_open_fds "), after)
        for line in after.split(separator: "\n") where line.hasPrefix("# TYPE") {
            let name = line.split(separator: " ")[2]
            XCTAssertTrue(after.contains("# HELP \(name) "), "no help for \(name)")
        }
        usleep(700_000)  // the worker publishes its tallies every half second
        let worker = try httpRequest(workerPort, "/metrics").body
        XCTAssertTrue(worker.contains("tessera_worker_tasks_total{status=\"succeeded\"} 30"), worker)
        XCTAssertTrue(worker.contains("tessera_worker_task_duration_seconds_count 30"), worker)
        XCTAssertEqual(try httpRequest(port, "/healthz").status, 200)
        XCTAssertEqual(try httpRequest(port, "/readyz").status, 200)
        XCTAssertEqual(try httpRequest(workerPort, "/readyz").status, 200)
        XCTAssertEqual(try httpRequest(port, "/nope").status, 404)
        try promtool(after)
        try promtool(worker)
    }

    /// With 100 connections open and idle, probes still answer at once (Kubernetes' probe
    /// timeout is 1 s; the old one-connection-at-a-time endpoint took 2 s per idle peer).
    func testProbesAnswerWithAHundredIdleConnections() throws {
        let c = try Cluster()
        let port = freePort(), workerPort = freePort()
        c.coordinatorArguments = ["--metrics-port", "\(port)"]
        try c.startCoordinator()
        try c.startWorker(["--metrics-port", "\(workerPort)"])
        waitForHTTP(workerPort)
        for p in [port, workerPort] {
            let idle = Self.idleConnections(p, count: 100)
            defer { idle.forEach { close($0) } }
            XCTAssertEqual(idle.count, 100)
            usleep(200_000)
            var times: [Double] = []
            for path in ["/healthz", "/readyz", "/metrics", "/healthz", "/healthz"] {
                let r = try httpRequest(p, path)
                XCTAssertEqual(r.status, 200, "\(path): \(r.body)")
                times.append(r.seconds)
            }
            times.sort()
            XCTAssertLessThan(times[times.count / 2], 0.05, "median probe time on port \(p): \(times)")
            XCTAssertLessThan(times.last!, 1.0, "slowest probe on port \(p): \(times)")
        }
    }

    /// Clients streaming endless header lines and clients trickling a byte at a time do not
    /// starve the probes: their requests are cut at 16 kB or at the 10 s deadline, and the
    /// server reads them without a task per byte (with FlyingFox, five 100 kB header lines
    /// made `/healthz` time out).
    func testProbesAnswerWhileClientsSendEndlessHeaders() throws {
        let c = try Cluster()
        let port = freePort()
        c.coordinatorArguments = ["--metrics-port", "\(port)"]
        try c.startCoordinator()
        waitForHTTP(port)
        let stop = Locked(false), refusals = Locked(0)
        let chunk = Array(("X-Filler: " + String(repeating: "a", count: 100_000)).utf8)
        let attackers = (0..<5).map { _ in
            Thread {
                while !stop.current {
                    guard let fd = Self.idleConnections(port, count: 1).first else { continue }
                    _ = Array("GET / HTTP/1.1\r\n".utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    while !stop.current, chunk.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 {}
                    var reply = [UInt8](repeating: 0, count: 64)
                    if read(fd, &reply, 64) > 12, String(decoding: reply[9..<12], as: UTF8.self) == "431" { refusals.update { $0 += 1 } }
                    close(fd)
                }
            }
        }
        attackers.forEach { $0.start() }
        let trickling = Self.idleConnections(port, count: 20)
        defer { trickling.forEach { close($0) } }
        let slowly = Array("GET / HTTP/1.1\r\nX-Slow: abcdefgh".utf8)
        var times: [Double] = []
        for i in 0..<20 {
            var byte = slowly[min(i, slowly.count - 1)]
            for fd in trickling { _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL)) }
            let r = try httpRequest(port, i % 2 == 0 ? "/healthz" : "/readyz")
            XCTAssertEqual(r.status, 200)
            times.append(r.seconds)
            usleep(50_000)
        }
        stop.update { $0 = true }
        times.sort()
        XCTAssertLessThan(times[times.count / 2], 0.05, "median probe time: \(times)")
        XCTAssertLessThan(times.last!, 1.0, "slowest probe: \(times)")
        XCTAssertGreaterThan(refusals.current, 0, "oversized heads are answered 431")
    }

    /// HTTP binds loopback unless `--metrics-address` says otherwise.
    func testHTTPBindsLoopbackByDefault() throws {
        let c = try Cluster()
        let port = freePort()
        c.coordinatorArguments = ["--metrics-port", "\(port)"]
        try c.startCoordinator()
        waitForHTTP(port)
        let listening = try String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)
        let hexPort = String(format: "%04X", port)
        let local = listening.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[3] == "0A", fields[1].hasSuffix(":" + hexPort) else { return nil }
            return String(fields[1])
        }
        XCTAssertEqual(local, ["0100007F:\(hexPort)"], "listening on 127.0.0.1 only")
    }
}
