import Foundation

/// Where a file lives: a local path, an object in an S3-compatible store, or an HTTP(S)
/// URL. Inputs, manifests and the output root are written as strings everywhere (job
/// files, the wire, the journal); this is how those strings are read.
public enum Location: Equatable, Sendable {
    case local(String)
    /// `s3://bucket/key` (the key may be empty or end with "/" for a prefix).
    case s3(bucket: String, key: String)
    /// `http://…` or `https://…`, query string included (presigned URLs).
    case http(String)

    public init(_ string: String) {
        if string.hasPrefix("s3://") {
            let rest = string.dropFirst(5)
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            self = .s3(bucket: String(rest[..<slash]), key: String(rest[slash...].drop { $0 == "/" }))
        } else if Location.isHTTP(string) {
            self = .http(string)
        } else {
            self = .local(string)
        }
    }

    public var isRemote: Bool {
        if case .local = self { return false }
        return true
    }

    public static func isRemote(_ string: String) -> Bool { string.hasPrefix("s3://") || isHTTP(string) }

    /// A location as a user wrote it (a job file's `inputs`/`output`, `--input`, `--output`,
    /// `-o`), made absolute: URLs as written, `~` expanded, a relative path taken from `base`.
    /// The one reading of locations for every option.
    public static func resolve(_ written: String, from base: String) -> String {
        if isRemote(written) { return written }
        let expanded = (written as NSString).expandingTildeInPath
        let full = expanded.hasPrefix("/") ? expanded : base + "/" + expanded
        return (full as NSString).standardizingPath
    }

    /// `root/relative`, for a directory or an `s3://bucket/prefix` root (with or without a final "/").
    public static func join(_ root: String, _ relative: String) -> String {
        var r = Substring(root)
        while r.hasSuffix("/") && !r.hasSuffix("://") && r.count > 1 { r = r.dropLast() }
        return r + "/" + relative
    }

    /// The `Content-Type` of a file by its extension (outputs in object storage).
    public static func contentType(forExtension ext: String) -> String {
        switch ext.lowercased() {
        case "jpg", "jpeg": return "image/jpeg"
        case "png": return "image/png"
        case "webp": return "image/webp"
        case "avif": return "image/avif"
        case "jxl": return "image/jxl"
        case "heic", "heif": return "image/heif"
        case "json": return "application/json"
        case "dzi", "xml": return "application/xml"
        default: return "application/octet-stream"
        }
    }

    public static func isHTTP(_ s: String) -> Bool {
        // "http://" or "https://", any case, without lowercasing a copy (called per input).
        var bytes = s.utf8.makeIterator()
        for expected in "http".utf8 {
            guard let b = bytes.next(), b | 0x20 == expected else { return false }
        }
        var b = bytes.next()
        if b.map({ $0 | 0x20 }) == UInt8(ascii: "s") { b = bytes.next() }
        return b == UInt8(ascii: ":") && bytes.next() == UInt8(ascii: "/") && bytes.next() == UInt8(ascii: "/")
    }

    /// The string without its query string and fragment (presigned signatures, tokens):
    /// what errors, logs and cache keys use.
    public static func withoutQuery(_ string: String) -> String {
        guard isHTTP(string), let cut = string.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return string }
        return String(string[..<cut])
    }

    /// The path part a name is made from: for HTTP URLs without query and percent escapes
    /// decoded (`https://h/a/my%20photo.jpg?X-Amz-…` → `https://h/a/my photo.jpg`).
    public static func namingPath(_ string: String) -> String {
        guard isHTTP(string) else { return string }
        let bare = withoutQuery(string)
        return bare.removingPercentEncoding ?? bare
    }
}

/// How a job reaches object storage: endpoint, region, addressing and which credentials.
/// Never holds a secret (jobs are journaled): `credentials` names a profile of the
/// shared credentials file, and each process reads the secret itself.
public struct StorageSettings: Codable, Sendable, Hashable {
    public enum Addressing: String, Codable, Sendable, CaseIterable {
        /// `https://endpoint/bucket/key` (MinIO, Ceph, rclone, most self-hosted servers).
        case path
        /// `https://bucket.endpoint/key` (AWS's default).
        case virtual
    }

    /// `http(s)://host[:port]`; default `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, then AWS's.
    public var endpoint: String?
    /// Default `AWS_REGION`, `AWS_DEFAULT_REGION`, then us-east-1.
    public var region: String?
    /// Default: path with a custom endpoint, virtual for AWS.
    public var addressing: Addressing?
    /// A profile of the shared credentials file (`~/.aws/credentials` or
    /// `AWS_SHARED_CREDENTIALS_FILE`); default: the environment, then `AWS_PROFILE`/default.
    public var credentials: String?
    /// `Cache-Control` sent with every output (an output's own setting wins).
    public var cacheControl: String?
    /// Outputs larger than this are uploaded in parts (default 16 MB; parts ≥ 5 MB).
    public var multipartMB: Int?

    public init(endpoint: String? = nil, region: String? = nil, addressing: Addressing? = nil,
                credentials: String? = nil, cacheControl: String? = nil, multipartMB: Int? = nil) {
        self.endpoint = endpoint
        self.region = region
        self.addressing = addressing
        self.credentials = credentials
        self.cacheControl = cacheControl
        self.multipartMB = multipartMB
    }

    public static let fields = ["endpoint", "region", "addressing", "credentials", "cacheControl", "multipartMB"]

    /// The first field that cannot work, as (field, message), or nil.
    public func problem() -> (field: String, message: String)? {
        if let e = endpoint, !Location.isHTTP(e) || e.contains("?") {
            return ("storage.endpoint", "expected http://host[:port] or https://host[:port], got \"\(e)\"")
        }
        for (field, value) in [("region", region), ("credentials", credentials), ("cacheControl", cacheControl)] {
            if let v = value, v.isEmpty || v.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return ("storage.\(field)", "must be non-empty text without control characters")
            }
        }
        if let m = multipartMB, !(5...5_000).contains(m) {
            return ("storage.multipartMB", "expected 5...5000 MB, got \(m)")
        }
        return nil
    }
}
