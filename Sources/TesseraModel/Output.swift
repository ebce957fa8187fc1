import Foundation

/// What a task made, one file: the one shape from the renderer to the report. A job's
/// `OutputSpec` (with its `Recipe`) says what to make; this says what was made, and is
/// what records, the journal's reports, CSV and the dashboard carry as JSON.
public struct OutputRecord: Sendable, Codable, Equatable {
    /// The output's name (`{preset}`; `tile` or `descriptor` in a pyramid).
    public var name: String
    /// Where it was written (relative to the output root until it is published).
    public var path: String
    /// The image format; nil for a pyramid's descriptor (`.dzi`, `info.json`, `vips-properties.xml`).
    public var format: ImageFormat?
    public var width: Int
    public var height: Int
    public var bytes: Int
    /// The encoder quality (1...100) of a lossy output (JPEG, WebP, AVIF); below the
    /// recipe's when a byte budget lowered it.
    public var quality: Int?
    /// What became of the source's gain map (nil: the source had none).
    public var gainMap: GainMapOutcome?
    /// XXH64 of the file's bytes as written (`xxh64`, 16 hex digits): what an incremental
    /// rerun compares an output that changed on disk against.
    public var contentHash: UInt64?
    /// The same, for JPEG outputs only (the records' `jpegQuality`).
    public var jpegQuality: Int? { format == .jpeg ? quality : nil }

    public init(name: String, path: String, format: ImageFormat?, width: Int, height: Int, bytes: Int, quality: Int?) {
        self.name = name
        self.path = path
        self.format = format
        self.width = width
        self.height = height
        self.bytes = bytes
        self.quality = quality
    }

    enum CodingKeys: String, CodingKey { case name, path, format, width, height, bytes, quality, jpegQuality, gainMap, xxh64 }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        path = try c.decode(String.self, forKey: .path)
        // Records before one shape wrote a tile's format as its extension ("jpg", "dzi").
        format = try c.decodeIfPresent(String.self, forKey: .format).flatMap { ImageFormat(rawValue: $0) ?? ImageFormat.byExtension[$0] }
        width = try c.decode(Int.self, forKey: .width)
        height = try c.decode(Int.self, forKey: .height)
        bytes = try c.decode(Int.self, forKey: .bytes)
        quality = try c.decodeIfPresent(Int.self, forKey: .quality) ?? c.decodeIfPresent(Int.self, forKey: .jpegQuality)
        gainMap = try c.decodeIfPresent(GainMapOutcome.self, forKey: .gainMap)
        contentHash = try c.decodeIfPresent(String.self, forKey: .xxh64).flatMap { UInt64($0, radix: 16) }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(path, forKey: .path)
        try c.encodeIfPresent(format, forKey: .format)
        try c.encode(width, forKey: .width)
        try c.encode(height, forKey: .height)
        try c.encode(bytes, forKey: .bytes)
        try c.encodeIfPresent(quality, forKey: .quality)
        try c.encodeIfPresent(jpegQuality, forKey: .jpegQuality)
        try c.encodeIfPresent(gainMap, forKey: .gainMap)
        if let contentHash {
            let hex = String(contentHash, radix: 16)
            try c.encode(String(repeating: "0", count: 16 - hex.count) + hex, forKey: .xxh64)
        }
    }
}

/// One file made and not yet published: its record and its bytes.
public struct OutputFile: Sendable {
    public var record: OutputRecord
    public var bytes: [UInt8]

    public init(_ record: OutputRecord, bytes: [UInt8]) {
        self.record = record
        self.bytes = bytes
    }
}
