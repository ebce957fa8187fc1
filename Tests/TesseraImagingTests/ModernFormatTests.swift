import Foundation
import TesseraImaging
import XCTest
import TesseraModel

/// HEIC/HEIF, AVIF and WebP in; WebP and AVIF out (issue 14). Fixtures are made with
/// the project's own encoders (libwebp; libheif with aom, and x265 when present).
final class ModernFormatTests: XCTestCase {
    func info(_ bytes: [UInt8]) throws -> ImageInfo { try ImageInfo.inspect(bytes) }

    /// A 4:4:4, near-lossless AVIF (or HEIC) for exact geometry checks.
    func heif(_ image: PixelBuffer, hevc: Bool = false, orientation: Int = 1, thumbnailBox: Int = 0,
              exif: [UInt8]? = nil, nclx: (primaries: UInt16, transfer: UInt16, matrix: UInt16)? = nil) throws -> [UInt8] {
        try Codec.encodeHEIF(image, quality: 95, hevc: hevc, orientation: orientation, nclx: nclx,
                             thumbnailBox: thumbnailBox, exif: exif, subsampling: .s444)
    }

    func testDetectionByContent() throws {
        let image = Fixtures.quadrants(width: 64, height: 48)
        XCTAssertEqual(try info(try Codec.encodeWebP(image)).format, .webp)
        XCTAssertEqual(try info(try Codec.encodeWebP(image, lossless: true)).format, .webp)
        XCTAssertEqual(try info(try heif(image)).format, .avif)
        if Codec.canEncodeHEIC { XCTAssertEqual(try info(try heif(image, hevc: true)).format, .heif) }
        // BMP and friends: a typed error naming what was found.
        assertThrowsImagingError(.unsupportedFormat, try Renderer.render(Array("BM".utf8) + [UInt8](repeating: 0, count: 64),
                                                                          recipes: [recipe([fit(32, 32)])]))
    }

    /// WebP decodes straight to the size the resampler needs (libwebp's scaler).
    func testWebPScaledDecodeAndEncode() throws {
        let source = try Codec.encodeWebP(Fixtures.quadrants(width: 800, height: 600), quality: 90)
        let result = try Renderer.render(source, recipes: [recipe([fit(100, 100)])])
        XCTAssertEqual(result.decodePath, .webp)
        XCTAssertLessThan(result.scaleEighths, 8, "scaled while decoding")
        XCTAssertLessThan(result.decodedSize.width, 800)
        let out = try Renderer.decode(result.outputs[0].bytes)
        XCTAssertEqual(Size(width: out.width, height: out.height), Size(width: 100, height: 75))
        assertColor(out.pixel(x: 10, y: 10), Quadrant.topLeft.color, tolerance: 12, "top left")
        assertColor(out.pixel(x: 90, y: 65), Quadrant.bottomRight.color, tolerance: 12, "bottom right")
        // WebP out: lossy at a quality, lossless exactly.
        let lossy = try Renderer.render(source, recipes: [recipe([fit(200, 200)], format: .webp, quality: 0.8)])
        XCTAssertEqual(lossy.outputs[0].format, .webp)
        XCTAssertEqual(lossy.outputs[0].quality, 80)
        XCTAssertEqual(try info(lossy.outputs[0].bytes).format, .webp)
        let small = Fixtures.noise(width: 40, height: 30)
        let lossless = try Renderer.render(try Codec.encodePNG(small), recipes: [recipe([], format: .webp) { $0.lossless = true }])
        XCTAssertEqual(try Renderer.decode(lossless.outputs[0].bytes).bytes, small.bytes, "lossless WebP is exact")
    }

    /// Alpha: kept in WebP/AVIF/PNG outputs, flattened (onto the background) for JPEG.
    func testAlphaKeptOrFlattened() throws {
        let image = Fixtures.solid(width: 40, height: 40, [0, 0, 255, 255])
        for y in 0..<40 { for x in 0..<20 { image.setPixel(x: x, y: y, [0, 255, 0, 0]) } }  // left half transparent
        for source in [try Codec.encodeWebP(image, lossless: true), try heif(image)] {
            let jpeg = try renderAndDecode(source, recipe([], format: .jpeg) { $0.background = RGBColor(hex: "#ff0000")! })
            XCTAssertEqual(jpeg.pixels.layout, .rgb)
            assertColor(jpeg.pixels.pixel(x: 5, y: 20), [255, 0, 0], tolerance: 12, "transparent → background")
            assertColor(jpeg.pixels.pixel(x: 35, y: 20), [0, 0, 255], tolerance: 12, "opaque blue")
            for format in [OutputFormat.webp, .png, .avif] {
                let kept = try renderAndDecode(source, recipe([], format: format))
                XCTAssertEqual(kept.pixels.layout, .rgba, "\(format)")
                XCTAssertLessThan(kept.pixels.pixel(x: 5, y: 20)[3], 10, "\(format): still transparent")
                XCTAssertGreaterThan(kept.pixels.pixel(x: 35, y: 20)[3], 245, "\(format)")
            }
        }
    }

    /// Every irot/imir combination decodes upright, at the displayed size planned before decoding.
    func testEveryHEIFOrientationDecodesUpright() throws {
        let stored = Fixtures.quadrants(width: 64, height: 48)
        for hevc in Codec.canEncodeHEIC ? [false, true] : [false] {
            for o in 1...8 {
                let file = try heif(stored, hevc: hevc, orientation: o)
                let expected = try Orientation(exif: o).apply(to: stored)
                let i = try info(file)
                XCTAssertEqual(Size(width: i.width, height: i.height), Size(width: expected.width, height: expected.height),
                               "orientation \(o) (\(hevc ? "HEIC" : "AVIF")): size as displayed")
                let decoded = try Renderer.decode(file)
                XCTAssertEqual(Size(width: decoded.width, height: decoded.height), Size(width: expected.width, height: expected.height))
                for (x, y) in [(4, 4), (expected.width - 5, 4), (4, expected.height - 5), (expected.width - 5, expected.height - 5)] {
                    assertColor(decoded.pixel(x: x, y: y), expected.pixel(x: x, y: y), tolerance: 20,
                                "orientation \(o) (\(hevc ? "HEIC" : "AVIF")) at \(x),\(y)")
                }
                // Planned from the displayed size: a 32-wide box gives a 32-wide output whatever the rotation.
                let out = try renderAndDecode(file, recipe([fit(32, 32)])).pixels
                XCTAssertEqual(out.width, expected.width >= expected.height ? 32 : 24)
            }
        }
    }

    /// HEIF transforms are authoritative: an EXIF Orientation beside them is not applied again.
    func testEXIFOrientationIsNotAppliedTwice() throws {
        let stored = Fixtures.quadrants(width: 64, height: 48)
        let exif = Array(Exif.build(orientation: 6).dropFirst(6))  // TIFF, without "Exif\0\0"
        let file = try heif(stored, orientation: 6, exif: exif)
        XCTAssertTrue(try info(file).hasExif)
        let decoded = try Renderer.decode(file)
        XCTAssertEqual(Size(width: decoded.width, height: decoded.height), Size(width: 48, height: 64), "rotated once")
        let expected = try Orientation(exif: 6).apply(to: stored)
        assertColor(decoded.pixel(x: 4, y: 4), expected.pixel(x: 4, y: 4), tolerance: 20)
    }

    /// An nclx box with Display P3 primaries: a P3 patch becomes its sRGB colour (ΔE76 ≤ 2).
    func testNCLXDisplayP3IsConvertedToSRGB() throws {
        let p3: [UInt8] = [200, 120, 90]
        let file = try heif(Fixtures.solid(width: 32, height: 32, p3), nclx: (12, 13, 6))
        let out = try renderAndDecode(file, recipe([], format: .png)).pixels.pixel(x: 16, y: 16)
        // Expected: P3 → linear → sRGB primaries (the D65 P3→sRGB matrix) → sRGB curve.
        func lin(_ v: UInt8) -> Double { let c = Double(v) / 255; return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4) }
        func enc(_ v: Double) -> Double { let c = min(max(v, 0), 1); return (c <= 0.0031308 ? 12.92 * c : 1.055 * pow(c, 1 / 2.4) - 0.055) * 255 }
        let (r, g, b) = (lin(p3[0]), lin(p3[1]), lin(p3[2]))
        let srgb = [enc(1.2249 * r - 0.2247 * g), enc(-0.0420 * r + 1.0419 * g), enc(-0.0197 * r - 0.0786 * g + 1.0979 * b)]
        func lab(_ c: [Double]) -> [Double] {
            let l = c.map { v -> Double in let x = v / 255; return x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4) }
            let X = (0.4124 * l[0] + 0.3576 * l[1] + 0.1805 * l[2]) / 0.95047
            let Y = 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]
            let Z = (0.0193 * l[0] + 0.1192 * l[1] + 0.9505 * l[2]) / 1.08883
            func f(_ t: Double) -> Double { t > 0.008856 ? cbrt(t) : 7.787 * t + 16 / 116 }
            return [116 * f(Y) - 16, 500 * (f(X) - f(Y)), 200 * (f(Y) - f(Z))]
        }
        let a = lab(out.map(Double.init)), e = lab(srgb)
        let dE = sqrt(zip(a, e).map { ($0 - $1) * ($0 - $1) }.reduce(0, +))
        XCTAssertLessThanOrEqual(dE, 2, "got \(out), expected \(srgb.map { Int($0.rounded()) })")
        // Unconverted, the patch would be far off: the conversion is what brings it in.
        let unconverted = lab(p3.map(Double.init))
        XCTAssertGreaterThan(sqrt(zip(unconverted, e).map { ($0 - $1) * ($0 - $1) }.reduce(0, +)), 4)
    }

    /// 4:2:0 HEIF read from its Y'CbCr planes (BT.601 full range, the common case) gives
    /// the colours that went in, as libheif's own RGB conversion does; with a box saying
    /// another matrix or limited range it goes through libheif's RGB conversion, whose
    /// result the planar path must equal for the common case.
    func testYCbCr420ColoursComeBack() throws {
        let colors: [[UInt8]] = [[220, 30, 30], [30, 200, 40], [40, 50, 210], [230, 210, 40],
                                 [200, 40, 190], [40, 190, 200], [128, 128, 128], [250, 250, 250]]
        let image = PixelBuffer(width: 128, height: 64, layout: .rgb)
        for (i, c) in colors.enumerated() {
            for y in (i / 4) * 32..<(i / 4 + 1) * 32 { for x in (i % 4) * 32..<(i % 4 + 1) * 32 { image.setPixel(x: x, y: y, c) } }
        }
        var files = [("AVIF, nclx BT.601 full", try Codec.encodeHEIF(image, quality: 95, nclx: (1, 13, 6), subsampling: .s420)),
                     ("AVIF, nclx BT.709", try Codec.encodeHEIF(image, quality: 95, nclx: (1, 13, 1), subsampling: .s420))]
        if Codec.canEncodeHEIC {
            files.append(("HEIC, no nclx", try Codec.encodeHEIF(image, quality: 95, hevc: true, subsampling: .s420)))
        }
        for (name, file) in files {
            let decoded = try Renderer.decode(file)
            for (i, c) in colors.enumerated() {
                assertColor(decoded.pixel(x: (i % 4) * 32 + 16, y: (i / 4) * 32 + 16), c, tolerance: 4, "\(name), patch \(i)")
            }
            // Chroma is read at the right place: a patch edge stays within a chroma sample.
            assertColor(decoded.pixel(x: 31, y: 16), colors[0], tolerance: 12, "\(name), last column of patch 0")
            assertColor(decoded.pixel(x: 32, y: 16), colors[1], tolerance: 12, "\(name), first column of patch 1")
        }
    }

    /// The thumbnail item is decoded when it covers every output, not otherwise, nor when switched off.
    func testHEIFThumbnailUsedOnlyWhenItCovers() throws {
        let file = try heif(Fixtures.quadrants(width: 1200, height: 900), thumbnailBox: 240)
        let small = try Renderer.render(file, recipes: [recipe([fit(200, 200)])])
        XCTAssertEqual(small.decodePath, .heifThumbnail)
        XCTAssertEqual(small.source.storedSize, Size(width: 1200, height: 900), "the primary's size is reported")
        XCTAssertEqual(try Renderer.decode(small.outputs[0].bytes).width, 200)
        let large = try Renderer.render(file, recipes: [recipe([fit(400, 400)])])
        XCTAssertEqual(large.decodePath, .heifPrimary)
        let both = try Renderer.render(file, recipes: [recipe([fit(64, 64)]), recipe([fit(800, 800)])])
        XCTAssertEqual(both.decodePath, .heifPrimary, "one output it does not cover: the primary")
        var options = RenderOptions()
        options.heifThumbnails = false
        XCTAssertEqual(try Renderer.render(file, recipes: [recipe([fit(200, 200)])], options: options).decodePath, .heifPrimary)
    }

    /// A phone's thumbnail item that decodes a pixel off its declared size is used at its
    /// decoded size; one far off is passed over for the primary: never a failure of the file.
    func testHEIFThumbnailOffItsDeclaredSizeStillRenders() throws {
        let file = try heif(Fixtures.quadrants(width: 1200, height: 900), thumbnailBox: 240)
        /// The file with the thumbnail's `ispe` (the smaller one) declaring `dw`, `dh` more.
        func declaring(_ dw: Int, _ dh: Int) -> [UInt8] {
            var bytes = file
            let tag = Array("ispe".utf8)
            var spots: [(at: Int, width: Int)] = []
            for i in 0..<(bytes.count - 16) where Array(bytes[i..<i + 4]) == tag {
                let w = bytes[(i + 8)..<(i + 12)].reduce(0) { $0 << 8 | Int($1) }
                spots.append((i, w))
            }
            guard let thumb = spots.min(by: { $0.width < $1.width }) else { return bytes }
            func put(_ value: Int, at offset: Int) {
                for k in 0..<4 { bytes[offset + k] = UInt8((value >> (24 - 8 * k)) & 0xFF) }
            }
            let h = bytes[(thumb.at + 12)..<(thumb.at + 16)].reduce(0) { $0 << 8 | Int($1) }
            put(thumb.width + dw, at: thumb.at + 8)
            put(h + dh, at: thumb.at + 12)
            return bytes
        }
        for (dw, dh) in [(1, 0), (0, 1), (1, 1), (-1, 0)] {
            let r = try Renderer.render(declaring(dw, dh), recipes: [recipe([fit(200, 200)])])
            XCTAssertEqual(r.decodePath, .heifThumbnail, "\(dw),\(dh)")
            XCTAssertEqual(try Renderer.decode(r.outputs[0].bytes).width, 200, "\(dw),\(dh)")
            XCTAssertEqual(try Renderer.decode(r.outputs[0].bytes).height, 150, "\(dw),\(dh)")
        }
        let far = try Renderer.render(declaring(40, 30), recipes: [recipe([fit(200, 200)])])
        XCTAssertEqual(try Renderer.decode(far.outputs[0].bytes).width, 200)
    }

    /// Byte budgets for WebP and AVIF: the highest quality that fits, or a clear error.
    func testByteBudgetsForWebPAndAVIF() throws {
        let source = try Codec.encodePNG(Fixtures.noise(width: 400, height: 300))
        for format in [OutputFormat.webp, .avif] {
            let free = try Renderer.render(source, recipes: [recipe([], format: format, quality: 0.9)]).outputs[0]
            let budget = free.bytes.count / 2
            let fitted = try Renderer.render(source, recipes: [recipe([], format: format, quality: 0.9) { $0.maxBytes = budget }]).outputs[0]
            XCTAssertLessThanOrEqual(fitted.bytes.count, budget, "\(format)")
            XCTAssertLessThan(fitted.quality ?? 100, 90, "\(format): quality lowered")
            assertThrowsImagingError(.budgetExceeded,
                                     try Renderer.render(source, recipes: [recipe([], format: format) { $0.maxBytes = 100 }]))
        }
    }

    /// One decode, several formats: `formats` writes AVIF, WebP and JPEG of the same pixels.
    func testSeveralFormatsPerOutput() throws {
        let source = try Codec.encodeJPEG(Fixtures.noise(width: 800, height: 600), quality: 90)
        let r = try PresetCatalog.builtIn.recipe(named: "web")
        let result = try Renderer.render(source, recipes: [r])
        XCTAssertEqual(result.outputs.map(\.format), [.avif, .webp, .jpeg])
        XCTAssertEqual(Set(result.outputs.map(\.size)), [Size(width: 800, height: 600)])
        XCTAssertEqual(result.outputs.map(\.quality), [60, 75, 80])
        for out in result.outputs { XCTAssertEqual(try info(out.bytes).format, out.format == .jpeg ? .jpeg : out.format) }
        // The widget rules still force JPEG or PNG.
        let widget = try Renderer.render(try heif(Fixtures.noise(width: 300, height: 200)),
                                         recipes: [try PresetCatalog.builtIn.recipe(named: "widget")])
        XCTAssertTrue([.jpeg, .png].contains(widget.outputs[0].format))
        // format auto/original keeps a writable source format, else JPEG (PNG with alpha).
        let fromWebP = try Renderer.render(try Codec.encodeWebP(Fixtures.noise(width: 60, height: 40)), recipes: [recipe([], format: .original)])
        XCTAssertEqual(fromWebP.outputs[0].format, .webp)
        if Codec.canEncodeHEIC {
            let fromHEIC = try Renderer.render(try heif(Fixtures.noise(width: 60, height: 40), hevc: true), recipes: [recipe([], format: .auto)])
            XCTAssertEqual(fromHEIC.outputs[0].format, .jpeg)
        }
    }

    /// Hostile files: each a typed error, never a crash.
    func testBrokenModernFilesFailClearly() throws {
        let webp = try Codec.encodeWebP(Fixtures.noise(width: 200, height: 150))
        let avif = try heif(Fixtures.noise(width: 200, height: 150), thumbnailBox: 64)
        let r = [recipe([fit(50, 50)])]
        // Truncated.
        for cut in [20, webp.count / 2, webp.count - 3] {
            XCTAssertThrowsError(try Renderer.render(Array(webp.prefix(cut)), recipes: r)) { e in
                XCTAssertTrue(["truncated", "corrupt"].contains((e as? ImagingError)?.code.rawValue ?? ""), "\(e)")
            }
        }
        for cut in [40, avif.count / 2, avif.count - 10] {
            XCTAssertThrowsError(try Renderer.render(Array(avif.prefix(cut)), recipes: r)) {
                XCTAssertTrue($0 is ImagingError, "\($0)")
                // One line (libheif's messages end in a newline).
                XCTAssertFalse("\($0)".contains(where: \.isNewline), "\($0)")
            }
        }
        // A VP8 frame whose size disagrees with its header (the VP8 frame's width patched).
        var mismatched = webp
        if let vp8 = find(Array("VP8 ".utf8), in: mismatched) {
            // Frame header: 3 bytes tag, 3 bytes start code, then 14-bit width.
            mismatched[vp8 + 8 + 6] = 0x34
            mismatched[vp8 + 8 + 7] = 0x12
            XCTAssertThrowsError(try Renderer.render(mismatched, recipes: r)) { XCTAssertTrue($0 is ImagingError, "\($0)") }
        }
        // A 1-kB file declaring 17000×17000 (the AVIF's ispe patched): refused before decoding.
        var huge = try heif(Fixtures.solid(width: 16, height: 16, [90, 120, 150]))
        if let ispe = find(Array("ispe".utf8), in: huge) {
            let v: [UInt8] = [0, 0, 0x42, 0x68]  // 17000
            for i in 0..<4 { huge[ispe + 8 + i] = v[i]; huge[ispe + 12 + i] = v[i] }
            XCTAssertLessThan(huge.count, 2048)
            XCTAssertThrowsError(try Renderer.render(huge, recipes: r)) { e in
                XCTAssertTrue(["limit-exceeded", "corrupt"].contains((e as? ImagingError)?.code.rawValue ?? ""), "\(e)")
            }
        }
        // Broken item references: the thumbnail's reference points nowhere.
        var broken = avif
        if let thmb = find(Array("thmb".utf8), in: broken) {
            broken[thmb + 4] = 0x7F; broken[thmb + 5] = 0x7F
            XCTAssertNoThrow(try? Renderer.render(broken, recipes: r), "no crash")
        }
        // Random damage anywhere: typed errors or pictures, never a crash.
        var state: UInt64 = 7
        for _ in 0..<40 {
            for source in [webp, avif] {
                var damaged = source
                for _ in 0..<8 {
                    state = state &* 6364136223846793005 &+ 1442695040888963407
                    let at = Int(state >> 33) % damaged.count
                    damaged[at] ^= UInt8(truncatingIfNeeded: state >> 20) | 1
                }
                do { _ = try Renderer.render(damaged, recipes: r) } catch { XCTAssertTrue(error is ImagingError, "\(error)") }
            }
        }
    }

    /// The corpus' phone photos: upright, sane colours (skipped without ../shared/corpus).
    func testModernCorpusRendersUpright() throws {
        guard let dir = Fixtures.corpus("modern") else { throw XCTSkip("corpus not present") }
        let expected: [String: Size] = [
            "immich_iphone_IMG_2682.heic": Size(width: 4032, height: 3024),
            "immich_samsung_motionphoto.heic": Size(width: 3000, height: 4000),
            "immich_10bit_hdr_p3_nclx.avif": Size(width: 3681, height: 5594),
            "immich_8bit_srgb.avif": Size(width: 1617, height: 1080),
            "vips_avif_orientation_6.avif": Size(width: 3024, height: 4032),
            "immich_denali.webp": Size(width: 600, height: 315),
            "sharp_4_lossy.webp": Size(width: 1024, height: 772),
            "sharp_5_alpha.webp": Size(width: 300, height: 300),
        ]
        for (name, size) in expected {
            let file = try bytes(of: dir.appendingPathComponent(name))
            let result = try Renderer.render(file, recipes: [recipe([fit(256, 256)], format: .png)])
            XCTAssertEqual(result.source.storedSize, size, name)
            let out = try Renderer.decode(result.outputs[0].bytes)
            XCTAssertEqual(out.width >= out.height, size.width >= size.height, "\(name): upright")
            var sum = [0, 0, 0]
            for y in 0..<out.height { for x in 0..<out.width { let p = out.pixel(x: x, y: y); for c in 0..<3 { sum[c] += Int(p[c]) } } }
            let mean = sum.map { $0 / (out.width * out.height) }
            XCTAssertTrue(mean.allSatisfy { (15...240).contains($0) }, "\(name): sane colours \(mean)")
        }
    }

    func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<i + needle.count]) == needle { return i }
        return nil
    }
}
