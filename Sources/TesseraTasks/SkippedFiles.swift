import Foundation

/// Files a directory walk passed over because they are not images Tessera reads (by
/// extension: `.tif`, `.gif`, `.txt`…), counted by extension: what a summary says was
/// skipped instead of dropping it silently. Hidden files and folders are not counted.
public final class SkippedFiles: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    /// Every skipped path, for `--strict` (kept only when asked: a walk of a million
    /// other files keeps their counts, not their names).
    public private(set) var paths: [String] = []
    public let keepsPaths: Bool

    public init(keepPaths: Bool = false) { keepsPaths = keepPaths }

    /// Counts `path` (its extension, lowercased, with the dot; "no extension" without one).
    public func add(_ path: String) {
        let name = (path as NSString).lastPathComponent
        let ext = (name as NSString).pathExtension.lowercased()
        lock.lock()
        counts[ext.isEmpty ? "no extension" : "." + ext, default: 0] += 1
        if keepsPaths { paths.append(path) }
        lock.unlock()
    }

    /// Skipped files by extension.
    public var byExtension: [String: Int] {
        lock.lock()
        defer { lock.unlock() }
        return counts
    }

    public var total: Int { byExtension.values.reduce(0, +) }

    /// `skipped 6 files: 2 .tif, 1 .gif, 3 .txt` (most first), or nil when none was.
    public static func line(_ byExtension: [String: Int]) -> String? {
        let total = byExtension.values.reduce(0, +)
        guard total > 0 else { return nil }
        let kinds = byExtension.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { "\($0.value) \($0.key)" }
        return "skipped \(total) file\(total == 1 ? "" : "s") that \(total == 1 ? "is" : "are") not images Tessera reads: "
            + kinds.joined(separator: ", ")
    }
}
