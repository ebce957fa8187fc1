import Foundation
import TesseraImaging
import TesseraModel
import TesseraShim
import XCTest

/// Tessera's Huffman decoder (jpeg_entropy.c) must give libjpeg-turbo's pixels exactly, at
/// every DCT scale, and fail or pad damaged data as libjpeg-turbo does.
final class JPEGEntropyTests: XCTestCase {
    override func tearDown() {
        ts_jpeg_own_entropy(1)
        super.tearDown()
    }

    /// PNG renders (lossless) of `jpeg` into boxes that select each DCT scale from 1/8 to 8/8.
    func renders(_ jpeg: [UInt8], own: Bool, strict: Bool = true, scales: [Int] = Array(1...8)) -> [Result<[UInt8], Error>] {
        ts_jpeg_own_entropy(own ? 1 : 0)
        defer { ts_jpeg_own_entropy(1) }
        var options = RenderOptions()
        options.strict = strict
        let size = (try? ImageInfo.inspect(jpeg)).map { ($0.width, $0.height) } ?? (64, 64)
        return scales.map { eighths in
            let w = max(1, size.0 * eighths / 8), h = max(1, size.1 * eighths / 8)
            return Result {
                try Renderer.render(jpeg, recipes: [recipe(eighths == 8 ? [] : [fit(w, h)], format: .png)],
                                    options: options).outputs[0].bytes
            }
        }
    }

    func assertSame(_ jpeg: [UInt8], strict: Bool = true, scales: [Int] = Array(1...8), _ what: String,
                    file: StaticString = #filePath, line: UInt = #line) {
        let own = renders(jpeg, own: true, strict: strict, scales: scales)
        let library = renders(jpeg, own: false, strict: strict, scales: scales)
        for (scale, (a, b)) in zip(own, library).enumerated() {
            switch (a, b) {
            case let (.success(x), .success(y)):
                XCTAssertTrue(x == y, "\(what) at \(scales[scale])/8: pixels differ", file: file, line: line)
            case let (.failure(x), .failure(y)):
                XCTAssertEqual((x as? ImagingError)?.code, (y as? ImagingError)?.code, "\(what) at \(scales[scale])/8", file: file, line: line)
            default:
                XCTFail("\(what) at \(scales[scale])/8: Tessera's decoder \(a), libjpeg's \(b)", file: file, line: line)
            }
        }
    }

    /// A photo-like image: smooth gradients, edges and a little noise.
    static func scene(width: Int, height: Int, layout: PixelLayout = .rgb, seed: UInt64 = 7) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: layout)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        for y in 0..<height {
            for x in 0..<width {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let n = Int(state >> 60) - 8
                let r = (x * 255 / max(1, width - 1) + n) & 255, g = ((x / 16 + y / 16) % 2 == 0 ? 200 : 40) + n
                let b = (y * 255 / max(1, height - 1) + n) & 255
                let px = [UInt8(r), UInt8(max(0, min(255, g))), UInt8(b)]
                image.setPixel(x: x, y: y, layout == .gray ? [px[1]] : px)
            }
        }
        return image
    }

    func testMatchesLibjpegAtEveryScale() throws {
        let before = ts_jpeg_own_entropy_scans()
        let cases: [(ChromaSubsampling, Int, Int, Int, Int)] = [
            (.s420, 320, 240, 0, 85), (.s420, 333, 217, 0, 100), (.s420, 301, 199, 5, 90), (.s422, 257, 129, 3, 75),
            (.s444, 97, 313, 1, 95), (.s444, 160, 120, 0, 30), (.s420, 9, 7, 0, 90), (.s420, 1, 1, 0, 90),
        ]
        for (sub, w, h, restart, quality) in cases {
            for image in [Self.scene(width: w, height: h), Fixtures.noise(width: w, height: h)] {
                let jpeg = try Codec.encodeJPEG(image, quality: quality, subsampling: sub, restartInterval: restart)
                assertSame(jpeg, "\(sub) \(w)×\(h) q\(quality) restart \(restart)")
            }
        }
        // Gray, and libjpeg's own (not optimised) tables.
        let gray = try Codec.encodeJPEG(Self.scene(width: 250, height: 170, layout: .gray), quality: 80)
        assertSame(gray, "gray")
        let standard = try Codec.encodeJPEG(Self.scene(width: 200, height: 150), quality: 92, optimize: false, restartInterval: 2)
        assertSame(standard, "standard tables")
        XCTAssertGreaterThan(ts_jpeg_own_entropy_scans() - before, 100, "Tessera's decoder ran")
    }

    func testCorpusJPEGsMatch() throws {
        let files = (Fixtures.corpusFiles("photos") + Fixtures.corpusFiles("edge")).filter { $0.pathExtension == "jpg" }
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        for f in files {
            let jpeg = try bytes(of: f)
            // Photos at 1/8 (a debug build takes minutes for all eight scales of 31 photos);
            // benchmarks compare them at every scale. Edge files at four.
            if f.path.contains("/photos/") {
                let box = try ImageInfo.inspect(jpeg).width / 8
                ts_jpeg_own_entropy(1)
                let own = try Renderer.render(jpeg, recipes: [recipe([fit(box, box)], format: .png)]).outputs[0].bytes
                ts_jpeg_own_entropy(0)
                let library = try Renderer.render(jpeg, recipes: [recipe([fit(box, box)], format: .png)]).outputs[0].bytes
                ts_jpeg_own_entropy(1)
                XCTAssertTrue(own == library, f.lastPathComponent)
            } else {
                assertSame(jpeg, scales: [1, 3, 4, 8], f.lastPathComponent)
            }
        }
    }

    /// Progressive files (libjpeg's scan script: DC and AC first scans at Al 1 and 2, then
    /// refinement scans, end-of-band runs across blocks): the same pixels at every scale.
    func testProgressiveMatchesLibjpegAtEveryScale() throws {
        let before = ts_jpeg_own_progressive_images()
        let cases: [(ChromaSubsampling, Int, Int, Int, Int)] = [
            (.s420, 320, 240, 0, 85), (.s420, 333, 217, 2, 100), (.s422, 257, 129, 1, 75),
            (.s444, 97, 313, 0, 95), (.s444, 160, 120, 5, 30), (.s420, 9, 7, 0, 90), (.s420, 1, 1, 1, 90),
        ]
        for (sub, w, h, restart, quality) in cases {
            for image in [Self.scene(width: w, height: h), Fixtures.noise(width: w, height: h)] {
                let jpeg = try Codec.encodeJPEG(image, quality: quality, subsampling: sub, progressive: true,
                                                restartInterval: restart)
                assertSame(jpeg, "progressive \(sub) \(w)×\(h) q\(quality) restart \(restart)")
            }
        }
        let gray = try Codec.encodeJPEG(Self.scene(width: 250, height: 170, layout: .gray), quality: 80, progressive: true)
        assertSame(gray, "progressive gray")
        // Every case decoded with Tessera's decoder at seven libjpeg scales (1/8 is ProgressiveDC's).
        XCTAssertGreaterThanOrEqual(ts_jpeg_own_progressive_images() - before, 15 * 7)
    }

    /// The corpus's progressive photos at 3/8 (what a 1280×720 box asks of a 12-24 MP photo).
    func testCorpusProgressivePhotosMatch() throws {
        let files = Fixtures.corpusFiles("photos").filter { $0.pathExtension == "jpg" }
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        var progressive = 0
        for f in files {
            let jpeg = try bytes(of: f)
            guard try ImageInfo.inspect(jpeg).progressive == true else { continue }
            progressive += 1
            ts_jpeg_own_entropy(1)
            let own = try Codec.decodeJPEG(jpeg, scaleEighths: 3)
            ts_jpeg_own_entropy(0)
            let library = try Codec.decodeJPEG(jpeg, scaleEighths: 3)
            ts_jpeg_own_entropy(1)
            XCTAssertTrue(own.bytes == library.bytes, f.lastPathComponent)
        }
        XCTAssertGreaterThan(progressive, 0)
    }

    /// A progressive file cut in any scan, or with bytes overwritten: libjpeg's outcome.
    func testDamagedProgressiveMatchesLibjpeg() throws {
        let jpeg = try Codec.encodeJPEG(Self.scene(width: 200, height: 136), quality: 88, progressive: true, restartInterval: 3)
        let scans = jpeg.indices.dropLast().filter { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }
        XCTAssertGreaterThan(scans.count, 5)
        for cut in stride(from: scans[0] + 12, to: jpeg.count - 1, by: jpeg.count / 19) {
            let part = Array(jpeg.prefix(cut))
            assertSame(part, strict: true, scales: [2, 3, 8], "cut at \(cut) of \(jpeg.count), strict")
            assertSame(part, strict: false, scales: [2, 3, 8], "cut at \(cut) of \(jpeg.count), lenient")
        }
        var state: UInt64 = 999
        for trial in 0..<24 {
            var damaged = jpeg
            for _ in 0..<(1 + trial % 3) {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let at = scans[0] + 20 + Int(state >> 33) % (jpeg.count - scans[0] - 24)
                damaged[at] = [0xFF, 0x00, UInt8(truncatingIfNeeded: state >> 13), 0xD3][trial % 4]
            }
            assertSame(damaged, strict: true, scales: [3, 8], "trial \(trial), strict")
            assertSame(damaged, strict: false, scales: [3, 8], "trial \(trial), lenient")
        }
    }

    /// Truncated anywhere: strict, both fail the same way; lenient, both give the same grey-padded pixels.
    func testTruncationsMatchLibjpeg() throws {
        let jpeg = try Codec.encodeJPEG(Self.scene(width: 240, height: 160), quality: 90, restartInterval: 4)
        for cut in stride(from: jpeg.count / 5, to: jpeg.count - 1, by: jpeg.count / 23) {
            let part = Array(jpeg.prefix(cut))
            assertSame(part, strict: true, "cut at \(cut) of \(jpeg.count), strict")
            assertSame(part, strict: false, "cut at \(cut) of \(jpeg.count), lenient")
        }
        ts_jpeg_own_entropy(1)
        assertThrowsImagingError(.truncated, try Renderer.render(Array(jpeg.prefix(jpeg.count / 2)), recipes: [recipe()]))
    }

    /// Bytes overwritten inside the entropy-coded data (lost restart markers, markers in the
    /// middle, codes in no table): never a crash, and libjpeg's outcome — except that a code in
    /// no table is always an error in strict mode, where libjpeg-turbo lets most of them pass.
    func testDamagedDataMatchesLibjpeg() throws {
        let jpeg = try Codec.encodeJPEG(Self.scene(width: 200, height: 136), quality: 88, restartInterval: 3)
        let sos = try XCTUnwrap(jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
        var state: UInt64 = 12345
        var identical = 0, stricter = 0, total = 0
        for trial in 0..<40 {
            var damaged = jpeg
            for _ in 0..<(1 + trial % 4) {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let at = sos + 20 + Int(state >> 33) % (jpeg.count - sos - 24)
                damaged[at] = [0xFF, 0x00, UInt8(truncatingIfNeeded: state >> 13), 0xD3][trial % 4]
            }
            for strict in [true, false] {
                let own = renders(damaged, own: true, strict: strict), library = renders(damaged, own: false, strict: strict)
                for (a, b) in zip(own, library) {
                    total += 1
                    if (try? a.get()) == (try? b.get()) {
                        identical += 1
                    } else if strict, case let .failure(error) = a, "\(error)".contains("bad Huffman code") {
                        stricter += 1
                    } else {
                        XCTFail("trial \(trial), strict \(strict): Tessera's decoder \(a), libjpeg's \(b)")
                    }
                }
            }
        }
        XCTAssertEqual(identical + stricter, total)
        XCTAssertGreaterThan(identical, total * 3 / 4)
    }

    /// Fill bytes before a stuffed 0xFF (FF FF FF 00) in the entropy-coded data read as the one
    /// 0xFF they stand for: the same pixels as the file without them. (libjpeg-turbo's fast
    /// path leaves coefficients of an aborted attempt in such a block, and this test fails
    /// with its decoder; found by the differential fuzz target.)
    func testFillBytesBeforeAStuffedByteAreSkipped() throws {
        let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 160, height: 120), quality: 95)
        let sos = try XCTUnwrap(jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
        let stuffed = try XCTUnwrap((sos + 14..<(jpeg.count - 2)).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0x00 })
        let padded = Array(jpeg[..<stuffed]) + [0xFF, 0xFF, 0xFF] + Array(jpeg[(stuffed + 1)...])
        XCTAssertEqual(padded.count, jpeg.count + 2)
        ts_jpeg_own_entropy(1)
        let before = ts_jpeg_own_entropy_scans()
        for box in [20, 60, 160] {
            let r = recipe(box == 160 ? [] : [fit(box, box)], format: .png)
            XCTAssertEqual(try Renderer.render(padded, recipes: [r]).outputs[0].bytes,
                           try Renderer.render(jpeg, recipes: [r]).outputs[0].bytes, "box \(box)")
        }
        XCTAssertEqual(ts_jpeg_own_entropy_scans() - before, 6)
    }
}
