import Foundation
import TesseraShim
import TesseraTasks

/// One HTTP request as the storage layer makes it.
struct HTTPRequest {
    var method: String
    var url: String
    var headers: [String] = []
    var body: UnsafeRawBufferPointer? = nil
    /// "aws:amz:REGION:s3" and "KEY:SECRET": sign with AWS Signature V4 (libcurl does).
    var sigv4: (scope: String, userpwd: String)? = nil
    var followRedirects = false
    var maxBody = 64 << 20
    /// The addresses this request may connect to (nil: any): `SourcePolicy`.
    var sources: SourcePolicy? = nil
}

/// Bytes libcurl received, owned without a copy (freed with the last reference).
public final class ReceivedBytes: @unchecked Sendable {
    let base: UnsafeMutablePointer<UInt8>?
    public let count: Int

    init(base: UnsafeMutablePointer<UInt8>?, count: Int) {
        self.base = base
        self.count = count
    }

    deinit { free(base) }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
    var text: String { String(decoding: bytes, as: UTF8.self) }
}

/// What came back: status, headers (names lowercased), body.
struct HTTPResponse {
    var status: Int
    var headers: [String: String]
    var body: ReceivedBytes

    var etag: String? { headers["etag"].map(HTTPResponse.unquote) }
    var contentLength: Int? { headers["content-length"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    static func unquote(_ etag: String) -> String {
        var e = Substring(etag.trimmingCharacters(in: .whitespaces))
        if e.hasPrefix("W/") { e = e.dropFirst(2) }
        if e.count >= 2, e.hasPrefix("\""), e.hasSuffix("\"") { e = e.dropFirst().dropLast() }
        return String(e)
    }
}

/// Transfer counters of one process (metrics, records, the benchmark).
public struct TransferCounters: Sendable, Equatable {
    public var requests = 0
    /// Requests that failed in a way worth retrying (5xx, 429, timeouts, resets).
    public var failures = 0
    /// Of those, retried (the rest ran out of attempts).
    public var retries = 0
    public var bytesIn = 0
    public var bytesOut = 0
    public var cacheHits = 0
    public var cacheMisses = 0
    public init() {}
}

/// libcurl easy handles, one per concurrent request, reused so connections stay open
/// (keep-alive, TLS sessions), with bounded retries: exponential backoff with full jitter
/// on 5xx, 429, timeouts and resets.
final class HTTPClient: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [UnsafeMutableRawPointer] = []
    private var counters = TransferCounters()
    /// Attempts per request (the first included).
    var attempts = 5
    var baseDelay = 0.1
    var maxDelay = 4.0
    var connectTimeoutMS = 5_000
    /// Abort a transfer that moves less than a byte a second for this long.
    var stallSeconds = 30

    static let shared = HTTPClient()

    deinit { for h in idle { ts_http_handle_free(h) } }

    var snapshot: TransferCounters {
        lock.lock()
        defer { lock.unlock() }
        return counters
    }

    func count(_ change: (inout TransferCounters) -> Void) {
        lock.lock()
        change(&counters)
        lock.unlock()
    }

    /// Performs `request`, retrying what may pass on a later try; returns the last
    /// response (any status) or throws `transfer-failed` when none came.
    func perform(_ request: HTTPRequest, retryable: (HTTPResponse) -> Bool = HTTPClient.isRetryable) throws -> HTTPResponse {
        var attempt = 0
        while true {
            attempt += 1
            let result = once(request)
            count { $0.requests += 1 }
            switch result {
            case .success(let r) where !retryable(r) || attempt >= attempts:
                if retryable(r) { count { $0.failures += 1 } }
                return r
            case .failure(let e) where attempt >= attempts:
                count { $0.failures += 1 }
                throw JobError(.transferFailed, "\(request.method) failed after \(attempt) attempts: \(e.reason)", file: request.url)
            case .failure(var e) where e.code != .transferFailed:
                e.file = request.url
                throw e
            default:
                count { $0.failures += 1; $0.retries += 1 }
                // Full jitter (AWS's advice): a random wait up to the exponential bound.
                let bound = min(maxDelay, baseDelay * pow(2, Double(attempt - 1)))
                usleep(UInt32(Double.random(in: 0...bound) * 1_000_000))
            }
        }
    }

    static func isRetryable(_ r: HTTPResponse) -> Bool { r.status == 429 || r.status >= 500 }

    private func once(_ request: HTTPRequest) -> Result<HTTPResponse, JobError> {
        lock.lock()
        let handle = idle.popLast() ?? ts_http_handle_new()
        lock.unlock()
        guard let handle else {
            if let why = ts_http_unavailable() { return .failure(JobError(JobError.Code(rawValue: "unsupported-feature"), String(cString: why))) }
            return .failure(JobError(.transferFailed, "cannot create an HTTP handle"))
        }
        defer {
            lock.lock()
            idle.append(handle)
            lock.unlock()
        }
        var response = ts_http_response()
        defer { ts_http_response_free(&response) }
        let rc: Int32 = request.method.withCString { method in
            request.url.withCString { url in
                withCStrings(request.headers) { headers in
                    withOptionalCString(request.sigv4?.scope) { scope in
                        withOptionalCString(request.sigv4?.userpwd) { userpwd in
                          withCStrings(request.sources?.hosts ?? []) { hosts in
                            var q = ts_http_request()
                            q.method = method
                            q.url = url
                            q.headers = headers
                            q.header_count = Int32(request.headers.count)
                            q.body = request.body?.baseAddress?.assumingMemoryBound(to: UInt8.self)
                            q.body_length = request.body?.count ?? 0
                            q.aws_sigv4 = scope
                            q.userpwd = userpwd
                            q.connect_timeout_ms = connectTimeoutMS
                            q.low_speed_seconds = stallSeconds
                            q.follow_redirects = request.followRedirects ? 1 : 0
                            q.max_body = request.maxBody
                            if let sources = request.sources {
                                q.restrict_sources = 1
                                q.allow_private = sources.allowPrivate ? 1 : 0
                                q.allowed_hosts = hosts
                                q.allowed_host_count = Int32(sources.hosts.count)
                            }
                            return ts_http_perform(handle, &q, &response)
                          }
                        }
                    }
                }
            }
        }
        if response.forbidden != 0 {
            // The same words whatever was (or was not) listening there.
            return .failure(JobError(.forbiddenSource, "the source policy refuses the address this URL leads to (loopback, link-local,"
                                     + " private, multicast or unspecified); the coordinator's --allow-url-hosts or --allow-private-sources open it"))
        }
        if response.too_large != 0 {
            return .failure(JobError(.inputTooLarge, "over the input limit of \(request.maxBody) bytes"))
        }
        guard rc == 0 else {
            let message = withUnsafeBytes(of: response.error) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            return .failure(JobError(.transferFailed, message.isEmpty ? "curl error \(response.curl_code)" : message))
        }
        var headers: [String: String] = [:]
        if let h = response.headers {
            let text = String(decoding: UnsafeRawBufferPointer(start: h, count: response.headers_length), as: UTF8.self)
            // "\r\n" is one Character in Swift: split on newlines, not on "\r" or "\n".
            for line in text.split(whereSeparator: \.isNewline) {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        // The body changes hands: ts_http_response_free no longer frees it.
        let body = ReceivedBytes(base: response.body, count: response.body_length)
        response.body = nil
        count { $0.bytesIn += body.count; $0.bytesOut += request.body?.count ?? 0 }
        return .success(HTTPResponse(status: Int(response.status), headers: headers, body: body))
    }
}

private func withOptionalCString<T>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}

private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}

extension SourcePolicy {
    /// Whether a fetch under this policy may connect to `address` (IPv4 or IPv6 text),
    /// before any host named in `hosts` is considered: what libcurl's socket callback
    /// decides for every address it dials (`ts_address_class`).
    public func allows(address: String) -> Bool {
        let verdict = ts_address_class(address)
        return verdict == 0 || (verdict == 1 && allowPrivate)
    }
}
