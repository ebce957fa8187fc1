import Foundation

/// One input file and the root it was found under (for naming outputs).
public struct InputFile: Sendable, Hashable, Codable {
    /// Path as given or found.
    public let path: String
    /// The directory the user named, or the file's own directory.
    public let root: String
    /// The piece of the file a task makes ("" for all of it; a `PyramidPart` for tiles).
    public let part: String

    public init(path: String, root: String, part: String = "") {
        self.path = path
        self.root = root
        self.part = part
    }

    enum CodingKeys: String, CodingKey { case path, root, part }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        path = try c.decode(String.self, forKey: .path)
        root = try c.decode(String.self, forKey: .root)
        part = try c.decodeIfPresent(String.self, forKey: .part) ?? ""
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(path, forKey: .path)
        try c.encode(root, forKey: .root)
        if !part.isEmpty { try c.encode(part, forKey: .part) }
    }

    /// What incremental reruns key on: the path, and the part when there is one.
    public var key: String { part.isEmpty ? path : path + "#" + part }

    public func with(part: String) -> InputFile { InputFile(path: path, root: root, part: part) }
    /// Directory of the file relative to `root` ("" at the top).
    public var relativeDirectory: String {
        let dir = Paths.directory(of: path)
        guard dir.count > root.count, dir.hasPrefix(root) else { return "" }
        return String(dir.dropFirst(root.count).drop { $0 == "/" })
    }
    public var stem: String { ((path as NSString).lastPathComponent as NSString).deletingPathExtension }
    public var fileExtension: String { (path as NSString).pathExtension.lowercased() }
}

/// Expands files and directories (recursively) into image inputs, sorted.
public enum InputDiscovery {
    /// Extensions picked up when walking directories. Files named explicitly are taken
    /// whatever their name (the renderer sniffs content, not names).
    public static let imageExtensions: Set<String> = ["jpg", "jpeg", "jpe", "jfif", "png", "webp", "heic", "heif", "hif", "avif"]

    /// Files and directories (searched with the jobs' walker) as inputs, in order.
    public static func expand(_ paths: [String], recursive: Bool = true) throws -> [InputFile] {
        try paths.flatMap { raw in
            try JobPlanner.expand(raw.count > 1 && raw.hasSuffix("/") ? String(raw.dropLast()) : raw, recursive: recursive)
        }
    }
}
