import Foundation

/// What one pyramid task did: reported per task.
public struct TileWork: Sendable, Codable, Equatable {
    public var part: PyramidPart?
    /// Deep Zoom level numbers (or IIIF shrinks) written.
    public var levels: [Int] = []
    public var tilesWritten = 0
    /// Tiles already present from an earlier attempt, not made again.
    public var tilesSkipped = 0
    public var bytes = 0
    /// The decoded region in level pixels: x, y, width, height (the first level of the part).
    public var region: [Int] = []
    public var decode = TileDecodeInfo()
    /// Decode (with the level halving) and encode milliseconds; in the record's timings, not its `tiles`.
    public var timings = StageTimings()
    public init() {}

    enum CodingKeys: String, CodingKey { case part, levels, tilesWritten, tilesSkipped, bytes, region, decode }
}

/// What a tile source is, read from its header: what planning needs.
public struct TileSourceInfo: Sendable, Equatable {
    public var format: ImageFormat
    public var width: Int
    public var height: Int
    public var progressive: Bool
    /// Bands can start anywhere at little cost: a baseline JPEG with restart markers in one
    /// interleaved scan (a band starts at a marker), a TIFF (strips and tiles are read where they are).
    public var restartSeekable: Bool
    /// Memory the decoder needs whatever the band (progressive coefficients, an
    /// interlaced PNG's whole image), in bytes.
    public var wholeImageBytes: Int
    /// Channels of a level row (1, 3 or 4).
    public var channels: Int
    /// Bytes before the image data (metadata included): a restarted band copies them.
    public var headerBytes: Int = 0
    /// The decoder reduces while decoding (a JPEG's DCT scales): a band of a small level is
    /// decoded small, and bands are worth cutting when stacks do not fit the budget.
    public var scalesOnDecode = false
    /// What reading past a pixel costs (entropy-decoding a JPEG row, inflating a PNG's),
    /// relative to making one: how planning weighs a stripe that starts low in the file.
    public var skipCost = 0.3

    public init(format: ImageFormat, width: Int, height: Int, progressive: Bool, restartSeekable: Bool,
                wholeImageBytes: Int, channels: Int) {
        self.format = format
        self.width = width
        self.height = height
        self.progressive = progressive
        self.restartSeekable = restartSeekable
        self.wholeImageBytes = wholeImageBytes
        self.channels = channels
    }
}

/// How a task got its pixels: reported per task.
public struct TileDecodeInfo: Sendable, Codable, Equatable {
    /// DCT scale in eighths (8: full size; PNG: 8).
    public var scaleEighths: Int = 8
    /// Further 2^n box shrink after decoding.
    public var boxShrink: Int = 1
    /// How the decoder reached the first row: `restart-marker` (decoding starts at a
    /// restart marker, nothing before it is read), `skip-scanlines` (entropy-decoded, not
    /// reconstructed), `read-through` (PNG: inflated and dropped), `none` (from the top).
    public var seek = TileSeek.none
    /// Source rows (full-resolution coordinates) the task decoded.
    public var sourceRows: [Int] = []
    public init() {}
}

/// How a tile task's decoder reached the first row it needs.
public enum TileSeek: String, Sendable, Codable {
    /// From the top: the part starts at row 0, or the source cannot seek.
    case none
    /// Decoding starts at a restart marker: nothing before it is read (baseline JPEG).
    case restartMarker = "restart-marker"
    /// Rows above are entropy-decoded, not reconstructed (`jpeg_skip_scanlines`).
    case skipScanlines = "skip-scanlines"
    /// Rows above are decoded and dropped (PNG: inflated, unfiltered).
    case readThrough = "read-through"
    /// The rows are read where they are stored (TIFF strips and tiles): nothing above is read.
    case direct
    /// Nothing of the source is read: a tail puts its first level together from the stripes
    /// its pyramid's stacks made of it.
    case stripes
}

extension TileDecodeInfo {
    /// The record's `decodePath` of a tile task, e.g. `jpeg-restart-marker`: the source's
    /// format and how its decoder reached the part.
    public func decodePath(_ format: ImageFormat) -> String { format.rawValue + "-" + seek.rawValue }
}
