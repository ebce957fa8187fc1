import Foundation

/// Which network addresses a job's fetches may connect to: every address libcurl dials for
/// an `http(s)://` input, a manifest URL or a job-chosen `storage.endpoint` (after DNS, and
/// after each redirect) is judged by it before the connection is made. The default refuses
/// what only the host's own network can reach: loopback, link-local (the cloud metadata
/// service at 169.254.169.254), private ranges, shared address space, multicast and
/// unspecified addresses (as imgproxy does by default).
public struct SourcePolicy: Codable, Sendable, Hashable {
    /// Loopback and private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) are
    /// open; link-local, multicast and unspecified addresses stay refused unless a host is
    /// named in `hosts`.
    public var allowPrivate: Bool
    /// Hosts (`name` or `name:port`, as the URL writes them) that may resolve to any address.
    public var hosts: [String]

    public init(allowPrivate: Bool = false, hosts: [String] = []) {
        self.allowPrivate = allowPrivate
        self.hosts = hosts
    }

    /// The default for a confined job.
    public static let standard = SourcePolicy()

    /// `host` or `host:port` as an `--allow-url-hosts` entry: a host name or an address,
    /// no scheme, path or spaces.
    public static func hostProblem(_ entry: String) -> String? {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]_")
        guard !entry.isEmpty, entry.count <= 260, entry.unicodeScalars.allSatisfy({ allowed.contains($0) }) else {
            return "expected HOST or HOST:PORT (a name or an address, no scheme or path), got \"\(entry)\""
        }
        return nil
    }
}

/// The folders and buckets a job may read and write: local directories (absolute, with
/// symbolic links resolved when judged) and `s3://bucket/prefix` roots. A job is confined
/// when it carries one; `tessera run` and `render` (one local user) carry none.
public struct AccessRoots: Codable, Sendable, Equatable {
    public var read: [String]
    public var write: [String]

    public init(read: [String] = [], write: [String] = []) {
        self.read = read
        self.write = write
    }

    public var isEmpty: Bool { read.isEmpty && write.isEmpty }

    /// A root as written on the command line or in a `.roots` file: an absolute directory,
    /// or `s3://bucket` / `s3://bucket/prefix`.
    public static func problem(_ root: String) -> String? {
        guard !root.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            return "a root must not contain control characters"
        }
        switch Location(root) {
        case .local(let path):
            return path.hasPrefix("/") ? nil : "expected an absolute folder or s3://bucket/prefix, got \"\(root)\""
        case .s3(let bucket, _):
            return bucket.isEmpty ? "names no bucket (s3://bucket/prefix), got \"\(root)\"" : nil
        case .http:
            return "a root is a folder or s3://bucket/prefix, not an HTTP URL: \"\(root)\""
        }
    }
}

/// What a coordinator decided a job may reach, kept with the job (the journal) and told to
/// every worker with it: the roots its files must lie in and the addresses its fetches
/// may dial. Workers check again where they read and write (a symbolic link changed
/// after planning is caught there).
public struct JobAccess: Codable, Sendable, Equatable {
    /// nil: the job's files were not confined (an admin, a local submitter, no roots).
    public var roots: AccessRoots?
    public var sources: SourcePolicy
    /// Existing files the job's outputs may replace without Tessera having written them.
    public var overwrite: Bool

    public init(roots: AccessRoots?, sources: SourcePolicy, overwrite: Bool = false) {
        self.roots = roots
        self.sources = sources
        self.overwrite = overwrite
    }
}

extension AccessRoots {
    /// The roots of a `NAME.roots` file in the allow-list folder: `read ROOT` and `write ROOT`
    /// lines, `#` comments. A root that is not absolute (or an `s3://` root without a
    /// bucket) throws, naming the line.
    public static func parse(_ text: String, file: String) throws -> AccessRoots {
        var roots = AccessRoots()
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: " ", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            func bad(_ m: String) -> JobError { JobError(.invalidJob, "\(file):\(n + 1): \(m)") }
            guard parts.count == 2, parts[0] == "read" || parts[0] == "write" else {
                throw bad("expected \"read ROOT\" or \"write ROOT\"")
            }
            if let p = problem(parts[1]) { throw bad(p) }
            if parts[0] == "read" { roots.read.append(parts[1]) } else { roots.write.append(parts[1]) }
        }
        return roots
    }

    /// What both allow: each root of one that lies in a root of the other (a folder by its
    /// resolved path, a bucket by its prefix). A submitter's own roots narrow the
    /// coordinator's, never widen them.
    public func narrowed(by other: AccessRoots, resolve: (String) -> String) -> AccessRoots {
        func meet(_ a: [String], _ b: [String]) -> [String] {
            var out: [String] = []
            for x in a {
                for y in b {
                    if AccessRoots.root(y, contains: x, resolve: resolve) { out.append(x) }
                    else if AccessRoots.root(x, contains: y, resolve: resolve) { out.append(y) }
                }
            }
            var seen = Set<String>()
            return out.filter { seen.insert($0).inserted }
        }
        return AccessRoots(read: meet(read, other.read), write: meet(write, other.write))
    }

    /// Whether `root` holds `location` (both local paths resolved by `resolve`, or both
    /// `s3://` URLs: the same bucket and a key under the prefix, at a "/" boundary).
    public static func root(_ root: String, contains location: String, resolve: (String) -> String) -> Bool {
        switch (Location(root), Location(location)) {
        case let (.local(r), .local(p)):
            let rr = resolve(r), rp = resolve(p)
            return rp == rr || rp.hasPrefix(rr == "/" ? "/" : rr + "/")
        case let (.s3(rb, rk), .s3(b, k)):
            guard rb == b else { return false }
            var prefix = rk
            while prefix.hasSuffix("/") { prefix.removeLast() }
            return prefix.isEmpty || k == prefix || k.hasPrefix(prefix + "/")
        default:
            return false
        }
    }
}
