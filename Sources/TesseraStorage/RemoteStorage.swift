import Foundation
import TesseraTasks
import TesseraModel

/// The bytes of a fetched input: a download held without a copy, or a cache entry mapped.
public enum FetchedBytes: Sendable {
    case received(ReceivedBytes)
    case mapped(MappedFile)

    public var bytes: UnsafeRawBufferPointer {
        switch self {
        case .received(let r): return r.bytes
        case .mapped(let m): return m.bytes
        }
    }
}

/// One input fetched from a URL.
public struct Fetched: Sendable {
    public var bytes: FetchedBytes
    /// The version the store gave (S3 ETag without quotes), when it gave one.
    public var etag: String?
    /// Served by the cache of originals (nil: no cache).
    public var cacheHit: Bool?
    /// Bytes that crossed the network for it (0 on a cache hit or a 304).
    public var transferred: Int
    /// How long fetching it took (set by whoever timed it: a prefetch).
    public var seconds = 0.0
}

/// A process's stores: one `RemoteStorage` per job storage settings, sharing the
/// connections and the cache of originals (a worker's, `tessera render`'s).
public final class RemoteStores: @unchecked Sendable {
    public let cache: SourceCache?
    private let lock = NSLock()
    private var stores: [Key: RemoteStorage] = [:]

    private struct Key: Hashable {
        var settings: StorageSettings?
        var sources: SourcePolicy?
    }

    public init(cache: SourceCache? = nil) { self.cache = cache }

    /// The store of a job's settings whose fetches follow `sources` (nil: any address).
    public func storage(_ settings: StorageSettings?, sources: SourcePolicy? = nil) -> RemoteStorage {
        lock.lock()
        defer { lock.unlock() }
        let key = Key(settings: settings, sources: sources)
        if let s = stores[key] { return s }
        let s = RemoteStorage(settings: settings, cache: cache, sources: sources)
        stores[key] = s
        return s
    }
}

/// Object storage (S3 API) and HTTP(S) for one job's settings: fetch inputs, store
/// outputs, check outputs exist, list prefixes. Every failure is a `JobError` naming the
/// URL without its query string: `not-found`, `access-denied`, `bad-credentials`,
/// `transfer-failed` (after bounded retries), `storage-refused`.
public final class RemoteStorage: @unchecked Sendable {
    private let settings: StorageSettings?
    /// The addresses HTTP(S) inputs, and a job-chosen `storage.endpoint`, may be fetched
    /// from (nil: any). The operator's own endpoint (from the environment) is trusted.
    private let sources: SourcePolicy?
    private let environment: [String: String]
    private let cache: SourceCache?
    private let http = HTTPClient.shared
    private let lock = NSLock()
    private var resolved: S3Service?

    public init(settings: StorageSettings?, cache: SourceCache? = nil, sources: SourcePolicy? = nil,
                environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.settings = settings
        self.sources = sources
        self.cache = cache
        self.environment = environment
    }

    /// This process's transfer counters (every RemoteStorage shares the connections).
    public static var counters: TransferCounters { HTTPClient.shared.snapshot }

    /// The S3 service, resolved on first use (a job of HTTP URLs needs no credentials).
    private func s3() throws -> S3Service {
        lock.lock()
        defer { lock.unlock() }
        if let resolved { return resolved }
        let s = try S3Service(settings: settings, environment: environment)
        resolved = s
        return s
    }

    // MARK: Fetch

    /// The bytes of `location` (s3:// or http(s)://), at most `limit` of them: from the
    /// cache when it holds this version, else downloaded (and checked: Content-Length,
    /// and the MD5 when an S3 ETag is one).
    public func fetch(_ location: String, knownETag: String? = nil, limit: Int) throws -> Fetched {
        let name = Location.withoutQuery(location)
        if let cache, let etag = knownETag, let hit = cache.lookup(location, etag: etag, limit: limit) {
            http.count { $0.cacheHits += 1 }
            return Fetched(bytes: .mapped(hit), etag: etag, cacheHit: true, transferred: 0)
        }
        var request: HTTPRequest
        let isS3: Bool
        switch Location(location) {
        case .s3(let bucket, let key):
            request = try s3().request("GET", bucket: bucket, key: key)
            isS3 = true
        case .http(let url):
            request = HTTPRequest(method: "GET", url: url)
            request.followRedirects = true
            isS3 = false
        case .local:
            throw JobError(.invalidJob, "not a URL", file: location)
        }
        request.maxBody = limit
        // An HTTP server is asked whether the cached version is still current.
        let revalidate = cache != nil && knownETag == nil ? cache?.lastETag(location) : nil
        if let revalidate { request.headers.append("If-None-Match: \"\(revalidate)\"") }
        let r: HTTPResponse
        r = try perform(request, location)
        if r.status == 304, let etag = revalidate, let hit = cache?.lookup(location, etag: etag, limit: limit) {
            http.count { $0.cacheHits += 1 }
            return Fetched(bytes: .mapped(hit), etag: etag, cacheHit: true, transferred: 0)
        }
        guard (200...299).contains(r.status) else { throw S3Service.failure(r, name, doing: "GET") }
        if let declared = r.contentLength, declared != r.body.count {
            throw JobError(.transferFailed, "GET: received \(r.body.count) of \(declared) bytes", file: name)
        }
        let etag = r.etag ?? knownETag
        if isS3, let etag, etag.count == 32, !etag.contains("-"), etag.allSatisfy(\.isHexDigit),
           MD5.hex(r.body.bytes) != etag.lowercased() {
            throw JobError(.transferFailed, "GET: the bytes do not match the object's MD5 (ETag \(etag))", file: name)
        }
        if cache != nil { http.count { $0.cacheMisses += 1 } }
        if let cache, let etag { cache.store(location, etag: etag, r.body.bytes) }
        return Fetched(bytes: .received(r.body), etag: etag, cacheHit: cache == nil ? nil : false, transferred: r.body.count)
    }

    /// The first `count` bytes of `location` (a ranged GET: probing a header).
    public func fetchPrefix(_ location: String, count: Int) throws -> ReceivedBytes {
        let name = Location.withoutQuery(location)
        var request: HTTPRequest
        switch Location(location) {
        case .s3(let bucket, let key): request = try s3().request("GET", bucket: bucket, key: key)
        case .http(let url): request = HTTPRequest(method: "GET", url: url); request.followRedirects = true
        case .local: throw JobError(.invalidJob, "not a URL", file: location)
        }
        request.headers.append("Range: bytes=0-\(count - 1)")
        request.maxBody = count
        let r = try perform(request, location)
        guard (200...299).contains(r.status) || r.status == 416 else { throw S3Service.failure(r, name, doing: "GET") }
        return r.body
    }

    // MARK: Store

    /// Uploads `bytes` as the object `location` (s3://bucket/key), with `Content-MD5`,
    /// `Content-Type` and `Cache-Control`, and no user metadata. Over the multipart
    /// threshold it goes in parts; a failed multipart upload is aborted, so no part stays
    /// stored (and billed). The object appears only when complete.
    public func store(_ bytes: UnsafeRawBufferPointer, to location: String, contentType: String,
                      cacheControl: String?) throws {
        guard case .s3(let bucket, let key) = Location(location) else {
            throw JobError(.invalidJob, "outputs go to a directory or s3://bucket/prefix", file: location)
        }
        let s = try s3()
        var headers = ["Content-Type: \(contentType)"]
        if let cacheControl { headers.append("Cache-Control: \(cacheControl)") }
        let threshold = (settings?.multipartMB ?? 16) << 20
        if bytes.count > threshold {
            try storeMultipart(bytes, s, bucket: bucket, key: key, headers: headers, partSize: max(5 << 20, threshold / 2))
            return
        }
        var request = s.request("PUT", bucket: bucket, key: key, headers: headers + ["Content-MD5: \(MD5.base64(bytes))"])
        request.body = bytes
        let r = try perform(request, location)
        guard (200...299).contains(r.status) else { throw S3Service.failure(r, location, doing: "PUT") }
    }

    private func storeMultipart(_ bytes: UnsafeRawBufferPointer, _ s: S3Service, bucket: String, key: String,
                                headers: [String], partSize: Int) throws {
        let location = "s3://\(bucket)/\(key)"
        let start = try perform(s.request("POST", bucket: bucket, key: key, query: [("uploads", "")], headers: headers), location)
        guard (200...299).contains(start.status), let upload = XML.values(start.body.text, "UploadId").first else {
            throw S3Service.failure(start, location, doing: "starting a multipart upload")
        }
        do {
            var parts: [(Int, String)] = []
            var offset = 0
            while offset < bytes.count {
                let part = UnsafeRawBufferPointer(rebasing: bytes[offset..<min(bytes.count, offset + partSize)])
                let number = parts.count + 1
                var request = s.request("PUT", bucket: bucket, key: key,
                                        query: [("partNumber", "\(number)"), ("uploadId", upload)],
                                        headers: ["Content-MD5: \(MD5.base64(part))"])
                request.body = part
                let r = try perform(request, location)
                guard (200...299).contains(r.status), let etag = r.etag else {
                    throw S3Service.failure(r, location, doing: "uploading part \(number)")
                }
                parts.append((number, etag))
                offset += part.count
            }
            let xml = "<CompleteMultipartUpload>" + parts.map {
                "<Part><PartNumber>\($0.0)</PartNumber><ETag>\"\($0.1)\"</ETag></Part>"
            }.joined() + "</CompleteMultipartUpload>"
            let body = Array(xml.utf8)
            let done = try body.withUnsafeBytes { raw -> HTTPResponse in
                var request = s.request("POST", bucket: bucket, key: key, query: [("uploadId", upload)],
                                        headers: ["Content-Type: application/xml"])
                request.body = raw
                return try perform(request, location)
            }
            // S3 may answer 200 with an error document when completing.
            guard (200...299).contains(done.status), !done.body.text.contains("<Error>") else {
                throw S3Service.failure(done, location, doing: "completing a multipart upload")
            }
        } catch {
            _ = try? perform(s.request("DELETE", bucket: bucket, key: key, query: [("uploadId", upload)]), location)
            throw error
        }
    }

    /// Whether every location exists (HEAD), for incremental reruns.
    public func exists(_ location: String) throws -> Bool {
        guard case .s3(let bucket, let key) = Location(location) else { return Paths.exists(location) }
        let r = try perform(try s3().request("HEAD", bucket: bucket, key: key), location)
        if r.status == 404 { return false }
        guard (200...299).contains(r.status) else { throw S3Service.failure(r, location, doing: "HEAD") }
        return true
    }

    /// The size and ETag of `location`, or nil when there is no such object.
    public func head(_ location: String) throws -> ObjectInfo? {
        guard case .s3(let bucket, let key) = Location(location) else { return nil }
        let r = try perform(try s3().request("HEAD", bucket: bucket, key: key), location)
        if r.status == 404 { return nil }
        guard (200...299).contains(r.status) else { throw S3Service.failure(r, location, doing: "HEAD") }
        return ObjectInfo(key: key, size: r.contentLength ?? 0, etag: r.etag ?? "")
    }

    /// Removes an object (an output of a task whose other outputs failed). Best effort.
    public func delete(_ location: String) {
        guard case .s3(let bucket, let key) = Location(location), let s = try? s3() else { return }
        _ = try? perform(s.request("DELETE", bucket: bucket, key: key), location)
    }

    /// Proves the credentials and the bucket before any work: lists at most one key of the
    /// prefix. Throws `bad-credentials`, `access-denied`, `not-found` (no bucket)...
    public func checkAccess(_ location: String) throws {
        guard case .s3(let bucket, let prefix) = Location(location) else { return }
        let r = try perform(try s3().request("GET", bucket: bucket, key: "",
                                             query: [("list-type", "2"), ("max-keys", "1"), ("prefix", prefix)]), location)
        guard (200...299).contains(r.status) else { throw S3Service.failure(r, location, doing: "listing") }
    }

    /// Every object under `s3://bucket/prefix` (ListObjectsV2, page by page), in key order;
    /// `recursive: false` stays at the prefix's level.
    public func list(_ location: String, recursive: Bool = true, _ body: (ObjectInfo) throws -> Void) throws {
        guard case .s3(let bucket, let prefix) = Location(location) else {
            throw JobError(.invalidJob, "only s3:// prefixes can be listed", file: location)
        }
        let s = try s3()
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if !recursive { query.append(("delimiter", "/")) }
            if let token { query.append(("continuation-token", token)) }
            let r = try perform(s.request("GET", bucket: bucket, key: "", query: query), location)
            guard (200...299).contains(r.status) else { throw S3Service.failure(r, location, doing: "listing") }
            let text = r.body.text
            for element in XML.elements(text, "Contents") {
                guard let key = XML.values(element, "Key").first else { continue }
                let size = XML.values(element, "Size").first.flatMap { Int($0) } ?? 0
                let etag = HTTPResponse.unquote(XML.values(element, "ETag").first ?? "")
                try body(ObjectInfo(key: key, size: size, etag: etag))
            }
            token = XML.values(text, "IsTruncated").first == "true" ? XML.values(text, "NextContinuationToken").first : nil
        } while token != nil
    }

    private func perform(_ request: HTTPRequest, _ location: String) throws -> HTTPResponse {
        var request = request
        // A URL input is judged by the policy; an object store only when the job chose its
        // endpoint (the operator's, from the environment, is where its own data lives).
        if Location.isHTTP(location) || settings?.endpoint != nil { request.sources = sources }
        do { return try http.perform(request) } catch var e as JobError {
            e.file = Location.withoutQuery(location)
            throw e
        }
    }
}
