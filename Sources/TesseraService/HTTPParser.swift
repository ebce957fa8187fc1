/// HTTP/1.1 request framing as RFC 9112 says a server must read it, with no leniency that
/// two parsers could read differently (request smuggling): lines end in CRLF (a bare LF or
/// CR is refused), header names are tokens with no whitespace before the colon, values
/// carry no control character but HTAB, an HTTP/1.1 request has exactly one `Host`, and a
/// body is framed by exactly one of `Content-Length` (digits only, duplicates equal) or a
/// final `chunked` transfer coding (decoded here; any other coding is 501).
enum HTTPParser {
    /// How a request's body is framed.
    enum Framing: Equatable {
        case none
        case length(Int)
        case chunked
    }

    struct Head {
        var method: String
        var target: String
        var version11: Bool
        /// Lowercased names; a repeated header keeps its last value (`Host`,
        /// `Content-Length` and `Transfer-Encoding` are checked for repeats first).
        var headers: [String: String]
        /// Where the body starts.
        var bodyStart: Int
        var framing: Framing
    }

    enum Result<T> {
        case incomplete
        case bad(Int, String)
        case done(T)
    }

    /// RFC 9110 `tchar`.
    static func isToken(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    /// Parses the head at the start of `bytes` (blank lines before it already removed).
    static func head(_ bytes: [UInt8], limits: HTTPLimits) -> Result<Head> {
        // Line ends: every LF after a CR, every CR before an LF (checked as bytes arrive).
        var end: Int?
        var i = 0
        let scanLimit = min(bytes.count, limits.maxHead + 4)
        while i < scanLimit {
            let b = bytes[i]
            if b == 10 {
                guard i > 0, bytes[i - 1] == 13 else { return .bad(400, "a bare LF: lines end in CRLF") }
                if i >= 3, bytes[i - 2] == 10, bytes[i - 3] == 13 {
                    end = i + 1
                    break
                }
            } else if b == 13, i + 1 < bytes.count, bytes[i + 1] != 10 {
                return .bad(400, "a bare CR: lines end in CRLF")
            }
            i += 1
        }
        guard let end else {
            return bytes.count > limits.maxHead ? .bad(431, "request line and headers are limited to \(limits.maxHead) bytes") : .incomplete
        }
        guard end - 4 <= limits.maxHead else { return .bad(431, "request line and headers are limited to \(limits.maxHead) bytes") }
        let headEnd = end - 4
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        var j = 0
        while j + 1 < headEnd {
            if bytes[j] == 13 && bytes[j + 1] == 10 {
                lines.append(bytes[start..<j])
                start = j + 2
                j += 2
            } else {
                j += 1
            }
        }
        lines.append(bytes[start..<headEnd])
        // The request line: METHOD SP TARGET SP VERSION, single spaces.
        let parts = lines[0].split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, parts[0].allSatisfy(isToken) else {
            return .bad(400, "not an HTTP/1.x request line")
        }
        guard parts[1].allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return .bad(400, "the request target holds a control character, a space or a byte that is not ASCII")
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            if version.hasPrefix("HTTP/"), version.count == 8 { return .bad(505, "HTTP/1.1 or HTTP/1.0 only") }
            return .bad(400, "not an HTTP/1.x request line")
        }
        var headers: [String: String] = [:]
        var count = 0, hosts = 0
        var codings: [String] = []
        for line in lines.dropFirst() {
            count += 1
            guard count <= limits.maxHeaders else { return .bad(431, "at most \(limits.maxHeaders) headers") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon != line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(isToken) else {
                return .bad(400, "malformed header line (a name is a token followed at once by \":\"; no line folding)")
            }
            var v = line[(colon + 1)...]
            guard v.allSatisfy({ $0 == 9 || $0 >= 32 && $0 != 127 }) else {
                return .bad(400, "a control character in the value of \(String(decoding: line[line.startIndex..<colon], as: UTF8.self))")
            }
            while let f = v.first, f == 32 || f == 9 { v = v.dropFirst() }
            while let l = v.last, l == 32 || l == 9 { v = v.dropLast() }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            let value = String(decoding: v, as: UTF8.self)
            switch name {
            case "host":
                hosts += 1
            case "content-length":
                guard !value.isEmpty, value.utf8.count <= 18, value.utf8.allSatisfy({ (48...57).contains($0) }) else {
                    return .bad(400, "bad Content-Length")
                }
                if let previous = headers[name], previous != value { return .bad(400, "conflicting Content-Length headers") }
            case "transfer-encoding":
                codings += value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            default:
                break
            }
            headers[name] = value
        }
        let version11 = version == "HTTP/1.1"
        if version11 && hosts != 1 { return .bad(400, hosts == 0 ? "an HTTP/1.1 request needs a Host header" : "more than one Host header") }
        if hosts > 1 { return .bad(400, "more than one Host header") }
        var framing = Framing.none
        if headers["transfer-encoding"] != nil {
            guard version11 else { return .bad(400, "Transfer-Encoding in an HTTP/1.0 request") }
            guard headers["content-length"] == nil else { return .bad(400, "both Transfer-Encoding and Content-Length") }
            guard codings.last == "chunked" else { return .bad(400, "the final transfer coding must be chunked") }
            guard codings.count == 1 else {
                return .bad(501, "transfer coding \(codings.first { $0 != "chunked" } ?? "chunked") is not supported (chunked only, once)")
            }
            framing = .chunked
        } else if let text = headers["content-length"], let n = Int(text) {
            guard n <= limits.maxBody else { return .bad(413, "request bodies are limited to \(limits.maxBody) bytes") }
            framing = n > 0 ? .length(n) : .none
        }
        return .done(Head(method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: parts[1], as: UTF8.self),
                          version11: version11, headers: headers, bodyStart: end, framing: framing))
    }

    /// Decodes a chunked body starting at `start`: the body and where the request ends.
    /// Chunk extensions are skipped; trailers are read and dropped (within the head limit).
    static func chunked(_ bytes: [UInt8], from start: Int, limits: HTTPLimits) -> Result<(body: [UInt8], end: Int)> {
        var body: [UInt8] = []
        var i = start
        /// The next CRLF-terminated line from `i`: its end (exclusive of CRLF), or nil when
        /// it has not all arrived.
        func line(from i: Int, limit: Int) -> Result<Int> {
            var j = i
            while j < bytes.count {
                if bytes[j] == 10 { return j > i && bytes[j - 1] == 13 ? .done(j - 1) : .bad(400, "a bare LF in the chunked body's framing") }
                if j - i > limit { return .bad(400, "a chunk line longer than \(limit) bytes") }
                j += 1
            }
            return .incomplete
        }
        while true {
            let sizeEnd: Int
            switch line(from: i, limit: 1024) {
            case .incomplete: return .incomplete
            case .bad(let s, let m): return .bad(s, m)
            case .done(let e): sizeEnd = e
            }
            var digits = bytes[i..<sizeEnd]
            if let semicolon = digits.firstIndex(of: UInt8(ascii: ";")) { digits = digits[..<semicolon] }
            guard !digits.isEmpty, digits.count <= 15, let size = Int(String(decoding: digits, as: UTF8.self), radix: 16) else {
                return .bad(400, "a bad chunk size")
            }
            i = sizeEnd + 2
            if size == 0 {
                // Trailers, then the empty line.
                var trailers = 0
                while true {
                    switch line(from: i, limit: limits.maxHead) {
                    case .incomplete: return .incomplete
                    case .bad(let s, let m): return .bad(s, m)
                    case .done(let e):
                        let empty = e == i
                        trailers += e - i + 2
                        guard trailers <= limits.maxHead else { return .bad(431, "trailers are limited to \(limits.maxHead) bytes") }
                        i = e + 2
                        if empty { return .done((body, i)) }
                    }
                }
            }
            guard body.count + size <= limits.maxBody else { return .bad(413, "request bodies are limited to \(limits.maxBody) bytes") }
            guard bytes.count >= i + size + 2 else { return .incomplete }
            guard bytes[i + size] == 13, bytes[i + size + 1] == 10 else { return .bad(400, "a chunk's data is not followed by CRLF") }
            body += bytes[i..<(i + size)]
            i += size + 2
        }
    }
}
