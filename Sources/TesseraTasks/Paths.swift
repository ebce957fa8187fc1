import Foundation
import TesseraModel

/// Path arithmetic on strings. Foundation's `NSString.deletingLastPathComponent` traps on
/// a one-character path without a slash (`"a"`, `"-"`; swift-corelibs-foundation), so
/// Tessera never calls it.
public enum Paths {
    /// The directory part: `"a/b/c.jpg"` → `"a/b"`, `"/c.jpg"` → `"/"`, `"c.jpg"` → `""`.
    public static func directory(of path: String) -> String {
        // On the UTF-8 bytes ("/" is one byte in any name): planning calls this per input.
        let u = path.utf8, slash = UInt8(ascii: "/")
        guard !u.isEmpty else { return "" }
        let second = u.index(after: u.startIndex)
        var end = u.endIndex
        while end > second && u[u.index(before: end)] == slash { end = u.index(before: end) }
        var i = end
        while i > u.startIndex && u[u.index(before: i)] != slash { i = u.index(before: i) }
        guard i > u.startIndex else { return "" }
        var dirEnd = u.index(before: i)
        if dirEnd == u.startIndex { return "/" }
        while dirEnd > second && u[u.index(before: dirEnd)] == slash { dirEnd = u.index(before: dirEnd) }
        return String(path[u.startIndex..<dirEnd])
    }

    /// The last component: `"a/b/c.jpg"` → `"c.jpg"`, trailing slashes ignored (`"a/b/"` →
    /// `"b"`), `"/"` → `"/"`; NSString's `lastPathComponent` without its copies (planning
    /// names a million files).
    public static func lastComponent(_ path: String) -> Substring {
        let u = path.utf8
        var end = u.endIndex
        while end != u.startIndex, u[u.index(before: end)] == UInt8(ascii: "/"), u.index(before: end) != u.startIndex {
            end = u.index(before: end)
        }
        var start = end
        while start != u.startIndex, u[u.index(before: start)] != UInt8(ascii: "/") { start = u.index(before: start) }
        if start == end, end != u.startIndex { return path[u.index(before: end)..<end] }  // "/"
        return path[start..<end]
    }

    /// A file name's stem and extension as NSString's `deletingPathExtension` and
    /// `pathExtension` give them: after the last ".", unless it starts the name (`.hidden`)
    /// or the name is `..`; `a.` has the extension "" and the stem `a`.
    public static func splitName(_ name: Substring) -> (stem: Substring, ext: Substring) {
        let u = name.utf8
        guard u.count > 1, name != "..", let dot = u.lastIndex(of: UInt8(ascii: ".")), dot != u.startIndex else {
            return (name, name[name.endIndex...])
        }
        return (name[..<dot], name[u.index(after: dot)...])
    }
}

// MARK: - File names that are not UTF-8

/// Linux file names are bytes. A name that is not valid UTF-8 is carried in a Swift
/// `String` with each invalid byte `b` as the private-use scalar U+10FF00 + b, and turned
/// back into the same bytes whenever it reaches the kernel (`Paths.withCString`), so such
/// files are found, read and written under their own names. In JSON they appear as those
/// scalars; `Paths.display` shows them as `\xNN`.
extension Paths {
    static let escapeBase: UInt32 = 0x10FF00

    /// A name or path from the kernel's bytes.
    public static func fromBytes<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        if let s = String(validatingUTF8Bytes: bytes) { return s }
        var scalars = String.UnicodeScalarView()
        var it = Array(bytes)[...]
        while !it.isEmpty {
            // The longest valid UTF-8 sequence at the front, or one escaped byte.
            var decoded: Unicode.Scalar?
            var used = 0
            for n in 1...min(4, it.count) {
                if let s = String(validatingUTF8Bytes: it.prefix(n)), s.unicodeScalars.count == 1 {
                    decoded = s.unicodeScalars.first
                    used = n
                    break
                }
            }
            if let decoded, !(decoded.value >= escapeBase && decoded.value <= escapeBase + 0xFF) {
                scalars.append(decoded)
                it = it.dropFirst(used)
            } else {
                scalars.append(Unicode.Scalar(escapeBase + UInt32(it.first!))!)
                it = it.dropFirst()
            }
        }
        return String(scalars)
    }

    /// Whether `path` holds escaped bytes.
    public static func hasEscapes(_ path: String) -> Bool {
        path.unicodeScalars.contains { $0.value >= escapeBase && $0.value <= escapeBase + 0xFF }
    }

    /// The kernel's bytes for `path` (NUL-terminated).
    public static func fileSystemBytes(_ path: String) -> [CChar] {
        var out: [CChar] = []
        out.reserveCapacity(path.utf8.count + 1)
        for s in path.unicodeScalars {
            if s.value >= escapeBase && s.value <= escapeBase + 0xFF {
                out.append(CChar(bitPattern: UInt8(s.value - escapeBase)))
            } else {
                out += String(s).utf8.map { CChar(bitPattern: $0) }
            }
        }
        out.append(0)
        return out
    }

    /// Calls `body` with the kernel's bytes for `path`.
    public static func withCString<T>(_ path: String, _ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
        if !hasEscapes(path) { return try path.withCString(body) }
        return try fileSystemBytes(path).withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    /// `path` for people (`DisplayName`): escaped bytes as `\xNN`, a URL without its query.
    public static func display(_ path: String) -> String { DisplayName.of(path) }

    /// Whether a file or directory exists at `path` (following symbolic links).
    public static func exists(_ path: String) -> Bool {
        var st = stat()
        return withCString(path) { stat($0, &st) } == 0
    }

    /// `realpath(3)`: symbolic links resolved, or nil when the path does not exist.
    public static func realPath(_ path: String) -> String? {
        guard let p = withCString(path, { realpath($0, nil) }) else { return nil }
        defer { free(p) }
        return fromBytes(UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p)))
    }

    /// `.` and `..` segments removed without touching the file system (symbolic links keep
    /// their own names; `NSString.standardizingPath` would resolve them).
    /// Whether `normalize` would return `path` unchanged: not empty, no empty, "." or ".."
    /// component, no trailing "/" (except "/" itself).
    static func isNormal(_ path: String) -> Bool {
        path.utf8.withContiguousStorageIfAvailable { b -> Bool in
            guard !b.isEmpty else { return false }
            if b.count == 1 { return b[0] == UInt8(ascii: "/") || b[0] != UInt8(ascii: ".") }
            if b[b.count - 1] == UInt8(ascii: "/") { return false }
            var start = b[0] == UInt8(ascii: "/") ? 1 : 0
            while start <= b.count {
                var end = start
                while end < b.count && b[end] != UInt8(ascii: "/") { end += 1 }
                let n = end - start
                if n == 0 || (n == 1 && b[start] == UInt8(ascii: ".")) ||
                    (n == 2 && b[start] == UInt8(ascii: ".") && b[start + 1] == UInt8(ascii: ".")) { return false }
                start = end + 1
            }
            return true
        } ?? false
    }

    public static func normalize(_ path: String) -> String {
        if isNormal(path) { return path }  // the common case (a million manifest lines): no copy
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
                continue
            }
            if part == "..", path.hasPrefix("/") { continue }
            parts.append(part)
        }
        let joined = parts.joined(separator: "/")
        return path.hasPrefix("/") ? "/" + joined : (joined.isEmpty ? "." : joined)
    }
}

extension String {
    /// The string the bytes spell in UTF-8, or nil when they are not valid UTF-8.
    init?<C: Collection>(validatingUTF8Bytes bytes: C) where C.Element == UInt8 {
        var decoder = UTF8()
        var it = bytes.makeIterator()
        var s = String.UnicodeScalarView()
        while true {
            switch decoder.decode(&it) {
            case .scalarValue(let v): s.append(v)
            case .emptyInput:
                self = String(s)
                return
            case .error: return nil
            }
        }
    }
}
