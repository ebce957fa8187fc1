import Foundation
import TesseraImaging
import XCTest
import TesseraModel

/// Crops, trim, attention, overlay, blur-fill padding and the colour additions (tint,
/// grayscale, vignette) through the renderer: where the pixels end up, exactly.
final class CropTests: XCTestCase {
    func png(_ image: PixelBuffer) throws -> [UInt8] { try Codec.encodePNG(image) }
    func lossless(_ ops: [RecipeOperation]) -> Recipe { recipe(ops, format: .png) }

    /// A grey image with a red `size`-pixel square at (x, y).
    func marked(width: Int, height: Int, x: Int, y: Int, size: Int) -> PixelBuffer {
        let image = Fixtures.solid(width: width, height: height, [128, 128, 128])
        for yy in y..<(y + size) { for xx in x..<(x + size) { image.setPixel(x: xx, y: yy, [220, 30, 30]) } }
        return image
    }

    func testRectangleCropKeepsTheMarkWhereItWas() throws {
        let source = try png(marked(width: 200, height: 100, x: 120, y: 40, size: 10))
        let (out, px) = try renderAndDecode(source, lossless([.crop(Crop(x: 100, y: 30, width: 50, height: 40))]))
        XCTAssertEqual(out.size, Size(width: 50, height: 40))
        XCTAssertEqual(px.pixel(x: 20, y: 10), [220, 30, 30], "mark at (120,40) - (100,30)")
        XCTAssertEqual(px.pixel(x: 29, y: 19), [220, 30, 30])
        XCTAssertEqual(px.pixel(x: 30, y: 20), [128, 128, 128])
        XCTAssertEqual(px.pixel(x: 19, y: 9), [128, 128, 128])
        // The same window as fractions of the image.
        let (f, fpx) = try renderAndDecode(source, lossless([.crop(Crop(x: 0.5, y: 0.3, width: 0.25, height: 0.4, units: .fractions))]))
        XCTAssertEqual(f.size, Size(width: 50, height: 40))
        XCTAssertEqual(fpx.bytes, px.bytes)
        // A crop, then a resize of what it kept: the DCT scale follows the region, not the image.
        let jpeg = try Codec.encodeJPEG(marked(width: 1600, height: 800, x: 1000, y: 300, size: 200), quality: 95)
        let result = try Renderer.render(jpeg, recipes: [recipe([.crop(Crop(x: 900, y: 200, width: 400, height: 400)), fit(100, 100)])])
        XCTAssertEqual(result.outputs[0].size, Size(width: 100, height: 100))
        // 400 px kept → 100 px: 3/8 leaves the resampler 1.5× (the whole 1600 px image would have allowed 1/8).
        XCTAssertEqual(result.scaleEighths, 3)
        let kept = try Renderer.decode(result.outputs[0].bytes)
        assertColor(kept.pixel(x: 50, y: 50), [220, 30, 30], tolerance: 12, "the mark (1000…1200, 300…500) fills the middle")
        assertColor(kept.pixel(x: 10, y: 10), [128, 128, 128], tolerance: 6)
    }

    func testCroppedJPEGSkipsRowsButStillFindsDamage() throws {
        // The rows above and below a crop are skipped (not IDCT'd): pixels stay exact...
        let image = marked(width: 800, height: 1200, x: 300, y: 900, size: 100)
        let jpeg = try Codec.encodeJPEG(image, quality: 95)
        let (out, px) = try renderAndDecode(jpeg, recipe([.crop(Crop(x: 200, y: 850, width: 300, height: 200))], format: .png))
        XCTAssertEqual(out.size, Size(width: 300, height: 200))
        assertColor(px.pixel(x: 150, y: 100), [220, 30, 30], tolerance: 8, "the mark at (300…400, 900…1000)")
        assertColor(px.pixel(x: 20, y: 20), [128, 128, 128], tolerance: 4)
        // ...and a file cut short below the crop is still reported as truncated, not rendered.
        let cut = Array(jpeg.prefix(jpeg.count * 2 / 3))
        assertThrowsImagingError(.truncated, try Renderer.render(cut, recipes: [recipe([.crop(Crop(x: 0, y: 0, width: 800, height: 100))])]))
    }

    func testAspectCropFollowsGravityAndFocus() throws {
        // Four columns of colour; a 1:1 crop of a 400×100 image keeps 100 columns.
        let image = PixelBuffer(width: 400, height: 100, layout: .rgb)
        let colours: [[UInt8]] = [[200, 0, 0], [0, 200, 0], [0, 0, 200], [200, 200, 0]]
        for y in 0..<100 { for x in 0..<400 { image.setPixel(x: x, y: y, colours[x / 100]) } }
        let source = try png(image)
        for (gravity, expected) in [(Gravity.west, 0), (.centre, -1), (.east, 3)] {
            let (out, px) = try renderAndDecode(source, lossless([.crop(Crop(aspect: 1, gravity: gravity))]))
            XCTAssertEqual(out.size, Size(width: 100, height: 100))
            if expected >= 0 {
                XCTAssertEqual(px.pixel(x: 5, y: 50), colours[expected], "\(gravity)")
                XCTAssertEqual(px.pixel(x: 95, y: 50), colours[expected], "\(gravity)")
            } else {
                XCTAssertEqual(px.pixel(x: 5, y: 50), colours[1], "centre: x 150…250")
                XCTAssertEqual(px.pixel(x: 95, y: 50), colours[2])
            }
        }
        let (_, focused) = try renderAndDecode(source, lossless([.crop(Crop(aspect: 1, focus: FocusPoint(x: 0.625, y: 0.5)))]))
        XCTAssertEqual(focused.pixel(x: 5, y: 50), colours[2], "centred on x = 250: 200…300")
        XCTAssertEqual(focused.pixel(x: 95, y: 50), colours[2])
        // "16:9" from text, on a portrait image: full width, 9/16 of it high.
        let c = try JSONDecoder().decode(RecipeOperation.self, from: Data(#"{"op":"crop","aspect":"16:9","gravity":"north"}"#.utf8))
        let (wide, _) = try renderAndDecode(try png(Fixtures.quadrants(width: 160, height: 300)), lossless([c]))
        XCTAssertEqual(wide.size, Size(width: 160, height: 90))
    }

    func testAttentionFindsTheDetailedColourfulPart() throws {
        // Flat grey, and on one side a patch of saturated, textured colour.
        for side in ["left", "right"] {
            let image = Fixtures.solid(width: 600, height: 200, [120, 120, 120])
            let x0 = side == "left" ? 40 : 420
            for y in 40..<160 { for x in x0..<(x0 + 120) {
                image.setPixel(x: x, y: y, (x / 6 + y / 6) % 2 == 0 ? [230, 40, 40] : [40, 200, 60])
            } }
            let jpeg = try Codec.encodeJPEG(image, quality: 92)
            for op in [RecipeOperation.crop(Crop(aspect: 1, gravity: .attention)),
                       .resize(Resize(width: 100, height: 100, mode: .fill, gravity: .attention))] {
                let (out, px) = try renderAndDecode(jpeg, recipe([op]))
                XCTAssertEqual(out.size.width, out.size.height)
                let w = out.size.width
                // The patch is inside the square: most of its middle row is not grey.
                let grey = (0..<w).filter { x in
                    let p = px.pixel(x: x, y: out.size.height / 2)
                    return abs(Int(p[0]) - 120) < 12 && abs(Int(p[1]) - 120) < 12 && abs(Int(p[2]) - 120) < 12
                }.count
                XCTAssertLessThan(Double(grey) / Double(w), 0.5, "\(side) \(op): the crop holds the patch (\(grey) of \(w) grey)")
                let centreCrop = try renderAndDecode(jpeg, recipe([.crop(Crop(aspect: 1))])).pixels
                let patchInCentre = (0..<centreCrop.width).filter { x in
                    let p = centreCrop.pixel(x: x, y: centreCrop.height / 2)
                    return abs(Int(p[0]) - 120) > 40
                }.count
                XCTAssertEqual(patchInCentre, 0, "the centre crop would miss it")
            }
        }
        // Attention through an orientation: a 90° rotation before the resize puts the patch at the bottom.
        let image = Fixtures.solid(width: 600, height: 200, [120, 120, 120])
        for y in 40..<160 { for x in 440..<560 { image.setPixel(x: x, y: y, (x / 6 + y / 6) % 2 == 0 ? [230, 40, 40] : [40, 200, 60]) } }
        let (rotated, rpx) = try renderAndDecode(try png(image), lossless([.rotate(degrees: 90), .crop(Crop(aspect: 1, gravity: .attention))]))
        XCTAssertEqual(rotated.size, Size(width: 200, height: 200))
        XCTAssertNotEqual(rpx.pixel(x: 100, y: 100), [120, 120, 120], "the patch (rows 440…560 after rotation) is in the window")
    }

    func testTrimRemovesExactlyTheUniformBorder() throws {
        let image = Fixtures.solid(width: 120, height: 80, [255, 255, 255])
        for y in 13..<61 { for x in 7..<101 { image.setPixel(x: x, y: y, [(x * 2) % 256, 90, 40].map { UInt8($0) }) } }
        let (out, px) = try renderAndDecode(try png(image), lossless([.trim(Trim())]))
        XCTAssertEqual(out.size, Size(width: 94, height: 48), "x 7..<101, y 13..<61")
        XCTAssertEqual(px.pixel(x: 0, y: 0), [14, 90, 40])
        // Noise within the threshold still counts as border; a JPEG's ringing too.
        image.setPixel(x: 2, y: 2, [250, 250, 252])
        XCTAssertEqual(try renderAndDecode(try png(image), lossless([.trim(Trim(threshold: 10))])).output.size, Size(width: 94, height: 48))
        XCTAssertEqual(try renderAndDecode(try png(image), lossless([.trim(Trim(threshold: 2))])).output.size, Size(width: 99, height: 59),
                       "threshold 2: the speck at (2,2) is content")
        let jpeg = try Codec.encodeJPEG(image, quality: 95)
        let trimmed = try Renderer.render(jpeg, recipes: [recipe([.trim(Trim(threshold: 24)), fit(47, nil)])])
        // Trim, then the resize fits what is left (found on the scaled decode: edges to within a decoded pixel, kept outward).
        XCTAssertEqual(trimmed.outputs[0].size.width, 47)
        XCTAssertTrue((24...25).contains(trimmed.outputs[0].size.height), "\(trimmed.outputs[0].size)")
        // A uniform image is left whole.
        XCTAssertEqual(try renderAndDecode(try png(Fixtures.solid(width: 30, height: 20, [9, 9, 9])), lossless([.trim(Trim())])).output.size,
                       Size(width: 30, height: 20))
    }

    func testOverlayIsCompositedAtItsPlaceWithItsAlphaAndReadOnce() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("overlay-\(getpid())-\(UInt64(Date().timeIntervalSince1970 * 1e6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let mark = Fixtures.solid(width: 10, height: 6, [0, 0, 255, 255])
        for x in 0..<10 { mark.setPixel(x: x, y: 5, [0, 0, 255, 0]) }  // a transparent last row
        let path = dir.appendingPathComponent("mark.png").path
        try Data(try Codec.encodePNG(mark)).write(to: URL(fileURLWithPath: path))
        let before = OverlayStore.shared.reads
        let source = try png(Fixtures.solid(width: 100, height: 50, [200, 200, 200]))
        let o = Overlay(path: path, gravity: .southeast, margin: 4, opacity: 0.5)
        for _ in 0..<3 {
            let (_, px) = try renderAndDecode(source, lossless([.overlay(o)]))
            // x 86..<96, y 40..<46; its last row transparent.
            assertColor(px.pixel(x: 86, y: 40), [100, 100, 228], tolerance: 1, "half of blue over grey")
            assertColor(px.pixel(x: 95, y: 44), [100, 100, 228], tolerance: 1)
            XCTAssertEqual(px.pixel(x: 95, y: 45), [200, 200, 200], "the transparent row leaves the image")
            XCTAssertEqual(px.pixel(x: 85, y: 40), [200, 200, 200])
            XCTAssertEqual(px.pixel(x: 96, y: 40), [200, 200, 200], "margin kept")
        }
        XCTAssertEqual(OverlayStore.shared.reads - before, 1, "read once for three renders")
        // Scaled to a fraction of the output's width, at the north-west.
        let (_, scaled) = try renderAndDecode(source, lossless([.overlay(Overlay(path: path, gravity: .northwest, width: 0.4))]))
        assertColor(scaled.pixel(x: 39, y: 10), [0, 0, 255], tolerance: 2, "40 px wide, 24 high (alpha fades the last rows)")
        XCTAssertEqual(scaled.pixel(x: 41, y: 5), [200, 200, 200])
        // A missing watermark fails the render with the path and the reason.
        XCTAssertThrowsError(try Renderer.render(source, recipes: [lossless([.overlay(Overlay(path: dir.path + "/none.png"))])])) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .invalidRecipe)
            XCTAssertTrue("\(e)".contains("none.png"), "\(e)")
        }
    }

    func testBlurFillPadShowsTheImageAroundIt() throws {
        let image = PixelBuffer(width: 100, height: 50, layout: .rgb)
        for y in 0..<50 { for x in 0..<100 { image.setPixel(x: x, y: y, x < 50 ? [220, 20, 20] : [20, 20, 220]) } }
        let (out, px) = try renderAndDecode(try png(image), lossless([.pad(Padding(width: 100, height: 100, fill: .blur))]))
        XCTAssertEqual(out.size, Size(width: 100, height: 100))
        XCTAssertEqual(px.pixel(x: 10, y: 50), [220, 20, 20], "the image, unchanged, in the middle")
        let top = px.pixel(x: 5, y: 5), bottom = px.pixel(x: 94, y: 95)
        XCTAssertGreaterThan(Int(top[0]), Int(top[2]) + 60, "red side above the image: \(top)")
        XCTAssertGreaterThan(Int(bottom[2]), Int(bottom[0]) + 60, "blue side below: \(bottom)")
    }

    func testGrayscaleTintAndVignette() throws {
        let source = try png(Fixtures.solid(width: 64, height: 64, [200, 120, 60]))
        let grey = try renderAndDecode(source, lossless([.adjust(try JSONDecoder().decode(ColourAdjustment.self,
                                                                                           from: Data(#"{"grayscale": true}"#.utf8)))])).pixels
        XCTAssertEqual(Set(grey.pixel(x: 3, y: 3)).count, 1)
        let tinted = try renderAndDecode(source, lossless([.adjust(ColourAdjustment(tint: RGBColor(r: 255, g: 128, b: 0), tintAmount: 1))])).pixels
        let luma = 0.2126 * 200 + 0.7152 * 120 + 0.0722 * 60
        assertColor(tinted.pixel(x: 3, y: 3), [UInt8(luma.rounded()), UInt8((luma * 128 / 255).rounded()), 0], tolerance: 1, "luma in the tint")
        let v = try renderAndDecode(source, lossless([.adjust(ColourAdjustment(vignette: 0.5))])).pixels
        XCTAssertEqual(v.pixel(x: 32, y: 32), [200, 120, 60], "centre untouched")
        let corner = v.pixel(x: 0, y: 0)
        XCTAssertLessThan(corner[0], 120, "corners darken by up to half: \(corner)")
        XCTAssertGreaterThan(corner[0], 95)
    }

    func testRecipesRoundTripAndBadParametersAreNamed() throws {
        let ops: [RecipeOperation] = [.trim(Trim(threshold: 5)), .crop(Crop(aspect: 1.5, gravity: .attention)),
                                      .crop(Crop(x: 0.1, y: 0.1, width: 0.5, height: 0.5, units: .fractions)),
                                      .resize(Resize(width: 100, height: 100, mode: .fill, gravity: .attention)),
                                      .overlay(Overlay(path: "/srv/mark.png", gravity: .south, margin: 8, opacity: 0.7, width: 0.25)),
                                      .pad(Padding(width: 120, height: 120, fill: .blur)),
                                      .adjust(ColourAdjustment(tint: .black, tintAmount: 0.3, vignette: 0.2))]
        let r = Recipe(name: "all", operations: ops, output: OutputSettings())
        XCTAssertNoThrow(try r.validate())
        XCTAssertEqual(try Recipe.decode(json: try r.jsonData()), r)
        func refused(_ op: RecipeOperation, _ field: String, _ expected: String) {
            XCTAssertThrowsError(try Recipe(name: "bad", operations: [op]).validate()) { e in
                let text = "\(e)"
                XCTAssertTrue(text.contains(field) && text.contains(expected), "\(text) should name \(field) and \(expected)")
            }
        }
        refused(.crop(Crop(x: 0, y: 0, width: 0, height: 10)), "operations[0].width", "1...65500")
        refused(.crop(Crop(x: 0.6, y: 0, width: 0.5, height: 1, units: .fractions)), "operations[0].width", "x + width ≤ 1")
        refused(.crop(Crop(aspect: 0)), "operations[0].aspect", "0.01...100")
        refused(.crop(Crop(width: 10, height: 10, gravity: .north)), "operations[0].gravity", "only with aspect")
        refused(.trim(Trim(threshold: 300)), "operations[0].threshold", "0...255")
        refused(.overlay(Overlay(path: "m.png", opacity: 2)), "operations[0].opacity", "0...1")
        refused(.overlay(Overlay(path: "m.png", width: 0)), "operations[0].width", "of the output's width")
        refused(.adjust(ColourAdjustment(vignette: 3)), "operations[0].vignette", "0.0...1.0")
        XCTAssertThrowsError(try Recipe(name: "bad", operations: [fit(10, 10), .crop(Crop(aspect: 1))]).validate()) {
            XCTAssertTrue("\($0)".contains("crop before the resize"), "\($0)")
        }
        XCTAssertThrowsError(try Recipe.decode(json: Data(#"{"operations":[{"op":"crop","aspect":"wide"}]}"#.utf8))) {
            XCTAssertTrue("\($0)".contains("16:9"), "\($0)")
        }
        // A rectangle outside the image: a typed error at render time.
        assertThrowsImagingError(.invalidRecipe, try Renderer.render(try self.png(Fixtures.solid(width: 20, height: 20, [1, 2, 3])),
                                                                     recipes: [self.lossless([.crop(Crop(x: 30, y: 0, width: 5, height: 5))])]))
    }
}
