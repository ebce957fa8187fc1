import Foundation
import TesseraModel
import TesseraShim

extension TileSourceInfo {
    /// Whether `marker` (JPEG EOI, PNG IEND) is in the last 4 KB: files may carry trailing
    /// data (MPF images end with their own EOI), truncated ones do not have it.
    static func endsLikeAnImage(_ bytes: UnsafeRawBufferPointer, marker: [UInt8]) -> Bool {
        let n = bytes.count, m = marker.count
        guard n >= m else { return false }
        var i = n - m
        while i >= max(0, n - 4096) {
            if bytes[i] == marker[0] && (1..<m).allSatisfy({ bytes[i + $0] == marker[$0] }) { return true }
            i -= 1
        }
        return false
    }

    /// What a pyramid of the source in `bytes` needs to know, from its loader's header.
    public static func probe(_ bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo {
        var options = RenderOptions()
        options.limits = limits
        return try SourceDecoder(bytes: bytes, options: options).loader.tileInfo(bytes: bytes, limits: limits)
    }
}

/// Makes the tiles of one part of a pyramid from the source bytes, streaming: a band
/// holds `tileSize + 2·overlap` rows of its level; the tail holds one small level.
/// Bytes in, tiles out: `emit` gets each tile's relative path and bytes (the caller
/// writes them), `exists` lets the caller skip tiles an earlier attempt wrote.
public struct TileRenderer {
    public let settings: TileSettings
    public let info: TileSourceInfo
    public let geometry: PyramidGeometry
    /// The pyramid's name (path under the output root, without suffix).
    public let name: String
    public var limits = Limits()
    public var strict = true
    /// The source bytes map a file (`RenderOptions.inputIsFileMap`).
    public var inputIsFileMap = false
    /// Where stacks leave their stripes of the tail's first level and the tail finds them
    /// (nil: the tail decodes the source).
    public var stripes: StripeStore?

    public init(settings: TileSettings, info: TileSourceInfo, name: String) {
        self.settings = settings
        self.info = info
        self.name = name
        geometry = PyramidGeometry(width: info.width, height: info.height, settings: settings)
    }

    /// The level the source decodes at for shrink `k`: its loader's scaled decode (a JPEG's
    /// DCT scale), then a box shrink.
    static func decodePlan(format: ImageFormat, shrink k: Int) -> (eighths: Int, boxShift: Int) {
        SourceLoaders.loader(for: format).tileDecodePlan(shrink: k)
    }

    func source(_ bytes: UnsafeRawBufferPointer, shrink k: Int, startRow: Int) throws -> RowSource {
        let (eighths, shift) = TileRenderer.decodePlan(format: info.format, shrink: k)
        var limits = self.limits
        limits.maxPixels = Int.max
        limits.maxDecoderMemory = settings.memoryBudgetMB << 20
        let base: RowSource
        if let streaming = try SourceLoaders.loader(for: info.format).rowSource(bytes: bytes, scaleEighths: eighths, startRow: startRow << shift,
                                                                                 limits: limits, strict: strict) {
            base = streaming
        } else {
            base = try DecodedRowSource(bytes: bytes, limits: limits, inputIsFileMap: inputIsFileMap)
            try base.seek(to: startRow << shift)
        }
        guard shift > 0 else { return base }
        let shrunk = BoxShrinkSource(base, shift: shift)
        try shrunk.seek(to: startRow)
        return shrunk
    }

    /// Renders `part`.
    public func render(_ bytes: UnsafeRawBufferPointer, part: PyramidPart, exists: (String) -> Bool = { _ in false },
                       emit: (OutputFile) throws -> Void) throws -> TileWork {
        var work = TileWork()
        work.part = part
        if case .descriptor = part {
            for (path, data) in descriptors() {
                try emit(OutputFile(.init(name: "descriptor", path: path, format: nil, width: 0, height: 0, bytes: data.count,
                                          quality: nil), bytes: data))
            }
            return work
        }
        let inside: Bool
        switch part {
        case .band(let k, let rows): inside = k < geometry.levelCount && rows.upperBound <= geometry.rows(k)
        case .stack(let n, let rows): inside = n >= 1 && n <= geometry.levelCount && rows.upperBound <= geometry.rows(n - 1)
        case .tail(let k): inside = k < geometry.levelCount
        case .descriptor: inside = true
        }
        guard inside else {
            throw ImagingError(.invalidRecipe, "pyramid part \(part) is outside the \(geometry.levelCount)-level pyramid")
        }
        let need = geometry.memoryEstimate(part, info: info, settings: settings)
        guard need <= settings.memoryBudgetMB << 20 else {
            let what = info.progressive ? SourceLoaders.loader(for: info.format).wholeDecodeAdvice(info)
                : "use a smaller tiles.tileSize or raise tiles.memoryBudgetMB"
            throw ImagingError(.limitExceeded, "part \(part) needs about \(need >> 20) MB, over the tile memory budget of \(settings.memoryBudgetMB) MB: \(what)")
        }
        // A pyramidal TIFF's part writes its tiles as one pack, for the assembling part.
        var pack: [(TilePack.Tile, [UInt8])]? = settings.layout == .tiff ? [] : nil
        func emitTile(_ tile: TilePack.Tile, _ file: OutputFile) throws {
            if pack != nil { pack!.append((tile, file.bytes)) } else { try emit(file) }
        }
        let clock = Stopwatch()
        var decodeTime = 0.0, encodeTime = 0.0
        let outChannels = settings.format == .jpeg ? (info.channels == 1 ? 1 : 3) : info.channels
        let wholeTile: UnsafeMutablePointer<UInt8>? = settings.layout == .tiff
            ? .allocate(capacity: settings.tileSize * settings.tileSize * outChannels) : nil
        defer { wholeTile?.deallocate() }

        /// Encodes and emits the tiles of tile row `r` of level `k` from `window`, whose
        /// first row is level row `top`.
        func emitRow(_ k: Int, _ r: Int, window: UnsafeMutablePointer<UInt8>, stride: Int, top: Int) throws {
            for c in 0..<geometry.columns(k) {
                let t = geometry.tile(k, column: c, row: r)
                let path = geometry.path(name: name, k: k, column: c, row: r, suffix: settings.suffix)
                if exists(path) {
                    work.tilesSkipped += 1
                    continue
                }
                let t0 = clock.milliseconds
                var p = UnsafePointer(window + (t.y.lowerBound - top) * stride + t.x.lowerBound * outChannels)
                var (w, h, s) = (t.x.count, t.y.count, stride)
                if let whole = wholeTile, w < settings.tileSize || h < settings.tileSize {
                    // A TIFF's tiles are whole: the edge's last column and row repeat to the tile's size.
                    let n = settings.tileSize, rowBytes = n * outChannels
                    for y in 0..<n {
                        let out = whole + y * rowBytes
                        if y < h {
                            out.update(from: p + y * s, count: w * outChannels)
                            for x in w..<n { (out + x * outChannels).update(from: out + (w - 1) * outChannels, count: outChannels) }
                        } else {
                            out.update(from: whole + (h - 1) * rowBytes, count: rowBytes)
                        }
                    }
                    (p, w, h, s) = (UnsafePointer(whole), n, n, rowBytes)
                }
                let data: [UInt8]
                if settings.layout == .tiff && settings.format == .png {
                    // Lossless: TIFF's Adobe Deflate with the horizontal predictor (PNG's own method).
                    var size = 0
                    guard let z = ts_tiff_deflate_tile(p, Int32(w), Int32(h), s, Int32(outChannels), 6, &size) else {
                        throw ImagingError(.outOfMemory, "cannot compress a \(w)x\(h) tile")
                    }
                    data = Array(UnsafeBufferPointer(start: z, count: size))
                    ts_free(z)
                } else if settings.format == .jpeg {
                    data = try JPEGEncoder.encode(p, width: w, height: h, stride: s,
                                                  channels: outChannels,
                                                  .init(quality: settings.quality, progressive: false, optimize: false,
                                                        subsampling: .s420, effort: 0))  // tiles: speed first
                } else {
                    data = try PNGEncoder.encode(p, width: w, height: h, stride: s,
                                                 channels: outChannels, compressionLevel: 6)
                }
                encodeTime += clock.milliseconds - t0
                try emitTile(TilePack.Tile(k: k, column: c, row: r), OutputFile(.init(name: "tile", path: path, format: settings.format, width: w,
                                              height: h, bytes: data.count, quality: nil), bytes: data))
                work.tilesWritten += 1
                work.bytes += data.count
            }
        }

        /// Reads `rows` rows from `src` into `dst`, flattening alpha for JPEG tiles.
        func read(_ src: RowSource, into dst: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int,
                  scratch: UnsafeMutablePointer<UInt8>?) throws {
            let t0 = clock.milliseconds
            defer { decodeTime += clock.milliseconds - t0 }
            guard src.channels != outChannels, let scratch else {
                try src.read(into: dst, stride: stride, rows: rows)
                return
            }
            let bg = settings.background
            for i in 0..<rows {
                try src.read(into: scratch, stride: src.width * 4, rows: 1)
                let out = dst + i * stride
                for x in 0..<src.width {
                    let a = UInt32(scratch[x * 4 + 3])
                    for c in 0..<3 {
                        let v = UInt32(scratch[x * 4 + c]) * a + UInt32(bg[c]) * (255 - a)
                        out[x * 3 + c] = UInt8((v + 127) / 255)
                    }
                }
            }
        }

        switch part {
        case .band(let k, let rows):
            let span = geometry.rowSpan(k, tileRows: rows)
            let t0 = clock.milliseconds
            let src = try source(bytes, shrink: k, startRow: span.lowerBound)
            decodeTime += clock.milliseconds - t0
            let width = src.width
            let stride = width * outChannels
            let capacity = settings.tileSize + 2 * settings.overlap
            let window = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * capacity)
            defer { window.deallocate() }
            let scratch: UnsafeMutablePointer<UInt8>? = src.channels == 4 && outChannels == 3
                ? .allocate(capacity: width * 4) : nil
            defer { scratch?.deallocate() }
            var top = span.lowerBound, filled = 0  // window holds level rows [top, top + filled)
            for r in rows {
                let t = geometry.tile(k, column: 0, row: r).y
                // Keep the rows this tile row shares with the last (the overlap), read the rest.
                let keep = max(0, top + filled - t.lowerBound)
                if keep > 0 && t.lowerBound > top {
                    window.update(from: window + (t.lowerBound - top) * stride, count: keep * stride)
                }
                top = t.lowerBound
                filled = keep
                if src.position < top + filled { try src.seek(to: top + filled) }
                try read(src, into: window + filled * stride, stride: stride, rows: t.upperBound - top - filled,
                         scratch: scratch)
                filled = t.count
                try emitRow(k, r, window: window, stride: stride, top: top)
            }
            work.levels = [geometry.layout == .deepzoom ? geometry.maxLevel - k : k]
            work.region = [0, span.lowerBound, width, span.count]
            work.decode = src.describe
            work.decode.sourceRows = [span.lowerBound << k, min(info.height, span.upperBound << k)]
        case .stack(let n, let rows):
            // Source rows of the stripe, and the overlap of every level beyond it; with a
            // stripe to hand over, from a row where level n starts too.
            let handover = stripes != nil ? part.stripeRows(in: geometry) : nil
            let unit = geometry.tileSize << (n - 1), pad = geometry.overlap << (handover == nil ? n - 1 : n)
            let first = max(0, rows.lowerBound * unit - pad)
            // The last stripe reads to the bottom (its last level-0 tile row may lie below the stripe).
            let last = rows.upperBound >= geometry.rows(n - 1) ? info.height : min(info.height, rows.upperBound * unit + pad)
            let t0 = clock.milliseconds
            let src = try source(bytes, shrink: 0, startRow: first)
            decodeTime += clock.milliseconds - t0
            let cascade = LevelCascade(geometry: geometry, count: handover == nil ? n : n + 1, channels: outChannels,
                                       firstRow: first, tileRows: { part.stackRows($0, in: geometry) })
            var stripe: [UInt8] = []
            var stripeRows = 0
            if let handover {
                let rowBytes = geometry.levelSize(n).width * outChannels
                stripe = StripeStore.header(rows: handover, width: geometry.levelSize(n).width, channels: outChannels)
                stripe.reserveCapacity(stripe.count + handover.count * rowBytes)
                cascade.lastLevelRow = { y, row in
                    guard handover.contains(y) else { return }
                    stripe.append(contentsOf: UnsafeBufferPointer(start: row, count: rowBytes))
                    stripeRows += 1
                }
            }
            let batch = 16, stride = src.width * outChannels
            let rowsBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * batch)
            defer { rowsBuffer.deallocate() }
            let scratch: UnsafeMutablePointer<UInt8>? = src.channels == 4 && outChannels == 3
                ? .allocate(capacity: src.width * 4) : nil
            defer { scratch?.deallocate() }
            var y = first
            while y < last {
                let count = min(batch, last - y)
                try read(src, into: rowsBuffer, stride: stride, rows: count, scratch: scratch)
                for i in 0..<count {
                    try cascade.push(rowsBuffer + i * stride) { k, r, window, stride, top in
                        try emitRow(k, r, window: window, stride: stride, top: top)
                    }
                }
                y += count
            }
            guard cascade.done else {
                throw ImagingError(.corrupt, "stack \(part) ended with tile rows missing per level: \(cascade.missing)")
            }
            if let handover, let stripes, stripeRows == handover.count {
                try stripes.save(part, stripe)
            }
            decodeTime += cascade.halvingTime
            work.levels = (0..<n).map { geometry.layout == .deepzoom ? geometry.maxLevel - $0 : $0 }
            work.region = [0, first, src.width, last - first]
            work.decode = src.describe
            work.decode.sourceRows = [first, last]
        case .tail(let k0):
            let t0 = clock.milliseconds
            let layout: PixelLayout = outChannels == 1 ? .gray : outChannels == 3 ? .rgb : .rgba
            var level: PixelBuffer
            if let fromStripes = try stripes.flatMap({ try $0.level(k0, geometry: geometry, info: info, settings: settings,
                                                                     layout: layout) }) {
                level = fromStripes
                decodeTime += clock.milliseconds - t0
                work.decode.seek = .stripes
            } else {
                let src = try source(bytes, shrink: k0, startRow: 0)
                level = try PixelBuffer.make(width: src.width, height: src.height, layout: layout)
                let scratch: UnsafeMutablePointer<UInt8>? = src.channels == 4 && outChannels == 3
                    ? .allocate(capacity: src.width * 4) : nil
                defer { scratch?.deallocate() }
                decodeTime += clock.milliseconds - t0
                try read(src, into: level.base, stride: level.stride, rows: src.height, scratch: scratch)
                work.decode = src.describe
                work.decode.sourceRows = [0, info.height]
            }
            work.region = [0, 0, level.width, level.height]
            for k in k0..<geometry.levelCount {
                if k > k0 {
                    let t1 = clock.milliseconds
                    // The level above as the geometry sizes it (a decode at a scale may round up).
                    let above = geometry.levelSize(k - 1)
                    level = try TileRenderer.halve(level, width: min(level.width, above.width),
                                                   height: min(level.height, above.height), roundDown: geometry.roundsDown)
                    decodeTime += clock.milliseconds - t1
                }
                for r in 0..<geometry.rows(k) {
                    try emitRow(k, r, window: level.base, stride: level.stride, top: 0)
                }
                work.levels.append(geometry.layout == .deepzoom ? geometry.maxLevel - k : k)
            }
            // The stripes served their one purpose.
            if work.decode.seek == .stripes { stripes?.remove() }
        case .descriptor:
            break
        }
        if let pack {
            let data = TilePack.encode(pack)
            try emit(OutputFile(.init(name: "tiles", path: "\(name).tif.tiles/\(TilePack.fileName(part))", format: nil,
                                      width: 0, height: 0, bytes: data.count, quality: nil), bytes: data))
        }
        work.timings.decode = decodeTime
        work.timings.encode = encodeTime
        return work
    }

    /// 2×2 box means of the top-left `width` × `height` of `src`, sizes rounded up (edge
    /// boxes average what they have) or down (an odd last row and column are dropped).
    static func halve(_ src: PixelBuffer, width: Int, height: Int, roundDown: Bool = false) throws -> PixelBuffer {
        let w = max(1, roundDown ? width / 2 : (width + 1) / 2), h = max(1, roundDown ? height / 2 : (height + 1) / 2)
        let out = try PixelBuffer.make(width: w, height: h, layout: src.layout)
        for y in 0..<h {
            let r0 = src.row(min(2 * y, height - 1)), r1 = src.row(min(2 * y + 1, height - 1))
            ts_halve_rows(r0, r1, Int32(width), Int32(src.channels), roundDown && width > 1 ? 0 : 1, out.row(y))
        }
        return out
    }

    /// The pyramid's descriptor (`.dzi` or `info.json`) and, for Deep Zoom, its viewer page.
    public func descriptors() -> [(String, [UInt8])] {
        switch settings.layout {
        case .deepzoom:
            let dzi = """
                <?xml version="1.0" encoding="UTF-8"?>
                <Image xmlns="http://schemas.microsoft.com/deepzoom/2008" Format="\(settings.suffix)" \
                Overlap="\(settings.overlap)" TileSize="\(settings.tileSize)">
                  <Size Width="\(info.width)" Height="\(info.height)"/>
                </Image>

                """
            var files = [("\(name).dzi", Array(dzi.utf8))]
            if settings.viewer {
                let base = (name as NSString).lastPathComponent
                files.append(("\(name).html", Array(TileViewer.page(title: base, filesURL: "\(base)_files/",
                                                                    width: info.width, height: info.height,
                                                                    tileSize: settings.tileSize, overlap: settings.overlap,
                                                                    maxLevel: geometry.maxLevel,
                                                                    suffix: settings.suffix).utf8)))
            }
            return files
        case .tiff:
            // The file is written from the tiles by the part that assembles them.
            return []
        case .iiif, .iiif3:
            let rawID = settings.baseURI.hasSuffix("/") ? settings.baseURI + name : settings.baseURI + "/" + name
            // A JSON string (file names may hold quotes or backslashes).
            let id = String(decoding: (try? JSONEncoder().encode(rawID)) ?? Data("\"\"".utf8), as: UTF8.self)
                .dropFirst().dropLast()
            let factors = (0..<max(1, geometry.levelCount - 1)).map { String(1 << $0) }.joined(separator: ", ")
            let format = settings.suffix
            let json: String
            if settings.layout == .iiif {
                json = """
                    {
                      "@context": "http://iiif.io/api/image/2/context.json",
                      "@id": "\(id)",
                      "profile": ["http://iiif.io/api/image/2/level0.json", {"formats": ["\(format)"], "qualities": ["default"]}],
                      "protocol": "http://iiif.io/api/image",
                      "tiles": [{"scaleFactors": [\(factors)], "width": \(settings.tileSize)}],
                      "width": \(info.width),
                      "height": \(info.height)
                    }

                    """
            } else {
                json = """
                    {
                      "@context": "http://iiif.io/api/image/3/context.json",
                      "id": "\(id)",
                      "type": "ImageService3",
                      "profile": "level0",
                      "protocol": "http://iiif.io/api/image",
                      "preferredFormats": ["\(format)"],
                      "tiles": [{"scaleFactors": [\(factors)], "width": \(settings.tileSize)}],
                      "width": \(info.width),
                      "height": \(info.height)
                    }

                    """
            }
            return [("\(name)/info.json", Array(json.utf8))]
        }
    }
}
