import TesseraImaging
import XCTest
import TesseraModel

/// Hostile inputs found in review: each once trapped or misbehaved.
final class EdgeInputTests: XCTestCase {
    /// A little-endian TIFF/EXIF payload with one IFD0 ASCII entry (raw bytes, not libexif).
    func exifWithCopyright(_ value: [UInt8]) -> [UInt8] {
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)] }
        let tiff: [UInt8] = Array("II".utf8) + le16(42) + le32(8) + le16(1)
            + le16(0x8298) + le16(2) + le32(value.count) + le32(26) + le32(0) + value
        return Array("Exif".utf8) + [0, 0] + tiff
    }

    func testHugeNonUTF8CopyrightDoesNotBreakStripOrRender() throws {
        let payload = exifWithCopyright([UInt8](repeating: 0xFF, count: 30_000))
        let jpeg = Codec.insertSegment(marker: 0xE1, payload: payload,
                                       into: try Codec.encodeJPEG(Fixtures.noise(width: 16, height: 16), quality: 80))
        XCTAssertEqual(try ImageInfo.inspect(jpeg).copyright?.count, 30_000, "read as Latin-1")
        let stripped = try LosslessStrip.strip(jpeg, options: StripOptions(keepCopyright: true))
        let kept = try XCTUnwrap(try ImageInfo.inspect(stripped.bytes).copyright)
        XCTAssertLessThanOrEqual(kept.utf8.count, Exif.maxCopyrightBytes)
        let out = try Renderer.render(jpeg, recipes: [recipe([fit(8, 8)]) { $0.keep = [.copyright] }]).outputs[0]
        XCTAssertNotNil(try ImageInfo.inspect(out.bytes).copyright)
    }

    func testShortICCSegmentAndMissingComponentSpecsDoNotTrap() throws {
        let base = try Codec.encodeJPEG(Fixtures.noise(width: 16, height: 16), quality: 80)
        let shortICC = Codec.insertSegment(marker: 0xE2, payload: Array("ICC_PROFILE\0".utf8), into: base)
        XCTAssertNil(try ImageInfo.inspect(shortICC).iccProfile)
        // SOF0 declaring 3 components without describing them.
        let bogus: [UInt8] = [0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x08, 0x08, 0x00, 0x10, 0x00, 0x10, 0x03, 0xFF, 0xD9]
        XCTAssertEqual(try ImageInfo.inspect(bogus).subsampling, "3 components, 0 described")
        assertThrowsImagingError(.corrupt, try Renderer.render(bogus, recipes: [recipe([fit(8, 8)])]))
    }

    func testHugeOutputsAreRefusedBeforeAllocating() throws {
        let one = try Codec.encodePNG(Fixtures.solid(width: 1, height: 1, [1, 2, 3]))
        assertThrowsImagingError(.limitExceeded, try Renderer.render(one, recipes: [
            recipe([.resize(Resize(width: 65_500, height: 65_500, upscale: true))])]))
        assertThrowsImagingError(.invalidRecipe, try Renderer.render(one, recipes: [
            recipe([.resize(Resize(width: 10_000, height: 10_000, upscale: true, scale: 8))])]))
    }

    func testWidePNGIsALimitNotCorruption() throws {
        var png = try Codec.encodePNG(Fixtures.noise(width: 8, height: 1))
        png.replaceSubrange(16..<20, with: [0, 1, 0x11, 0x70])  // width 70000
        let ihdr = Array(png[12..<29])
        png.replaceSubrange(29..<33, with: Array(pngChunk("IHDR", Array(ihdr[4...])).suffix(4)))
        assertThrowsImagingError(.limitExceeded, try Renderer.render(png, recipes: [recipe([fit(8, 8)])]))
    }

    /// Scaled decodes map exactly m/8 of the source: a fill crop of a 1/8 decode is centred.
    func testScaledDecodeGeometryIsExact() throws {
        // 4001 wide: the 1/8 decode is 501 wide (last block partial), the geometry still 1/8.
        let image = PixelBuffer(width: 4001, height: 1000, layout: .rgb)
        for y in 0..<1000 { for x in 0..<4001 { image.setPixel(x: x, y: y, x < 2000 ? [0, 0, 0] : [255, 255, 255]) } }
        let src = try Codec.encodeJPEG(image, quality: 95, subsampling: .s444)
        let result = try Renderer.render(src, recipes: [recipe([fill(64, 64)], format: .png)])
        XCTAssertEqual(result.scaleEighths, 1)
        let px = try Renderer.decode(result.outputs[0].bytes)
        // The black/white edge at x=2000 is the centre of the 1000x1000 crop: output x=32.
        XCTAssertLessThan(px.pixel(x: 29, y: 32)[0], 40)
        XCTAssertGreaterThan(px.pixel(x: 34, y: 32)[0], 215)
    }
}
