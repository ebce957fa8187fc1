import TesseraImaging
import XCTest
import TesseraModel

final class ResampleTests: XCTestCase {
    func testUniformColourStaysExact() throws {
        for layout in [PixelLayout.gray, .rgb, .rgba] {
            let color: [UInt8] = layout == .gray ? [77] : layout == .rgb ? [200, 100, 50] : [200, 100, 50, 255]
            let png = try Codec.encodePNG(Fixtures.solid(width: 301, height: 203, color))
            for op in [fit(64, 64), fill(40, 40), .resize(Resize(width: 500, height: 500, upscale: true))] {
                let (_, px) = try renderAndDecode(png, recipe([op], format: .png))
                for (x, y) in [(0, 0), (px.width - 1, px.height - 1), (px.width / 2, px.height / 2)] {
                    assertColor(px.pixel(x: x, y: y), color, tolerance: 1, "\(layout) \(op)")
                }
            }
        }
    }

    /// Averaging black and white in linear light gives sRGB ~188; in gamma space it
    /// would be 128 (the classic too-dark downscale).
    func testDownscaleAveragesInLinearLight() throws {
        let stripes = PixelBuffer(width: 200, height: 200, layout: .gray)
        for y in 0..<200 { for x in 0..<200 { stripes.setPixel(x: x, y: y, [x % 2 == 0 ? 0 : 255]) } }
        let (_, px) = try renderAndDecode(try Codec.encodePNG(stripes), recipe([fit(50, 50)], format: .png))
        let mean = px.mean(x: 5, y: 5, width: 40, height: 40)[0]
        XCTAssertEqual(mean, 188, accuracy: 3)
    }

    /// Transparent pixels must not bleed their colour: premultiplied alpha.
    func testTransparentColourDoesNotBleed() throws {
        let checker = PixelBuffer(width: 200, height: 200, layout: .rgba)
        for y in 0..<200 {
            for x in 0..<200 { checker.setPixel(x: x, y: y, (x + y) % 2 == 0 ? [255, 0, 0, 0] : [0, 255, 0, 255]) }
        }
        let (_, px) = try renderAndDecode(try Codec.encodePNG(checker), recipe([fit(50, 50)], format: .png))
        XCTAssertEqual(px.layout, .rgba)
        let m = px.mean(x: 5, y: 5, width: 40, height: 40)
        XCTAssertLessThan(m[0], 2, "red from transparent pixels leaked")
        XCTAssertGreaterThan(m[1], 250)
        XCTAssertEqual(m[3], 128, accuracy: 2)
    }

    func testNoResizeIsPixelExact() throws {
        let image = Fixtures.noise(width: 37, height: 23, layout: .rgba)
        let (_, px) = try renderAndDecode(try Codec.encodePNG(image), recipe([], format: .png))
        XCTAssertEqual(px.bytes, image.bytes)
    }

    func testDownscaleKeepsStructure() throws {
        // A white square on black: after 4x reduction it is still there, sharp-edged.
        let image = Fixtures.solid(width: 400, height: 400, [0, 0, 0])
        for y in 100..<300 { for x in 100..<300 { image.setPixel(x: x, y: y, [255, 255, 255]) } }
        let (_, px) = try renderAndDecode(try Codec.encodePNG(image), recipe([fit(100, 100)], format: .png))
        assertColor(px.pixel(x: 50, y: 50), [255, 255, 255], tolerance: 1)
        assertColor(px.pixel(x: 10, y: 10), [0, 0, 0], tolerance: 1)
        assertColor(px.pixel(x: 28, y: 50), [255, 255, 255], tolerance: 8)  // just inside the edge at 25
        assertColor(px.pixel(x: 21, y: 50), [0, 0, 0], tolerance: 8)
    }
}
