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
}
