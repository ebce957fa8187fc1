import Foundation

/// Bearer tokens of the HTTP API, kept beside the CURVE keys of the allow-list: a token
/// file `NAME.token` in its `clients/` or `admins/` folder gives the holder of the token
/// that role, under the name NAME (the owner of the jobs it submits). The file holds the
/// token's SHA-256, never the token: `sha256:HEX` on one line. `tessera token create`
/// writes one and prints the token once.
public struct APIToken: Sendable, Equatable {
    public var name: String
    public var role: PeerRole
    /// The owner string of this token's jobs (a CURVE client's is its key).
    public var owner: String { "token:" + name }

    public init(name: String, role: PeerRole) {
        self.name = name
        self.role = role
    }
}

public enum APITokens {
    /// A new token: `tsr_` and 64 hex digits (256 random bits).
    public static func generate() -> String {
        var g = SystemRandomNumberGenerator()
        return "tsr_" + (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
    }

    /// What a token file holds for `token`.
    public static func fileLine(_ token: String) -> String { "sha256:" + SHA256.hex(Array(token.utf8)) }

    /// Whether `name` may name a token (a file name: letters, digits, `.`, `_`, `-`).
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && !name.hasPrefix(".")
            && name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) }
    }

    /// Writes `DIR/ROLE-FOLDER/NAME.token` for a new token and returns the token. Refuses
    /// to replace an existing file (revoking is removing the file).
    public static func create(in allowList: String, name: String, role: PeerRole) throws -> String {
        guard isValidName(name) else {
            throw KeyError("token name \"\(name)\": use letters, digits, '.', '_' and '-' (at most 64)")
        }
        guard role == .client || role == .admin else { throw KeyError("a token is for a client or an admin, not a \(role.rawValue)") }
        let dir = allowList + "/" + role.directory
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/" + name + ".token"
        for other in PeerRole.allCases where FileManager.default.fileExists(atPath: allowList + "/" + other.directory + "/" + name + ".token") {
            throw KeyError("\(allowList)/\(other.directory)/\(name).token exists: remove it to revoke that token first")
        }
        let token = generate()
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeyError("\(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let line = Array((fileLine(token) + "\n").utf8)
        guard line.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == line.count else {
            unlink(path)
            throw KeyError("\(path): cannot write")
        }
        return token
    }

    /// The token files of an allow-list folder: hash → token. Malformed files are skipped
    /// with their reason in `problems`.
    public static func load(_ allowList: String) -> (tokens: [String: APIToken], problems: [String]) {
        var tokens: [String: APIToken] = [:]
        var problems: [String] = []
        for role in [PeerRole.client, .admin] {
            let dir = allowList + "/" + role.directory
            for file in ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() where file.hasSuffix(".token") {
                let name = String(file.dropLast(6))
                guard let text = try? String(contentsOfFile: dir + "/" + file, encoding: .utf8) else {
                    problems.append("\(dir)/\(file): unreadable")
                    continue
                }
                let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
                guard line.hasPrefix("sha256:"), line.count == 71, line.dropFirst(7).allSatisfy(\.isHexDigit) else {
                    problems.append("\(dir)/\(file): expected one line sha256:HEX (64 hex digits)")
                    continue
                }
                tokens[String(line.dropFirst(7)).lowercased()] = APIToken(name: name, role: role)
            }
        }
        return (tokens, problems)
    }

    /// The token a request's `Authorization: Bearer TOKEN` names, among `tokens` (by hash;
    /// the comparison of hashes is over every byte).
    public static func match(_ authorization: String?, in tokens: [String: APIToken]) -> APIToken? {
        guard let authorization, authorization.lowercased().hasPrefix("bearer ") else { return nil }
        let token = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, token.utf8.count <= 256 else { return nil }
        let hash = SHA256.hex(Array(token.utf8))
        var found: APIToken?
        for (known, t) in tokens where constantTimeEqual(known, hash) { found = t }
        return found
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var d: UInt8 = 0
        for i in 0..<x.count { d |= x[i] ^ y[i] }
        return d == 0
    }
}

/// SHA-256 (FIPS 180-4), for token hashes.
public enum SHA256 {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    public static func hash(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
        var data = message
        data.append(0x80)
        while data.count % 64 != 56 { data.append(0) }
        let bits = UInt64(message.count) * 8
        for i in (0..<8).reversed() { data.append(UInt8(truncatingIfNeeded: bits >> (UInt64(i) * 8))) }
        var w = [UInt32](repeating: 0, count: 64)
        for chunk in stride(from: 0, to: data.count, by: 64) {
            for t in 0..<16 {
                let j = chunk + t * 4
                w[t] = UInt32(data[j]) << 24 | UInt32(data[j + 1]) << 16 | UInt32(data[j + 2]) << 8 | UInt32(data[j + 3])
            }
            for t in 16..<64 {
                let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
                let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
                w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
            }
            var (a, b, c, d, e, f, g, hh) = (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7])
            for t in 0..<64 {
                let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                let ch = (e & f) ^ (~e & g)
                let t1 = hh &+ s1 &+ ch &+ k[t] &+ w[t]
                let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                let maj = (a & b) ^ (a & c) ^ (b & c)
                let t2 = s0 &+ maj
                (hh, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
            }
            h[0] &+= a; h[1] &+= b; h[2] &+= c; h[3] &+= d
            h[4] &+= e; h[5] &+= f; h[6] &+= g; h[7] &+= hh
        }
        return h.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * UInt32($0))) } }
    }

    public static func hex(_ message: [UInt8]) -> String {
        hash(message).map { String(format: "%02x", $0) }.joined()
    }

    @inline(__always) private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
}
