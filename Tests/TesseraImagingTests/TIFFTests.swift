import XCTest
@testable import TesseraImaging
import TesseraModel

/// TIFF and BigTIFF sources: every layout libtiff reads, into the same pipeline as JPEG;
/// hostile files fail typed. Files are made here (`TestTIFF`, and `tiffcp` for compressions).
final class TIFFTests: XCTestCase {
    private func decode(_ bytes: [UInt8], options: RenderOptions = RenderOptions()) throws -> PixelBuffer {
        try Renderer.decode(bytes, options: options)
    }

    private func expectPixels(_ image: PixelBuffer, _ page: TestTIFF.Page, map: (Int, Int, Int) -> UInt8,
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(image.width, page.width, file: file, line: line)
        XCTAssertEqual(image.height, page.height, file: file, line: line)
        var wrong = 0
        for y in 0..<image.height {
            for x in 0..<image.width {
                let p = image.pixel(x: x, y: y)
                for c in 0..<image.layout.channels where p[c] != map(x, y, c) { wrong += 1 }
            }
        }
        XCTAssertEqual(wrong, 0, "samples differ from the source", file: file, line: line)
    }

    func testDetectionAndExtensions() {
        for head: [UInt8] in [[0x49, 0x49, 42, 0], [0x4D, 0x4D, 0, 42], [0x49, 0x49, 43, 0], [0x4D, 0x4D, 0, 43]] {
            XCTAssertEqual((head + [0, 0, 0, 8]).withUnsafeBytes { ImageFormat.sniff($0) }, .tiff)
        }
        XCTAssertNil([0x49, 0x49, 44, 0, 0, 0, 0, 8].withUnsafeBytes { ImageFormat.sniff($0) })
        XCTAssertEqual(ImageFormat.byExtension["tif"], .tiff)
        XCTAssertEqual(ImageFormat.byExtension["tiff"], .tiff)
        XCTAssertFalse(ImageFormat.tiff.isWritable)
    }

    func testRGBStripsTilesAndPlanesGiveTheSourcePixels() throws {
        let base = TestTIFF.Page(width: 45, height: 31, rowsPerStrip: 7)
        var tiled = base
        tiled.tile = 16
        tiled.rowsPerStrip = nil
        var planar = base
        planar.planar = true
        var planarTiled = tiled
        planarTiled.planar = true
        for (name, page) in [("strips", base), ("tiles", tiled), ("planar strips", planar), ("planar tiles", planarTiled)] {
            let image = try decode(TestTIFF(pages: [page]).bytes())
            XCTAssertEqual(image.layout, .rgb, name)
            expectPixels(image, page) { x, y, c in UInt8((x * 7 + y * 3 + c * 50) & 0xFF) }
        }
    }

    func testSixteenBitAndFloatRoundToEightBits() throws {
        var gray = TestTIFF.Page(width: 256, height: 2, samples: 1, bits: 16, photometric: 1)
        gray.sample = { x, y, _ in UInt32(x * 256 + y * 128) }
        let image = try decode(TestTIFF(pages: [gray]).bytes())
        XCTAssertEqual(image.layout, .gray)
        expectPixels(image, gray) { x, y, _ in UInt8((UInt32(x * 256 + y * 128) * 255 + 32767) / 65535) }

        var float = TestTIFF.Page(width: 11, height: 1, samples: 1, bits: 32, photometric: 1, sampleFormat: 3)
        float.sample = { x, _, _ in Float(Double(x) / 10 * 1.2 - 0.1).bitPattern }  // -0.1 … 1.1: clamped
        expectPixels(try decode(TestTIFF(pages: [float]).bytes()), float) { x, _, _ in
            UInt8((min(max(Float(Double(x) / 10 * 1.2 - 0.1), 0), 1) * 255).rounded())
        }
    }

    func testAlphaAssociatedIsUnpremultipliedAndWhiteIsZeroInverted() throws {
        var rgba = TestTIFF.Page(width: 8, height: 8, samples: 4, extraSample: 1)
        // Premultiplied: colour 200·a/255 at alpha a.
        rgba.sample = { x, _, s in s == 3 ? UInt32(x * 32 + 16) : UInt32(200 * (x * 32 + 16) / 255) }
        let image = try decode(TestTIFF(pages: [rgba]).bytes())
        XCTAssertEqual(image.layout, .rgba)
        for x in 0..<8 {
            let p = image.pixel(x: x, y: 3)
            XCTAssertEqual(p[3], UInt8(x * 32 + 16))
            // 8-bit premultiplied colour holds 200 to within 255/alpha.
            XCTAssertEqual(Int(p[0]), 200, accuracy: 255 / Int(p[3]) + 1, "unpremultiplied at alpha \(p[3])")
        }
        var white = TestTIFF.Page(width: 4, height: 1, samples: 1, photometric: 0)
        white.sample = { x, _, _ in UInt32(x * 60) }
        expectPixels(try decode(TestTIFF(pages: [white]).bytes()), white) { x, _, _ in 255 - UInt8(x * 60) }
    }

    func testCMYKWithoutAProfileIsConvertedAsJPEGCMYKIs() throws {
        var cmyk = TestTIFF.Page(width: 4, height: 1, samples: 4, photometric: 5)
        let inks: [[UInt32]] = [[0, 0, 0, 0], [255, 0, 0, 0], [0, 0, 0, 255], [0, 128, 255, 0]]
        cmyk.sample = { x, _, s in inks[x][s] }
        let image = try decode(TestTIFF(pages: [cmyk]).bytes())
        XCTAssertEqual(image.pixel(x: 0, y: 0), [255, 255, 255])
        XCTAssertEqual(image.pixel(x: 1, y: 0), [0, 255, 255])
        XCTAssertEqual(image.pixel(x: 2, y: 0), [0, 0, 0])
        XCTAssertEqual(image.pixel(x: 3, y: 0), [255, 127, 0])
    }

    /// CIELab (photometric 8, a* and b* signed): through Little CMS from D50 Lab to sRGB.
    func testCIELabIsConvertedToSRGB() throws {
        var lab = TestTIFF.Page(width: 4, height: 1, samples: 3, photometric: 8)
        // (L*, a*, b*) as stored: L* 0…255 for 0…100, a* and b* two's complement.
        let values: [[UInt32]] = [[255, 0, 0], [0, 0, 0], [128, 0, 0], [138, 80, 70]]
        lab.sample = { x, _, s in values[x][s] }
        let image = try decode(TestTIFF(pages: [lab]).bytes())
        // White and black within Little CMS's rounding of the D50 → D65 adaptation.
        for c in image.pixel(x: 0, y: 0) { XCTAssertGreaterThanOrEqual(c, 253) }
        for c in image.pixel(x: 1, y: 0) { XCTAssertLessThanOrEqual(c, 2) }
        for c in image.pixel(x: 2, y: 0) { XCTAssertEqual(Int(c), 119, accuracy: 2, "L* 50 is sRGB 119 grey") }
        let red = image.pixel(x: 3, y: 0)  // L* 54, a* 80, b* 70: a strong red
        XCTAssertGreaterThan(Int(red[0]), 200)
        XCTAssertLessThan(Int(red[1]), 60)
    }

    /// Every Orientation tag value: the displayed size, and the stored top-left corner where it belongs.
    func testAllEightOrientationsAreUpright() throws {
        var page = TestTIFF.Page(width: 6, height: 4, samples: 1, photometric: 1)
        page.sample = { x, y, _ in x == 0 && y == 0 ? 255 : 0 }
        // Where the stored (0, 0) ends up in the displayed image (EXIF semantics).
        let corner: [Int: (Int, Int)] = [1: (0, 0), 2: (5, 0), 3: (5, 3), 4: (0, 3), 5: (0, 0), 6: (3, 0), 7: (3, 5), 8: (0, 5)]
        for o in 1...8 {
            page.orientation = o
            let image = try decode(TestTIFF(pages: [page]).bytes())
            XCTAssertEqual(image.width, o >= 5 ? 4 : 6, "orientation \(o)")
            XCTAssertEqual(image.height, o >= 5 ? 6 : 4, "orientation \(o)")
            let (x, y) = corner[o]!
            XCTAssertEqual(image.pixel(x: x, y: y)[0], 255, "orientation \(o): stored corner at (\(x), \(y))")
        }
    }

    func testPagesAreListedAndRenderedFromTheFirst() throws {
        let pages = [TestTIFF.Page(width: 30, height: 20), TestTIFF.Page(width: 15, height: 10), TestTIFF.Page(width: 8, height: 5)]
        let file = TestTIFF(pages: pages).bytes()
        let info = try ImageInfo.inspect(file)
        XCTAssertEqual(info.format, .tiff)
        XCTAssertEqual(info.width, 30)
        XCTAssertEqual(info.structure.first, "3 pages: 30x20, 15x10, 8x5")
        var second = RenderOptions()
        second.page = 1
        XCTAssertEqual(try decode(file, options: second).width, 15, "page 1")
        second.page = 3
        XCTAssertThrowsError(try decode(file, options: second)) {
            XCTAssertEqual(($0 as? ImagingError)?.reason, "page 3 of a 3-page TIFF (pages count from 0)")
        }
        second.page = 1
        XCTAssertThrowsError(try decode(try Codec.encodePNG(PixelBuffer(width: 2, height: 2, layout: .rgb)), options: second)) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .invalidRecipe)
        }
        let result = try Renderer.render(file, recipes: [recipe([fit(10, 10)], format: .png)])
        XCTAssertEqual(result.decodePath, .tiff)
        XCTAssertEqual(result.outputs[0].size, Size(width: 10, height: 7))
        XCTAssertEqual(result.outputs[0].format, .png)
    }

    /// What libtiff reports becomes a typed error: never a crash, never printed.
    func testHostileFilesFailTyped() throws {
        let good = TestTIFF(pages: [TestTIFF.Page(width: 64, height: 64, rowsPerStrip: 8)]).bytes()
        func code(_ bytes: [UInt8]) -> String? {
            do { _ = try decode(bytes); return nil } catch let e as ImagingError { return e.code.rawValue } catch { return "untyped" }
        }
        // Cut in the middle of the pixel data: the header (at the end) is gone too.
        XCTAssertNotNil(code(Array(good.prefix(good.count / 2))))
        // The IFD offset points past the end: a file cut short (libtiff writes its directory last).
        XCTAssertEqual(code(Array(good.prefix(8))), "truncated")
        var past = good
        past[4] = 0xFF; past[5] = 0xFF; past[6] = 0xFF; past[7] = 0x0F
        XCTAssertEqual(code(past), "truncated")
        // Strips that point past the end of the file.
        var lost = TestTIFF.Page(width: 64, height: 64, rowsPerStrip: 64)
        lost.extraTags = [(273, 4, [0x7FFF_0000])]
        XCTAssertNotNil(code(TestTIFF(pages: [lost]).bytes()))
        // 70000 × 70000 declared: refused from the header, nothing allocated.
        var huge = TestTIFF.Page(width: 1, height: 1)
        huge.extraTags = [(256, 4, [70_000]), (257, 4, [70_000])]
        XCTAssertEqual(code(TestTIFF(pages: [huge]).bytes()), "limit-exceeded")
        // One tile of 60000 × 60000 px: over the band budget, refused after the header is
        // read (the fuzzer's use-after-free: the handle was closed twice on that path).
        var strip = TestTIFF.Page(width: 1, height: 1, tile: 16)
        strip.extraTags = [(256, 4, [60_000]), (257, 4, [60_000]), (322, 4, [60_000]), (323, 4, [60_000])]
        var roomy = RenderOptions()
        roomy.limits.maxPixels = Int.max
        XCTAssertThrowsError(try decode(TestTIFF(pages: [strip]).bytes(), options: roomy)) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .limitExceeded)
        }
        // No PhotometricInterpretation: libtiff's guess (RGB for 3 samples), or a typed refusal.
        var bare = TestTIFF.Page(width: 4, height: 4)
        bare.extraTags = [(262, 3, [])]
        XCTAssertNotEqual(code(TestTIFF(pages: [bare]).bytes()), "untyped")
        // 12-bit samples.
        var twelve = TestTIFF.Page(width: 4, height: 4, samples: 1, photometric: 1)
        twelve.extraTags = [(258, 3, [12])]
        XCTAssertEqual(code(TestTIFF(pages: [twelve]).bytes()), "unsupported-feature")
        // A compression Debian's libtiff is not built with (JPEG 2000, 34712).
        var packed = TestTIFF.Page(width: 4, height: 4)
        packed.extraTags = [(259, 3, [34712])]
        XCTAssertEqual(code(TestTIFF(pages: [packed]).bytes()), "unsupported-compression")
    }

    /// An IFD chain that loops back on itself: the pages are counted once, page 0 renders.
    func testAnIFDLoopEnds() throws {
        var bytes = TestTIFF(pages: [TestTIFF.Page(width: 10, height: 10), TestTIFF.Page(width: 5, height: 5)]).bytes()
        // The last IFD's next pointer (the file's last 4 bytes) back to the first IFD.
        let first = Array(bytes[4..<8])
        bytes.replaceSubrange(bytes.count - 4..<bytes.count, with: first)
        let image = try decode(bytes)
        XCTAssertEqual(image.width, 10)
        XCTAssertEqual(try ImageInfo.inspect(bytes).structure.first, "2 pages: 10x10, 5x5")
    }

    /// Compressions of Debian's libtiff (`tiffcp`): the same pixels (JPEG: close).
    func testCompressionsGiveTheSamePixels() throws {
        guard let tiffcp = ["/usr/bin/tiffcp", "/usr/local/bin/tiffcp"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("tiffcp (libtiff-tools) not installed")
        }
        var page = TestTIFF.Page(width: 96, height: 64, rowsPerStrip: 16)
        page.sample = { x, y, s in UInt32(x + y + s * 40) }  // smooth: what JPEG is for
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tiff-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("plain.tif")
        try Data(TestTIFF(pages: [page]).bytes()).write(to: source)
        let reference = try decode(try bytes(of: source))
        for (scheme, args) in [("lzw", ["-c", "lzw:2"]), ("zip", ["-c", "zip"]), ("packbits", ["-c", "packbits"]),
                               ("zstd", ["-c", "zstd"]), ("lzma", ["-c", "lzma"]), ("jpeg", ["-c", "jpeg:90", "-r", "16"]),
                               ("tiled", ["-t", "-w", "32", "-l", "32", "-c", "zip"]), ("bigtiff", ["-8", "-c", "lzw"])] {
            let out = dir.appendingPathComponent("\(scheme).tif")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: tiffcp)
            p.arguments = args + [source.path, out.path]
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, scheme)
            let image = try decode(try bytes(of: out))
            XCTAssertEqual(image.width, 96, scheme)
            XCTAssertEqual(image.height, 64, scheme)
            let difference = meanAbsoluteDifference(image, reference)
            XCTAssertLessThan(difference, scheme == "jpeg" ? 3 : 0.0001, scheme)
        }
    }

    /// A TIFF of more directories than are counted (10,000) says "at least 10,000 pages",
    /// not "10000-page".
    func testPageCountsPastTheBoundSayAtLeast() throws {
        let pages = (0..<10_001).map { _ in TestTIFF.Page(width: 1, height: 1) }
        let bytes = TestTIFF(pages: pages).bytes()
        let structure = try ImageInfo.inspect(bytes).structure
        XCTAssertEqual(structure.first?.hasPrefix("at least 10,000 pages"), true, "\(structure)")
        var options = RenderOptions()
        options.page = 10_000
        XCTAssertThrowsError(try decode(bytes, options: options)) { e in
            XCTAssertTrue("\(e)".contains("a TIFF of at least 10,000 pages"), "\(e)")
        }
    }

    /// Damaged data libtiff decodes anyway — CCITT G3/G4 with bad code words (libtiff says
    /// "Premature EOL" or "Bad code word" and fills the rest), an LZW strip whose codes go
    /// wrong — fails `corrupt` in strict mode (it rendered silently before) and renders with
    /// `--lenient`.
    func testDamagedDataFailsStrictAndRendersLenient() throws {
        guard let tiffcp = ["/usr/bin/tiffcp", "/usr/local/bin/tiffcp"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("tiffcp (libtiff-tools) not installed")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A bilevel page, one strip, uncompressed (bits packed MSB first, 1 = black).
        let (w, h) = (256, 200)
        var packed = [UInt8](repeating: 0, count: w / 8 * h)
        for y in 0..<h {
            for x in 0..<w where (x / 16 + y / 10) % 2 == 0 || (x - y) % 37 == 0 { packed[y * w / 8 + x / 8] |= 0x80 >> (x % 8) }
        }
        var bilevel: [UInt8] = [0x49, 0x49, 42, 0]
        func u32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xFF) } }
        bilevel += u32(8 + packed.count) + packed
        let tags: [(Int, Int, Int)] = [(256, 3, w), (257, 3, h), (258, 3, 1), (259, 3, 1), (262, 3, 0), (273, 4, 8), (277, 3, 1),
                                       (278, 3, h), (279, 4, packed.count)]
        bilevel += [UInt8(tags.count), 0]
        for (tag, type, value) in tags { bilevel += [UInt8(tag & 0xFF), UInt8(tag >> 8), UInt8(type), 0, 1, 0, 0, 0] + u32(value) }
        bilevel += [0, 0, 0, 0]
        var rgb = TestTIFF.Page(width: 256, height: 200, rowsPerStrip: 200)
        rgb.sample = { x, y, s in UInt32(((x &* 2_654_435_761) ^ (y &* 40_503) ^ (s &* 97)) >> 7 & 0xFF) }
        var lenient = RenderOptions()
        lenient.strict = false
        for (name, source, args) in [("g4", bilevel, ["-c", "g4"]), ("g3", bilevel, ["-c", "g3"]),
                                      ("lzw", TestTIFF(pages: [rgb]).bytes(), ["-c", "lzw", "-r", "200"])] {
            let plain = dir.appendingPathComponent("\(name)-plain.tif"), out = dir.appendingPathComponent("\(name).tif")
            try Data(source).write(to: plain)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: tiffcp)
            p.arguments = args + [plain.path, out.path]
            try p.run()
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, name)
            let good = try bytes(of: out)
            XCTAssertEqual(try decode(good).width, 256, name)
            // Two bytes in the middle of the one strip's data (StripOffsets 273, StripByteCounts 279).
            let strip = try XCTUnwrap(Self.stripRange(good), name)
            var bad = good
            bad[strip.lowerBound + strip.count / 2] ^= 0x5A
            bad[strip.lowerBound + strip.count / 2 + 1] ^= 0xC3
            XCTAssertThrowsError(try decode(bad), name) { e in
                XCTAssertEqual((e as? ImagingError)?.code, .corrupt, "\(name): \(e)")
            }
            if name != "lzw" {  // libtiff fills what a bad code word left: lenient renders it
                XCTAssertEqual(try decode(bad, options: lenient).width, 256, "\(name): lenient renders what decodes")
            }
        }
    }

    /// The byte range of a little-endian TIFF's first strip (one-strip files).
    static func stripRange(_ b: [UInt8]) -> Range<Int>? {
        func u16(_ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
        func u32(_ i: Int) -> Int { u16(i) | u16(i + 2) << 16 }
        let ifd = u32(4), n = u16(ifd)
        var offset: Int?, count: Int?
        for e in 0..<n {
            let at = ifd + 2 + 12 * e, tag = u16(at), type = u16(at + 2)
            let value = type == 3 ? u16(at + 8) : u32(at + 8)
            if tag == 273 { offset = value }
            if tag == 279 { count = value }
        }
        guard let offset, let count, offset + count <= b.count else { return nil }
        return offset..<(offset + count)
    }

    /// 8-bit LZW strips and tiles go through Tessera's own LZW decoder (not libtiff's codec):
    /// every layout decodes exactly as the uncompressed file — gray, RGB, RGBA, planes, tiles,
    /// with and without the predictor, on rows mixing noise (short strings) and flat runs (long
    /// strings, and codes used the moment they are defined). Corrupt LZW data fails typed.
    func testLZWDecodesExactlyAsTheUncompressedFile() throws {
        guard let tiffcp = ["/usr/bin/tiffcp", "/usr/local/bin/tiffcp"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("tiffcp (libtiff-tools) not installed")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lzw-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func lzw(_ page: TestTIFF.Page, predictor: Int) throws -> (plain: [UInt8], packed: [UInt8]) {
            let source = dir.appendingPathComponent("plain.tif"), out = dir.appendingPathComponent("lzw.tif")
            try Data(TestTIFF(pages: [page]).bytes()).write(to: source)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: tiffcp)
            p.arguments = ["-c", "lzw:\(predictor)", source.path, out.path]
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0)
            return (try bytes(of: source), try bytes(of: out))
        }
        var checked = 0
        for (samples, photometric, extra) in [(1, 1, nil), (3, 2, nil), (4, 2, 2)] as [(Int, Int, Int?)] {
            for planar in [false, true] where samples > 1 || !planar {
                for tile in [nil, 32] as [Int?] {
                    for predictor in [1, 2] {
                        var page = TestTIFF.Page(width: 157, height: 93, samples: samples, photometric: photometric, planar: planar,
                                                 tile: tile, rowsPerStrip: 8, extraSample: extra)
                        // Left: hashed noise; right: flat runs per row.
                        page.sample = { x, y, s in x < 80 ? UInt32(((x &* 2_654_435_761) ^ (y &* 40_503) ^ (s &* 97)) >> 7 & 0xFF) : UInt32((y / 3 + s * 60) & 0xFF) }
                        let (plain, packed) = try lzw(page, predictor: predictor)
                        let what = "\(samples) samples\(planar ? ", planes" : "")\(tile != nil ? ", tiles" : "") predictor \(predictor)"
                        let a = try decode(plain), b = try decode(packed)
                        XCTAssertEqual(b.width, 157, what)
                        XCTAssertEqual(b.height, 93, what)
                        XCTAssertEqual(meanAbsoluteDifference(a, b), 0, what)
                        checked += 1
                    }
                }
            }
        }
        XCTAssertEqual(checked, 20)
        // Hostile: bytes of the LZW data changed at random fail typed or decode (never crash);
        // the data cut short fails typed.
        var page = TestTIFF.Page(width: 157, height: 93, rowsPerStrip: 93)
        page.sample = { x, y, s in UInt32(((x &* 2_654_435_761) ^ (y &* 40_503) ^ (s &* 97)) >> 7 & 0xFF) }
        let packed = try lzw(page, predictor: 2).packed
        var generator = SystemRandomNumberGenerator()
        var failed = 0
        for _ in 0..<300 {
            var bad = packed
            for _ in 0..<4 { bad[Int.random(in: 8..<packed.count / 2, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            do { _ = try decode(bad) } catch is ImagingError { failed += 1 }
        }
        XCTAssertGreaterThan(failed, 0, "some of 300 corrupted files fail")
        var cut = packed
        cut.replaceSubrange(8..<8 + packed.count / 2, with: [UInt8](repeating: 0, count: packed.count / 2))
        XCTAssertThrowsError(try decode(cut)) { XCTAssertTrue($0 is ImagingError, "\($0)") }
    }

    /// Resolution tags are kept only when a recipe keeps `resolution`: JFIF density in a JPEG,
    /// pHYs in a PNG, the values as the source says them (vips' thumbnail keeps them too),
    /// swapped by an orientation that turns the image; a source's JFIF density carries on.
    func testResolutionIsKeptOnlyWhenTheRecipeSaysSo() throws {
        var page = TestTIFF.Page(width: 40, height: 20)
        // XResolution 300/1, YResolution 600/1 (RATIONAL), ResolutionUnit 2 (inch).
        page.extraTags = [(282, 5, [300, 1]), (283, 5, [600, 1]), (296, 3, [2])]
        let file = TestTIFF(pages: [page]).bytes()
        func jfif(_ jpeg: [UInt8]) -> (unit: UInt8, x: Int, y: Int) {
            // APP0 "JFIF\0": version (2), units, Xdensity, Ydensity (big-endian).
            guard let i = (0..<jpeg.count - 16).first(where: { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xE0 }) else { return (9, 0, 0) }
            let d = i + 4 + 5 + 2
            return (jpeg[d], Int(jpeg[d + 1]) << 8 | Int(jpeg[d + 2]), Int(jpeg[d + 3]) << 8 | Int(jpeg[d + 4]))
        }
        func phys(_ png: [UInt8]) -> (x: UInt32, y: UInt32)? {
            guard let i = (0..<png.count - 12).first(where: { png[$0..<$0 + 4].elementsEqual("pHYs".utf8) }) else { return nil }
            func u32(_ k: Int) -> UInt32 { png[k..<k + 4].reduce(0) { $0 << 8 | UInt32($1) } }
            return (u32(i + 4), u32(i + 8))
        }
        let kept = recipe([fit(20, 20)]) { $0.keep = [.resolution] }
        let plain = recipe([fit(20, 20)])
        let r = try Renderer.render(file, recipes: [kept, plain, recipe([fit(20, 20)], format: .png) { $0.keep = [.resolution] },
                                                    recipe([fit(20, 20)], format: .png)])
        XCTAssertTrue(jfif(r.outputs[0].file.bytes) == (1, 300, 600), "\(jfif(r.outputs[0].file.bytes))")
        XCTAssertEqual(jfif(r.outputs[1].file.bytes).unit, 0, "no unit: an aspect ratio only")
        XCTAssertTrue(phys(r.outputs[2].file.bytes).map { $0 == (11811, 23622) } ?? false, "300 and 600 dpi in pixels per metre")
        XCTAssertNil(phys(r.outputs[3].file.bytes))
        // Orientation 6 turns the image: 600 across, 300 down. Centimetres are converted.
        page.orientation = 6
        page.extraTags = [(282, 5, [100, 1]), (283, 5, [200, 1]), (296, 3, [3])]
        let turned = try Renderer.render(TestTIFF(pages: [page]).bytes(), recipes: [kept])
        XCTAssertTrue(jfif(turned.outputs[0].file.bytes) == (1, 508, 254), "\(jfif(turned.outputs[0].file.bytes))")
        // A JPEG's own JFIF density carries on through a render.
        let again = try Renderer.render(r.outputs[0].file.bytes, recipes: [kept])
        XCTAssertTrue(jfif(again.outputs[0].file.bytes) == (1, 300, 600))
    }

    /// `../shared/corpus/stills`: every TIFF its MANIFEST says renders does, at 256 px; every
    /// one it says fails (as vips does) fails typed — except two valid files libtiff reads
    /// where vips gives up (old-style JPEG; tiled separate planes), which render.
    func testCorpusStillsRenderOrFailTyped() throws {
        guard let dir = Fixtures.corpus("stills"),
              let manifest = try? String(contentsOf: dir.appendingPathComponent("MANIFEST.tsv"), encoding: .utf8) else {
            throw XCTSkip("corpus not present")
        }
        let beyondVips: Set<String> = ["pillow_old-style-jpeg-compression.tif", "pillow_tiff_tiled_planar_raw.tif"]
        var rendered = 0, refused = 0
        for line in manifest.split(separator: "\n").dropFirst() {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count > 5, f[2] == "TIFF" else { continue }
            let data = try bytes(of: dir.appendingPathComponent(f[0]))
            do {
                let result = try Renderer.render(data, recipes: [recipe([fit(256, 256)])])
                XCTAssertTrue(f[5] == "ok" || beyondVips.contains(f[0]), "\(f[0]) rendered, but the manifest expects an error")
                XCTAssertLessThanOrEqual(max(result.outputs[0].size.width, result.outputs[0].size.height), 256, f[0])
                rendered += 1
            } catch let e as ImagingError where f[5] == "ok" && f.count > 6 && f[6].contains("vips warns") {
                // Damaged data vips renders with a warning: strict fails it `corrupt`, lenient renders it.
                XCTAssertEqual(e.code, .corrupt, "\(f[0]): \(e)")
                var lenient = RenderOptions()
                lenient.strict = false
                XCTAssertNoThrow(try Renderer.render(data, recipes: [recipe([fit(256, 256)])], options: lenient), f[0])
                refused += 1
            } catch let e as ImagingError {
                XCTAssertEqual(f[5], "error", "\(f[0]): \(e)")
                refused += 1
            }
        }
        XCTAssertEqual(rendered + refused, 34, "TIFFs in the manifest")
        print("stills: \(rendered) TIFFs rendered, \(refused) refused typed")
    }

    /// A pyramid band from a TIFF: the band's own strips or tiles are read (nothing above it),
    /// and its tiles are those of the same pixels from a PNG, byte for byte.
    func testPyramidBandsReadOnlyTheirRowsAndMatchAPNGSource() throws {
        var page = TestTIFF.Page(width: 700, height: 600, rowsPerStrip: 16)
        page.sample = { x, y, s in UInt32((x / 3 + y / 2 + s * 60) & 0xFF) }
        var tiled = page
        tiled.tile = 64
        tiled.rowsPerStrip = nil
        let image = PixelBuffer(width: 700, height: 600, layout: .rgb)
        for y in 0..<600 { for x in 0..<700 { for c in 0..<3 { image.row(y)[x * 3 + c] = UInt8(page.sample(x, y, c)) } } }
        let png = try Codec.encodePNG(image)
        func tiles(_ source: [UInt8], _ part: PyramidPart) throws -> ([String: [UInt8]], TileWork) {
            try source.withUnsafeBytes { raw in
                let info = try TileSourceInfo.probe(raw, limits: Limits())
                var files: [String: [UInt8]] = [:]
                let work = try TileRenderer(settings: TileSettings(), info: info, name: "p").render(raw, part: part) {
                    files[$0.record.path] = $0.bytes
                }
                return (files, work)
            }
        }
        for part in [PyramidPart.band(shrink: 0, rows: 1..<2), .band(shrink: 1, rows: 1..<2), .tail(from: 2)] {
            let (reference, _) = try tiles(png, part)
            for (name, p) in [("strips", page), ("tiles", tiled)] {
                let (made, work) = try tiles(TestTIFF(pages: [p]).bytes(), part)
                XCTAssertFalse(made.isEmpty)
                XCTAssertEqual(made, reference, "\(name) \(part)")
                if case .band = part { XCTAssertEqual(work.decode.seek, .direct, "\(name) \(part)") }
            }
        }
        XCTAssertEqual(try TestTIFF(pages: [page]).bytes().withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }.format, .tiff)
    }

    /// Stacks (formats without a scaled decode): one read of a stripe makes the tile rows of
    /// every stacked level over it, each level the 2×2 box mean of the one above, exactly the
    /// pixels of whole levels halved in turn; the stripes' tiles together are every tile of
    /// those levels once; a TIFF stripe reads nothing above its own rows (and the overlap).
    func testStacksMakeEveryLevelOfTheirStripeFromOneRead() throws {
        var page = TestTIFF.Page(width: 700, height: 600, rowsPerStrip: 16)
        page.sample = { x, y, s in UInt32((x * 7 / 5 + (y * y) / 97 + s * 60 + (x ^ y) % 13) & 0xFF) }
        var tiled = page
        tiled.tile = 64
        tiled.rowsPerStrip = nil
        let image = PixelBuffer(width: 700, height: 600, layout: .rgb)
        for y in 0..<600 { for x in 0..<700 { for c in 0..<3 { image.row(y)[x * 3 + c] = UInt8(page.sample(x, y, c)) } } }
        var settings = TileSettings()
        settings.tileSize = 64
        let geometry = PyramidGeometry(width: 700, height: 600, settings: settings)
        var levels = [image]
        for k in 1..<3 { levels.append(TileTests.halve(levels[k - 1])) }
        // Level 2 has 3 tile rows: stripes of 1 and 2 of them.
        let parts = [PyramidPart.stack(levels: 3, rows: 0..<1), .stack(levels: 3, rows: 1..<3)]
        let sources = [("png", try Codec.encodePNG(image)), ("strips", try TestTIFF(pages: [page]).bytes()),
                       ("tiles", try TestTIFF(pages: [tiled]).bytes())]
        for (name, bytes) in sources {
            var files: [String: [UInt8]] = [:]
            for part in parts {
                let work = try bytes.withUnsafeBytes { raw in
                    let info = try TileSourceInfo.probe(raw, limits: Limits())
                    return try TileRenderer(settings: settings, info: info, name: "p").render(raw, part: part) {
                        XCTAssertNil(files[$0.record.path], "\(name): \($0.record.path) written twice")
                        files[$0.record.path] = $0.bytes
                    }
                }
                XCTAssertEqual(work.levels, [geometry.maxLevel, geometry.maxLevel - 1, geometry.maxLevel - 2])
                if part == parts[1] {
                    // Rows from 4·64 less the overlap of level 2 (4 source rows).
                    XCTAssertEqual(work.decode.sourceRows, [252, 600], name)
                    if name != "png" { XCTAssertEqual(work.decode.seek, .direct, name) }
                }
            }
            var expected = 0
            for k in 0..<3 {
                let pixels = levels[k].bytes
                for r in 0..<geometry.rows(k) {
                    for c in 0..<geometry.columns(k) {
                        let t = geometry.tile(k, column: c, row: r)
                        let path = geometry.path(name: "p", k: k, column: c, row: r, suffix: "jpg")
                        XCTAssertTrue(files[path] == (try TileTests.directTile(levels[k], pixels: pixels, x: t.x, y: t.y)),
                                      "\(name): \(path) is not the tile of level \(k) halved in turn")
                        expected += 1
                    }
                }
            }
            XCTAssertEqual(files.count, expected, name)
        }
    }

    /// The tail of a pyramid with stacks puts its first level together from the stripes the
    /// stacks leave (nothing of the source read again): its tiles are those of the levels
    /// halved in turn, like the stacks'; the stripes are removed after; without them the tail
    /// decodes the source.
    func testATailReadsTheStripesItsStacksLeft() throws {
        var page = TestTIFF.Page(width: 2000, height: 1400, rowsPerStrip: 32)
        page.sample = { x, y, s in UInt32((x / 3 + y * 5 / 7 + s * 50 + (x * y) % 11) & 0xFF) }
        let source = TestTIFF(pages: [page]).bytes()
        let image = PixelBuffer(width: 2000, height: 1400, layout: .rgb)
        for y in 0..<1400 { for x in 0..<2000 { for c in 0..<3 { image.row(y)[x * 3 + c] = UInt8(page.sample(x, y, c)) } } }
        var settings = TileSettings()
        settings.tileSize = 64
        settings.memoryBudgetMB = 32  // the tail starts at shrink 1: level 0 is a stack
        let info = try source.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        var renderer = TileRenderer(settings: settings, info: info, name: "p")
        let g = renderer.geometry
        let parts = g.plan(info: info, settings: settings)
        XCTAssertTrue(parts.contains(.tail(from: 1)) && parts.contains { if case .stack(1, _) = $0 { return true } else { return false } },
                      "\(parts)")
        var stored: [String: [UInt8]] = [:]
        renderer.stripes = StripeStore(save: { stored[$0.description] = $1 }, load: { stored[$0.description] },
                                       remove: { stored = [:] })
        var files: [String: [UInt8]] = [:]
        var tailWork: TileWork?
        for part in parts {
            let work = try source.withUnsafeBytes { raw in try renderer.render(raw, part: part) { files[$0.record.path] = $0.bytes } }
            if case .tail = part { tailWork = work }
            if case .stack = part { XCTAssertNotNil(stored[part.description], "\(part) left its stripe") }
        }
        XCTAssertEqual(tailWork?.decode.seek, .stripes)
        XCTAssertTrue(stored.isEmpty, "the tail removed the stripes")
        var level = image
        for k in 0..<g.levelCount {
            if k > 0 { level = TileTests.halve(level) }
            let pixels = level.bytes
            for r in 0..<g.rows(k) {
                for c in 0..<g.columns(k) {
                    let t = g.tile(k, column: c, row: r), path = g.path(name: "p", k: k, column: c, row: r, suffix: "jpg")
                    XCTAssertTrue(files[path] == (try TileTests.directTile(level, pixels: pixels, x: t.x, y: t.y)), "\(path)")
                }
            }
        }
        // No stripes: the tail decodes the source.
        let again = try source.withUnsafeBytes { raw in try renderer.render(raw, part: .tail(from: 1)) { _ in } }
        XCTAssertEqual(again.decode.seek, TileSeek.none)
        XCTAssertEqual(again.tilesWritten, (1..<g.levelCount).reduce(0) { $0 + g.rows($1) * g.columns($1) })
    }

    /// A crop of a tiled TIFF reads only the tiles under it, columns as well as rows: with every
    /// other tile's offset past the end of the file, the whole image fails and the crop renders
    /// its exact pixels.
    func testATiledCropReadsOnlyItsTiles() throws {
        var page = TestTIFF.Page(width: 640, height: 256)
        page.tile = 64
        page.rowsPerStrip = nil
        // Tiles in file order from offset 8, 64·64·3 bytes each; those outside columns 5 and 6 point nowhere.
        let offsets = (0..<40).map { i in (5...6).contains(i % 10) ? UInt32(8 + i * 12288) : 0x7FFF_0000 }
        page.extraTags = [(324, 4, offsets)]
        let file = TestTIFF(pages: [page]).bytes()
        XCTAssertThrowsError(try Renderer.render(file, recipes: [recipe([], format: .png)])) { e in
            XCTAssertTrue(["corrupt", "truncated"].contains((e as? ImagingError)?.code.rawValue ?? ""), "\(e)")
        }
        let crop = try Renderer.render(file, recipes: [recipe([.crop(Crop(x: 330, y: 10, width: 100, height: 200))], format: .png)])
        let out = try Renderer.decode(crop.outputs[0].bytes)
        XCTAssertEqual([out.width, out.height], [100, 200])
        for (x, y) in [(0, 0), (99, 199), (53, 77)] {
            XCTAssertEqual(out.pixel(x: x, y: y), (0..<3).map { UInt8(page.sample(330 + x, 10 + y, $0)) }, "(\(x), \(y))")
        }
    }

    /// `layout: tiff`: levels halve rounding down until one fits in a tile; every tile is
    /// whole (edges repeated); a stack and the tail make them from a TIFF source; the writer
    /// puts them into a TIFF or BigTIFF as they are, which reads back as the source page with
    /// its levels, and whose every tile is a tile the parts made, byte for byte.
    func testPyramidalTIFFOutputFromItsTiles() throws {
        var page = TestTIFF.Page(width: 300, height: 203, rowsPerStrip: 16)
        page.sample = { x, y, s in UInt32((x * 3 + y * 2 + s * 70 + (x * y) % 17) & 0xFF) }
        let source = TestTIFF(pages: [page]).bytes()
        var settings = TileSettings(layout: .tiff, tileSize: 64)
        settings.quality = 90
        try settings.validate()
        let info = try source.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        let renderer = TileRenderer(settings: settings, info: info, name: "p")
        let g = renderer.geometry
        // 300x203 → 150x101 → 75x50 → 37x25 (fits in 64).
        XCTAssertEqual((0..<g.levelCount).map { g.levelSize($0) },
                       [Size(width: 300, height: 203), Size(width: 150, height: 101), Size(width: 75, height: 50), Size(width: 37, height: 25)])
        // Each part writes one pack of its tiles; the descriptor part writes nothing here.
        var tiles: [String: [UInt8]] = [:]
        for part in [PyramidPart.stack(levels: 2, rows: 0..<g.rows(1)), .tail(from: 2), .descriptor] {
            var files: [OutputFile] = []
            _ = try source.withUnsafeBytes { raw in try renderer.render(raw, part: part) { files.append($0) } }
            XCTAssertEqual(files.map(\.record.path), part == .descriptor ? [] : ["p.tif.tiles/\(TilePack.fileName(part))"])
            for file in files {
                try file.bytes.withUnsafeBytes { raw in
                    for (t, range) in try TilePack.index(raw) {
                        let path = g.path(name: "p", k: t.k, column: t.column, row: t.row, suffix: "jpg")
                        XCTAssertNil(tiles[path])
                        tiles[path] = Array(raw[range])
                        let tile = try Codec.decodeJPEG(tiles[path]!)
                        XCTAssertEqual([tile.width, tile.height], [64, 64], "\(path): whole tiles")
                    }
                }
            }
        }
        XCTAssertEqual(tiles.count, g.tileCount, "every tile once")
        XCTAssertThrowsError(try [UInt8](Array("TSPACK01".utf8) + [9, 0, 0, 0]).withUnsafeBytes { try TilePack.index($0) })
        // An entry whose offset reads as negative fails typed.
        let hostile = Array("TSPACK01".utf8) + [1, 0, 0, 0] + [0, 0] + [0, 0, 0, 0] + [0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 0x80] + [1, 0, 0, 0]
        XCTAssertThrowsError(try hostile.withUnsafeBytes { try TilePack.index($0) })
        // 300 x 257: level 1 has 2 tile rows of 64 (128 rows), level 0 has 5: the one stripe makes all five.
        var tall = page
        tall.height = 257
        let tallSource = TestTIFF(pages: [tall]).bytes()
        let tallInfo = try tallSource.withUnsafeBytes { try TileSourceInfo.probe($0, limits: Limits()) }
        let tallRenderer = TileRenderer(settings: settings, info: tallInfo, name: "t")
        let tg = tallRenderer.geometry
        var made = 0
        for part in [PyramidPart.stack(levels: 2, rows: 0..<tg.rows(1)), .tail(from: 2)] {
            made += try tallSource.withUnsafeBytes { raw in try tallRenderer.render(raw, part: part) { _ in }.tilesWritten }
        }
        XCTAssertEqual([tg.rows(0), tg.rows(1)], [5, 2])
        XCTAssertEqual(made, tg.tileCount)
        // An edge tile repeats the last column: its right half is the column at x = 299 - 256.
        let edge = try Codec.decodeJPEG(try XCTUnwrap(tiles["p.tif.tiles/0/4_0.jpg"]))
        XCTAssertLessThan(abs(Int(edge.pixel(x: 63, y: 10)[0]) - Int(edge.pixel(x: 43, y: 10)[0])), 6)
        for big in [false, true] {
            let path = NSTemporaryDirectory() + "/tessera-pyramid-\(getpid())-\(big).tif"
            defer { unlink(path) }
            let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0)
            try PyramidTIFFWriter.write(fd: fd, geometry: g, channels: 3, bigTIFF: big, subifd: false) { k, c, r in
                try XCTUnwrap(tiles[g.path(name: "p", k: k, column: c, row: r, suffix: "jpg")])
            }
            let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            XCTAssertEqual(file[2], big ? 43 : 42, "BigTIFF's version is 43")
            let structure = try ImageInfo.inspect(file).structure.joined(separator: " ")
            XCTAssertTrue(structure.contains("levels 150x101, 75x50, 37x25"), structure)
            let back = try Renderer.decode(file)
            XCTAssertEqual(Size(width: back.width, height: back.height), Size(width: 300, height: 203))
            // As close to the source as one JPEG of it at the same quality (a misplaced tile or row is far off).
            let image = PixelBuffer(width: 300, height: 203, layout: .rgb)
            for y in 0..<203 { for x in 0..<300 { image.setPixel(x: x, y: y, (0..<3).map { UInt8(page.sample(x, y, $0)) }) } }
            let once = try Codec.decodeJPEG(try Codec.encodeJPEG(image, quality: 90, subsampling: .s420))
            var diff = 0, reference = 0
            for y in 0..<203 {
                for x in 0..<300 {
                    diff += abs(Int(back.pixel(x: x, y: y)[1]) - Int(page.sample(x, y, 1)))
                    reference += abs(Int(once.pixel(x: x, y: y)[1]) - Int(page.sample(x, y, 1)))
                }
            }
            XCTAssertLessThan(Double(diff), Double(reference) * 1.15 + 300 * 203 * 0.3, "mean error \(Double(diff) / (300 * 203)), one JPEG's \(Double(reference) / (300 * 203))")
            // A tile as stored is the tile made (no re-encoding), its tables in the level's JPEGTables.
            // (The check below is the tile's abbreviated stream.)
            let tile = try XCTUnwrap(PyramidTIFFWriter.split(try XCTUnwrap(tiles["p.tif.tiles/1/2_1.jpg"])))
            XCTAssertNotNil(file.firstRange(of: tile.body), "level 1's tile 2,1 is in the file as it was made")
            XCTAssertEqual(tile.tables.count, 2 + 2 * 69 + 2 * 33 + 2 * 183 + 2, "SOI, 2 DQT, 2 DC and 2 AC DHT, EOI (vips writes the same 574 bytes)")
        }
    }

    /// A pyramidal TIFF (reduced-resolution directories after the page, as `vips tiffsave
    /// --pyramid` writes them): a thumbnail reads the smallest level that leaves the resampler
    /// its headroom (else the smallest that covers, as a JPEG's DCT scale falls back); the
    /// levels are not pages.
    func testPyramidalSourcesReadTheSmallestLevelThatCovers() throws {
        func flat(_ w: Int, _ h: Int, _ v: UInt32, reduced: Bool) -> TestTIFF.Page {
            var p = TestTIFF.Page(width: w, height: h, samples: 1, photometric: 1, rowsPerStrip: 16)
            p.sample = { _, _, _ in v }
            if reduced { p.subfileType = 1 }
            return p
        }
        // Each level has its own grey, so the output says which one was read.
        let file = TestTIFF(pages: [flat(400, 300, 100, reduced: false), flat(200, 150, 150, reduced: true),
                                    flat(100, 75, 200, reduced: true), flat(50, 40, 30, reduced: false)]).bytes()
        let info = try ImageInfo.inspect(file)
        XCTAssertEqual(info.structure.first, "2 pages: 400x300, 50x40")
        XCTAssertTrue(info.structure.contains("levels 200x150, 100x75"), "\(info.structure)")
        for (box, grey, path, level) in [(64, 200, DecodePath.tiffLevel, 2), (120, 150, .tiffLevel, 1), (180, 150, .tiffLevel, 1), (250, 100, .tiff, nil)] {
            let result = try Renderer.render(file, recipes: [recipe([fit(box, box)], format: .png)])
            XCTAssertEqual(result.decodePath, path, "box \(box)")
            XCTAssertEqual(result.level, level, "box \(box)")
            XCTAssertEqual(result.outputs[0].size.width, box, "box \(box)")
            XCTAssertEqual(result.source.storedSize, Size(width: 400, height: 300), "the page's size is reported")
            let pixels = try Renderer.decode(result.outputs[0].bytes)
            XCTAssertEqual(Int(pixels.pixel(x: box / 2, y: box / 4)[0]), grey, "box \(box): read the level of grey \(grey)")
        }
        XCTAssertEqual(DecodePath.tiffLevel.recorded(level: 2), "tiff-level-2")
        // 400×300 over a 0.1 MP limit: a pyramid is checked by what it decodes.
        var options = RenderOptions()
        options.limits.maxPixels = 100_000
        XCTAssertEqual(try Renderer.render(file, recipes: [recipe([fit(64, 64)])], options: options).level, 2)
        XCTAssertThrowsError(try Renderer.render(file, recipes: [recipe([fit(300, 300)])], options: options)) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .limitExceeded)
        }
    }
}
