import Foundation

/// How an input is named to people — in records, errors, logs, CSV, the dashboard and
/// reports: the one place that decides it.
///
/// - an HTTP(S) URL without its query string and fragment: a presigned URL's signature
///   (`?X-Amz-Signature=…`) is a credential and never leaves the process;
/// - a file name's bytes that are not UTF-8 (carried as U+10FF00 + byte, see `Paths`) as `\xNN`.
public enum DisplayName {
    /// The first of the 256 private-use scalars that stand for bytes that are not UTF-8.
    public static let escapeBase: UInt32 = 0x10FF00

    public static func of(_ name: String) -> String {
        var name = name
        let lower = name.prefix(8).lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://"), let cut = name.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            name = String(name[..<cut])
        }
        guard name.unicodeScalars.contains(where: { $0.value >= escapeBase && $0.value <= escapeBase + 0xFF }) else { return name }
        var out = ""
        for s in name.unicodeScalars {
            if s.value >= escapeBase && s.value <= escapeBase + 0xFF {
                out += String(format: "\\x%02X", s.value - escapeBase)
            } else {
                out.unicodeScalars.append(s)
            }
        }
        return out
    }
}
