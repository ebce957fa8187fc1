import Foundation

/// How a tile pyramid is laid out on disk.
public enum TileLayout: String, Sendable, Codable, CaseIterable {
    /// Deep Zoom: `NAME.dzi` + `NAME_files/LEVEL/COL_ROW.EXT`, level 0 is 1×1, tiles overlap.
    case deepzoom
    /// IIIF Image API 2 level 0: `NAME/info.json` + `NAME/x,y,w,h/w,/0/default.EXT`.
    case iiif
    /// IIIF Image API 3 level 0: the same with `w,h` sizes and a v3 `info.json`.
    case iiif3
    /// One pyramidal TIFF, `NAME.tif`, for image servers (IIPImage, Cantaloupe): tiled, JPEG,
    /// each level a reduced-resolution page (or SubIFD) half the one above, rounded down, until
    /// one fits in a tile, as `vips tiffsave --tile --pyramid` lays it out. Parts make the tiles
    /// (whole tiles, edges repeated, a pack a part in `NAME.tif.tiles/`); the last part writes them into
    /// the file as they are (no re-encoding) and removes them.
    case tiff
}

/// What a tile pyramid is made of (the `tiles:` section of a job).
public struct TileSettings: Sendable, Codable, Equatable {
    public var layout: TileLayout = .deepzoom
    /// Tile edge in pixels, without overlap (Deep Zoom's default 254, IIIF's 256).
    public var tileSize: Int
    /// Pixels each tile shares with its neighbours on every inner edge (Deep Zoom only).
    public var overlap: Int
    /// `jpeg` or `png` tiles.
    public var format: ImageFormat = .jpeg
    /// JPEG quality 1...100 (dzsave's default 75).
    public var quality: Int = 75
    /// Colour under transparent pixels when tiles are JPEG (RGB).
    public var background: [UInt8] = [255, 255, 255]
    /// IIIF `id` prefix; the pyramid's name is appended.
    public var baseURI: String = "https://example.com/iiif"
    /// Write `NAME.html`, a self-contained pan/zoom viewer (Deep Zoom).
    public var viewer: Bool = true
    /// Memory one task may use, in MB: band heights and tile sizes are checked against it.
    public var memoryBudgetMB: Int = 256
    /// A pyramidal TIFF's reduced levels as SubIFDs of the full-size page (`vips tiffsave
    /// --subifd`) instead of pages after it.
    public var subifd = false

    public init(layout: TileLayout = .deepzoom, tileSize: Int? = nil, overlap: Int? = nil) {
        self.layout = layout
        self.tileSize = tileSize ?? (layout == .deepzoom ? 254 : 256)
        self.overlap = overlap ?? (layout == .deepzoom ? 1 : 0)
    }

    enum CodingKeys: String, CodingKey {
        case layout, tileSize, overlap, format, quality, background, baseURI, viewer, memoryBudgetMB, subifd
    }

    /// JSON jobs take the same defaults as job files.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(layout: try c.decodeIfPresent(TileLayout.self, forKey: .layout) ?? .deepzoom,
                  tileSize: try c.decodeIfPresent(Int.self, forKey: .tileSize),
                  overlap: try c.decodeIfPresent(Int.self, forKey: .overlap))
        format = try c.decodeIfPresent(ImageFormat.self, forKey: .format) ?? format
        if let q = try c.decodeIfPresent(Double.self, forKey: .quality) {
            // 0...1 as in job files and recipes (dzsave's Q 75 is 0.75); a whole 2...100 is the
            // 1...100 of journals and messages written before this was one field.
            if q > 0 && q <= 1 {
                quality = max(1, Int((q * 100).rounded()))
            } else if q == q.rounded() && q >= 2 && q <= 100 {
                quality = Int(q)
            } else {
                throw ImagingError(.invalidRecipe, "tiles.quality: expected 0...1\(Recipe.qualityHint(q)), got \(q)")
            }
        }
        background = try c.decodeIfPresent([UInt8].self, forKey: .background) ?? background
        baseURI = try c.decodeIfPresent(String.self, forKey: .baseURI) ?? baseURI
        viewer = try c.decodeIfPresent(Bool.self, forKey: .viewer) ?? viewer
        memoryBudgetMB = try c.decodeIfPresent(Int.self, forKey: .memoryBudgetMB) ?? memoryBudgetMB
        subifd = try c.decodeIfPresent(Bool.self, forKey: .subifd) ?? subifd
    }

    /// As a job file writes it: quality 0...1.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(layout, forKey: .layout)
        try c.encode(tileSize, forKey: .tileSize)
        try c.encode(overlap, forKey: .overlap)
        try c.encode(format, forKey: .format)
        try c.encode(Double(quality) / 100, forKey: .quality)
        try c.encode(background, forKey: .background)
        try c.encode(baseURI, forKey: .baseURI)
        try c.encode(viewer, forKey: .viewer)
        try c.encode(memoryBudgetMB, forKey: .memoryBudgetMB)
        if subifd { try c.encode(subifd, forKey: .subifd) }
    }

    public func validate() throws {
        guard (16...4096).contains(tileSize) else {
            throw ImagingError(.invalidRecipe, "tiles.tileSize must be 16...4096, got \(tileSize)")
        }
        guard overlap >= 0, overlap <= tileSize / 2 else {
            throw ImagingError(.invalidRecipe, "tiles.overlap must be 0...\(tileSize / 2), got \(overlap)")
        }
        guard layout == .deepzoom || overlap == 0 else {
            throw ImagingError(.invalidRecipe, "\(layout == .tiff ? "TIFF" : "IIIF") tiles do not overlap: tiles.overlap must be 0")
        }
        if layout == .tiff {
            guard tileSize % 16 == 0 else {
                throw ImagingError(.invalidRecipe, "TIFF tiles are a multiple of 16 pixels: tiles.tileSize \(tileSize) is not")
            }
            guard format == .jpeg || format == .png else {
                throw ImagingError(.invalidRecipe, "a pyramidal TIFF's tiles are jpeg or png (lossless Deflate), got \(format.rawValue)")
            }
        } else if subifd {
            throw ImagingError(.invalidRecipe, "tiles.subifd applies to layout tiff only")
        }
        guard format == .jpeg || format == .png else {
            throw ImagingError(.invalidRecipe, "tiles.format must be jpeg or png, got \(format.rawValue)")
        }
        guard (1...100).contains(quality) else {
            throw ImagingError(.invalidRecipe, "tiles.quality must be 1...100, got \(quality)")
        }
        guard background.count == 3 else {
            throw ImagingError(.invalidRecipe, "tiles.background must be 3 values (RGB)")
        }
        guard (32...1_048_576).contains(memoryBudgetMB) else {
            throw ImagingError(.invalidRecipe, "tiles.memoryBudgetMB: expected 32...1048576 (MB), got \(memoryBudgetMB)")
        }
    }

    /// The file suffix of tiles.
    public var suffix: String { format == .png ? "png" : "jpg" }
}

/// The geometry of a pyramid: level sizes, tile grids and tile rectangles, exactly as
/// `vips dzsave` lays them out. Levels are counted by shrink `k` (level size is the
/// source size divided by 2^k, rounded up), so `k = 0` is full resolution; Deep Zoom
/// numbers the same level `maxLevel - k`.
public struct PyramidGeometry: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public let tileSize: Int
    public let overlap: Int
    public let layout: TileLayout

    public init(width: Int, height: Int, settings: TileSettings) {
        self.width = width
        self.height = height
        tileSize = settings.tileSize
        overlap = settings.overlap
        layout = settings.layout
    }

    /// Deep Zoom's highest level number: ceil(log2(max(width, height))).
    public var maxLevel: Int {
        var n = 0
        while (1 << n) < max(width, height) { n += 1 }
        return n
    }

    /// Shrinks written: Deep Zoom goes down to 1×1; IIIF and TIFF stop at the first level
    /// that fits in one tile.
    public var levelCount: Int {
        switch layout {
        case .deepzoom:
            return maxLevel + 1
        case .iiif, .iiif3, .tiff:
            var k = 0
            while true {
                let s = levelSize(k)
                if s.width <= tileSize && s.height <= tileSize { return k + 1 }
                k += 1
            }
        }
    }

    /// Level k's size: the source's over 2^k, rounded up (Deep Zoom, IIIF), or rounded down
    /// (a pyramidal TIFF, as vips writes one: a level's odd last row and column are dropped).
    public func levelSize(_ k: Int) -> Size {
        if roundsDown { return Size(width: max(1, width >> k), height: max(1, height >> k)) }
        return Size(width: (width + (1 << k) - 1) >> k, height: (height + (1 << k) - 1) >> k)
    }

    /// Whether levels halve rounding down (a pyramidal TIFF).
    public var roundsDown: Bool { layout == .tiff }

    public func columns(_ k: Int) -> Int { (levelSize(k).width + tileSize - 1) / tileSize }
    public func rows(_ k: Int) -> Int { (levelSize(k).height + tileSize - 1) / tileSize }

    /// A tile's pixels in level-`k` coordinates: [x0, x1) × [y0, y1), overlap included.
    public func tile(_ k: Int, column c: Int, row r: Int) -> (x: Range<Int>, y: Range<Int>) {
        let s = levelSize(k)
        func span(_ i: Int, _ n: Int) -> Range<Int> {
            let lo = max(0, i * tileSize - (i > 0 ? overlap : 0))
            let hi = min(n, (i + 1) * tileSize + overlap)
            return lo..<hi
        }
        return (span(c, s.width), span(r, s.height))
    }

    /// Level-`k` rows that tile rows `rows` need.
    public func rowSpan(_ k: Int, tileRows rows: Range<Int>) -> Range<Int> {
        tile(k, column: 0, row: rows.lowerBound).y.lowerBound..<tile(k, column: 0, row: rows.upperBound - 1).y.upperBound
    }

    public var tileCount: Int { (0..<levelCount).reduce(0) { $0 + columns($1) * rows($1) } }

    /// The tile's path relative to the output root, for a pyramid called `name`.
    public func path(name: String, k: Int, column c: Int, row r: Int, suffix: String) -> String {
        switch layout {
        case .deepzoom:
            return "\(name)_files/\(maxLevel - k)/\(c)_\(r).\(suffix)"
        case .iiif, .iiif3:
            let t = tile(k, column: c, row: r)
            let s = 1 << k
            let last = k == levelCount - 1
            // The smallest level is the whole image: region = full extent.
            let rx = last ? 0 : t.x.lowerBound * s, ry = last ? 0 : t.y.lowerBound * s
            let rw = last ? width : min(t.x.count * s, width - rx)
            let rh = last ? height : min(t.y.count * s, height - ry)
            let size = layout == .iiif ? "\(t.x.count)," : "\(t.x.count),\(t.y.count)"
            return "\(name)/\(rx),\(ry),\(rw),\(rh)/\(size)/0/default.\(suffix)"
        case .tiff:
            return "\(name).tif.tiles/\(k)/\(c)_\(r).\(suffix)"
        }
    }
}

/// The piece of a pyramid one task makes. Bands are tile rows of one level; a stack is the
/// tile rows of several levels over one stripe of the source, made from one read of it; the
/// tail is every level from `shrink` down, made from one small decode; the descriptor part
/// writes `.dzi` or `info.json` (and the viewer) once every other part has succeeded, so a
/// descriptor always describes a whole pyramid.
public enum PyramidPart: Sendable, Hashable, CustomStringConvertible {
    /// Tile rows `rows` of the level at shrink k (level = source / 2^k; a JPEG's at its DCT
    /// scale). Planned only for a JPEG whose stacks would not fit the memory budget (and
    /// found in journals of earlier versions).
    case band(shrink: Int, rows: Range<Int>)
    /// Levels 0..<`levels` over the stripe of tile rows `rows` of the deepest one (shrink
    /// `levels - 1`): level k's tile rows `rows` scaled by 2^(levels-1-k). Each level is the
    /// 2×2 box mean of the one above, as the tail makes its levels, so the source is read once
    /// for all of them.
    case stack(levels: Int, rows: Range<Int>)
    /// Every level from shrink k down.
    case tail(from: Int)
    /// The `.dzi` or `info.json` (and viewer), made last.
    case descriptor

    /// The level shrink the part starts at (0 for the descriptor).
    public var shrink: Int {
        switch self {
        case .band(let k, _), .tail(let k): return k
        case .stack, .descriptor: return 0
        }
    }

    /// Tile rows of level `k` a stack makes (empty for a level it does not make).
    public func stackRows(_ k: Int, in geometry: PyramidGeometry) -> Range<Int> {
        guard case .stack(let levels, let rows) = self, k < levels else { return 0..<0 }
        let s = levels - 1 - k
        let n = geometry.rows(k)
        // The last stripe takes every row left: with sizes rounded down, a level can have a tile
        // row more than twice the one below (2049 rows: 9 tile rows of 256 over 1024's 4).
        let last = rows.upperBound >= geometry.rows(levels - 1)
        return min(n, rows.lowerBound << s)..<(last ? n : min(n, rows.upperBound << s))
    }

    /// Rows of level `levels` (the tail's first) a stack hands over to the tail: those whose
    /// source rows lie in its stripe; nil when stripes do not fall on whole rows of that level
    /// (an odd tile size) or for other parts.
    public func stripeRows(in geometry: PyramidGeometry) -> Range<Int>? {
        guard case .stack(let n, let rows) = self, geometry.tileSize % 2 == 0, n < geometry.levelCount else { return nil }
        let unit = geometry.tileSize << (n - 1), h = geometry.levelSize(n).height
        return min(h, (rows.lowerBound * unit) >> n)..<min(h, (rows.upperBound * unit) >> n)
    }

    /// `k0:r3-6` (band: shrink 0, tile rows 3..<6), `k0-3:r1-2` (stack of shrinks 0...3 over
    /// tile row 1 of shrink 3), `k3+` (tail from shrink 3) or `meta`: its name in task keys,
    /// records and messages.
    public var description: String {
        switch self {
        case .tail(let k): return "k\(k)+"
        case .band(let k, let rows): return "k\(k):r\(rows.lowerBound)-\(rows.upperBound)"
        case .stack(let n, let rows): return "k0-\(n - 1):r\(rows.lowerBound)-\(rows.upperBound)"
        case .descriptor: return "meta"
        }
    }

    /// Parses `description`; nil for anything else.
    public init?(_ text: String) {
        if text == "meta" {
            self = .descriptor
            return
        }
        guard text.hasPrefix("k") else { return nil }
        let body = text.dropFirst()
        if body.hasSuffix("+"), let k = Int(body.dropLast()), k >= 0, k < 64 {
            self = .tail(from: k)
            return
        }
        let halves = body.split(separator: ":", omittingEmptySubsequences: false)
        guard halves.count == 2, halves[1].hasPrefix("r") else { return nil }
        let bounds = halves[1].dropFirst().split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
        guard bounds.count == 2, let lo = bounds[0], let hi = bounds[1], lo >= 0, lo < hi, hi <= 1 << 40 else { return nil }
        if halves[0].hasPrefix("0-") {
            guard let last = Int(halves[0].dropFirst(2)), last >= 0, last < 40 else { return nil }
            self = .stack(levels: last + 1, rows: lo..<hi)
            return
        }
        guard let k = Int(halves[0]), k >= 0, k < 64 else { return nil }
        self = .band(shrink: k, rows: lo..<hi)
    }
}

extension PyramidPart: Codable {
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        let text = try c.decode(String.self)
        guard let part = PyramidPart(text) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a pyramid part: \"\(text)\"")
        }
        self = part
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

extension PyramidGeometry {
    /// Bytes of level `k` held whole, with `channels` per pixel.
    public func levelBytes(_ k: Int, channels: Int) -> Int {
        let s = levelSize(k)
        return s.width * s.height * channels
    }

    /// The first shrink made by the tail: the largest level small enough to hold whole
    /// (16 MB, or a quarter of the budget), never above what a band could make instead.
    public func tailShrink(info: TileSourceInfo, settings: TileSettings) -> Int {
        let cap = min(16 << 20, (settings.memoryBudgetMB << 20) / 4)
        var k = 0
        while k < levelCount - 1 && levelBytes(k, channels: info.channels) * 4 / 3 > cap { k += 1 }
        return k
    }

    /// Memory a part needs beyond the source bytes: the band window (or the tail's levels)
    /// plus what the decoder holds whatever the band (progressive coefficients, an
    /// interlaced PNG), plus libjpeg's and the encoder's working rows.
    public func memoryEstimate(_ part: PyramidPart, info: TileSourceInfo, settings: TileSettings) -> Int {
        let k = part.shrink
        let decodeWidth = info.scalesOnDecode ? levelSize(min(k, 3)).width : width
        let working = decodeWidth * 4 * 64 + (4 << 20) + 2 * info.headerBytes
        switch part {
        case .band:
            return levelSize(k).width * 4 * (tileSize + 2 * overlap) + info.wholeImageBytes + working
        case .stack(let levels, _):
            // A window of tile rows per level (under twice level 0's) and a row each to halve.
            let windows = (0..<levels).reduce(0) { $0 + levelSize($1).width * 4 * (tileSize + 2 * overlap + 1) }
            return windows + info.wholeImageBytes + working
        case .tail:
            return levelBytes(k, channels: info.channels) * 4 / 3 + info.wholeImageBytes + working
        case .descriptor:
            return 1 << 20
        }
    }

    /// Splits the pyramid into parts: stacks for the large levels, one tail for the small
    /// ones, the descriptor last. A stack is a stripe of whole tile rows of the deepest
    /// stacked level (shrink kt - 1), read once at full size and halved level by level (2×2
    /// box means, vips' way) into every stacked level's tile rows; it leaves its rows of the
    /// tail's first level for the tail, which the coordinator holds until its stacks end. So
    /// the source is decoded once in all: a JPEG band per level at its DCT scale entropy-
    /// decoded the whole file once per level, which cost more than the scaled IDCT saved.
    /// A stack's memory does not grow with its height (it streams), so stripes are sized by
    /// work: about 12 megapixels when the decoder can start at a restart marker or a strip;
    /// otherwise fewer, larger stripes, because each one entropy-decodes (JPEG) or inflates
    /// (PNG) everything above it. Largest first, so that the longest tasks start first.
    /// A JPEG whose stacks would not fit the memory budget (a very wide one under a small
    /// budget: a stack holds a window per level) is cut into bands instead, one level's tile
    /// rows each, decoded at the level's DCT scale (1/2, 1/4, 1/8): half the window, but the
    /// whole file entropy-decoded once per level.
    public func plan(info: TileSourceInfo, settings: TileSettings) -> [PyramidPart] {
        let kt = tailShrink(info: info, settings: settings)
        guard kt > 0 else { return [.tail(from: 0), .descriptor] }
        let full = Double(width * height)
        let target: Double = info.restartSeekable ? 12e6 : info.progressive ? 48e6 : 32e6
        let maxStripes = info.restartSeekable ? Int.max : 8
        // Relative cost of reading past a pixel (entropy decoding or inflating) vs making one.
        let passCost = info.skipCost
        // Stripes of whole tile rows of the deepest stacked level (shrink kt - 1).
        let units = rows(kt - 1), unitRows = tileSize << (kt - 1)
        let n = max(1, min(units, maxStripes, Int((full / target).rounded(.up))))
        var parts: [(PyramidPart, Double)] = []
        for i in 0..<n {
            let r = (i * units / n)..<((i + 1) * units / n)
            let top = min(height, r.lowerBound * unitRows), bottom = min(height, r.upperBound * unitRows)
            let made = Double((bottom - top) * width) * 4 / 3
            let passed = full * Double(bottom - (info.restartSeekable ? top : 0)) / Double(height)
            parts.append((.stack(levels: kt, rows: r), made + passCost * passed))
        }
        if info.scalesOnDecode, memoryEstimate(parts[0].0, info: info, settings: settings) > settings.memoryBudgetMB << 20 {
            parts = []
            for k in 0..<kt {
                let s = levelSize(k)
                let m = max(1, min(rows(k), maxStripes, Int((Double(s.width * s.height) / target).rounded(.up))))
                for i in 0..<m {
                    let r = (i * rows(k) / m)..<((i + 1) * rows(k) / m)
                    let span = rowSpan(k, tileRows: r)
                    let readFrom = info.restartSeekable ? Double(span.lowerBound) / Double(s.height) : 0
                    let passed = full * (Double(span.upperBound) / Double(s.height) - readFrom)
                    parts.append((.band(shrink: k, rows: r), Double(span.count * s.width) + passCost * passed))
                }
            }
        }
        return parts.sorted { $0.1 > $1.1 }.map(\.0) + [.tail(from: kt), .descriptor]
    }
}
