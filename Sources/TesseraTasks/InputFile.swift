import Foundation
import TesseraModel

/// One input file and the root it was found under (for naming outputs).
public struct InputFile: Sendable, Hashable, Codable {
    /// Path as given or found.
    public let path: String
    /// The directory the user named, or the file's own directory.
    public let root: String
    /// The piece of the file a task makes: nil for all of it, a part of its pyramid for tiles.
    public let part: PyramidPart?
    /// An object's version as its store listed it (S3 ETag, without quotes): what reruns
    /// and the cache of originals key on instead of the content. Nil for files and URLs.
    public let etag: String?

    public init(path: String, root: String, part: PyramidPart? = nil, etag: String? = nil) {
        self.path = path
        self.root = root
        self.part = part
        self.etag = etag
    }

    enum CodingKeys: String, CodingKey { case path, root, part, etag }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        path = try c.decode(String.self, forKey: .path)
        root = try c.decode(String.self, forKey: .root)
        part = try c.decodeIfPresent(PyramidPart.self, forKey: .part)
        etag = try c.decodeIfPresent(String.self, forKey: .etag)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(path, forKey: .path)
        try c.encode(root, forKey: .root)
        try c.encodeIfPresent(part, forKey: .part)
        try c.encodeIfPresent(etag, forKey: .etag)
    }

    /// What records, log lines, reports and the dashboard call this input: the path, or a
    /// URL without its query string (a presigned URL's signature is a credential; only the
    /// journal, which must fetch it, keeps it). `Paths.display(name)` for people.
    public var name: String { Location.withoutQuery(path) }

    /// What incremental reruns key on: the path, and the part when there is one.
    public var key: String { part.map { path + "#" + $0.description } ?? path }

    public func with(part: PyramidPart) -> InputFile { InputFile(path: path, root: root, part: part, etag: etag) }

    /// The pyramid's name under the output root (tiles): the input's directory and stem.
    public var pyramidName: String {
        let dir = relativeDirectory
        return dir.isEmpty ? stem : dir + "/" + stem
    }
    /// Directory of the file relative to `root` ("" at the top).
    public var relativeDirectory: String {
        let dir = Paths.directory(of: Location.namingPath(path))
        guard dir.utf8.count > root.utf8.count, dir.utf8.starts(with: root.utf8) else { return "" }
        let rest = dir.utf8.dropFirst(root.utf8.count).drop { $0 == UInt8(ascii: "/") }
        return String(dir[rest.startIndex...])
    }
    public var stem: String { String(Paths.splitName(Paths.lastComponent(Location.namingPath(path))).stem) }
    public var fileExtension: String { Paths.splitName(Paths.lastComponent(Location.namingPath(path))).ext.lowercased() }
}

/// An output an incremental rerun expects to find as an earlier rendition left it: an
/// object that must still exist, or a file of this size whose bytes hash to this (the
/// coordinator sends a file only when its size and time alone cannot tell).
public struct ExpectedOutput: Sendable, Equatable {
    public var path: String
    /// Bytes it had (nil: not compared).
    public var size: Int?
    /// XXH64 of its bytes (nil: not compared).
    public var hash: UInt64?

    public init(path: String, size: Int? = nil, hash: UInt64? = nil) {
        self.path = path
        self.size = size
        self.hash = hash
    }
}
