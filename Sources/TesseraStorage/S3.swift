import Foundation
import TesseraTasks

/// An access key, its secret and, for temporary credentials, a session token.
struct Credentials: Equatable {
    var accessKey: String
    var secret: String
    var sessionToken: String?

    /// Where the SDKs look, in their order: a named profile when the job names one (only
    /// that); else `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`; else
    /// the profile `AWS_PROFILE` (or `default`) of `AWS_SHARED_CREDENTIALS_FILE` (or
    /// `~/.aws/credentials`). Nil: anonymous (unsigned requests, public buckets).
    static func resolve(profile: String?, environment: [String: String]) throws -> Credentials? {
        let file = environment["AWS_SHARED_CREDENTIALS_FILE"]
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.aws/credentials"
        if let profile {
            guard let c = fromFile(file, profile: profile) else {
                throw JobError(.badCredentials, "no profile [\(profile)] with aws_access_key_id and aws_secret_access_key", file: file)
            }
            return c
        }
        if let key = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"], !key.isEmpty {
            return Credentials(accessKey: key, secret: secret, sessionToken: environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 })
        }
        return fromFile(file, profile: environment["AWS_PROFILE"] ?? "default")
    }

    /// The INI file's `[profile]` section (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`).
    static func fromFile(_ path: String, profile: String) -> Credentials? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var section = "", values: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                continue
            }
            guard section == profile, let eq = line.firstIndex(of: "=") else { continue }
            values[line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()] = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
        }
        guard let key = values["aws_access_key_id"], let secret = values["aws_secret_access_key"] else { return nil }
        return Credentials(accessKey: key, secret: secret, sessionToken: values["aws_session_token"])
    }
}

/// One object of a listing.
public struct ObjectInfo: Sendable, Equatable {
    public var key: String
    public var size: Int
    public var etag: String
}

/// An S3-compatible service as one job reaches it: endpoint, region, addressing and
/// credentials resolved once (settings, then the standard environment variables).
struct S3Service {
    var endpoint: String
    var region: String
    var addressing: StorageSettings.Addressing
    var credentials: Credentials?

    init(settings: StorageSettings?, environment: [String: String]) throws {
        region = settings?.region ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1"
        let custom = settings?.endpoint ?? environment["AWS_ENDPOINT_URL_S3"] ?? environment["AWS_ENDPOINT_URL"]
        var e = custom ?? "https://s3.\(region).amazonaws.com"
        while e.hasSuffix("/") { e.removeLast() }
        endpoint = e
        addressing = settings?.addressing ?? (custom == nil ? .virtual : .path)
        credentials = try Credentials.resolve(profile: settings?.credentials, environment: environment)
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters (and "/" in keys),
    /// as Signature V4 canonicalises it.
    static func encode(_ s: String, keepSlash: Bool) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                out += String(format: "%%%02X", b)
            }
        }
        return out
    }

    /// The request URL; query parameters sorted and encoded (the canonical form libcurl signs).
    func url(bucket: String, key: String, query: [(String, String)] = []) -> String {
        var u: String
        switch addressing {
        case .path:
            u = endpoint + "/" + S3Service.encode(bucket, keepSlash: false) + "/" + S3Service.encode(key, keepSlash: true)
        case .virtual:
            let scheme = endpoint.hasPrefix("https://") ? "https://" : "http://"
            u = scheme + bucket + "." + endpoint.dropFirst(scheme.count) + "/" + S3Service.encode(key, keepSlash: true)
        }
        if !query.isEmpty {
            u += "?" + query.sorted { $0.0 < $1.0 }
                .map { S3Service.encode($0.0, keepSlash: false) + "=" + S3Service.encode($0.1, keepSlash: false) }
                .joined(separator: "&")
        }
        return u
    }

    func request(_ method: String, bucket: String, key: String, query: [(String, String)] = [],
                 headers: [String] = []) -> HTTPRequest {
        var r = HTTPRequest(method: method, url: url(bucket: bucket, key: key, query: query), headers: headers)
        if let c = credentials {
            r.sigv4 = ("aws:amz:\(region):s3", c.accessKey + ":" + c.secret)
            r.headers.append("x-amz-content-sha256: UNSIGNED-PAYLOAD")
            if let t = c.sessionToken { r.headers.append("x-amz-security-token: \(t)") }
        }
        return r
    }

    /// The typed error for a response that is not a success, naming `location`.
    static func failure(_ r: HTTPResponse, _ location: String, doing what: String) -> JobError {
        let code = XML.values(r.body.text, "Code").first ?? ""
        let message = XML.values(r.body.text, "Message").first.map { ": " + $0 } ?? ""
        let detail = "\(what): HTTP \(r.status)\(code.isEmpty ? "" : " \(code)")\(message)"
        switch (r.status, code) {
        case (404, _): return JobError(.notFound, detail, file: location)
        case (401, _), (403, "SignatureDoesNotMatch"), (403, "InvalidAccessKeyId"), (403, "InvalidToken"),
             (403, "ExpiredToken"), (400, "AuthorizationHeaderMalformed"):
            return JobError(.badCredentials, detail, file: location)
        case (403, _): return JobError(.accessDenied, detail, file: location)
        case (429, _), (500...599, _): return JobError(.transferFailed, detail, file: location)
        default: return JobError(.storageRefused, detail, file: location)
        }
    }
}

/// Just enough XML for S3's answers: the texts of elements by name, entities decoded.
enum XML {
    static func values(_ text: String, _ tag: String) -> [String] {
        var out: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(tag)>") {
            guard let close = rest[open.upperBound...].range(of: "</\(tag)>") else { break }
            out.append(decode(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return out
    }

    /// The elements `<tag>…</tag>` themselves (to read several fields of each).
    static func elements(_ text: String, _ tag: String) -> [String] {
        var out: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(tag)>") {
            guard let close = rest[open.upperBound...].range(of: "</\(tag)>") else { break }
            out.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return out
    }

    static func decode(_ s: Substring) -> String {
        guard s.contains("&") else { return String(s) }
        var out = "", i = s.startIndex
        while i < s.endIndex {
            if s[i] == "&", let semi = s[i...].firstIndex(of: ";"), s.distance(from: i, to: semi) <= 10 {
                let name = s[s.index(after: i)..<semi]
                var scalar: Unicode.Scalar?
                switch name {
                case "amp": scalar = "&"
                case "lt": scalar = "<"
                case "gt": scalar = ">"
                case "quot": scalar = "\""
                case "apos": scalar = "'"
                default:
                    if name.hasPrefix("#x") { scalar = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init) }
                    else if name.hasPrefix("#") { scalar = UInt32(name.dropFirst()).flatMap(Unicode.Scalar.init) }
                }
                if let scalar {
                    out.unicodeScalars.append(scalar)
                    i = s.index(after: semi)
                    continue
                }
            }
            out.append(s[i])
            i = s.index(after: i)
        }
        return out
    }
}
