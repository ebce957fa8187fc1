import CTurboJPEG
import TesseraImaging
import XCTest
import TesseraModel

/// The DC-scan path for progressive JPEGs at 1/8 must produce exactly libjpeg's pixels.
final class ProgressiveDCTests: XCTestCase {
    func render(_ jpeg: [UInt8], dc: Bool, box: Int = 20) throws -> RenderResult {
        var o = RenderOptions()
        o.progressiveDC = dc
        return try Renderer.render(jpeg, recipes: [recipe([fit(box, box)], format: .png)], options: o)
    }

    func testMatchesLibjpegExactly() throws {
        let cases: [(ChromaSubsampling, Int, Int, Int)] = [
            (.s420, 320, 240, 0), (.s420, 333, 217, 0), (.s420, 301, 199, 5), (.s422, 320, 240, 0),
            (.s422, 257, 129, 3), (.s444, 320, 240, 0), (.s444, 97, 313, 7),
        ]
        for (sub, w, h, restart) in cases {
            let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: w, height: h), quality: 85, subsampling: sub,
                                            progressive: true, restartInterval: restart)
            let fast = try render(jpeg, dc: true), full = try render(jpeg, dc: false)
            XCTAssertEqual(fast.scaleEighths, 1)
            XCTAssertEqual(fast.decodePath, .progressiveDC, "the DC path ran")
            XCTAssertEqual(full.decodePath, .jpeg)
            XCTAssertEqual(fast.outputs[0].bytes, full.outputs[0].bytes, "\(sub) \(w)x\(h) restart \(restart)")
        }
        // Gray.
        let gray = try Codec.encodeJPEG(Fixtures.noise(width: 250, height: 170, layout: .gray), quality: 80, progressive: true)
        XCTAssertEqual(try render(gray, dc: true).outputs[0].bytes, try render(gray, dc: false).outputs[0].bytes)
    }

    func testCorpusProgressivePhotosMatch() throws {
        let files = Fixtures.corpusFiles("photos").filter { $0.lastPathComponent.hasPrefix("immich_") }
            + Fixtures.corpusFiles("edge").filter { $0.lastPathComponent.contains("progressive") }
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        for f in files {
            let jpeg = try bytes(of: f)
            let box = try ImageInfo.inspect(jpeg).width / 16
            XCTAssertEqual(try render(jpeg, dc: true, box: box).decodePath, .progressiveDC, f.lastPathComponent)
            XCTAssertEqual(try render(jpeg, dc: true, box: box).outputs[0].bytes,
                           try render(jpeg, dc: false, box: box).outputs[0].bytes, f.lastPathComponent)
        }
    }

    /// Damage in a DC scan falls back to libjpeg, which reports it.
    func testDamageFallsBackToLibjpegErrors() throws {
        let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 320, height: 240), quality: 85, progressive: true)
        assertThrowsImagingError(.truncated, try render(Array(jpeg.prefix(jpeg.count / 3)), dc: true))
        var corrupt = jpeg
        let firstScan = try XCTUnwrap(Codec.jpegSegments(jpeg).firstIndex { $0.marker == 0xDA })
        _ = firstScan
        let sos = jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }!
        for i in (sos + 20)..<(sos + 60) { corrupt[i] = 0xFF }
        XCTAssertThrowsError(try render(corrupt, dc: true))
    }

    /// The same coefficients stored as a baseline file, by TurboJPEG's lossless transform
    /// (libjpeg's own memory manager reads them).
    func baseline(_ jpeg: [UInt8]) throws -> [UInt8] {
        let handle = try XCTUnwrap(tjInitTransform())
        defer { tjDestroy(handle) }
        var transform = tjtransform()
        transform.op = Int32(TJXOP_NONE.rawValue)
        var dst: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let rc = jpeg.withUnsafeBufferPointer { tjTransform(handle, $0.baseAddress, UInt($0.count), 1, &dst, &size, &transform, 0) }
        defer { if let dst { tjFree(dst) } }
        XCTAssertEqual(rc, 0, String(cString: tjGetErrorStr2(handle)))
        return Array(UnsafeBufferPointer(start: try XCTUnwrap(dst), count: Int(size)))
    }

    /// Progressive (multi-scan) JPEGs are decoded through whole-image coefficient arrays the
    /// shim maps itself: the pixels, at every DCT scale, are exactly those of the same
    /// coefficients in one baseline scan (no such arrays); the decoder's memory limit applies.
    func testProgressiveCoefficientArraysGiveTheBaselinePixels() throws {
        let cases: [(PixelLayout, ChromaSubsampling, Int, Int)] = [
            (.rgb, .s420, 643, 481), (.rgb, .s422, 257, 129), (.rgb, .s444, 300, 200), (.gray, .auto, 250, 170),
        ]
        for (layout, sub, w, h) in cases {
            let progressive = try Codec.encodeJPEG(Fixtures.noise(width: w, height: h, layout: layout), quality: 85,
                                                   subsampling: sub, progressive: true)
            let single = try baseline(progressive)
            XCTAssertTrue(try Codec.jpegSegments(progressive).contains { $0.marker == 0xC2 })
            XCTAssertTrue(try Codec.jpegSegments(single).allSatisfy { $0.marker != 0xC2 }, "one sequential scan")
            for scale in [8, 4, 3, 1] {
                XCTAssertEqual(try Codec.decodeJPEG(progressive, scaleEighths: scale).bytes,
                               try Codec.decodeJPEG(single, scaleEighths: scale).bytes, "\(sub) \(w)x\(h) at \(scale)/8")
            }
        }
        // 2000 x 1500 at 4:2:0: 9 MB of coefficients, over a 4 MB limit; the baseline file needs none.
        let big = try Codec.encodeJPEG(Fixtures.noise(width: 2000, height: 1500), quality: 70, subsampling: .s420, progressive: true)
        var o = RenderOptions()
        o.limits.maxDecoderMemory = 4 << 20
        let box = [recipe([fit(500, 500)], format: .png)]
        assertThrowsImagingError(.limitExceeded, try Renderer.render(big, recipes: box, options: o))
        XCTAssertNoThrow(try Renderer.render(try baseline(big), recipes: box, options: o))
    }

    /// The memory a render is planned to need counts a progressive JPEG's coefficient arrays
    /// at its own sampling: 4:4:4 keeps twice the coefficients of 4:2:0 (2400 x 1600: 23 MB
    /// against 11.5 MB), so a budget between the two admits the 4:2:0 file and refuses the
    /// 4:4:4 one before decoding; one baseline scan needs no such arrays at all.
    func testPlannedMemoryCountsTheCoefficientArraysAtTheirSampling() throws {
        let image = Fixtures.noise(width: 2400, height: 1600)
        let p444 = try Codec.encodeJPEG(image, quality: 70, subsampling: .s444, progressive: true)
        let p420 = try Codec.encodeJPEG(image, quality: 70, subsampling: .s420, progressive: true)
        var o = RenderOptions()
        o.limits.maxMemoryBytes = 26 << 20
        let box = [recipe([fit(500, 500)], format: .png)]
        assertThrowsImagingError(.outOfMemory, try Renderer.render(p444, recipes: box, options: o))
        XCTAssertNoThrow(try Renderer.render(p420, recipes: box, options: o))
        XCTAssertNoThrow(try Renderer.render(try baseline(p444), recipes: box, options: o))
    }
}
