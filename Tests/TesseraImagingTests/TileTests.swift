import Foundation
import TesseraImaging
import XCTest
import TesseraModel

/// Tile pyramids: the grid as `vips dzsave` lays it out, and every band decode (restart
/// marker starts, skipped scanlines, progressive) against a plain whole-image decode.
final class TileTests: XCTestCase {
    /// A photo-like RGB image: gradients, a few frequencies, and noise, made row by row.
    static func scene(width: Int, height: Int, seed: UInt64 = 7) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: .rgb)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        image.withUnsafeMutableBytes { p in
            for y in 0..<height {
                let row = y * width * 3
                let fy = Double(y) / Double(height)
                for x in 0..<width {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17
                    let fx = Double(x) / Double(width)
                    let wave = sin(Double(x) * 0.05 + Double(y) * 0.013) * 40 + sin(Double(x + 2 * y) * 0.31) * 12
                    let n = Int(state % 24) - 12
                    p[row + x * 3] = UInt8(clamping: Int(fx * 200 + wave) + n)
                    p[row + x * 3 + 1] = UInt8(clamping: Int(fy * 180 + 40 - wave / 2) + n)
                    p[row + x * 3 + 2] = UInt8(clamping: Int((1 - fx) * 120 + fy * 100) + n / 2)
                }
            }
        }
        return image
    }

    /// The tile's window of `image`, encoded the way tiles are (quality 75, 4:2:0, no
    /// Huffman optimisation): what a tile must equal byte for byte.
    static func directTile(_ image: PixelBuffer, pixels: [UInt8], x: Range<Int>, y: Range<Int>, quality: Int = 75) throws -> [UInt8] {
        let ch = image.channels
        let crop = PixelBuffer(width: x.count, height: y.count, layout: image.layout)
        crop.withUnsafeMutableBytes { dst in
            for (i, row) in y.enumerated() {
                let from = (row * image.width + x.lowerBound) * ch
                for j in 0..<(x.count * ch) { dst[i * x.count * ch + j] = pixels[from + j] }
            }
        }
        return try Codec.encodeJPEG(crop, quality: quality, subsampling: .s420, optimize: false)
    }

    static func halve(_ src: PixelBuffer) -> PixelBuffer {
        let w = (src.width + 1) / 2, h = (src.height + 1) / 2, ch = src.channels
        let s = src.bytes
        let out = PixelBuffer(width: w, height: h, layout: src.layout)
        out.withUnsafeMutableBytes { o in
            for y in 0..<h {
                for x in 0..<w {
                    for c in 0..<ch {
                        var sum = 0, n = 0
                        for yy in (2 * y)..<min(2 * y + 2, src.height) {
                            for xx in (2 * x)..<min(2 * x + 2, src.width) {
                                sum += Int(s[(yy * src.width + xx) * ch + c]); n += 1
                            }
                        }
                        o[(y * w + x) * ch + c] = UInt8((sum + n / 2) / n)
                    }
                }
            }
        }
        return out
    }

    func render(_ jpeg: [UInt8], settings: TileSettings = TileSettings(), name: String = "p", stripes: StripeStore? = nil)
        throws -> (files: [String: [UInt8]], works: [TileWork], renderer: TileRenderer) {
        let info = try jpeg.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        var renderer = TileRenderer(settings: settings, info: info, name: name)
        renderer.stripes = stripes
        var files: [String: [UInt8]] = [:]
        var works: [TileWork] = []
        for part in renderer.geometry.plan(info: info, settings: settings) {
            let w = try jpeg.withUnsafeBytes { raw in
                try renderer.render(raw, part: part) { out in
                    XCTAssertNil(files[out.record.path], "\(out.record.path) written twice")
                    files[out.record.path] = out.bytes
                }
            }
            works.append(w)
        }
        return (files, works, renderer)
    }

    func testGridMatchesVipsDzsave() throws {
        // Figures read from `vips dzsave` 8.14 output for a 1001×703 image.
        let g = PyramidGeometry(width: 1001, height: 703, settings: TileSettings())
        XCTAssertEqual(g.maxLevel, 10)
        XCTAssertEqual(g.levelCount, 11)
        XCTAssertEqual(g.levelSize(1), Size(width: 501, height: 352))   // level 9
        XCTAssertEqual(g.levelSize(2), Size(width: 251, height: 176))   // level 8
        XCTAssertEqual(g.levelSize(4), Size(width: 63, height: 44))     // level 6
        XCTAssertEqual(g.levelSize(10), Size(width: 1, height: 1))      // level 0
        XCTAssertEqual(g.columns(0), 4)
        XCTAssertEqual(g.rows(0), 3)
        let t = g.tile(0, column: 0, row: 0), inner = g.tile(0, column: 1, row: 1), last = g.tile(0, column: 3, row: 2)
        XCTAssertEqual(t.x, 0..<255)            // 254 + overlap on the right
        XCTAssertEqual(inner.x, 253..<509)      // overlap on both sides: 256
        XCTAssertEqual(last.x, 761..<1001)
        XCTAssertEqual(last.y, 507..<703)
        XCTAssertEqual(g.path(name: "a/b", k: 0, column: 3, row: 2, suffix: "jpg"), "a/b_files/10/3_2.jpg")
        var iiif = TileSettings(layout: .iiif)
        let i = PyramidGeometry(width: 1001, height: 703, settings: iiif)
        XCTAssertEqual(i.levelCount, 3)
        XCTAssertEqual(i.path(name: "p", k: 1, column: 1, row: 1, suffix: "jpg"), "p/512,512,489,191/245,/0/default.jpg")
        XCTAssertEqual(i.path(name: "p", k: 2, column: 0, row: 0, suffix: "jpg"), "p/0,0,1001,703/251,/0/default.jpg")
        iiif.layout = .iiif3
        XCTAssertEqual(PyramidGeometry(width: 1001, height: 703, settings: iiif)
            .path(name: "p", k: 1, column: 1, row: 1, suffix: "jpg"), "p/512,512,489,191/245,96/0/default.jpg")
    }

    func testPlanCoversEveryTileRowOfEveryLevelOnce() throws {
        // Stacks over stripes of the deepest stacked level, each level's tile rows made
        // once, then the tail; JPEGs too (a band per level at its DCT scale is no longer planned).
        for (w, h, format, seekable) in [(20000, 15000, ImageFormat.tiff, true), (9000, 7001, .png, false),
                                         (30000, 700, .webp, false), (300, 200, .tiff, true),
                                         (8000, 6000, .jpeg, false), (8000, 6000, .jpeg, true), (30000, 700, .jpeg, false),
                                         (300, 200, .jpeg, false), (20000, 20000, .jpeg, false)] {
            var info = TileSourceInfo(format: format, width: w, height: h, progressive: format == .webp,
                                      restartSeekable: seekable, wholeImageBytes: 0, channels: 3)
            // What the JPEG loader says of its files: DCT scales, dearer rows to read past.
            if format == .jpeg { info.scalesOnDecode = true; info.skipCost = 0.45 }
            let s = TileSettings()
            let g = PyramidGeometry(width: w, height: h, settings: s)
            let parts = g.plan(info: info, settings: s)
            for part in parts { XCTAssertEqual(PyramidPart(part.description), part, part.description) }
            let tail = g.tailShrink(info: info, settings: s)
            XCTAssertEqual(parts.filter { if case .tail(tail) = $0 { return true } else { return false } }.count, 1)
            XCTAssertFalse(parts.contains { if case .band = $0 { return true } else { return false } })
            for k in 0..<tail {
                var rows: [Int] = []
                for part in parts { rows += Array(part.stackRows(k, in: g)) }
                XCTAssertEqual(rows.sorted(), Array(0..<g.rows(k)), "\(w)x\(h) \(format) level k=\(k)")
            }
            if w == 20000 { XCTAssertGreaterThanOrEqual(parts.count, 6, "stripes to share among workers") }
            if format == .jpeg && w == 8000 {
                XCTAssertEqual(parts.count - 2, seekable ? 4 : 2, "stripes of about 12 MP from restart markers, else fewer")
            }
            XCTAssertLessThanOrEqual(g.memoryEstimate(parts[0], info: info, settings: s), 256 << 20)
        }
        // A JPEG whose stacks would not fit a small budget (a window per level): bands of one
        // level each, at its DCT scale, every tile row once, each within the budget.
        for seekable in [false, true] {
            var info = TileSourceInfo(format: .jpeg, width: 40000, height: 3000, progressive: false, restartSeekable: seekable,
                                      wholeImageBytes: 0, channels: 3)
            info.scalesOnDecode = true
            info.skipCost = 0.45
            var s = TileSettings()
            s.memoryBudgetMB = 64
            let g = PyramidGeometry(width: 40000, height: 3000, settings: s)
            let parts = g.plan(info: info, settings: s)
            let tail = g.tailShrink(info: info, settings: s)
            XCTAssertGreaterThan(g.memoryEstimate(.stack(levels: tail, rows: 0..<1), info: info, settings: s), 64 << 20)
            XCTAssertFalse(parts.contains { if case .stack = $0 { return true } else { return false } })
            for k in 0..<tail {
                var rows: [Int] = []
                for case .band(k, let r) in parts { rows += Array(r) }
                XCTAssertEqual(rows.sorted(), Array(0..<g.rows(k)), "level k=\(k)")
            }
            for part in parts { XCTAssertLessThanOrEqual(g.memoryEstimate(part, info: info, settings: s), 64 << 20, "\(part)") }
        }
        // Sizes rounded down (a pyramidal TIFF): 2049 rows make 9 tile rows of 256 over level 1's
        // 1024 rows (4 tile rows): the last stripe takes the ninth.
        for (w, h) in [(10000, 2049), (9000, 7001), (12345, 4097)] {
            let info = TileSourceInfo(format: .tiff, width: w, height: h, progressive: false, restartSeekable: true,
                                      wholeImageBytes: 0, channels: 3)
            let s = TileSettings(layout: .tiff)
            let g = PyramidGeometry(width: w, height: h, settings: s)
            let parts = g.plan(info: info, settings: s)
            let tail = g.tailShrink(info: info, settings: s)
            XCTAssertGreaterThan(tail, 1, "\(w)x\(h)")
            for k in 0..<tail {
                var rows: [Int] = []
                for part in parts { rows += Array(part.stackRows(k, in: g)) }
                XCTAssertEqual(rows.sorted(), Array(0..<g.rows(k)), "\(w)x\(h) tiff level k=\(k)")
            }
        }
        XCTAssertEqual(PyramidPart("k0-3:r2-4"), .stack(levels: 4, rows: 2..<4))
        XCTAssertNil(PyramidPart("k0-:r2-4"))
        XCTAssertNil(PyramidPart("k0-3:r4-2"))
        XCTAssertNil(PyramidPart("k1:r5-5"))
        XCTAssertNil(PyramidPart("x"))
    }

    /// 8,000 × 6,000, baseline, with restart markers, and progressive: every tile of the
    /// grid exists once with the right size; stack tiles equal the same window of a whole
    /// decode halved level by level, and so do the tail's (from the stacks' stripes); a
    /// tail without stripes equals box-halved scaled decodes, and a band (journals of earlier
    /// versions) the same window of a whole decode at its DCT scale.
    func testLargePyramidsMatchADirectRenderOfTheSameRegion() throws {
        let image = TileTests.scene(width: 8000, height: 6000)
        let variants: [(String, [UInt8], String)] = [
            ("baseline", try Codec.encodeJPEG(image, quality: 88, subsampling: .s420), "skip-scanlines"),
            // 8000 px = 500 MCUs of 16 px per row: one restart interval per MCU row.
            ("restart", try Codec.encodeJPEG(image, quality: 88, subsampling: .s420, restartInterval: 500), "restart-marker"),
            ("progressive", try Codec.encodeJPEG(image, quality: 88, subsampling: .s420, progressive: true), "skip-scanlines"),
        ]
        for (label, jpeg, expectedSeek) in variants {
            var saved: [PyramidPart: [UInt8]] = [:]
            var stripesRemoved = false
            let store = StripeStore(save: { saved[$0] = $1 }, load: { saved[$0] }, remove: { stripesRemoved = true })
            let (files, works, renderer) = try render(jpeg, stripes: store)
            let g = renderer.geometry
            var expected = Set(["p.dzi", "p.html"])
            for k in 0..<g.levelCount {
                for r in 0..<g.rows(k) { for c in 0..<g.columns(k) { expected.insert(g.path(name: "p", k: k, column: c, row: r, suffix: "jpg")) } }
            }
            XCTAssertEqual(Set(files.keys), expected, label)
            XCTAssertEqual(files.count, g.tileCount + 2, label)
            let tail = try XCTUnwrap(works.compactMap { w -> Int? in if case .tail(let k)? = w.part { return k } else { return nil } }.first)
            XCTAssertGreaterThan(tail, 1, label)
            var midStarts = 0
            for w in works {
                switch try XCTUnwrap(w.part) {
                case .stack(let n, let rows):
                    XCTAssertEqual(n, tail, label)
                    XCTAssertEqual(w.decode.scaleEighths, 8, "\(label) \(rows): a stripe is decoded once, at full size")
                    if rows.lowerBound > 0 {
                        XCTAssertEqual(w.decode.seek.rawValue, expectedSeek, "\(label) \(rows)")
                        midStarts += 1
                    }
                case .tail:
                    XCTAssertEqual(w.decode.seek, .stripes, "\(label): the tail reads the stacks' stripes, not the source")
                default:
                    break
                }
            }
            XCTAssertTrue(stripesRemoved, label)
            if label != "progressive" { XCTAssertGreaterThan(midStarts, 0, "\(label): stripes start mid-image") }

            // Every level is the one above halved, from a whole decode.
            var levels: [Int: PixelBuffer] = [0: try Codec.decodeJPEG(jpeg)]
            for k in 1..<g.levelCount { levels[k] = TileTests.halve(levels[k - 1]!) }
            var checked = 0
            for k in 0..<g.levelCount {
                let level = levels[k]!
                XCTAssertEqual(Size(width: level.width, height: level.height), g.levelSize(k), "\(label) k=\(k)")
                let pixels = level.bytes
                // Stacked levels: corners, edges and every stack's first and last tile row; tail levels: every tile.
                var rows = Set([0, g.rows(k) - 1, g.rows(k) / 2])
                for w in works {
                    let r = w.part?.stackRows(k, in: g) ?? 0..<0
                    if !r.isEmpty { rows.insert(r.lowerBound); rows.insert(r.upperBound - 1) }
                }
                let cols = k >= tail ? Array(0..<g.columns(k)) : [0, 1, g.columns(k) / 2, g.columns(k) - 1]
                for r in (k >= tail ? Set(0..<g.rows(k)) : rows) {
                    for c in Set(cols) where c < g.columns(k) {
                        let t = g.tile(k, column: c, row: r)
                        let path = g.path(name: "p", k: k, column: c, row: r, suffix: "jpg")
                        let direct = try TileTests.directTile(level, pixels: pixels, x: t.x, y: t.y)
                        XCTAssertTrue(files[path] == direct, "\(label): \(path) differs from the direct render of x \(t.x) y \(t.y)")
                        checked += 1
                    }
                }
            }
            XCTAssertGreaterThan(checked, 90, label)

            // A tail without stripes (a stack failed) decodes at its DCT scale and halves on.
            var scaled = try Codec.decodeJPEG(jpeg, scaleEighths: 8 >> min(tail, 3))
            for _ in 3..<max(3, tail) { scaled = TileTests.halve(scaled) }
            let scaledPixels = scaled.bytes
            var bare = renderer
            bare.stripes = nil
            let alone = try jpeg.withUnsafeBytes { raw in
                try bare.render(raw, part: .tail(from: tail)) { out in
                    let name = out.record.path.split(separator: "/").last!.split(separator: ".")[0].split(separator: "_")
                    guard out.record.path.contains("_files/\(g.maxLevel - tail)/") else { return }
                    let t = g.tile(tail, column: Int(name[0])!, row: Int(name[1])!)
                    XCTAssertTrue(out.bytes == (try TileTests.directTile(scaled, pixels: scaledPixels, x: t.x, y: t.y)),
                                  "\(label): \(out.record.path) of a tail without stripes")
                }
            }
            XCTAssertEqual(alone.decode.scaleEighths, 8 >> min(tail, 3), label)

            // Bands that start mid-image reach their rows as expected, at their DCT scale.
            for part in [PyramidPart.band(shrink: 0, rows: 13..<15), PyramidPart.band(shrink: 1, rows: 7..<9), PyramidPart.band(shrink: 2, rows: 3..<5)] {
                let k = part.shrink
                let level = try Codec.decodeJPEG(jpeg, scaleEighths: 8 >> k), pixels = level.bytes
                let w = try jpeg.withUnsafeBytes { raw in
                    try renderer.render(raw, part: part) { out in
                        let name = out.record.path.split(separator: "/").last!.split(separator: ".")[0].split(separator: "_")
                        let t = g.tile(k, column: Int(name[0])!, row: Int(name[1])!)
                        XCTAssertTrue(out.bytes == (try TileTests.directTile(level, pixels: pixels, x: t.x, y: t.y)),
                                      "\(label) \(part): \(out.record.path) differs from the direct render")
                        if k == 0 { XCTAssertTrue(files[out.record.path] == out.bytes, "\(label) \(part): \(out.record.path)") }
                    }
                }
                XCTAssertEqual(w.decode.seek.rawValue, expectedSeek, "\(label) \(part)")
                XCTAssertEqual(w.decode.scaleEighths, 8 >> k, "\(label) \(part)")
                XCTAssertEqual(w.tilesWritten, 2 * g.columns(k))
            }
            // Tiles of 256 without overlap: bands and stripes start exactly on an MCU row, where
            // 4:2:0 chroma upsampling needs the row above (a restart start must begin higher).
            var aligned = TileSettings()
            aligned.tileSize = 256
            aligned.overlap = 0
            let ga = PyramidGeometry(width: 8000, height: 6000, settings: aligned)
            let ra = TileRenderer(settings: aligned, info: renderer.info, name: "a")
            let full = levels[0]!, fullPixels = full.bytes
            for part in [PyramidPart.band(shrink: 0, rows: 8..<9), .stack(levels: 1, rows: 8..<9)] {
                let w = try jpeg.withUnsafeBytes { raw in
                    try ra.render(raw, part: part) { out in
                        let c = Int(out.record.path.split(separator: "/").last!.split(separator: "_")[0])!
                        let t = ga.tile(0, column: c, row: 8)
                        XCTAssertTrue(out.bytes == (try TileTests.directTile(full, pixels: fullPixels, x: t.x, y: t.y)),
                                      "\(label) \(part): aligned tile \(out.record.path) differs from the direct render")
                    }
                }
                XCTAssertEqual(w.tilesWritten, ga.columns(0))
                XCTAssertEqual(w.decode.seek.rawValue, expectedSeek, label)
            }
            let dzi = String(decoding: files["p.dzi"]!, as: UTF8.self)
            XCTAssertTrue(dzi.contains("Width=\"8000\" Height=\"6000\"") && dzi.contains("TileSize=\"254\"") && dzi.contains("Overlap=\"1\""), dzi)
            let html = String(decoding: files["p.html"]!, as: UTF8.self)
            XCTAssertTrue(html.contains("p_files/") && !html.contains("http://") && !html.contains("https://"), "viewer fetches only its tiles")
        }
    }

    func testDamagedAndOversizedSourcesFailClearly() throws {
        let image = TileTests.scene(width: 3000, height: 2000)
        let jpeg = try Codec.encodeJPEG(image, quality: 85, restartInterval: 188)
        let cut = Array(jpeg.prefix(jpeg.count / 2))
        XCTAssertThrowsError(try cut.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .truncated, "a truncated file fails every part at once: \(e)")
        }
        // Past the probe (as if the end marker were there), the band and the tail still stop at the cut.
        let info = try jpeg.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        let renderer = TileRenderer(settings: TileSettings(), info: info, name: "p")
        var emitted = 0
        let lastRows = PyramidPart.band(shrink: 0, rows: (renderer.geometry.rows(0) - 2)..<renderer.geometry.rows(0))
        let lastStripe = PyramidPart.stack(levels: 2, rows: (renderer.geometry.rows(1) - 1)..<renderer.geometry.rows(1))
        for part in [lastRows, lastStripe, PyramidPart.tail(from: 3)] {
            XCTAssertThrowsError(try cut.withUnsafeBytes { try renderer.render($0, part: part) { _ in emitted += 1 } }) { e in
                XCTAssertEqual((e as? ImagingError)?.code, .truncated, "\(part): \(e)")
            }
        }
        XCTAssertEqual(emitted, 0, "no tile from rows that are not in the file")
        XCTAssertThrowsError(try [UInt8]("not an image".utf8).withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .unsupportedFormat)
        }
        // A progressive JPEG keeps every coefficient while decoding: refused when over the budget.
        let progressive = try Codec.encodeJPEG(TileTests.scene(width: 6000, height: 4000), quality: 80, progressive: true)
        let pinfo = try progressive.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        var tight = TileSettings()
        tight.memoryBudgetMB = 64
        let r = TileRenderer(settings: tight, info: pinfo, name: "p")
        for part in [PyramidPart.band(shrink: 0, rows: 0..<1), .stack(levels: 3, rows: 0..<1)] {
            XCTAssertThrowsError(try progressive.withUnsafeBytes { try r.render($0, part: part) { _ in } }) { e in
                let err = e as? ImagingError
                XCTAssertEqual(err?.code, .limitExceeded)
                XCTAssertTrue(err?.reason.contains("progressive") == true, "\(e)")
            }
        }
    }

    /// Hostile headers and markers: a start is only made where the file really has it.
    func testMisnumberedRestartMarkersAreNotTrusted() throws {
        let image = TileTests.scene(width: 3200, height: 2400)
        var jpeg = try Codec.encodeJPEG(image, quality: 85, subsampling: .s420, restartInterval: 200)  // one per MCU row
        // Renumber the 40th restart marker (RST7 -> RST6): intervals after it are not where they claim.
        var seen = 0, i = 0
        let sos = (0..<(jpeg.count - 1)).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }!
        i = sos + 2
        while i < jpeg.count - 1 {
            if jpeg[i] == 0xFF, (0xD0...0xD7).contains(jpeg[i + 1]) {
                seen += 1
                if seen == 40 { XCTAssertEqual(jpeg[i + 1], 0xD7); jpeg[i + 1] = 0xD6; break }
            }
            i += 1
        }
        let info = try jpeg.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        XCTAssertTrue(info.restartSeekable)
        let renderer = TileRenderer(settings: TileSettings(), info: info, name: "p")
        // Tile row 5 starts at row 1269: below the damaged marker (MCU row 40 = row 640).
        do {
            let w = try jpeg.withUnsafeBytes { try renderer.render($0, part: PyramidPart.band(shrink: 0, rows: 5..<6)) { _ in } }
            XCTFail("a band below a misnumbered marker decoded (\(w.decode.seek))")
        } catch let e as ImagingError {
            XCTAssertEqual(e.code, .corrupt, "\(e)")
        }
        // Above it, bands are fine.
        let ok = try jpeg.withUnsafeBytes { try renderer.render($0, part: PyramidPart.band(shrink: 0, rows: 1..<2)) { _ in } }
        XCTAssertEqual(ok.tilesWritten, renderer.geometry.columns(0))
    }

    /// Every format edge case of the corpus (orientations, CMYK, gray, progressive, 12-bit,
    /// arithmetic, lossless, PNG bit depths, palettes, interlacing) makes a complete pyramid
    /// or fails with a typed reason; none crashes or leaves a part of a pyramid.
    func testCorpusEdgeCasesMakePyramidsOrFailClearly() throws {
        let files = Fixtures.corpusFiles("edge")
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        var made = 0, refused: [String] = []
        for url in files {
            let data = try bytes(of: url)
            do {
                let (out, _, renderer) = try render(data)
                XCTAssertEqual(out.count, renderer.geometry.tileCount + 2, url.lastPathComponent)
                made += 1
            } catch let e as ImagingError {
                XCTAssertTrue([.unsupportedFeature, .unsupportedFormat, .corrupt, .truncated].contains(e.code), "\(url.lastPathComponent): \(e)")
                refused.append(url.lastPathComponent)
            }
        }
        XCTAssertGreaterThan(made, files.count - 5, "refused: \(refused)")
        XCTAssertTrue(refused.allSatisfy { $0.contains("12bit") || $0.contains("lossless") }, "\(refused)")
    }

    /// PNG sources stream rows; JPEG tiles flatten transparency onto the background.
    func testPNGWithAlphaMakesFlattenedTiles() throws {
        let rgba = PixelBuffer(width: 700, height: 500, layout: .rgba)
        rgba.withUnsafeMutableBytes { p in
            for y in 0..<500 { for x in 0..<700 {
                let o = (y * 700 + x) * 4
                p[o] = 200; p[o + 1] = 40; p[o + 2] = 40
                p[o + 3] = x < 350 ? 255 : 0    // right half transparent
            } }
        }
        let png = try Codec.encodePNG(rgba)
        var s = TileSettings()
        s.background = [0, 0, 255]
        let (files, _, renderer) = try render(png, settings: s)
        XCTAssertEqual(files.count, renderer.geometry.tileCount + 2)
        let left = try Codec.decodeJPEG(files["p_files/10/0_0.jpg"]!)
        let right = try Codec.decodeJPEG(files["p_files/10/2_1.jpg"]!)
        XCTAssertEqual(Size(width: left.width, height: left.height), Size(width: 255, height: 255))
        XCTAssertEqual(Size(width: right.width, height: right.height), Size(width: 193, height: 247))
        assertColor(left.pixel(x: 100, y: 100), [200, 40, 40], tolerance: 6)
        assertColor(right.pixel(x: 150, y: 100), [0, 0, 255], tolerance: 6)
    }
}
