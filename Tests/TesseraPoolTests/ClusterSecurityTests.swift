import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import XCTest

/// CURVE authentication, the endpoint policy, key files, and the metrics endpoint.
final class ClusterSecurityTests: XCTestCase {
    func testKeygenWritesPrivateSecretsAndLoads() throws {
        let c = try Cluster()
        let r = try tessera(["keygen", "node", "-o", c.dir + "/keys"])
        XCTAssertEqual(r.status, 0, r.err)
        var st = stat()
        XCTAssertEqual(stat(c.dir + "/keys/node.secret", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        let pair = try CurveKeyPair.load(secretFile: c.dir + "/keys/node.secret")
        XCTAssertEqual(try CurveKeyPair.loadPublic(c.dir + "/keys/node.pub"), pair.publicKey)
        XCTAssertEqual(try tessera(["keygen", "node", "-o", c.dir + "/keys"]).status, 2, "no silent overwrite")
        chmod(c.dir + "/keys/node.secret", 0o644)
        XCTAssertThrowsError(try CurveKeyPair.load(secretFile: c.dir + "/keys/node.secret"), "readable by others")
    }

    func testNonLoopbackNeedsKeysOrInsecure() throws {
        XCTAssertTrue(EndpointPolicy.isLocal("tcp://127.0.0.1:5555"))
        XCTAssertTrue(EndpointPolicy.isLocal("tcp://localhost:5555"))
        XCTAssertTrue(EndpointPolicy.isLocal("tcp://[::1]:5555"))
        XCTAssertTrue(EndpointPolicy.isLocal("ipc:///tmp/x.sock"))
        XCTAssertFalse(EndpointPolicy.isLocal("tcp://*:5555"))
        XCTAssertFalse(EndpointPolicy.isLocal("tcp://10.0.0.5:5555"))
        XCTAssertFalse(EndpointPolicy.isLocal("tcp://coordinator:5555"))
        let c = try Cluster()
        let refused = try tessera(["coordinator", "--bind", "tcp://*:0", "--journal", c.dir + "/j.sqlite"])
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.err.contains("CURVE keys are required"), refused.err)
        let worker = try tessera(["worker", "--connect", "tcp://10.255.255.1:5555"])
        XCTAssertEqual(worker.status, 2)
        XCTAssertTrue(worker.err.contains("--insecure"), worker.err)
    }

    /// CURVE on: allowed worker and client work; an unknown worker gets nothing and an
    /// unknown client cannot submit; adding the key to the allow-list lets it in, no restart.
    func testCurveAllowList() throws {
        let c = try Cluster()
        for name in ["coordinator", "good", "client", "stranger"] {
            XCTAssertEqual(try tessera(["keygen", name, "-o", c.dir + "/keys"]).status, 0)
        }
        try Cluster.allow(c.dir + "/allow", keys: c.dir + "/keys", workers: ["good"], clients: ["client"])
        let port = 40000 + Int(getpid() % 20000)
        let endpoint = "tcp://127.0.0.1:\(port)"
        let coordinator = try Cluster.spawn(["coordinator", "--bind", endpoint, "--journal", c.journal,
                                             "--curve-secret", c.dir + "/keys/coordinator.secret", "--allow", c.dir + "/allow",
                                             "--allow-read", c.dir, "--allow-write", c.dir,
                                             "--metrics-port", "0", "--metrics-address", "127.0.0.1"],
                                            log: c.dir + "/coordinator.log")
        c.coordinator = coordinator
        let server = c.dir + "/keys/coordinator.pub"
        let client = CoordinatorClient(endpoint: endpoint, timeout: 10,
                                       curve: (try CurveKeyPair.load(secretFile: c.dir + "/keys/client.secret"),
                                               try CurveKeyPair.loadPublic(server)))
        var up = false
        for _ in 0..<100 where !up {
            up = (try? client.ping()) != nil
            if !up { usleep(50_000) }
        }
        XCTAssertTrue(up, c.logs())
        _ = try c.makeImages(20, width: 320, height: 240)
        c.workers.append(try Cluster.spawn(["worker", "--connect", endpoint, "--curve-secret", c.dir + "/keys/stranger.secret",
                                            "--server-key", server], log: c.dir + "/stranger.log"))
        c.workers.append(try Cluster.spawn(["worker", "--connect", endpoint, "--curve-secret", c.dir + "/keys/good.secret",
                                            "--server-key", server], log: c.dir + "/good.log"))
        let job = try client.submit(try c.job(presets: ["favicon"])).job
        let end = try client.wait(job: job, within: 300)
        XCTAssertEqual(end.succeeded, 20)
        let records = try client.results(job: job).map { try JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
        XCTAssertEqual(Set(records.compactMap(\.worker).map { $0.split(separator: "@").first! }).count, 1, "only the good worker ran tasks")
        XCTAssertEqual(try client.status().workers, 1)
        // The stranger may still be starting when the good worker has finished the job: its
        // refusal is looked for until it comes (10 s at most).
        let strangerKey = try CurveKeyPair.loadPublic(c.dir + "/keys/stranger.pub")
        var log = ""
        for _ in 0..<100 {
            log = try String(contentsOfFile: c.dir + "/coordinator.log", encoding: .utf8)
            if log.contains("refused CURVE key \(strangerKey.prefix(8))") { break }
            usleep(100_000)
        }
        XCTAssertTrue(log.contains("refused CURVE key \(strangerKey.prefix(8))"), log)
        // Clients without keys, or with unknown ones, are refused at the handshake.
        let plain = CoordinatorClient(endpoint: endpoint, timeout: 10)
        XCTAssertThrowsError(try plain.submit(try c.job(presets: ["favicon"]))) { XCTAssertTrue($0 is AuthenticationRefused, "\($0)") }
        let stranger = CoordinatorClient(endpoint: endpoint, timeout: 10,
                                         curve: (try CurveKeyPair.load(secretFile: c.dir + "/keys/stranger.secret"),
                                                 try CurveKeyPair.loadPublic(server)))
        XCTAssertThrowsError(try stranger.submit(try c.job(presets: ["favicon"]))) { error in
            XCTAssertTrue("\(error)".contains("not in the coordinator's allow-list"), "\(error)")
        }
        XCTAssertEqual(try client.status().jobs.count, 1, "nothing was submitted by the refused clients")
        // The CLI says why and exits 4.
        let cli = try tessera(["status", "--coordinator", endpoint, "--curve-secret", c.dir + "/keys/stranger.secret",
                               "--server-key", server])
        XCTAssertEqual(cli.status, 4, cli.err)
        XCTAssertTrue(cli.err.contains("allow-list"), cli.err)
        XCTAssertTrue(try String(contentsOfFile: c.dir + "/stranger.log", encoding: .utf8).contains("refused this worker's key"))
        // Allow the stranger: it is let in without a restart (reload every 3 s, worker retry ≤ 10 s).
        try FileManager.default.copyItem(atPath: c.dir + "/keys/stranger.pub", toPath: c.dir + "/allow/workers/stranger.pub")
        var admitted = false
        let deadline = Date().addingTimeInterval(30)
        while !admitted && Date() < deadline {
            admitted = (try? client.status().workers) == 2
            if !admitted { usleep(200_000) }
        }
        XCTAssertTrue(admitted, "allow-list reloaded\n" + c.logs())
    }
}
