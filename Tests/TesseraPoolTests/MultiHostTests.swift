import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import XCTest

/// The pool across hosts: a coordinator, three workers and a client, each in its own
/// network namespace on a private subnet, over TCP with CURVE and `--inline` data (no
/// shared storage is assumed). One worker's link is cut mid-job; the job still ends
/// with every task exactly once. Unknown keys are refused, for a worker and a client.
final class MultiHostTests: XCTestCase {
    func testJobAcrossHostsWithCurveSurvivesACutLink() throws {
        let lab = try NetworkLab(hosts: ["coordinator", "w1", "w2", "w3", "client"])
        let c = try Cluster()
        let binary = Cluster.binary.path
        func tessera(_ host: String, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
            try lab.run(host, ["timeout", "180", binary] + args)
        }

        // Keys: the coordinator allows w1–w3 and the client; "stranger" is unknown.
        let keys = c.dir + "/keys", allow = c.dir + "/allow"
        for name in ["coordinator", "w1", "w2", "w3", "client", "stranger"] {
            XCTAssertEqual(try NetworkLab.exec([binary, "keygen", name, "-o", keys]).status, 0)
        }
        try Cluster.allow(allow, keys: keys, workers: ["w1", "w2", "w3"], clients: ["client"])
        let serverKey = "\(keys)/coordinator.pub"
        func keyArgs(_ name: String) -> [String] { ["--curve-secret", "\(keys)/\(name).secret", "--server-key", serverKey] }

        // 160 inputs: 40 distinct 1600x1200 photos-like JPEGs, each in four folders.
        let originals = try c.makeImages(40, width: 1600, height: 1200)
        var inputs: [String] = []
        for copy in 0..<4 {
            let folder = "\(c.dir)/in/copy\(copy)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for o in originals {
                let path = folder + "/" + URL(fileURLWithPath: o).lastPathComponent
                try FileManager.default.copyItem(atPath: o, toPath: path)
                inputs.append(path)
            }
        }
        for o in originals { try FileManager.default.removeItem(atPath: o) }
        let jobFile = c.dir + "/job.yaml"
        try """
            name: multi-host
            kind: thumbnail
            inputs:
              - \(c.dir)/in
            output: \(c.dir)/out
            outputs:
              - preset: compressedThumbnail
            """.write(toFile: jobFile, atomically: true, encoding: .utf8)

        let endpoint = "tcp://\(lab.address("coordinator")):5555"
        let metricsURL = "http://\(lab.address("coordinator")):9090/metrics"
        _ = try lab.spawn("coordinator", [binary, "coordinator", "--bind", endpoint, "--journal", c.journal,
                                          "--curve-secret", "\(keys)/coordinator.secret", "--allow", allow,
                                          "--allow-read", c.dir, "--allow-write", c.dir,
                                          "--worker-timeout", "3", "--metrics-port", "9090", "--metrics-address", "0.0.0.0"],
                          log: c.dir + "/coordinator.log")
        for w in ["w1", "w2", "w3"] {
            _ = try lab.spawn(w, [binary, "worker", "--connect", endpoint, "--id", w, "--inline", "--log-level", "info"] + keyArgs(w),
                              log: c.dir + "/\(w).log")
        }
        // A worker with an unknown key, on w3's host.
        _ = try lab.spawn("w3", [binary, "worker", "--connect", endpoint, "--id", "stranger", "--inline"] + keyArgs("stranger"),
                          log: c.dir + "/stranger.log")

        // Wait until the three known workers are connected.
        var connected = 0
        let upBy = Date().addingTimeInterval(30)
        while connected < 3 && Date() < upBy {
            if let s = try? tessera("client", ["status", "--coordinator", endpoint, "--json"] + keyArgs("client")), s.status == 0,
               let reply = try? JSONDecoder().decode(StatusReply.self, from: Data(s.out.utf8)) {
                connected = reply.workers
            }
            if connected < 3 { usleep(200_000) }
        }
        XCTAssertEqual(connected, 3, "workers connected over CURVE\n" + c.logs())

        // A client with an unknown key cannot submit (and is told why).
        let refused = try tessera("client", ["submit", jobFile, "--coordinator", endpoint] + keyArgs("stranger"))
        XCTAssertEqual(refused.status, 4, refused.err)
        XCTAssertTrue(refused.err.contains("allow-list"), refused.err)
        // Nor can one without keys: non-loopback TCP needs them (or --insecure, which the coordinator refuses).
        XCTAssertEqual(try tessera("client", ["status", "--coordinator", endpoint]).status, 2)
        XCTAssertEqual(try tessera("client", ["status", "--coordinator", endpoint, "--insecure"]).status, 4)

        // Submit, watch the queue drain over the metrics endpoint, cut w1 a quarter of the way in.
        let started = Date()
        let submit = try tessera("client", ["submit", jobFile, "--coordinator", endpoint, "--json"] + keyArgs("client"))
        XCTAssertEqual(submit.status, 0, submit.err)
        let job = try JSONDecoder().decode(SubmitReply.self, from: Data(submit.out.utf8)).job
        var depths: [Int] = []
        var cutAt: Int?
        var lastMetrics = ""
        let deadline = Date().addingTimeInterval(150)
        while Date() < deadline {
            let m = try lab.run("client", ["curl", "-s", "--max-time", "2", metricsURL]).out
            if let depth = metric(m, "tessera_queue_depth"), let done = metric(m, "tessera_tasks_completed_total{status=\"succeeded\"}") {
                lastMetrics = m
                // (The text is rendered every 0.5 s: skip what predates the job.)
                if depths.last != depth && (depth > 0 || !depths.isEmpty) { depths.append(depth) }
                if cutAt == nil && done >= inputs.count / 4 {
                    try lab.setLink("w1", up: false)
                    cutAt = done
                }
                if done == inputs.count { break }
            }
            usleep(100_000)
        }
        let seconds = Date().timeIntervalSince(started)
        let cut = try XCTUnwrap(cutAt, "w1's link was cut mid-job\n" + c.logs())
        XCTAssertLessThan(cut, inputs.count, "the cut came before the end")
        let end = try tessera("client", ["wait", job, "--coordinator", endpoint, "--json"] + keyArgs("client"))
        XCTAssertEqual(end.status, 0, end.err + c.logs())

        // Every task exactly once, outputs written by the coordinator and decodable.
        let results = try tessera("client", ["results", job, "--coordinator", endpoint] + keyArgs("client"))
        XCTAssertEqual(results.status, 0, results.err)
        let records = try results.out.split(separator: "\n").map { try JSONDecoder().decode(TaskRecord.self, from: Data($0.utf8)) }
        try c.assertExactlyOnce(records, inputs: inputs)
        XCTAssertTrue(records.allSatisfy { $0.status == .succeeded })
        var byWorker: [String: Int] = [:]
        for r in records { byWorker[String((r.worker ?? "?").split(separator: "@").first ?? ""), default: 0] += 1 }
        XCTAssertNil(byWorker["stranger"], "the unknown worker got no task")
        XCTAssertGreaterThan(byWorker["w1", default: 0], 0, "w1 worked before its link was cut")
        XCTAssertEqual(byWorker.values.reduce(0, +), inputs.count)
        XCTAssertEqual(metric(lastMetrics, "tessera_queue_depth"), 0)
        XCTAssertGreaterThan(depths.first ?? 0, 0, "the queue was seen non-empty")
        // The queue drains; it may only grow back by the tasks w1 held when it was found lost
        // (requeued, at most its credit of 2), even after the others had emptied it.
        let rises = zip(depths, depths.dropFirst()).map { max(0, $1 - $0) }.reduce(0, +)
        XCTAssertLessThanOrEqual(rises, 2, "the queue only drains, but for w1's requeued tasks: \(depths)")
        XCTAssertGreaterThan(depths.first ?? 0, depths.last ?? 0)
        let log = try String(contentsOfFile: c.dir + "/coordinator.log", encoding: .utf8)
        let strangerKey = try CurveKeyPair.loadPublic("\(keys)/stranger.pub")
        XCTAssertTrue(log.contains("refused CURVE key \(strangerKey.prefix(8))"), log)
        let after = try lab.run("client", ["curl", "-s", "--max-time", "2", metricsURL]).out
        XCTAssertGreaterThanOrEqual(metric(after, "tessera_workers_lost_total") ?? 0, 1, "w1 counted as lost")
        // w1 held tasks (credit 2) when it was cut off: those went to the other workers.
        XCTAssertGreaterThanOrEqual(metric(after, "tessera_tasks_requeued_total") ?? 0, 1, "w1's tasks requeued")

        // Bring w1 back: its late reports (if any) are deduplicated; nothing changes.
        try lab.setLink("w1", up: true)
        sleep(4)
        let again = try tessera("client", ["results", job, "--coordinator", endpoint] + keyArgs("client"))
        XCTAssertEqual(again.out.split(separator: "\n").count, inputs.count)
        let status = try tessera("client", ["status", job, "--coordinator", endpoint, "--json"] + keyArgs("client"))
        XCTAssertTrue(status.out.contains("\"succeeded\":\(inputs.count)"), status.out)

        let bytesIn = records.reduce(0) { $0 + $1.bytesIn }, bytesOut = records.reduce(0) { $0 + $1.bytesOut }
        print(String(format: "multi-host: %d tasks over CURVE in %.2f s (%.1f tasks/s), %.1f MB in / %.1f MB out inline; per worker %@; w1 cut at %d done; queue depth seen %@",
                     inputs.count, seconds, Double(inputs.count) / seconds, Double(bytesIn) / 1e6, Double(bytesOut) / 1e6,
                     byWorker.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "), cut,
                     depths.map(String.init).joined(separator: "→")))
    }

    /// A sample's value from Prometheus text (`name` including any labels).
    func metric(_ text: String, _ name: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1)).map { Int($0) }
        }
        return nil
    }
}
