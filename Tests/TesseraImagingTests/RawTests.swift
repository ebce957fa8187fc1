import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel

/// Camera raw through LibRaw: the corpus's DNGs and real cameras' containers, and DNGs made
/// here (`Codec.encodeDNG`): upright, the colours of the photo they were made from, the
/// cheapest decode that serves, typed failures for what is not there.
final class RawTests: XCTestCase {
    func render(_ bytes: [UInt8], _ ops: [RecipeOperation], raw: RawDecode = .auto,
                configure: (inout RenderOptions) -> Void = { _ in }) throws -> (RenderResult, PixelBuffer) {
        var o = RenderOptions()
        o.raw = raw
        configure(&o)
        let r = try Renderer.render(bytes, recipes: [recipe(ops, format: .png)], options: o)
        return (r, try Renderer.decode(r.outputs[0].bytes))
    }

    /// Every `ok` file renders upright with the colours of its source photo (SSIM ≥ 0.9),
    /// every `error` fails typed, every `stub` fails typed on a raw decode.
    func testCorpusRawFilesRenderUprightOrFailTyped() throws {
        guard let dir = Fixtures.corpus("raw") else { throw XCTSkip("no ../shared/corpus/raw") }
        let manifest = try String(contentsOf: dir.appendingPathComponent("MANIFEST.tsv"), encoding: .utf8)
        var seen = 0
        for line in manifest.split(separator: "\n").dropFirst() {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count >= 4 else { continue }
            let (name, expect, source) = (f[0], f[2], f[3])
            let file = try bytes(of: dir.appendingPathComponent(name))
            XCTAssertEqual(file.withUnsafeBytes { ImageFormat.sniff($0) }, .raw, name)
            seen += 1
            switch expect {
            case "ok":
                let (r, shown) = try render(file, [fit(256, 256)])
                XCTAssertTrue(r.recordedDecodePath.hasPrefix("raw-"), "\(name): \(r.recordedDecodePath)")
                guard !source.isEmpty, let photos = Fixtures.corpus("") else { continue }
                // The source photo as the DNG shows it: turned as its name says, at the render's size.
                let turn = name.contains("rot90") ? 90 : name.contains("rot180") ? 180 : name.contains("rot270") ? 270 : 0
                let ops: [RecipeOperation] = (turn == 0 ? [] : [.rotate(degrees: turn)]) + [fill(shown.width, shown.height)]
                let (_, expected) = try render(try bytes(of: photos.appendingPathComponent(source)), ops)
                let score = ssim(shown, expected)
                XCTAssertGreaterThanOrEqual(score, 0.9, "\(name): SSIM \(score) against \(source) turned \(turn)")
            case "error":
                assertThrowsImagingError(.truncated, try render(file, [fit(256, 256)]), name)
            default:  // stub: the sensor data is gone
                do {
                    _ = try render(file, [fit(256, 256)], raw: .half)
                    XCTFail("\(name): a stub rendered")
                } catch let e as ImagingError {
                    XCTAssertTrue([.truncated, .unsupportedFormat].contains(e.code), "\(name): \(e)")
                }
                // No stub's preview covers 256 px (the largest is 160x120): none renders from it.
                XCTAssertThrowsError(try render(file, [fit(256, 256)]), name)
            }
        }
        XCTAssertGreaterThanOrEqual(seen, 17)
    }

    /// The cheapest decode that serves, in the record: the preview when it covers the box,
    /// else half size with the resampler's margin, else a full demosaic; each can be forced.
    func testTheDecodeFollowsTheBox() throws {
        let photo = ConformanceTests.makePicture(width: 960, height: 720)
        let big = try Codec.encodePNG(photo)
        let preview = try Codec.encodeJPEG(try Renderer.decode(try Renderer.render(big, recipes: [recipe([fit(480, 360)], format: .png)]).outputs[0].bytes),
                                           quality: 92)
        let withPreview = try Codec.encodeDNG(photo, preview: preview)
        let without = try Codec.encodeDNG(photo)
        if let dump = ProcessInfo.processInfo.environment["TESSERA_RAW_DUMP"] {
            try Data(withPreview).write(to: URL(fileURLWithPath: dump + "/with.dng"))
            try Data(preview).write(to: URL(fileURLWithPath: dump + "/preview.jpg"))
        }
        func path(_ file: [UInt8], _ box: Int, _ raw: RawDecode = .auto) throws -> String {
            try render(file, [fit(box, box)], raw: raw).0.recordedDecodePath
        }
        XCTAssertEqual(try path(withPreview, 64), "raw-preview")
        XCTAssertEqual(try path(withPreview, 480), "raw-preview", "480x360 covers a 480 box")
        XCTAssertEqual(try path(withPreview, 481), "raw-full", "a preview one pixel short is not used (nor half size: 481 x 1.35 > 480)")
        XCTAssertEqual(try path(without, 64), "raw-half")
        XCTAssertEqual(try path(without, 350), "raw-half", "480 wide at half size: 350 x 1.35 fits")
        XCTAssertEqual(try path(without, 400), "raw-full", "400 x 1.35 does not")
        XCTAssertEqual(try path(withPreview, 64, .full), "raw-full")
        XCTAssertEqual(try path(withPreview, 900, .half), "raw-half")
        XCTAssertEqual(try path(withPreview, 900, .preview), "raw-preview")
        let (forced, out) = try render(withPreview, [fit(900, 900)], raw: .preview)
        XCTAssertEqual(out.width, 480, "the preview's size, not enlarged")
        XCTAssertTrue(forced.warnings.contains { $0.contains("embedded preview gives 480x360 where the raw image gives 900x675") }, "\(forced.warnings)")
        assertThrowsImagingError(.unsupportedFeature, try path(without, 64, .preview))
        // Every path shows the same picture.
        for (file, raw) in [(withPreview, RawDecode.preview), (without, .half), (without, .full)] {
            let (_, shown) = try render(file, [fit(160, 160)], raw: raw)
            let (_, expected) = try render(big, [fit(160, 160)])
            XCTAssertGreaterThanOrEqual(ssim(shown, expected), 0.95, "\(raw)")
        }
    }

    /// Colours through LibRaw's matrices and the camera's white balance: the quadrants come back.
    func testColoursAndOrientationComeBack() throws {
        let stored = Fixtures.quadrants(width: 240, height: 160)
        for (orientation, size) in [(1, Size(width: 240, height: 160)), (3, Size(width: 240, height: 160)),
                                    (6, Size(width: 160, height: 240)), (8, Size(width: 160, height: 240))] {
            for pattern in ["RGGB", "BGGR", "GRBG", "GBRG"] {
                let dng = try Codec.encodeDNG(stored, pattern: pattern, bits: 14, orientation: orientation)
                let (r, shown) = try render(dng, [], raw: .full)
                XCTAssertEqual(Size(width: shown.width, height: shown.height), size, "orientation \(orientation)")
                XCTAssertEqual(r.recordedDecodePath, "raw-full")
                let expected = try Orientation(exif: orientation).apply(to: stored)
                for (x, y) in [(20, 20), (size.width - 20, 20), (20, size.height - 20), (size.width - 20, size.height - 20)] {
                    assertColor(shown.pixel(x: x, y: y), expected.pixel(x: x, y: y), tolerance: 24,
                                "\(pattern), orientation \(orientation) at \(x),\(y)")
                }
            }
        }
    }

    /// 16-bit linear samples go into the resampler as they are: a dark gradient keeps more
    /// levels than an 8-bit sRGB round trip of its rows could (both in linear light).
    func testLinearSamplesAreNotRoundedToEightBits() throws {
        let w = 512, h = 64
        var dng = try Codec.encodeDNG(PixelBuffer(width: w, height: h, layout: .rgb), bits: 16)
        // The sensor data (from byte 8, 16 bits a photosite): a fine dark ramp, a step of one
        // code every two columns over the black level (65535 / 16).
        let black = 65535 / 16
        for y in 0..<h {
            for x in 0..<w {
                let v = black + x / 2
                dng[8 + (y * w + x) * 2] = UInt8(v & 0xFF)
                dng[8 + (y * w + x) * 2 + 1] = UInt8(v >> 8)
            }
        }
        var o = RenderOptions()
        o.raw = .half
        let source = try dng.withUnsafeBytes { try SourceDecoder(bytes: $0, options: o) }
        try source.start(scaleEighths: 4, maxBatchRows: 16)
        XCTAssertTrue(source.linearRows)
        let width = source.decodedSize.width
        let rows = UnsafeMutablePointer<UInt16>.allocate(capacity: width * 3 * 16)
        defer { rows.deallocate() }
        let n = try source.readLinear(into: rows, stride: width * 3, maxRows: 16)
        XCTAssertGreaterThan(n, 0)
        // Green: the mean of a block's two green photosites, from neighbouring columns.
        let linearLevels = Set((0..<width).map { rows[$0 * 3 + 1] })
        let eightBitLevels = Set(linearLevels.map { SRGB.fromLinear[Int($0)] })
        XCTAssertGreaterThan(linearLevels.count, eightBitLevels.count, "the rows carry more than 8 bits of sRGB")
    }

    /// Half size straight from the mosaic gives LibRaw's own half size (within 1 %), for each
    /// CFA pattern and depth: its black levels, white balance and matrix are LibRaw's.
    func testStreamedHalfSizeIsLibRawsHalfSize() throws {
        var files: [(String, [UInt8])] = []
        for (pattern, bits) in [("RGGB", 12), ("BGGR", 16), ("GRBG", 10), ("GBRG", 14)] {
            files.append(("\(pattern) \(bits)", try Codec.encodeDNG(ConformanceTests.picture, pattern: pattern, bits: bits)))
        }
        if let dir = Fixtures.corpus("raw") {
            for name in ["synth_sony_rggb_16bit.dng", "synth_kodim01_gbrg_12bit_rot270.dng"] {
                files.append((name, try bytes(of: dir.appendingPathComponent(name))))
            }
        }
        for (name, file) in files {
            try file.withUnsafeBytes { raw in
                let libraw = try RawDecoder(bytes: raw, limits: Limits())
                let theirs = try libraw.decode(half: true, cpuSeconds: nil, release: false)
                let packed = UnsafeMutablePointer<UInt16>.allocate(capacity: theirs.width * 3 * theirs.height)
                defer { packed.deallocate() }
                for y in 0..<theirs.height { theirs.copyRow(y, to: packed + y * theirs.width * 3, gain: 1) }
                let d = try RawDecoder(bytes: raw, limits: Limits())
                let size = try XCTUnwrap(try d.beginHalf(cpuSeconds: nil, release: false), name)
                XCTAssertEqual(size, Size(width: theirs.width, height: theirs.height), name)
                let count = size.width * 3
                let rows = UnsafeMutablePointer<UInt16>.allocate(capacity: count * size.height)
                defer { rows.deallocate() }
                try d.halfRows(0, size.height, into: rows, stride: count)
                var sum = 0.0, worst = 0
                for k in 0..<count * size.height {
                    let diff = abs(Int(rows[k]) - Int(packed[k]))
                    sum += Double(diff)
                    worst = max(worst, diff)
                }
                let mean = sum / Double(count * size.height)
                XCTAssertLessThan(mean, 655, "\(name): mean difference \(mean) of 65535 (worst \(worst))")
                withExtendedLifetime(libraw) {}
            }
        }
    }

    /// What a file does not hold is not decoded: a cut, a sensor data map that points past the
    /// end or claims too few bytes, a header over the limits, a timeout; `strip` refuses raw.
    func testHostileRawFilesFailTyped() throws {
        let dng = try Codec.encodeDNG(ConformanceTests.picture)
        assertThrowsImagingError(.truncated, try render(Array(dng.prefix(dng.count / 2)), [fit(64, 64)]))
        assertThrowsImagingError(.truncated, try render(Array(dng.prefix(dng.count / 2)), [fit(64, 64)], raw: .full))
        assertThrowsImagingError(.limitExceeded, try render(ConformanceTests.tiffDeclaring(dng, side: 60000), [fit(64, 64)]))
        assertThrowsImagingError(.timedOut, try render(dng, [fit(64, 64)], configure: { $0.decodeSeconds = 1e-9 }))
        // Strip byte counts that say a few bytes: LibRaw would demosaic noise.
        var short = dng
        let walk = try XCTUnwrap(dng.withUnsafeBytes { RawContainer.TIFFWalk($0) })
        XCTAssertEqual(walk.rawImage?.width, 320)
        let ifd = ConformanceTests.u32(dng, 4)
        for e in 0..<ConformanceTests.u16(dng, ifd) where ConformanceTests.u16(dng, ifd + 2 + e * 12) == 279 {
            let at = ConformanceTests.u32(dng, ifd + 2 + e * 12 + 8)
            for k in 0..<ConformanceTests.u32(dng, ifd + 2 + e * 12 + 4) { ConformanceTests.put32(&short, at + 4 * k, 2) }
        }
        do {
            _ = try render(short, [fit(64, 64)])
            XCTFail("rendered sensor data the file does not hold")
        } catch let e as ImagingError {
            XCTAssertEqual(e.code, .truncated)
            XCTAssertTrue(e.reason.contains("not the"), e.reason)
        }
        do {
            _ = try LosslessStrip.strip(dng)
            XCTFail("stripped a raw file")
        } catch let e as ImagingError {
            XCTAssertEqual(e.code, .unsupportedFeature)
            XCTAssertTrue(e.reason.hasPrefix("raw files are not rewritten"), e.reason)
        }
        // A directory of 1023 SubIFD tags of 65535 pointers each (the fuzzer's find: the walk
        // queued 67 million IFDs and took them off the front one by one): bounded work, a TIFF
        // that is not raw, told apart at once.
        var many: [UInt8] = [0x49, 0x49, 42, 0, 8, 0, 0, 0, 0xFF, 0x03]
        for _ in 0..<1023 { many += [0x4A, 0x01, 4, 0, 0xFF, 0xFF, 0, 0, 0x10, 0, 0, 0] }
        many += [UInt8](repeating: 0, count: 4 + 65535 * 4)
        let sniffed = many.withUnsafeBytes { RawContainer.sniff($0) }
        XCTAssertFalse(sniffed, "a TIFF of empty directories is not a raw file")
        XCTAssertEqual(many.withUnsafeBytes { RawContainer.TIFFWalk($0)?.images.count }, 1)
        // The fuzzer's finds in LibRaw 0.20 itself: a Hasselblad model string that overflows a
        // buffer in its parser (glibc aborts the process), an IFD that makes it read through a
        // wild pointer. The header is read in a child first: each fails typed and the process
        // (a worker's other tasks) goes on.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for (name, signal) in [("crash-libraw020-hasselblad-model-strcat", "Aborted"), ("crash-libraw020-parse-tiff-ifd-segv", "Segmentation fault")] {
            let file = try bytes(of: root.appendingPathComponent("Fuzz/regressions/raw/" + name))
            XCTAssertEqual(file.withUnsafeBytes { ImageFormat.sniff($0) }, .raw, name)
            do {
                _ = try render(file, [fit(64, 64)])
                XCTFail("rendered a file LibRaw's parser dies on: \(name)")
            } catch let e as ImagingError {
                XCTAssertEqual(e.code, .corrupt, name)
                XCTAssertTrue(e.reason.contains("failed on this file's header (\(signal))") || e.reason.contains("failed on this file's header ("), e.reason)
            }
            XCTAssertThrowsError(try ImageInfo.inspect(file), name)
        }
        // A TIFF is not raw, a JPEG named .nef is a JPEG: content decides.
        XCTAssertEqual(try Codec.encodePNG(ConformanceTests.picture).withUnsafeBytes { ImageFormat.sniff($0) }, .png)
        let tiff = TestTIFF(pages: [TestTIFF.Page(width: 8, height: 8)]).bytes()
        XCTAssertEqual(tiff.withUnsafeBytes { ImageFormat.sniff($0) }, .tiff)
    }

    /// `inspect` says what the raw file holds and how it was taken.
    func testInspectOfARawFile() throws {
        let info = try ImageInfo.inspect(try Codec.encodeDNG(ConformanceTests.picture, orientation: 6))
        XCTAssertEqual(info.format, .raw)
        XCTAssertEqual(info.width, 320)
        XCTAssertEqual(info.displayWidth, 240)
        XCTAssertEqual(info.orientationFrom, "raw container")
        XCTAssertTrue(info.colorSpace.hasPrefix("CFA"), info.colorSpace)
        XCTAssertEqual(info.capture?.make, "Tessera")
        XCTAssertTrue(info.alternatives.contains { $0.hasPrefix("half size") }, "\(info.alternatives)")
    }

    /// Makes `examples/raw/` (run once, with TESSERA_MAKE_RAW_EXAMPLES=1): two DNGs of the
    /// bundled sample images — the Kodak photo turned (orientation 6) with a JPEG preview, and
    /// the Canon photo at 960 px without one.
    func testMakeTheRawExamples() throws {
        guard ProcessInfo.processInfo.environment["TESSERA_MAKE_RAW_EXAMPLES"] != nil else { throw XCTSkip("makes examples/raw") }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let images = root.appendingPathComponent("examples/images"), out = root.appendingPathComponent("examples/raw")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let kodak = try Renderer.decode(try bytes(of: images.appendingPathComponent("kodak_kodim01.png")))
        // Stored turned back, so that orientation 6 shows the photo upright.
        let stored = try Orientation(exif: 8).apply(to: kodak)
        let preview = try Codec.encodeJPEG(try Renderer.decode(try Renderer.render(try Codec.encodePNG(stored),
            recipes: [recipe([fit(384, 384)], format: .png)]).outputs[0].bytes), quality: 85)
        try Data(try Codec.encodeDNG(stored, pattern: "RGGB", bits: 12, orientation: 6, preview: preview))
            .write(to: out.appendingPathComponent("kodim01_rggb_preview.dng"))
        let canon = try Renderer.render(try bytes(of: images.appendingPathComponent("mei_Canon_EOS_1000D.jpg")),
                                        recipes: [recipe([fit(960, 960)], format: .png)]).outputs[0].bytes
        try Data(try Codec.encodeDNG(try Renderer.decode(canon), pattern: "GBRG", bits: 14))
            .write(to: out.appendingPathComponent("canon_1000d_gbrg.dng"))
    }
}
