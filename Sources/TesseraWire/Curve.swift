import CZMQ
import Foundation

/// A CURVE key pair as Z85 text, stored as two files: `NAME.pub` (the public key, to
/// share) and `NAME.secret` (public and secret keys, mode 0600).
public struct CurveKeyPair: Sendable, Equatable {
    public let publicKey: String
    public let secretKey: String

    public static func generate() throws -> CurveKeyPair {
        let (p, s) = try CurveKeys.generate()
        return CurveKeyPair(publicKey: p, secretKey: s)
    }

    /// A short, stable id for logs: the first 8 characters of the public key.
    public var keyID: String { String(publicKey.prefix(8)) }

    /// Writes `NAME.pub` (0644) and `NAME.secret` (0600, created with that mode).
    public func write(name: String, directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let pub = directory + "/" + name + ".pub"
        let sec = directory + "/" + name + ".secret"
        try (publicKey + "\n").write(toFile: pub, atomically: true, encoding: .utf8)
        unlink(sec)
        let fd = open(sec, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeyError("cannot create \(sec): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let text = "public \(publicKey)\nsecret \(secretKey)\n"
        guard Glibc.write(fd, text, text.utf8.count) == text.utf8.count else { throw KeyError("cannot write \(sec)") }
    }

    /// Reads a `.secret` file; refuses one that others can read.
    public static func load(secretFile path: String) throws -> CurveKeyPair {
        var st = stat()
        guard stat(path, &st) == 0 else { throw KeyError("\(path): no such key file") }
        guard st.st_mode & 0o077 == 0 else {
            throw KeyError("\(path): secret key file is readable by others (mode \(String(st.st_mode & 0o777, radix: 8))); chmod 600 it")
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var pub: String?, sec: String?
        for line in text.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            if parts[0] == "public" { pub = parts[1].trimmingCharacters(in: .whitespaces) }
            if parts[0] == "secret" { sec = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        guard let sec, sec.count == 40 else { throw KeyError("\(path): no 40-character Z85 secret key") }
        let derived = try CurveKeys.publicKey(fromSecret: sec)
        if let pub, pub != derived { throw KeyError("\(path): public key does not match the secret key") }
        return CurveKeyPair(publicKey: derived, secretKey: sec)
    }

    /// Reads a public key file (`.pub`: one Z85 key).
    public static func loadPublic(_ path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw KeyError("\(path): cannot read") }
        let key = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .first { !$0.isEmpty && !$0.hasPrefix("#") } ?? ""
        guard key.count == 40, CurveKeys.isZ85(key) else { throw KeyError("\(path): not a 40-character Z85 public key") }
        return key
    }
}

public struct KeyError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The coordinator refused our CURVE handshake: our key is not in its allow-list (ZAP
/// status 400), or the server key we were given is not the coordinator's.
public struct AuthenticationRefused: Error, CustomStringConvertible {
    public let endpoint: String
    /// Nil when this side had no keys.
    public let keyID: String?
    public let event: ZMQEvent
    public init(endpoint: String, keyID: String?, event: ZMQEvent) {
        self.endpoint = endpoint
        self.keyID = keyID
        self.event = event
    }
    public var description: String {
        guard let keyID else {
            return "\(endpoint) refused the connection: the coordinator requires CURVE keys (--curve-secret and --server-key)"
        }
        if event.kind.contains(.handshakeFailedAuth) {
            return "\(endpoint) refused this key (\(keyID)…, ZAP status \(event.value)): it is not in the coordinator's allow-list"
        }
        if event.kind.contains(.handshakeFailedProtocol) && event.value == 0x1100_0002 {
            return "\(endpoint) does not use CURVE (mechanism mismatch): connect to it without --curve-secret and --server-key"
                + " (and without TESSERA_CURVE_SECRET and TESSERA_SERVER_KEY in the environment)"
        }
        return "CURVE handshake with \(endpoint) failed (key \(keyID)…): is --server-key the coordinator's public key?"
    }
}

extension CurveKeys {
    static func isZ85(_ s: String) -> Bool {
        let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")
        return s.allSatisfy { alphabet.contains($0) }
    }

    /// Z85 text of a 32-byte binary key (`zmq_z85_encode`).
    public static func z85(_ key: [UInt8]) -> String? {
        guard key.count == 32 else { return nil }
        var out = [CChar](repeating: 0, count: 41)
        return key.withUnsafeBufferPointer { zmq_z85_encode(&out, $0.baseAddress, 32) } == nil ? nil : String(cString: out)
    }
}

/// The public keys allowed to connect: a directory of `.pub` files, or one file with a
/// key per line (`#` comments). Re-read when it changes, so keys are added and revoked
/// without a restart.
/// What a key may do: workers take and report tasks; clients submit, watch and cancel
/// their own jobs; admins also cancel any job and shut the coordinator down.
public enum PeerRole: String, Sendable, CaseIterable {
    case worker, client, admin

    /// The allow-list subdirectory holding this role's keys.
    public var directory: String { rawValue + "s" }
}

/// The public keys a coordinator lets in, each with its role. Either a directory with
/// `workers/`, `clients/` and `admins/` subdirectories of `.pub` files (`tessera keygen`
/// output; one key per line), where any other visible top-level file holds `ROLE KEY`
/// lines (what a Kubernetes ConfigMap mounts); or one file of `ROLE KEY` lines. Re-read
/// when anything in it changes.
public final class AllowList: @unchecked Sendable {
    public let path: String
    public private(set) var roles: [String: PeerRole] = [:]
    /// The file each key of a role folder came from (`clients/alice.pub`): its `.roots`
    /// file beside it says what that client's jobs may reach.
    public private(set) var keyFiles: [String: String] = [:]
    private var signature = ""

    public init(path: String) throws {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else { throw KeyError("\(path): no such allow-list") }
        try reload()
    }

    public var keys: Set<String> { Set(roles.keys) }

    public func contains(_ key: String) -> Bool { roles[key] != nil }

    public func role(of key: String) -> PeerRole? { roles[key] }

    /// Re-reads when anything changed; returns the keys added and removed (or whose role
    /// changed) when it did. A malformed list throws and leaves the current one in force.
    @discardableResult
    public func reload() throws -> (added: Int, removed: Set<String>)? {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
            throw KeyError("\(path): the allow-list is gone")
        }
        var files: [(String, PeerRole?)] = [(path, nil)]
        if isDir.boolValue {
            let top = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
            if let stray = top.first(where: { $0.hasSuffix(".pub") }) {
                throw KeyError("\(path)/\(stray): a key's role is where it is: move it into "
                               + PeerRole.allCases.map { path + "/" + $0.directory + "/" }.joined(separator: ", "))
            }
            let roleDirectories = Set(PeerRole.allCases.map(\.directory))
            files = top.filter { !roleDirectories.contains($0) }.compactMap { name -> (String, PeerRole?)? in
                var isSubdirectory: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: path + "/" + name, isDirectory: &isSubdirectory)
                return isSubdirectory.boolValue ? nil : (path + "/" + name, nil)
            }
            files += PeerRole.allCases.flatMap { role -> [(String, PeerRole?)] in
                let dir = path + "/" + role.directory
                // `NAME.token` files are the HTTP API's bearer tokens (`APITokens`) and
                // `NAME.roots` files what a key's or token's jobs may reach: not keys.
                return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
                    .filter { !$0.hasPrefix(".") && !$0.hasSuffix(".token") && !$0.hasSuffix(".roots") }.sorted().map { (dir + "/" + $0, role) }
            }
        }
        let sig = files.map { f -> String in
            var st = stat()
            _ = stat(f.0, &st)
            return "\(f.0):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec):\(st.st_size)"
        }.joined(separator: "|")
        guard sig != signature else { return nil }
        var next: [String: PeerRole] = [:]
        var nextFiles: [String: String] = [:]
        for (file, dirRole) in files {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = raw.trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") { continue }
                let parts = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
                var role = dirRole, key = parts[0]
                if dirRole == nil {
                    guard parts.count == 2, let r = PeerRole(rawValue: parts[0]) else {
                        throw KeyError("\(file):\(n + 1): expected ROLE KEY (role: worker, client or admin)")
                    }
                    role = r
                    key = parts[1]
                }
                guard key.count == 40, CurveKeys.isZ85(key), let role else {
                    throw KeyError("\(file):\(n + 1): not a 40-character Z85 public key")
                }
                if let other = next[key], other != role {
                    throw KeyError("\(file): key \(key.prefix(8))… is listed as both \(other.rawValue) and \(role.rawValue)")
                }
                next[key] = role
                if dirRole != nil { nextFiles[key] = file }
            }
        }
        signature = sig
        keyFiles = nextFiles
        let removed = Set(roles.filter { next[$0.key] != $0.value }.keys)
        let added = next.filter { roles[$0.key] != $0.value }.count
        roles = next
        return (added, removed)
    }
}

/// Which endpoints may run without CURVE: loopback TCP and `ipc://`/`inproc://`.
public enum EndpointPolicy {
    public static func isLocal(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
        guard endpoint.hasPrefix("tcp://") else { return false }
        var host = String(endpoint.dropFirst(6))
        if let semicolon = host.lastIndex(of: ";") { host = String(host[host.index(after: semicolon)...]) }
        if host.hasPrefix("[") {
            host = String(host.dropFirst().prefix { $0 != "]" })
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The refusal for a non-local endpoint without keys (nil when allowed).
    public static func check(_ endpoints: [String], hasKeys: Bool, insecure: Bool) -> String? {
        let exposed = endpoints.filter { !isLocal($0) }
        guard !exposed.isEmpty, !hasKeys, !insecure else { return nil }
        return "\(exposed.joined(separator: ", ")) is not loopback: CURVE keys are required (--curve-secret, and --allow or --server-key); pass --insecure to run unauthenticated and unencrypted anyway"
    }
}
