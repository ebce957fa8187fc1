import Foundation
import TesseraModel
import TesseraShim

/// What C libraries print on stderr while Tessera calls them (libjxl's `JXL_FAILURE`
/// lines, file and line first): caught, and made part of the error it explains — never
/// printed. Tessera's own lines go to `stderr`, the process's real standard error,
/// whatever a capture has fd 2 pointing at.
public enum LibraryOutput {
    /// The process's standard error, for Tessera's own lines.
    public static var stderr: Int32 { ts_stderr_fd() }

    /// Runs `body` with what `library` prints caught: dropped when it succeeds, its
    /// messages added to the reason when it throws an `ImagingError`.
    static func capturing<T>(_ library: String, _ body: () throws -> T) throws -> T {
        let start = ts_libout_begin()
        let result = Result { try body() }
        var text = ""
        if start >= 0 {
            let capacity = 8192
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            defer { buffer.deallocate() }
            let n = buffer.withMemoryRebound(to: CChar.self, capacity: capacity) { ts_libout_end(start, $0, capacity) }
            text = String(decoding: UnsafeBufferPointer(start: buffer, count: n), as: UTF8.self)
        }
        switch result {
        case .success(let value): return value
        case .failure(var error as ImagingError):
            let said = messages(text)
            if !said.isEmpty {
                let detail = " (\(library): \(said.joined(separator: "; ")))"
                let tail = "; no output written"
                error.reason = error.reason.hasSuffix(tail) ? String(error.reason.dropLast(tail.count)) + detail + tail : error.reason + detail
            }
            throw error
        case .failure(let error): throw error
        }
    }

    /// The messages in a library's lines, at most three, each short and printable:
    /// `./lib/jxl/fields.cc:730: JXL_FAILURE: No feasible selector` → `No feasible selector`.
    /// libjxl's `JXL_RETURN_IF_ERROR` lines, which only trace the failure back up, are dropped.
    static func messages(_ text: String) -> [String] {
        var out: [String] = []
        for raw in text.split(whereSeparator: \.isNewline) {
            var line = Substring(raw)
            if line.contains("JXL_RETURN_IF_ERROR") || line.hasSuffix("missing input") { continue }
            // "path:line: message"
            if let colon = line.firstIndex(of: ":"), line[..<colon].contains("/") || line[..<colon].hasSuffix(".cc") || line[..<colon].hasSuffix(".c") {
                let rest = line[line.index(after: colon)...]
                if let next = rest.firstIndex(of: ":"), rest[..<next].allSatisfy(\.isNumber) {
                    line = rest[rest.index(after: next)...]
                }
            }
            if let tag = line.range(of: "JXL_FAILURE:") { line = line[tag.upperBound...] }
            let clean = String(line.trimmingCharacters(in: .whitespaces).unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) }.prefix(160))
            guard !clean.isEmpty, !out.contains(clean) else { continue }
            out.append(clean)
            if out.count == 3 { break }
        }
        return out
    }
}
