import TesseraImaging
import XCTest
import TesseraModel

/// Fast delivery mode: EXIF thumbnails for small outputs, reported per file.
final class FastModeTests: XCTestCase {
    func fastOptions() -> RenderOptions {
        var o = RenderOptions()
        o.fastMode = true
        return o
    }

    /// A 4:3 image whose EXIF thumbnail is a 160x120 version of itself (orientation 6).
    func photo(thumbnail: PixelBuffer) throws -> [UInt8] {
        let displayed = Fixtures.quadrants(width: 800, height: 1066)
        let stored = try Orientation(exif: 6).inverse.apply(to: displayed)  // 1066x800
        let thumb = try Codec.encodeJPEG(thumbnail, quality: 90)
        return try Codec.encodeJPEG(stored, quality: 90, exif: Exif.build(orientation: 6, thumbnail: thumb))
    }

    func testSmallOutputsComeFromTheExifThumbnail() throws {
        let thumbnail = try Orientation(exif: 6).inverse.apply(to: Fixtures.quadrants(width: 120, height: 160))
        let jpeg = try photo(thumbnail: thumbnail)
        let result = try Renderer.render(jpeg, recipes: [recipe([fit(64, 64)])], options: fastOptions())
        XCTAssertEqual(result.decodePath, .exifThumbnail)
        XCTAssertEqual(result.source.storedSize, Size(width: 1066, height: 800), "reports the image, not the thumbnail")
        let px = try Renderer.decode(result.outputs[0].bytes)
        XCTAssertEqual(Size(width: px.width, height: px.height), Size(width: 48, height: 64))
        // Upright, with the image's orientation applied to the thumbnail.
        assertColor(px.pixel(x: 10, y: 10), Quadrant.topLeft.color, tolerance: 30)
        assertColor(px.pixel(x: 38, y: 54), Quadrant.bottomRight.color, tolerance: 30)
        // The default mode never uses it.
        XCTAssertEqual(try Renderer.render(jpeg, recipes: [recipe([fit(64, 64)])]).decodePath, .jpeg)
    }

    func testThumbnailRejectedWhenTooSmallOrLetterboxed() throws {
        let thumbnail = try Orientation(exif: 6).inverse.apply(to: Fixtures.quadrants(width: 120, height: 160))
        let jpeg = try photo(thumbnail: thumbnail)
        // Too small for a 256 px output.
        XCTAssertEqual(try Renderer.render(jpeg, recipes: [recipe([fit(256, 256)])], options: fastOptions()).decodePath, .jpeg)
        // Letterboxed (16:9 thumbnail of a 4:3 image).
        let letterboxed = try photo(thumbnail: Fixtures.solid(width: 160, height: 90, [0, 0, 0]))
        XCTAssertEqual(try Renderer.render(letterboxed, recipes: [recipe([fit(64, 64)])], options: fastOptions()).decodePath,
                       .jpeg)
        // A damaged thumbnail falls back to the image.
        var broken = try Codec.encodeJPEG(Fixtures.noise(width: 160, height: 120), quality: 90)
        broken.removeLast(broken.count / 2)
        let withBroken = try Codec.encodeJPEG(Fixtures.noise(width: 1600, height: 1200), quality: 90,
                                              exif: Exif.build(orientation: 1, thumbnail: broken))
        let r = try Renderer.render(withBroken, recipes: [recipe([fit(64, 64)])], options: fastOptions())
        XCTAssertEqual(r.decodePath, .jpeg)
        XCTAssertEqual(r.outputs[0].size, Size(width: 64, height: 48))
    }

    func testFastProgressiveUsesDCOnly() throws {
        let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 640, height: 480), quality: 85, subsampling: .s420,
                                        progressive: true)
        let fast = try Renderer.render(jpeg, recipes: [recipe([fit(40, 40)], format: .png)], options: fastOptions())
        XCTAssertEqual(fast.decodePath, .progressiveDCOnly)
        let exact = try Renderer.render(jpeg, recipes: [recipe([fit(40, 40)], format: .png)])
        XCTAssertEqual(exact.decodePath, .progressiveDC)
        let a = try Renderer.decode(fast.outputs[0].bytes), b = try Renderer.decode(exact.outputs[0].bytes)
        XCTAssertLessThan(meanAbsoluteDifference(a, b), 6, "close to the exact path")
    }
}
