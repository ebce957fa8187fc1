import TesseraImaging
import XCTest
import TesseraModel

final class BadInputTests: XCTestCase {
    let thumb = recipe([fit(64, 64)])

    func render(_ bytes: [UInt8], options: RenderOptions = RenderOptions()) throws -> RenderResult {
        try Renderer.render(bytes, recipes: [thumb], options: options)
    }

    func testEmptyAndNonImages() {
        assertThrowsImagingError(.empty, try render([]))
        assertThrowsImagingError(.unsupportedFormat, try render(Array("<html>not an image</html>".utf8)))
        assertThrowsImagingError(.unsupportedFormat, try render(Array("BM".utf8) + [UInt8](repeating: 0, count: 100)))
        // A GIF signature and nothing after it: a GIF cut short, not a foreign file.
        assertThrowsImagingError(.truncated, try render(Array("GIF89a".utf8) + [UInt8](repeating: 0, count: 100)))
        // Two bytes of JPEG start are a JPEG cut short, not a foreign file.
        assertThrowsImagingError(.truncated, try render([0xFF, 0xD8]))
    }

    /// Errors for files that are not images name what was found, never the bytes.
    func testUnsupportedFilesAreNamedNotEchoed() {
        let cases: [([UInt8], String)] = [
            ([0, 0, 0, 0x0C] + Array("jP  ".utf8) + [UInt8](repeating: 0, count: 20), "it looks like JPEG 2000"),
            (Array("BM".utf8) + [UInt8](repeating: 0, count: 100), "it looks like BMP"),
            (Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVEfmt ".utf8) + [UInt8](repeating: 0, count: 20), "unrecognised content"),
            // Canon CR3 is a camera raw now: 28 bytes of it are a raw file cut short.
            ([0, 0, 0, 0x18] + Array("ftypcrx ".utf8) + [UInt8](repeating: 0, count: 20), "truncated raw file"),
            ([0, 0, 0, 0x18] + Array("ftypjpm ".utf8) + [UInt8](repeating: 0, count: 20), "it looks like ISO media (jpm)"),
            (Array("%PDF-1.7\n".utf8) + [0x80, 0x81], "it looks like PDF"),
            (Array("root:$6$secret:19000:0:99999:7:::\n".utf8), "it looks like text"),
            ([0x00, 0x01, 0x02, 0x03, 0xFE, 0x99, 0x42, 0x13], "unrecognised content"),
        ]
        for (bytes, expected) in cases {
            XCTAssertThrowsError(try render(bytes)) { error in
                let text = "\(error)"
                XCTAssertTrue(text.contains(expected), text)
                XCTAssertFalse(text.contains("secret") || text.contains("72 6F") || text.contains("00 01 02"), text)
            }
        }
    }

    func testTruncatedFilesFailInsteadOfRenderingGrey() throws {
        let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 300, height: 200), quality: 90)
        for cut in [3, 20, 200, jpeg.count / 2, jpeg.count - 10] {
            assertThrowsImagingError(.truncated, try render(Array(jpeg.prefix(cut))), "cut at \(cut) of \(jpeg.count)")
        }
        let progressive = try Codec.encodeJPEG(Fixtures.noise(width: 300, height: 200), quality: 90, progressive: true)
        assertThrowsImagingError(.truncated, try render(Array(progressive.prefix(progressive.count * 2 / 3))))
        let png = try Codec.encodePNG(Fixtures.noise(width: 300, height: 200))
        for cut in [8, 30, png.count / 2, png.count - 5] {
            assertThrowsImagingError(.truncated, try render(Array(png.prefix(cut))))
        }
        // Lenient mode renders what is there.
        var lenient = RenderOptions()
        lenient.strict = false
        XCTAssertEqual(try render(Array(jpeg.prefix(jpeg.count / 2)), options: lenient).outputs.count, 1)
    }

    func testCorruptDataIsATypedError() throws {
        var jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 300, height: 200), quality: 90)
        let scan = try Codec.jpegSegments(jpeg).firstIndex { $0.marker == 0xDA }!
        XCTAssertGreaterThan(scan, 0)
        // Overwrite the middle of the entropy-coded data with markers and garbage.
        let mid = jpeg.count / 2
        for i in 0..<64 { jpeg[mid + i] = i % 2 == 0 ? 0xFF : 0xD3 }
        assertThrowsImagingError(.corrupt, try render(jpeg))
        var png = try Codec.encodePNG(Fixtures.noise(width: 300, height: 200))
        png[png.count / 2] ^= 0xFF  // IDAT CRC no longer matches
        assertThrowsImagingError(.corrupt, try render(png))
    }

    func testHugeDeclaredSizesAreRefusedBeforeAllocating() throws {
        // A tiny JPEG whose frame header claims 60000x60000.
        var jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 8, height: 8), quality: 90)
        let sof = jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xC0 }!
        jpeg[sof + 5] = 0xEA; jpeg[sof + 6] = 0x60; jpeg[sof + 7] = 0xEA; jpeg[sof + 8] = 0x60
        assertThrowsImagingError(.limitExceeded, try render(jpeg))
        // A PNG claiming 50000x50000.
        var png = try Codec.encodePNG(Fixtures.noise(width: 8, height: 8))
        png.replaceSubrange(16..<24, with: [0, 0, 0xC3, 0x50, 0, 0, 0xC3, 0x50])
        let ihdr = Array(png[12..<29])
        png.replaceSubrange(29..<33, with: Array(pngChunk("IHDR", Array(ihdr[4...])).suffix(4)))
        assertThrowsImagingError(.limitExceeded, try render(png))
        // The pixel limit is configurable.
        var small = RenderOptions()
        small.limits.maxPixels = 1000
        assertThrowsImagingError(.limitExceeded, try render(try Codec.encodePNG(Fixtures.noise(width: 50, height: 50)),
                                                            options: small))
        var tiny = RenderOptions()
        tiny.limits.maxInputBytes = 100
        assertThrowsImagingError(.limitExceeded, try render(try Codec.encodePNG(Fixtures.noise(width: 50, height: 50)),
                                                            options: tiny))
    }

    func testUnsupportedJPEGProcessesAreClear() throws {
        guard let dir = Fixtures.corpus("edge") else { throw XCTSkip("corpus not present") }
        for name in ["12bit_monkey12.jpg", "lossless_sof3_testimgl.jpg"] {
            assertThrowsImagingError(.unsupportedFeature, try render(try bytes(of: dir.appendingPathComponent(name))))
        }
    }

    func testInvalidRecipesAreRefused() throws {
        let png = try Codec.encodePNG(Fixtures.noise(width: 8, height: 8))
        assertThrowsImagingError(.invalidRecipe, try Renderer.render(png, recipes: [recipe([fit(0, 10)])]))
        assertThrowsImagingError(.invalidRecipe, try Renderer.render(png, recipes: [recipe([fit(10, 10), fit(5, 5)])]))
        assertThrowsImagingError(.invalidRecipe, try Renderer.render(png, recipes: [recipe([.rotate(degrees: 45)])]))
        assertThrowsImagingError(.invalidRecipe, try Renderer.render(png, recipes: [recipe([]) { $0.pngCompression = 12 }]))
    }

    func testErrorsNameTheFile() {
        let e = ImagingError(.truncated, "truncated JPEG").naming("photos/a.jpg")
        XCTAssertEqual(e.description, "photos/a.jpg: truncated JPEG [truncated]")
    }
}
