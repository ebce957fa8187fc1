/// What a user sent, made safe to put in a log line: data, never structure. Control
/// characters are escaped (`\n`, `\r`, `\t`, `\x1b`, `\u{85}`…), so no name, path or URL can
/// start a line of its own or move a terminal's cursor, and a long value is cut to a bound
/// with its length stated. Every log handler of the `tessera` command escapes whole
/// messages too; `field` is for the values interpolated into them, which it also bounds.
public enum LogText {
    /// The longest value kept whole in a log line, in characters.
    public static let fieldLimit = 200

    /// `value` escaped and, past `limit` characters, cut: `"abc…" (900000 bytes)`.
    public static func field(_ value: String, limit: Int = fieldLimit) -> String {
        var out = ""
        var kept = 0
        for scalar in value.unicodeScalars {
            if kept >= limit {
                return out + "… (\(value.utf8.count) bytes)"
            }
            append(scalar, to: &out)
            kept += 1
        }
        return out
    }

    /// `text` with every control character escaped (its length unbounded).
    public static func escaped(_ text: String) -> String {
        // The common case, nothing to escape: no copy.
        if !text.unicodeScalars.contains(where: needsEscape) { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars { append(scalar, to: &out) }
        return out
    }

    /// C0 and C1 controls, DEL, the line and paragraph separators, and the bidirectional
    /// overrides that reorder what a terminal shows.
    static func needsEscape(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    private static func append(_ s: Unicode.Scalar, to out: inout String) {
        guard needsEscape(s) else { return out.unicodeScalars.append(s) }
        switch s {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            let hex = String(s.value, radix: 16)
            out += s.value < 0x100 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{" + hex + "}"
        }
    }
}
