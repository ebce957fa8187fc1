import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraTestSupport
import XCTest
import TesseraModel

struct TestTimeout: Error {}

/// A coordinator process and worker processes (the real `tessera` binary) on an
/// `ipc://` socket in a temporary directory, with a client to drive them.
final class Cluster {
    let dir: String
    let endpoint: String
    let journal: String
    var coordinator: Process?
    var workers: [Process] = []
    let client: CoordinatorClient
    var coordinatorArguments: [String] = []
    /// Added to the environment of the processes started from now on (object-storage settings).
    var environment: [String: String] = [:]

    static var binary: URL { tesseraBinary }

    init(coordinatorArguments: [String] = []) throws {
        dir = NSTemporaryDirectory() + "tessera-pool-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/in", withIntermediateDirectories: true)
        endpoint = "ipc://\(dir)/coordinator.sock"
        journal = dir + "/journal.sqlite"
        client = CoordinatorClient(endpoint: endpoint, timeout: 20)
        self.coordinatorArguments = coordinatorArguments
    }

    deinit {
        for p in workers where p.isRunning { kill(p.processIdentifier, SIGCONT); kill(p.processIdentifier, SIGKILL) }
        if let c = coordinator, c.isRunning { kill(c.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: dir)
    }

    static func spawn(_ args: [String], log: String, environment: [String: String] = [:]) throws -> Process {
        let p = Process()
        p.executableURL = binary
        p.arguments = args
        if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try p.run()
        return p
    }

    func startCoordinator() throws {
        coordinator = try Cluster.spawn(["coordinator", "--bind", endpoint, "--journal", journal, "--log-level", "info"]
                                        + coordinatorArguments, log: dir + "/coordinator-\(Date().timeIntervalSince1970).log",
                                        environment: environment)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? client.ping()) != nil { return }
            usleep(50_000)
        }
        XCTFail("coordinator did not come up")
    }

    @discardableResult
    func startWorker(_ extra: [String] = [], environment extraEnvironment: [String: String] = [:]) throws -> Process {
        let p = try Cluster.spawn(["worker", "--connect", endpoint, "--log-level", "info"] + extra,
                                  log: dir + "/worker-\(workers.count).log",
                                  environment: environment.merging(extraEnvironment) { $1 })
        workers.append(p)
        return p
    }

    /// Writes `count` distinct JPEGs of `width`x`height` into in/ (some in a subdirectory).
    func makeImages(_ count: Int, width: Int = 640, height: Int = 480) throws -> [String] {
        var paths: [String] = []
        for i in 0..<count {
            let image = PixelBuffer(width: width, height: height, layout: .rgb)
            var state = UInt64(i + 1) &* 0x9E37_79B9_7F4A_7C15
            for y in 0..<height {
                for x in 0..<width {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17
                    image.setPixel(x: x, y: y, [UInt8((x + i * 7) & 255), UInt8((y * 2 + i) & 255), UInt8(state & 63)])
                }
            }
            let sub = i % 3 == 0 ? "/sub" : ""
            let path = dir + "/in\(sub)/img\(String(format: "%04d", i)).jpg"
            try FileManager.default.createDirectory(atPath: dir + "/in\(sub)", withIntermediateDirectories: true)
            try Data(try Codec.encodeJPEG(image, quality: 85)).write(to: URL(fileURLWithPath: path))
            paths.append(path)
        }
        return paths
    }

    func job(name: String = "test", presets: [String] = ["favicon", "compressedThumbnail"], kind: JobKind = .thumbnail,
             configure: (inout JobSpec) -> Void = { _ in }) throws -> JobSpec {
        var spec = JobSpec(name: name, kind: kind, inputs: [.path(dir + "/in", patterns: [], recursive: true)],
                           output: dir + "/out",
                           outputs: try presets.map { OutputSpec(name: $0, recipe: try PresetCatalog.builtIn.recipe(named: $0)) })
        configure(&spec)
        return spec
    }

    /// Waits until `condition(status)` or fails after `timeout` seconds.
    func waitFor(_ job: String, timeout: Double = 120, _ condition: (JobStatus) -> Bool) throws -> JobStatus {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let s = try? client.status(job: job).jobs.first, condition(s) { return s }
            usleep(20_000)
        }
        XCTFail("timed out waiting for job \(job)\n\(logs().suffix(4000))")
        throw TestTimeout()
    }

    func records(_ job: String) throws -> [TaskRecord] {
        try client.results(job: job).map { try JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
    }

    /// Every input exactly once, every success's outputs present and decodable.
    func assertExactlyOnce(_ records: [TaskRecord], inputs: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(records.count, inputs.count, "one record per task", file: file, line: line)
        XCTAssertEqual(Set(records.map(\.input)), Set(inputs), "every input exactly once", file: file, line: line)
        for r in records where r.status == .succeeded {
            XCTAssertFalse(r.outputs.isEmpty, file: file, line: line)
            for o in r.outputs {
                let bytes = try XCTUnwrap(FileManager.default.contents(atPath: o.path), "missing \(o.path)", file: file, line: line)
                let px = try Renderer.decode([UInt8](bytes))
                XCTAssertEqual(px.width, o.width, file: file, line: line)
                XCTAssertEqual(px.height, o.height, file: file, line: line)
            }
        }
    }

    /// An allow-list directory: `keys/NAME.pub` copied into `workers/`, `clients/`, `admins/`.
    static func allow(_ allow: String, keys: String, workers: [String] = [], clients: [String] = [],
                      admins: [String] = []) throws {
        for (dir, names) in [("workers", workers), ("clients", clients), ("admins", admins)] {
            try FileManager.default.createDirectory(atPath: allow + "/" + dir, withIntermediateDirectories: true)
            for name in names {
                try FileManager.default.copyItem(atPath: "\(keys)/\(name).pub", toPath: "\(allow)/\(dir)/\(name).pub")
            }
        }
    }

    func logs() -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.filter { $0.hasSuffix(".log") }.sorted().map { name in
            "== \(name)\n" + ((try? String(contentsOfFile: dir + "/" + name, encoding: .utf8)) ?? "")
        }.joined(separator: "\n")
    }
}

/// One value from a SQLite file (a journal), read by Python's sqlite3: what the journal
/// says, not what the coordinator reports.
func sqliteValue(_ database: String, _ query: String, _ arguments: [String] = []) throws -> String {
    let script = "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2], sys.argv[3:]).fetchone()[0])"
    return try runProcess("python3", ["-c", script, database, query] + arguments).stdout
        .trimmingCharacters(in: .whitespacesAndNewlines)
}

extension XCTestCase {
    /// Runs the `tessera` binary to its end: exit status, standard output, standard error.
    func tessera(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        let r = try TesseraTestSupport.tessera(args)
        return (r.status, r.stdout, r.stderr)
    }
}

/// A test case that calls a coordinator's HTTP API with curl (`base` is its address).
class APITestCase: XCTestCase {
    struct Reply {
        var status: Int
        var body: String
        var headers: [String: String]
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:] }
    }

    var base = ""

    /// One request: `curl -s -D headers`, the status, the body and the headers (lowercased names).
    func call(_ method: String, _ path: String, token: String? = nil, body: String? = nil,
              type: String = "application/json", extra: [String] = []) throws -> Reply {
        let headerFile = NSTemporaryDirectory() + "api-headers-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: headerFile) }
        var args = ["-s", "-X", method, "-D", headerFile, "-w", "\n%{http_code}", base + path] + extra
        if let token { args += ["-H", "Authorization: Bearer \(token)"] }
        if let body { args += ["-H", "Content-Type: \(type)", "--data-binary", "@-"] }
        let r = try runProcess("curl", args, input: body.map { Data($0.utf8) })
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        var headers: [String: String] = [:]
        for line in (try? String(contentsOfFile: headerFile, encoding: .utf8))?.split(separator: "\r\n") ?? [] {
            if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return Reply(status: Int(lines.last ?? "") ?? 0, body: lines.dropLast().joined(separator: "\n"), headers: headers)
    }

    func token(_ cluster: Cluster, _ name: String, role: String = "client") throws -> String {
        let r = try runProcess(Cluster.binary.path, ["token", "create", name, "--role", role, "--dir", cluster.dir + "/tokens"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let token = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(token.hasPrefix("tsr_") && token.count == 68, token)
        let file = try String(contentsOfFile: cluster.dir + "/tokens/\(role)s/\(name).token", encoding: .utf8)
        XCTAssertFalse(file.contains(token), "the file holds the token's hash, not the token")
        return token
    }

    func waitReady(_ port: Int) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? runProcess("curl", ["-sf", "http://127.0.0.1:\(port)/readyz"]))?.status == 0 { return }
            usleep(100_000)
        }
        throw TestTimeout()
    }
}
