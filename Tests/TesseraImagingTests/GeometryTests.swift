import TesseraImaging
import XCTest
import TesseraModel

final class GeometryTests: XCTestCase {
    /// One 4000x3000 source, many recipes in one render (decoded once):
    /// exact sizes for fit, fill, width-only and no-upscale boxes.
    func testOutputSizesAreExact() throws {
        let source = try Codec.encodeJPEG(Fixtures.noise(width: 4000, height: 3000), quality: 80)
        let cases: [(RecipeOperation, Size)] = [
            (fit(1280, 720), Size(width: 960, height: 720)),
            (fit(256, 256), Size(width: 256, height: 192)),
            (fit(333, 333), Size(width: 333, height: 250)),       // 249.75 rounds to 250
            (fit(1024, nil), Size(width: 1024, height: 768)),
            (fit(nil, 100), Size(width: 133, height: 100)),
            (fill(64, 64), Size(width: 64, height: 64)),
            (fill(300, 100), Size(width: 300, height: 100)),
            (fit(5000, 5000), Size(width: 4000, height: 3000)),   // no upscaling unless asked
            (.resize(Resize(width: 100, height: 100, scale: 2)), Size(width: 200, height: 150)),
            (.resize(Resize(width: 100, height: 100, scale: 0.5)), Size(width: 100, height: 75)), // scale clamps to 1
        ]
        let result = try Renderer.render(source, recipes: cases.map { recipe([$0.0]) })
        XCTAssertEqual(result.outputs.count, cases.count)
        for (out, (op, size)) in zip(result.outputs, cases) {
            XCTAssertEqual(out.size, size, "\(op)")
            let info = try ImageInfo.inspect(out.bytes)
            XCTAssertEqual(Size(width: info.width, height: info.height), size, "\(op) encoded size")
        }
        // One output needs the full-size decode, so the shared decode is full size.
        XCTAssertEqual(result.scaleEighths, 8)
    }

    func testOddSizesNeverRoundToZero() throws {
        let tall = try Codec.encodePNG(Fixtures.noise(width: 3, height: 1000))
        XCTAssertEqual(try Renderer.render(tall, recipes: [recipe([fit(100, 100)])]).outputs[0].size,
                       Size(width: 1, height: 100))
        let one = try Codec.encodePNG(Fixtures.solid(width: 1, height: 1, [9, 9, 9]))
        XCTAssertEqual(try Renderer.render(one, recipes: [recipe([fill(64, 64)])]).outputs[0].size,
                       Size(width: 1, height: 1))
        let small = try Codec.encodePNG(Fixtures.noise(width: 50, height: 40))
        XCTAssertEqual(try Renderer.render(small, recipes: [recipe([.resize(Resize(width: 100, height: 100, upscale: true))])])
                        .outputs[0].size, Size(width: 100, height: 80))
        // Fill without upscaling crops to the box's aspect ratio instead of enlarging.
        XCTAssertEqual(try Renderer.render(small, recipes: [recipe([fill(64, 64)])]).outputs[0].size,
                       Size(width: 40, height: 40))
    }

    /// A thumbnail never costs a full-size decode: the smallest DCT scale that still
    /// leaves the resampler room (1.35x) is used, and several outputs share the largest.
    func testThumbnailsUseScaledDecoding() throws {
        let source = try Codec.encodeJPEG(Fixtures.noise(width: 4000, height: 3000), quality: 80)
        let favicon = try Renderer.render(source, recipes: [recipe([fit(64, 64)])])
        XCTAssertEqual(favicon.scaleEighths, 1)
        XCTAssertEqual(favicon.decodedSize, Size(width: 500, height: 375))
        // 960x720 from 4000x3000: 3/8 (1500 wide) leaves 1.56x; 2/8 would leave 1.04x.
        let thumb = try Renderer.render(source, recipes: [recipe([fit(1280, 720)])])
        XCTAssertEqual(thumb.scaleEighths, 3)
        let both = try Renderer.render(source, recipes: [recipe([fit(64, 64)]), recipe([fit(1280, 720)])])
        XCTAssertEqual(both.scaleEighths, 3, "decoded once, at the scale the largest output needs")
        XCTAssertEqual(both.outputs.map(\.size), [Size(width: 64, height: 48), Size(width: 960, height: 720)])
        // The scale is planned after orientation: a portrait-tagged source swaps the box.
        let tagged = try Codec.encodeJPEG(Fixtures.noise(width: 4000, height: 3000), quality: 80,
                                          exif: Exif.build(orientation: 6))
        let portrait = try Renderer.render(tagged, recipes: [recipe([fit(1280, 720)])])
        XCTAssertEqual(portrait.outputs[0].size, Size(width: 540, height: 720))
        XCTAssertLessThan(portrait.scaleEighths, 8)
        // A 1024-wide output of a 3024-wide source: 3/8 leaves only 1.11x, 4/8 leaves 1.48x.
        let phone = try Codec.encodeJPEG(Fixtures.noise(width: 3024, height: 4032), quality: 80)
        XCTAssertEqual(try Renderer.render(phone, recipes: [recipe([fit(1024, nil)])]).scaleEighths, 4)
        // 1024 of 2000: 4/8 does not cover it; 5/8 leaves 1.22x; 6/8 (1.46x) is used, not a full decode.
        let wide = try Codec.encodeJPEG(Fixtures.noise(width: 2000, height: 1500), quality: 80)
        XCTAssertEqual(try Renderer.render(wide, recipes: [recipe([fit(1024, nil)])]).scaleEighths, 6)
        // Where even 7/8 cannot leave 1.5x, the smallest covering scale is used.
        let small = try Codec.encodeJPEG(Fixtures.noise(width: 1100, height: 800), quality: 80)
        XCTAssertEqual(try Renderer.render(small, recipes: [recipe([fit(1000, nil)])]).scaleEighths, 8)
        XCTAssertEqual(try Renderer.render(small, recipes: [recipe([fit(540, nil)])]).scaleEighths, 6)
    }

    func testFillCropsAroundTheCentre() throws {
        // Left third red, middle third green, right third blue; fill a square: only green survives.
        let image = PixelBuffer(width: 300, height: 100, layout: .rgb)
        for y in 0..<100 {
            for x in 0..<300 { image.setPixel(x: x, y: y, x < 100 ? [255, 0, 0] : x < 200 ? [0, 255, 0] : [0, 0, 255]) }
        }
        let (out, px) = try renderAndDecode(try Codec.encodePNG(image), recipe([fill(50, 50)], format: .png))
        XCTAssertEqual(out.size, Size(width: 50, height: 50))
        assertColor(px.pixel(x: 25, y: 25), [0, 255, 0], tolerance: 1)
        // Edges: the filter may reach a little past the crop, but the crop is green.
        for x in [0, 49] {
            let p = px.pixel(x: x, y: 25)
            XCTAssertGreaterThan(p[1], 200, "x=\(x) \(p)")
            XCTAssertLessThan(max(p[0], p[2]), 90, "x=\(x) \(p)")
        }
    }
}
