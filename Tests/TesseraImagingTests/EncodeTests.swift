import TesseraImaging
import XCTest
import TesseraModel

final class EncodeTests: XCTestCase {
    func testByteBudgetFindsTheHighestQualityThatFits() throws {
        let source = try Codec.encodePNG(Fixtures.noise(width: 800, height: 600))
        let unlimited = try Renderer.render(source, recipes: [recipe([], quality: 0.95)]).outputs[0]
        XCTAssertEqual(unlimited.quality, 95)
        let budget = unlimited.bytes.count / 3
        let out = try Renderer.render(source, recipes: [recipe([], quality: 0.95) { $0.maxBytes = budget }]).outputs[0]
        XCTAssertLessThanOrEqual(out.bytes.count, budget)
        let q = try XCTUnwrap(out.quality)
        XCTAssertLessThan(q, 95)
        // The highest: one step up no longer fits.
        let above = try Renderer.render(source, recipes: [recipe([], quality: Double(q + 1) / 100)]).outputs[0]
        XCTAssertGreaterThan(above.bytes.count, budget)
        // Impossible budgets fail clearly.
        assertThrowsImagingError(.budgetExceeded,
                                 try Renderer.render(source, recipes: [recipe([]) { $0.maxBytes = 500 }]))
    }

    func testWidgetPreset() throws {
        let r = try PresetCatalog.builtIn.recipe(named: "widget")
        // A large noisy JPEG: at most 1024 wide, under 1 MB, JPEG, no metadata.
        let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 3000, height: 2000), quality: 95,
                                        exif: Exif.build(orientation: 1, gps: (1, 1)))
        let out = try Renderer.render(jpeg, recipes: [r]).outputs[0]
        XCTAssertEqual(out.format, .jpeg)
        XCTAssertEqual(out.size, Size(width: 1024, height: 683))
        XCTAssertLessThan(out.bytes.count, 1_000_000)
        XCTAssertFalse(try ImageInfo.inspect(out.bytes).hasExif)
        // A transparent PNG: PNG out, flattened onto white, no alpha.
        let rgba = Fixtures.solid(width: 2000, height: 100, [10, 20, 30, 0])
        let png = try Renderer.render(try Codec.encodePNG(rgba), recipes: [r]).outputs[0]
        XCTAssertEqual(png.format, .png)
        XCTAssertEqual(png.size, Size(width: 1024, height: 51))
        let px = try Renderer.decode(png.bytes)
        XCTAssertEqual(px.layout, .rgb)
        XCTAssertEqual(px.pixel(x: 500, y: 25), [255, 255, 255])
        // A PNG too big for the budget falls back to JPEG.
        let noisyPNG = try Codec.encodePNG(Fixtures.noise(width: 1024, height: 1024, layout: .rgba))
        let fallback = try Renderer.render(noisyPNG, recipes: [r]).outputs[0]
        XCTAssertEqual(fallback.format, .jpeg)
        XCTAssertLessThan(fallback.bytes.count, 1_000_000)
    }

    func testJPEGOptions() throws {
        let source = try Codec.encodePNG(Fixtures.noise(width: 64, height: 64))
        func info(_ configure: (inout OutputSettings) -> Void) throws -> ImageInfo {
            try ImageInfo.inspect(try Renderer.render(source, recipes: [recipe([], configure: configure)]).outputs[0].bytes)
        }
        XCTAssertTrue(try info { $0.progressive = true }.progressive)
        XCTAssertFalse(try info { $0.progressive = false }.progressive)
        XCTAssertEqual(try info { $0.subsampling = .s444 }.subsampling, "4:4:4")
        XCTAssertEqual(try info { $0.subsampling = .s420 }.subsampling, "4:2:0")
        XCTAssertEqual(try info { $0.quality = 0.95 }.subsampling, "4:4:4", "auto: no chroma subsampling from 0.9")
        XCTAssertEqual(try info { $0.quality = 0.8 }.subsampling, "4:2:0")
    }

    /// Quality is 0...1: a value outside is refused (with a hint for a percentage), not clamped.
    func testQualityOutsideZeroToOneIsRefused() throws {
        let source = try Codec.encodePNG(Fixtures.noise(width: 32, height: 32))
        XCTAssertEqual(try Renderer.render(source, recipes: [recipe([], quality: 0.8)]).outputs[0].quality, 80)
        XCTAssertEqual(try Renderer.render(source, recipes: [recipe([], quality: 0)]).outputs[0].quality, 1)
        XCTAssertThrowsError(try Renderer.render(source, recipes: [recipe([], quality: 85)])) {
            XCTAssertTrue("\($0)".contains("output.quality: expected 0...1 (a fraction, not a percentage: 85.0 means 0.85), got 85.0"), "\($0)")
        }
        XCTAssertThrowsError(try Renderer.render(source, recipes: [recipe([], quality: -3)])) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .invalidRecipe)
        }
    }

    func testAlphaIsFlattenedForJPEG() throws {
        let image = Fixtures.solid(width: 20, height: 20, [0, 0, 255, 255])
        for y in 0..<20 { for x in 0..<10 { image.setPixel(x: x, y: y, [0, 255, 0, 0]) } }
        let r = recipe([]) { $0.background = RGBColor(hex: "#ff0000")! }
        let (out, px) = try renderAndDecode(try Codec.encodePNG(image), r)
        XCTAssertEqual(out.format, .jpeg)
        assertColor(px.pixel(x: 3, y: 10), [255, 0, 0], tolerance: 6)
        assertColor(px.pixel(x: 16, y: 10), [0, 0, 255], tolerance: 6)
        // PNG output keeps alpha unless the recipe flattens.
        let kept = try renderAndDecode(try Codec.encodePNG(image), recipe([], format: .png)).pixels
        XCTAssertEqual(kept.layout, .rgba)
        let flat = try renderAndDecode(try Codec.encodePNG(image),
                                       recipe([.flatten(background: .white)], format: .png)).pixels
        XCTAssertEqual(flat.layout, .rgb)
        XCTAssertEqual(flat.pixel(x: 3, y: 10), [255, 255, 255])
    }

    func testGrayStaysGrayAndOriginalFormatIsKept() throws {
        let gray = try Codec.encodeJPEG(Fixtures.solid(width: 50, height: 40, [100]), quality: 90)
        let out = try Renderer.render(gray, recipes: [recipe([fit(25, 25)], format: .original)]).outputs[0]
        XCTAssertEqual(out.format, .jpeg)
        XCTAssertEqual(try ImageInfo.inspect(out.bytes).components, 1)
        let png = try Codec.encodePNG(Fixtures.noise(width: 10, height: 10))
        XCTAssertEqual(try Renderer.render(png, recipes: [PresetCatalog.builtIn.recipe(named: "default")]).outputs[0].format, .png)
    }

    func testPNGRoundTripIsLossless() throws {
        for layout in [PixelLayout.gray, .rgb, .rgba] {
            let image = Fixtures.noise(width: 33, height: 17, layout: layout)
            XCTAssertEqual(try Renderer.decode(try Codec.encodePNG(image, compressionLevel: 9)).bytes, image.bytes, "\(layout)")
        }
    }
}
