import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel

/// JPEG XL: read (whole, and the 1/8 image from the DC pass), written (lossy and lossless),
/// and JPEGs recompressed without loss — their bytes given back exactly.
final class JXLTests: XCTestCase {
    /// A smooth picture with edges (what a photo has, unlike noise).
    static func picture(width: Int, height: Int, alpha: Bool = false) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: alpha ? .rgba : .rgb)
        for y in 0..<height {
            for x in 0..<width {
                let inDisc = (x - width / 2) * (x - width / 2) + (y - height / 2) * (y - height / 2) < width * height / 10
                var px: [UInt8] = [UInt8(x * 255 / max(1, width - 1)), UInt8(y * 255 / max(1, height - 1)), inDisc ? 40 : 200]
                if alpha { px.append(UInt8((x + y) * 255 / max(1, width + height - 2))) }
                image.setPixel(x: x, y: y, px)
            }
        }
        return image
    }

    func testLosslessRoundTripIsExact() throws {
        for alpha in [false, true] {
            let image = Self.picture(width: 67, height: 41, alpha: alpha)
            let jxl = try JXLEncoder.encode(image, .init(quality: 100, lossless: true, effort: 3))
            XCTAssertEqual(jxl.withUnsafeBytes { ImageFormat.sniff($0) }, .jxl)
            let back = try Renderer.decode(jxl, recipe: recipe(format: .png))
            XCTAssertEqual(back.layout, image.layout)
            XCTAssertEqual(back.bytes, image.bytes, "alpha \(alpha): lossless pixels differ")
        }
    }

    func testLossyOutputOfARecipe() throws {
        let png = try Codec.encodePNG(Self.picture(width: 400, height: 300))
        let (out, px) = try renderAndDecode(png, recipe([fit(200, 200)], format: .jxl, quality: 0.9))
        XCTAssertEqual(out.format, .jxl)
        XCTAssertEqual(out.size, Size(width: 200, height: 150))
        let reference = try Renderer.decode(png, recipe: recipe([fit(200, 200)], format: .png))
        XCTAssertLessThan(meanAbsoluteDifference(px, reference), 2.5, "quality 90 is distance 1: close to the source")
        // Lower quality, fewer bytes; the distance map is cjxl's.
        let small = try Renderer.render(png, recipes: [recipe([fit(200, 200)], format: .jxl, quality: 0.5)]).outputs[0]
        XCTAssertLessThan(small.bytes.count, out.bytes.count)
        XCTAssertEqual(JXLEncoder.distance(quality: 90), 1.0, accuracy: 1e-6)
        XCTAssertEqual(JXLEncoder.distance(quality: 100), 0)
        // A byte budget is met by lowering the quality.
        let budget = out.bytes.count * 2 / 3
        let fitted = try Renderer.render(png, recipes: [recipe([fit(200, 200)], format: .jxl, quality: 0.9) { $0.maxBytes = budget }]).outputs[0]
        XCTAssertLessThanOrEqual(fitted.bytes.count, budget)
    }

    /// A large lossy file to a thumbnail: the whole image decoded (decision 022), close to
    /// the thumbnail of the pixels it was made from.
    func testThumbnailOfALargeFile() throws {
        let image = Self.picture(width: 2048, height: 1536)
        let jxl = try JXLEncoder.encode(image, .init(quality: 85, effort: 3))
        let small = try Renderer.render(jxl, recipes: [recipe([fit(128, 128)], format: .png)])
        XCTAssertEqual(small.decodePath, .jxl)
        XCTAssertEqual(small.outputs[0].size, Size(width: 128, height: 96))
        let reference = try Renderer.decode(try Codec.encodePNG(image), recipe: recipe([fit(128, 128)], format: .png))
        XCTAssertLessThan(meanAbsoluteDifference(try Renderer.decode(small.outputs[0].bytes), reference), 2.0)
    }

    /// Made-here JPEGs of every sampling, progressive, with restart intervals, metadata and a
    /// trailing gain map, then the corpus' JPEGs: each recompresses, and what libjxl
    /// reconstructs (and `djxl`, where installed) is the JPEG byte for byte.
    func testLosslessRecompressionGivesBackEveryByte() throws {
        var jpegs: [(String, [UInt8])] = []
        let image = Self.picture(width: 333, height: 222)
        for sub in [ChromaSubsampling.s444, .s422, .s420] {
            for progressive in [false, true] {
                jpegs.append(("made \(sub) progressive \(progressive)",
                              try JPEGEncoder.encode(image, .init(quality: 85, progressive: progressive, optimize: true, subsampling: sub),
                                                     exif: Exif.build(orientation: 6))))
            }
        }
        for url in Fixtures.corpusFiles("photos") + Fixtures.corpusFiles("edge") where url.pathExtension == "jpg" {
            jpegs.append((url.lastPathComponent, try bytes(of: url)))
        }
        let djxl = ["/usr/bin/djxl", "/usr/local/bin/djxl"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("jxl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: tmp) }
        var recompressed = 0, refused = 0, bytesIn = 0, bytesOut = 0
        for (name, jpeg) in jpegs {
            let jxl: [UInt8]
            do { jxl = try jpeg.withUnsafeBytes { try LosslessJXL.recompress($0) } } catch let e as ImagingError {
                // Only what JPEG XL cannot hold is refused, with the reason.
                XCTAssertTrue([.unsupportedFeature, .transformFailed, .corrupt, .truncated].contains(e.code), "\(name): \(e)")
                XCTAssertFalse(name.hasPrefix("made"), "\(name): \(e)")
                refused += 1
                continue
            }
            recompressed += 1
            bytesIn += jpeg.count
            bytesOut += jxl.count
            XCTAssertEqual(try jxl.withUnsafeBytes { try JXLDecoder.reconstructJPEG($0) }, jpeg, name)
            if let djxl {
                let input = tmp.appendingPathComponent("a.jxl"), output = tmp.appendingPathComponent("a.jpg")
                try Data(jxl).write(to: input)
                let p = Process()
                p.executableURL = URL(fileURLWithPath: djxl)
                p.arguments = [input.path, output.path]
                p.standardOutput = FileHandle.nullDevice
                p.standardError = FileHandle.nullDevice
                try p.run()
                p.waitUntilExit()
                XCTAssertEqual(p.terminationStatus, 0, name)
                XCTAssertEqual(try [UInt8](Data(contentsOf: output)), jpeg, "\(name): djxl does not give back the JPEG")
            }
            // And it renders: the same pixels as the JPEG, near enough (libjxl's own IDCT).
            if name.hasPrefix("made") {
                let a = try Renderer.decode(jxl, recipe: recipe([fit(100, 100)], format: .png))
                let b = try Renderer.decode(jpeg, recipe: recipe([fit(100, 100)], format: .png))
                XCTAssertEqual(Size(width: a.width, height: a.height), Size(width: b.width, height: b.height), "\(name): orientation kept")
                XCTAssertLessThan(meanAbsoluteDifference(a, b), 3, name)
            }
        }
        XCTAssertGreaterThanOrEqual(recompressed, 6)
        XCTAssertLessThan(bytesOut, bytesIn * 9 / 10, "at least 10 % smaller overall")
        print("recompressed \(recompressed), refused \(refused): \(bytesIn) -> \(bytesOut) bytes")
    }

    func testRecompressionRefusesWhatItCannotGiveBack() throws {
        let png = try Codec.encodePNG(Self.picture(width: 20, height: 20))
        assertThrowsImagingError(.unsupportedFeature, try png.withUnsafeBytes { try LosslessJXL.recompress($0) })
        let jpeg = try Codec.encodeJPEG(Self.picture(width: 64, height: 64), quality: 80)
        assertThrowsImagingError(.corrupt, try Array(jpeg.prefix(200)).withUnsafeBytes { try LosslessJXL.recompress($0) })
        // Cut in its scan: refused as what it is (truncated, libjpeg says, not a JPEG that JPEG XL
        // cannot hold), or recompressed into something that gives back exactly those bytes.
        let cut = Array(jpeg.prefix(jpeg.count - 100))
        do {
            let jxl = try cut.withUnsafeBytes { try LosslessJXL.recompress($0) }
            XCTAssertEqual(try jxl.withUnsafeBytes { try JXLDecoder.reconstructJPEG($0) }, cut)
        } catch let e as ImagingError {
            XCTAssertEqual(e.code, .truncated, "\(e)")
        }
        assertThrowsImagingError(.empty, try [UInt8]().withUnsafeBytes { try LosslessJXL.recompress($0) })
        // A JPEG XL of pixels has no JPEG to give back.
        let jxl = try JXLEncoder.encode(Self.picture(width: 20, height: 20), .init(quality: 80, effort: 1))
        XCTAssertNil(try jxl.withUnsafeBytes { try JXLDecoder.reconstructJPEG($0) })
    }

    /// Cut off anywhere, flipped bytes, or over the pixel limit: a typed error, never a crash.
    func testDamagedFilesFailCleanly() throws {
        let jxl = try JXLEncoder.encode(Self.picture(width: 300, height: 200), .init(quality: 80, effort: 3))
        for cut in [2, 5, 12, 20, jxl.count / 3, jxl.count / 2, jxl.count - 10, jxl.count - 1] {
            XCTAssertThrowsError(try Renderer.render(Array(jxl.prefix(cut)), recipes: [recipe([fit(64, 64)])]), "cut at \(cut)") { e in
                XCTAssertTrue(e is ImagingError, "\(e)")
            }
        }
        var limited = RenderOptions()
        limited.limits.maxPixels = 10_000
        assertThrowsImagingError(.limitExceeded, try Renderer.render(jxl, recipes: [recipe([fit(64, 64)])], options: limited))
        var state: UInt64 = 7
        for _ in 0..<40 {
            var damaged = jxl
            for _ in 0..<4 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let i = 12 + Int(state >> 33) % (damaged.count - 12)
                damaged[i] ^= UInt8(truncatingIfNeeded: state >> 20) | 1
            }
            do { _ = try Renderer.render(damaged, recipes: [recipe([fit(64, 64)])]) } catch is ImagingError {} catch {
                XCTFail("\(error)")
            }
        }
        for name in ["jxl_splines.jxl", "jxl_square-extended-size-container.jxl"] {
            guard let dir = Fixtures.corpus("stills") else { continue }
            let file = try bytes(of: dir.appendingPathComponent(name))
            XCTAssertThrowsError(try Renderer.render(file, recipes: [recipe([fit(64, 64)])]), name) { XCTAssertTrue($0 is ImagingError) }
        }
    }

    /// A 16-bit PQ file is tone-mapped like a PQ AVIF: dark stays dark, bright becomes white.
    func testPQIsToneMapped() throws {
        guard let dir = Fixtures.corpus("stills") else { throw XCTSkip("no corpus") }
        let file = try bytes(of: dir.appendingPathComponent("jxl_pq_gradient.jxl"))
        let result = try Renderer.render(file, recipes: [recipe([fit(544, 32)], format: .png)])
        let px = try Renderer.decode(result.outputs[0].bytes)
        XCTAssertEqual(Size(width: px.width, height: px.height), Size(width: 544, height: 32))
        let row = (0..<px.width).map { Int(px.pixel(x: $0, y: 16)[0]) }
        XCTAssertLessThan(row[2], 16)
        XCTAssertGreaterThan(row[px.width - 3], 240)
        for x in stride(from: 8, to: px.width, by: 8) { XCTAssertGreaterThanOrEqual(row[x] + 2, row[x - 8], "monotonic at \(x)") }
        let info = try ImageInfo.inspect(file)
        XCTAssertEqual(info.format, .jxl)
    }

    /// A container assembled here: an Exif box over the 16 MB cap (left unread) before an XMP
    /// box (read), then the codestream; and the same with a small Exif box (read: orientation 6
    /// in it is not applied, the codestream's orientation is authoritative).
    func testMetadataBoxesInAContainer() throws {
        let codestream = try JXLEncoder.encode(Self.picture(width: 40, height: 20), .init(quality: 80, effort: 1))
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let n = UInt32(8 + payload.count)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + Array(type.utf8) + payload
        }
        let signature: [UInt8] = [0, 0, 0, 0x0C] + Array("JXL ".utf8) + [0x0D, 0x0A, 0x87, 0x0A]
        let ftyp = box("ftyp", Array("jxl ".utf8) + [0, 0, 0, 0] + Array("jxl ".utf8))
        let xmp = box("xml ", Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'></x:xmpmeta>".utf8))
        let tiff = Array(Exif.build(orientation: 6).dropFirst(6))  // the box holds TIFF after a 4-byte offset
        for (exifPayload, kept) in [([UInt8](repeating: 0, count: 4) + tiff + [UInt8](repeating: 0, count: 17 << 20), false),
                                    ([UInt8](repeating: 0, count: 4) + tiff, true)] {
            let file = signature + ftyp + box("Exif", exifPayload) + xmp + box("jxlc", codestream)
            let info = try ImageInfo.inspect(file)
            XCTAssertEqual(info.structure.contains("Exif"), kept, "\(info.structure)")
            XCTAssertTrue(info.structure.contains("xml (XMP)"), "\(info.structure)")
            let out = try Renderer.render(file, recipes: [recipe([fit(40, 40)], format: .png)]).outputs[0]
            XCTAssertEqual(out.size, Size(width: 40, height: 20), "the codestream says upright")
        }
    }

    func testCorpusStillsAndInspect() throws {
        guard let dir = Fixtures.corpus("stills") else { throw XCTSkip("no corpus") }
        let exifXMP = try bytes(of: dir.appendingPathComponent("jxl_1x1_exif_xmp.jxl"))
        let info = try ImageInfo.inspect(exifXMP)
        XCTAssertEqual(info.width, 1)
        XCTAssertTrue(info.structure.contains("Exif"), "\(info.structure)")
        XCTAssertTrue(info.structure.contains("xml (XMP)"), "\(info.structure)")
        // The animation gives its first frame, composed on the canvas.
        let anim = try bytes(of: dir.appendingPathComponent("jxl_cropped_traffic_light.jxl"))
        let out = try Renderer.render(anim, recipes: [recipe([fit(100, 100)], format: .png)]).outputs[0]
        XCTAssertEqual(out.size, Size(width: 50, height: 80))
    }
}
