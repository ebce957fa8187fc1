/// Path arithmetic on strings. Foundation's `NSString.deletingLastPathComponent` traps on
/// a one-character path without a slash (`"a"`, `"-"`; swift-corelibs-foundation), so
/// Tessera never calls it.
public enum Paths {
    /// The directory part: `"a/b/c.jpg"` → `"a/b"`, `"/c.jpg"` → `"/"`, `"c.jpg"` → `""`.
    public static func directory(of path: String) -> String {
        var p = Substring(path)
        while p.count > 1 && p.hasSuffix("/") { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/") else { return "" }
        if slash == p.startIndex { return "/" }
        var dir = p[..<slash]
        while dir.count > 1 && dir.hasSuffix("/") { dir = dir.dropLast() }
        return String(dir)
    }
}
