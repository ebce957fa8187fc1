import Foundation
import TesseraTestSupport
import XCTest

/// The HTTP JSON API with curl, against a real coordinator and real workers: tokens by
/// role, submission in JSON and YAML with the job file's errors, listing, progress as
/// Server-Sent Events until the job ends, results paged through `Link`, cancel, retry.
final class APITests: APITestCase {
    func testClientsSubmitFollowPageAndCancelTheirOwnJobsOnly() throws {
        let port = freePort()
        base = "http://127.0.0.1:\(port)"
        let cluster = try Cluster()
        try FileManager.default.createDirectory(atPath: cluster.dir + "/tokens", withIntermediateDirectories: true)
        let alice = try token(cluster, "alice"), bob = try token(cluster, "bob"), root = try token(cluster, "root", role: "admin")
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--api-tokens", cluster.dir + "/tokens",
                                        "--allow-read", cluster.dir, "--allow-write", cluster.dir]
        _ = try cluster.makeImages(5)
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: cluster.dir + "/in/broken.jpg"))
        try cluster.startCoordinator()
        try waitReady(port)

        // Who may call.
        XCTAssertEqual(try call("GET", "/api/v1/jobs").status, 401)
        XCTAssertEqual(try call("GET", "/api/v1/jobs").headers["www-authenticate"], "Bearer")
        XCTAssertEqual(try call("GET", "/api/v1/jobs", token: "tsr_" + String(repeating: "0", count: 64)).status, 401)
        XCTAssertEqual(try call("GET", "/api/v1/nothing", token: alice).status, 404)
        XCTAssertEqual(try call("PUT", "/api/v1/jobs", token: alice).status, 405)

        // Submitting: YAML and JSON bodies, the job file's validation with a line number.
        let yaml = "name: api-yaml\ninputs: [\(cluster.dir)/in]\noutput: \(cluster.dir)/out-yaml\noutputs: [{preset: favicon}]\n"
        let created = try call("POST", "/api/v1/jobs", token: alice, body: yaml, type: "application/yaml")
        XCTAssertEqual(created.status, 201, created.body)
        let job = try XCTUnwrap(created.json["job"] as? String)
        XCTAssertEqual(created.headers["location"], "/api/v1/jobs/\(job)")
        XCTAssertEqual(created.json["tasks"] as? Int, 6)
        let json = #"{"name": "api-json", "inputs": ["\#(cluster.dir)/in"], "output": "\#(cluster.dir)/out-json", "outputs": [{"preset": "favicon"}]}"#
        let other = try call("POST", "/api/v1/jobs", token: bob, body: json)
        XCTAssertEqual(other.status, 201, other.body)
        let bobsJob = try XCTUnwrap(other.json["job"] as? String)
        let bad = try call("POST", "/api/v1/jobs", token: alice, body: "name: x\ninputs: [/in]\noutput: /tmp/o\nqualty: 3\n",
                           type: "application/yaml")
        XCTAssertEqual(bad.status, 422, bad.body)
        let error = try XCTUnwrap(bad.json["error"] as? [String: Any])
        XCTAssertEqual(error["code"] as? String, "invalid-job")
        XCTAssertTrue((error["message"] as? String ?? "").contains("request body:4"), "\(error)")
        XCTAssertEqual(try call("POST", "/api/v1/jobs", token: alice, body: "x", type: "text/plain").status, 415)

        // Each client sees its own jobs; an admin sees all.
        func ids(_ r: Reply) -> Set<String> { Set(((r.json["jobs"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }) }
        XCTAssertEqual(ids(try call("GET", "/api/v1/jobs", token: alice)), [job])
        XCTAssertEqual(ids(try call("GET", "/api/v1/jobs", token: bob)), [bobsJob])
        XCTAssertEqual(ids(try call("GET", "/api/v1/jobs", token: root)), [job, bobsJob])
        let first = try call("GET", "/api/v1/jobs?limit=1", token: root)
        XCTAssertEqual(ids(first), [bobsJob], "the most recent first")
        XCTAssertEqual(first.headers["link"], "</api/v1/jobs?limit=1&offset=1>; rel=\"next\"")
        XCTAssertEqual(ids(try call("GET", "/api/v1/jobs?limit=1&offset=1", token: root)), [job])
        XCTAssertEqual(try call("GET", "/api/v1/jobs/\(job)", token: bob).status, 403)
        XCTAssertEqual(try call("DELETE", "/api/v1/jobs/\(job)", token: bob).status, 403)
        XCTAssertEqual(try call("GET", "/api/v1/jobs/j-nosuchjob", token: root).status, 404)
        XCTAssertEqual(try call("GET", "/api/v1/jobs?state=bogus", token: alice).status, 400)

        // Bob cancels his job before any worker runs it.
        let cancelled = try call("DELETE", "/api/v1/jobs/\(bobsJob)", token: bob)
        XCTAssertEqual(cancelled.status, 200, cancelled.body)
        XCTAssertEqual(cancelled.json["state"] as? String, "cancelled")
        XCTAssertEqual(cancelled.json["cancelled"] as? Int, 6)

        // HEAD on the events of a job still queued: the stream's head at once, not its events.
        let head = try runProcess("curl", ["-s", "-X", "HEAD", "-D", "-", "-o", "/dev/null", "--max-time", "5",
                                           "-H", "Authorization: Bearer \(alice)", base + "/api/v1/jobs/\(job)/events"])
        XCTAssertEqual(head.status, 0, "curl ended before its 5 s limit: \(head.stderr)")
        XCTAssertTrue(head.stdout.hasPrefix("HTTP/1.1 200") && head.stdout.lowercased().contains("content-type: text/event-stream"),
                      head.stdout)

        // A worker runs Alice's job; its progress comes as events until it ends.
        try cluster.startWorker()
        let events = try call("GET", "/api/v1/jobs/\(job)/events", token: alice, extra: ["-N", "--max-time", "60"])
        XCTAssertEqual(events.status, 200)
        XCTAssertEqual(events.headers["content-type"], "text/event-stream")
        let statuses = events.body.split(separator: "\n").filter { $0.hasPrefix("data: ") }
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.dropFirst(6).utf8)) as? [String: Any] }
        XCTAssertGreaterThanOrEqual(statuses.count, 1)
        XCTAssertEqual(statuses.last?["state"] as? String, "failed", "the stream ends with the job: \(events.body)")
        XCTAssertEqual(statuses.last?["succeeded"] as? Int, 5)
        XCTAssertEqual(statuses.last?["progress"] as? Double, 1)

        // Results, two to a page, followed through Link; only the failed one with status=failed.
        var seen: [String] = []
        var next: String? = "/api/v1/jobs/\(job)/results?limit=2"
        var pages = 0
        while let path = next {
            let page = try call("GET", path, token: alice)
            XCTAssertEqual(page.status, 200, page.body)
            XCTAssertEqual(page.headers["content-type"], "application/x-ndjson")
            for line in page.body.split(separator: "\n") {
                let record = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                seen.append(try XCTUnwrap(record["input"] as? String))
            }
            next = page.headers["link"].flatMap { link in
                link.hasSuffix("rel=\"next\"") ? String(link.dropFirst().prefix { $0 != ">" }) : nil
            }
            pages += 1
        }
        XCTAssertEqual(seen.count, 6)
        XCTAssertEqual(Set(seen).count, 6, "every task once")
        XCTAssertEqual(pages, 3 + 1, "pages of 2, the last one empty: \(seen)")
        let failed = try call("GET", "/api/v1/jobs/\(job)/results?status=failed", token: alice)
        XCTAssertEqual(failed.body.split(separator: "\n").count, 1)
        XCTAssertTrue(failed.body.contains("broken.jpg"), failed.body)

        // The broken input fixed, its task runs again.
        try FileManager.default.copyItem(atPath: cluster.dir + "/in/img0001.jpg", toPath: cluster.dir + "/in/fixed.jpg")
        try FileManager.default.removeItem(atPath: cluster.dir + "/in/broken.jpg")
        try FileManager.default.copyItem(atPath: cluster.dir + "/in/fixed.jpg", toPath: cluster.dir + "/in/broken.jpg")
        let retried = try call("POST", "/api/v1/jobs/\(job)/retry-failed", token: alice)
        XCTAssertEqual(retried.status, 200, retried.body)
        XCTAssertEqual(retried.json["retried"] as? Int, 1)
        let done = try cluster.waitFor(job) { $0.finished != nil && $0.state != .running }
        XCTAssertEqual(done.succeeded, 6)
        XCTAssertEqual(done.failed, 0)

        // A revoked token is refused at once (the folder is re-read every 2 s).
        try FileManager.default.removeItem(atPath: cluster.dir + "/tokens/clients/bob.token")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try call("GET", "/api/v1/jobs", token: bob).status != 401 { usleep(200_000) }
        XCTAssertEqual(try call("GET", "/api/v1/jobs", token: bob).status, 401)
    }

    /// The OpenAPI document: served as kept in docs/api/, and true to the server: every
    /// documented route answers with a documented status, and every status the API answered
    /// in these requests is documented for its route.
    func testTheOpenAPIDocumentIsServedAndTrue() throws {
        let port = freePort()
        base = "http://127.0.0.1:\(port)"
        let cluster = try Cluster()
        try FileManager.default.createDirectory(atPath: cluster.dir + "/tokens", withIntermediateDirectories: true)
        let alice = try token(cluster, "alice"), bob = try token(cluster, "bob")
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--api-tokens", cluster.dir + "/tokens",
                                        "--allow-read", cluster.dir, "--allow-write", cluster.dir]
        _ = try cluster.makeImages(2)
        try cluster.startCoordinator()
        try waitReady(port)
        let served = try call("GET", "/api/v1/openapi.json")
        XCTAssertEqual(served.status, 200)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let kept = try String(contentsOf: root.appendingPathComponent("docs/api/openapi.json"), encoding: .utf8)
        XCTAssertEqual(served.body + "\n", kept, "docs/api/openapi.json is what the server serves")
        let doc = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(kept.utf8)) as? [String: Any])
        XCTAssertEqual(doc["openapi"] as? String, "3.1.0")
        let paths = try XCTUnwrap(doc["paths"] as? [String: [String: Any]])

        let job = #"{"name": "n", "inputs": ["\#(cluster.dir)/in"], "output": "\#(cluster.dir)/out", "outputs": [{"preset": "favicon"}]}"#
        let id = try XCTUnwrap(try call("POST", "/api/v1/jobs", token: alice, body: job).json["job"] as? String)
        try cluster.startWorker()
        _ = try cluster.waitFor(id) { $0.finished != nil }
        // (route template, method, path, token, body, type)
        var requests: [(String, String, String, String?, String?, String)] = [
            ("/api/v1/openapi.json", "GET", "/api/v1/openapi.json", nil, nil, ""),
            ("/api/v1/jobs", "POST", "/api/v1/jobs", alice, job, "application/json"),
            ("/api/v1/jobs", "POST", "/api/v1/jobs", alice, "name: [", "application/yaml"),
            ("/api/v1/jobs", "POST", "/api/v1/jobs", alice, "x", "text/plain"),
            ("/api/v1/jobs", "POST", "/api/v1/jobs", nil, job, "application/json"),
            ("/api/v1/jobs", "GET", "/api/v1/jobs", alice, nil, ""),
            ("/api/v1/jobs", "GET", "/api/v1/jobs?limit=0", alice, nil, ""),
            ("/api/v1/jobs", "GET", "/api/v1/jobs", nil, nil, ""),
        ]
        for (template, sub) in [("/api/v1/jobs/{id}", ""), ("/api/v1/jobs/{id}/results", "/results"),
                                ("/api/v1/jobs/{id}/events", "/events"), ("/api/v1/jobs/{id}/retry-failed", "/retry-failed")] {
            let method = sub == "/retry-failed" ? "POST" : "GET"
            requests += [(template, method, "/api/v1/jobs/\(id)\(sub)", alice, nil, ""),
                         (template, method, "/api/v1/jobs/\(id)\(sub)", bob, nil, ""),
                         (template, method, "/api/v1/jobs/j-none\(sub)", alice, nil, ""),
                         (template, method, "/api/v1/jobs/\(id)\(sub)", nil, nil, "")]
        }
        requests += [("/api/v1/jobs/{id}/results", "GET", "/api/v1/jobs/\(id)/results?status=nope", alice, nil, ""),
                     ("/api/v1/jobs/{id}", "DELETE", "/api/v1/jobs/\(id)", alice, nil, ""),
                     ("/api/v1/jobs/{id}", "DELETE", "/api/v1/jobs/\(id)", bob, nil, "")]
        var answered: [String: Set<String>] = [:]
        for (template, method, path, token, body, type) in requests {
            let r = try call(method, path, token: token, body: body, type: type, extra: ["--max-time", "30"])
            let operation = try XCTUnwrap(paths[template]?[method.lowercased()] as? [String: Any], "\(method) \(template) is documented")
            let statuses = try XCTUnwrap(operation["responses"] as? [String: Any]).keys
            XCTAssertTrue(statuses.contains(String(r.status)), "\(method) \(path) answered \(r.status), documented: \(statuses.sorted())")
            answered["\(method) \(template)", default: []].insert(String(r.status))
        }
        // Every documented operation was called.
        for (template, item) in paths {
            for method in item.keys where method != "parameters" {
                XCTAssertNotNil(answered["\(method.uppercased()) \(template)"], "\(method) \(template) was not tried")
            }
        }
    }

    /// A 50,000-task job cancelled while it runs keeps what finished and cancels the rest;
    /// the 10,000 results of another come page by page (never all in one answer), each once.
    func testCancelMidJobAndPageTenThousandResults() throws {
        let port = freePort()
        base = "http://127.0.0.1:\(port)"
        let cluster = try Cluster()
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--api-insecure"]
        try cluster.startCoordinator()
        try waitReady(port)
        func noop(_ n: Int, _ name: String) throws -> String {
            let manifest = cluster.dir + "/\(name).txt"
            try (0..<n).map { "/nonexistent/d\($0 / 1000)/f\($0).jpg" }.joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
            let r = try call("POST", "/api/v1/jobs", body: #"{"name": "\#(name)", "kind": "noop", "inputs": [{"manifest": "\#(manifest)"}], "output": "\#(cluster.dir)/\#(name)"}"#)
            XCTAssertEqual(r.status, 201, r.body)
            return try XCTUnwrap(r.json["job"] as? String)
        }
        let long = try noop(50_000, "long")
        try cluster.startWorker()
        let started = try cluster.waitFor(long, timeout: 60) { $0.succeeded > 0 }
        XCTAssertLessThan(started.succeeded, 50_000)
        let cancelled = try call("DELETE", "/api/v1/jobs/\(long)")
        XCTAssertEqual(cancelled.status, 200, cancelled.body)
        let end = try cluster.waitFor(long, timeout: 60) { $0.finished != nil }
        XCTAssertEqual(end.state, .cancelled)
        XCTAssertGreaterThan(end.succeeded, 0)
        XCTAssertGreaterThan(end.cancelled, 0)
        XCTAssertEqual(end.succeeded + end.cancelled, 50_000)

        let job = try noop(10_000, "paged")
        XCTAssertEqual(try cluster.waitFor(job, timeout: 120) { $0.finished != nil }.succeeded, 10_000)
        var inputs = Set<String>()
        var next: String? = "/api/v1/jobs/\(job)/results?limit=1000"
        var pages = 0
        while let path = next {
            let page = try call("GET", path)
            XCTAssertEqual(page.status, 200)
            let lines = page.body.split(separator: "\n")
            XCTAssertLessThanOrEqual(lines.count, 1000)
            for line in lines {
                let record = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                XCTAssertTrue(inputs.insert(try XCTUnwrap(record["input"] as? String)).inserted)
            }
            next = page.headers["link"].map { String($0.dropFirst().prefix { $0 != ">" }) }
            pages += 1
        }
        XCTAssertEqual(inputs.count, 10_000)
        XCTAssertEqual(pages, 11)
    }

    /// Submissions per token are bounded (429 with Retry-After); bodies are bounded (413).
    func testSubmissionsAndBodiesAreBounded() throws {
        let port = freePort()
        base = "http://127.0.0.1:\(port)"
        let cluster = try Cluster()
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--api-insecure", "--api-cors", "https://app.example"]
        _ = try cluster.makeImages(1)
        try cluster.startCoordinator()
        try waitReady(port)
        // Browsers from the one origin allowed: the preflight and the answers say so.
        let preflight = try call("OPTIONS", "/api/v1/jobs", extra: ["-H", "Origin: https://app.example",
                                                                   "-H", "Access-Control-Request-Method: POST"])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.headers["access-control-allow-origin"], "https://app.example")
        XCTAssertTrue(preflight.headers["access-control-allow-headers"]?.contains("Authorization") == true)
        XCTAssertEqual(try call("GET", "/api/v1/jobs").headers["access-control-allow-origin"], "https://app.example")
        let job = #"{"name": "n", "inputs": ["\#(cluster.dir)/in"], "output": "\#(cluster.dir)/out", "outputs": [{"preset": "favicon"}]}"#
        var statuses: [Int] = []
        var retryAfter: String?
        for _ in 0..<62 {
            let r = try call("POST", "/api/v1/jobs", body: job)
            statuses.append(r.status)
            if r.status == 429 { retryAfter = r.headers["retry-after"] }
        }
        XCTAssertEqual(statuses.filter { $0 == 201 }.count, 60, "\(statuses)")
        XCTAssertEqual(statuses.suffix(2), [429, 429])
        XCTAssertNotNil(retryAfter.flatMap(Int.init))
        let huge = "name: n\n# " + String(repeating: "x", count: 1 << 20) + "\n"
        XCTAssertEqual(try call("POST", "/api/v1/jobs", body: huge, type: "application/yaml").status, 413)

        // A stream that follows a queued job ends when the coordinator stops (no worker: it
        // never runs), and the coordinator exits.
        let queued = try XCTUnwrap(try call("GET", "/api/v1/jobs?state=queued").json["jobs"] as? [[String: Any]]).first?["id"] as? String
        let stream = Process()
        stream.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        stream.arguments = ["-sN", "--max-time", "60", "\(base)/api/v1/jobs/\(try XCTUnwrap(queued))/events"]
        stream.standardOutput = FileHandle.nullDevice
        try stream.run()
        usleep(700_000)
        XCTAssertTrue(stream.isRunning, "the stream waits for the job")
        let coordinator = try XCTUnwrap(cluster.coordinator)
        kill(coordinator.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(15)
        while (stream.isRunning || coordinator.isRunning) && Date() < deadline { usleep(50_000) }
        XCTAssertFalse(stream.isRunning, "the event stream ended with the coordinator")
        XCTAssertFalse(coordinator.isRunning, "the coordinator exited with a stream open")
        if stream.isRunning { stream.terminate() }
    }
}
