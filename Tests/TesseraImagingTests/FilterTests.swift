import Foundation
import TesseraImaging
import XCTest
import TesseraModel

/// The filter operations (sharpen, blur, adjust) through the renderer, on generated
/// images: pixel-level outcomes, and parameters refused with field, expected and actual.
final class FilterTests: XCTestCase {
    /// A 64×32 PNG: the left half `left`, the right half `right` (grey levels).
    func edge(_ left: UInt8, _ right: UInt8) throws -> [UInt8] {
        let image = PixelBuffer(width: 64, height: 32, layout: .rgb)
        for y in 0..<32 { for x in 0..<64 { image.setPixel(x: x, y: y, x < 32 ? [left, left, left] : [right, right, right]) } }
        return try Codec.encodePNG(image)
    }

    func render(_ png: [UInt8], _ operations: [RecipeOperation]) throws -> PixelBuffer {
        let recipe = Recipe(name: "t", operations: operations, output: OutputSettings(format: .png))
        let result = try Renderer.render(png, recipes: [recipe])
        return try Renderer.decode(result.outputs[0].bytes)
    }

    func testSharpenRaisesEdgeContrastAndNeverWraps() throws {
        let out = try render(try edge(60, 200), [.sharpen(UnsharpMask(sigma: 1, amount: 1.5, threshold: 0))])
        XCTAssertLessThan(out.pixel(x: 31, y: 16)[0], 60, "the dark side darkens at the edge")
        XCTAssertGreaterThan(out.pixel(x: 32, y: 16)[0], 200, "the bright side brightens")
        XCTAssertEqual(out.pixel(x: 5, y: 16)[0], 60, "flat areas unchanged")
        XCTAssertEqual(out.pixel(x: 60, y: 16)[0], 200)
        // Black against white: clamped at 0 and 255, never wrapped round.
        let extreme = try render(try edge(0, 255), [.sharpen(UnsharpMask(sigma: 1, amount: 5, threshold: 0))])
        XCTAssertEqual(extreme.pixel(x: 31, y: 16)[0], 0)
        XCTAssertEqual(extreme.pixel(x: 32, y: 16)[0], 255)
        // Below the threshold nothing moves.
        let soft = try render(try edge(100, 103), [.sharpen(UnsharpMask(sigma: 1, amount: 2, threshold: 10))])
        XCTAssertEqual(soft.pixel(x: 31, y: 16)[0], 100)
    }

    func testBlurSoftensEdgesOnly() throws {
        let out = try render(try edge(0, 200), [.blur(sigma: 2)])
        let a = Int(out.pixel(x: 31, y: 16)[0]), b = Int(out.pixel(x: 32, y: 16)[0])
        XCTAssertTrue((40...160).contains(a) && (40...160).contains(b), "the edge is soft: \(a), \(b)")
        XCTAssertEqual(out.pixel(x: 2, y: 16)[0], 0)
        XCTAssertEqual(out.pixel(x: 62, y: 16)[0], 200)
    }

    func testColourAdjustments() throws {
        let colour = PixelBuffer(width: 16, height: 16, layout: .rgb)
        colour.fill([200, 80, 40])
        let png = try Codec.encodePNG(colour)
        XCTAssertEqual(try render(png, [.adjust(ColourAdjustment())]).pixel(x: 3, y: 3), [200, 80, 40], "identity")
        let grey = try render(png, [.adjust(ColourAdjustment(saturation: 0))]).pixel(x: 3, y: 3)
        XCTAssertEqual(Set(grey).count, 1, "saturation 0: grey \(grey)")
        let luma: Double = 0.2126 * 200 + 0.7152 * 80 + 0.0722 * 40
        XCTAssertEqual(Int(grey[0]), Int(luma.rounded()), accuracy: 1)
        let brighter = try render(png, [.adjust(ColourAdjustment(brightness: 0.2))]).pixel(x: 3, y: 3)
        XCTAssertEqual(brighter.map(Int.init), [251, 131, 91], "+0.2 × 255 each")
        let contrast = try render(png, [.adjust(ColourAdjustment(contrast: 2))]).pixel(x: 3, y: 3)
        XCTAssertEqual(contrast.map(Int.init), [255, 33, 0], "around mid-grey, clamped")
        // One stop more exposure doubles linear light: mid-grey 128 → sRGB of 2 × 0.2158.
        let mid = PixelBuffer(width: 8, height: 8, layout: .rgb)
        mid.fill([128, 128, 128])
        let exposed = try render(try Codec.encodePNG(mid), [.adjust(ColourAdjustment(exposure: 1))]).pixel(x: 1, y: 1)
        XCTAssertEqual(Int(exposed[0]), 175, accuracy: 1)
        let sepia = try render(try Codec.encodePNG(mid), [.adjust(ColourAdjustment(sepia: 1))]).pixel(x: 1, y: 1)
        XCTAssertTrue(sepia[0] > sepia[1] && sepia[1] > sepia[2], "warm tone: \(sepia)")
        let gamma = try render(try Codec.encodePNG(mid), [.adjust(ColourAdjustment(gamma: 2))]).pixel(x: 1, y: 1)
        XCTAssertEqual(Int(gamma[0]), Int((pow(128.0 / 255, 0.5) * 255).rounded()), accuracy: 1)
    }

    func testFiltersRunOnTheSmallImageInRecipeOrder() throws {
        // Resized first (64 → 16 wide), then filtered: the output has the resized size.
        let out = try render(try edge(60, 200), [.resize(Resize(width: 16, height: nil)), .sharpen(UnsharpMask()),
                                                 .adjust(ColourAdjustment(saturation: 0))])
        XCTAssertEqual(out.width, 16)
        XCTAssertEqual(out.height, 8)
    }

    func testRecipesRoundTripAndBadParametersAreRefused() throws {
        let recipe = Recipe(name: "chain", operations: [.resize(Resize(width: 256, height: nil)), .blur(sigma: 0.5),
                                                         .sharpen(UnsharpMask(sigma: 1, amount: 0.8, threshold: 3)),
                                                         .adjust(ColourAdjustment(brightness: 0.1, sepia: 0.5))])
        let back = try Recipe.decode(json: try recipe.jsonData())
        XCTAssertEqual(back, recipe)
        XCTAssertEqual(back.version, 2)
        // A version 1 recipe still loads.
        let v1 = try Recipe.decode(json: Data(#"{"format":"tessera.recipe","version":1,"operations":[{"op":"resize","width":64}],"output":{"format":"jpeg"}}"#.utf8))
        XCTAssertEqual(v1.version, 1)
        for (json, message) in [
            (#"{"op":"sharpen","sigma":50}"#, "operations[0].sigma: expected 0.3...10, got 50"),
            (#"{"op":"sharpen","amount":-1}"#, "operations[0].amount: expected 0...10, got -1"),
            (#"{"op":"blur"}"#, "sigma"),
            (#"{"op":"adjust","contrast":9}"#, "operations[0].contrast: expected 0.0...4.0, got 9"),
            (#"{"op":"adjust","gamma":0}"#, "operations[0].gamma: expected 0.1...10.0, got 0"),
            (#"{"op":"emboss"}"#, "unknown operation \"emboss\""),
        ] {
            let text = #"{"format":"tessera.recipe","version":2,"operations":["# + json + #"],"output":{"format":"png"}}"#
            XCTAssertThrowsError(try Recipe.decode(json: Data(text.utf8)), json) { e in
                XCTAssertTrue("\(e)".contains(message), "\(json): \(e)")
            }
        }
    }
}

/// `fill` with gravity and a focus point: the crop keeps the side or point asked for.
final class GravityTests: XCTestCase {
    /// 400×200, grey, with a red 40×40 patch centred at (60, 100) (the left side).
    func source() throws -> [UInt8] {
        let image = PixelBuffer(width: 400, height: 200, layout: .rgb)
        image.fill([128, 128, 128])
        for y in 80..<120 { for x in 40..<80 { image.setPixel(x: x, y: y, [255, 0, 0]) } }
        return try Codec.encodePNG(image)
    }

    func crop(_ resize: Resize) throws -> PixelBuffer {
        let recipe = Recipe(name: "c", operations: [.resize(resize)], output: OutputSettings(format: .png))
        return try Renderer.decode(try Renderer.render(try source(), recipes: [recipe]).outputs[0].bytes)
    }

    func redPixels(_ image: PixelBuffer) -> Int {
        var n = 0
        for y in 0..<image.height { for x in 0..<image.width { let p = image.pixel(x: x, y: y); if p[0] > 200 && p[1] < 60 { n += 1 } } }
        return n
    }

    func testGravityAndFocusPlaceTheCrop() throws {
        let west = try crop(Resize(width: 100, height: 100, mode: .fill, gravity: .west))
        XCTAssertEqual([west.width, west.height], [100, 100])
        XCTAssertGreaterThan(redPixels(west), 300, "west keeps the left side and its patch")
        XCTAssertGreaterThan(west.pixel(x: 30, y: 50)[0], 200, "the patch sits at x 40…80 of 200 → 20…40 of 100")
        XCTAssertEqual(redPixels(try crop(Resize(width: 100, height: 100, mode: .fill, gravity: .east))), 0)
        XCTAssertEqual(redPixels(try crop(Resize(width: 100, height: 100, mode: .fill))), 0, "centre misses the patch")
        // Focus on the patch: it ends up in the middle of the crop.
        let focused = try crop(Resize(width: 100, height: 100, mode: .fill, focus: FocusPoint(x: 60.0 / 400, y: 0.5)))
        XCTAssertGreaterThan(focused.pixel(x: 30, y: 50)[0], 200, "kept inside the image: the crop starts at the left edge")
        let middle = try crop(Resize(width: 50, height: 50, mode: .fill, upscale: false, focus: FocusPoint(x: 0.75, y: 0.5)))
        XCTAssertEqual(redPixels(middle), 0)
        // Refused: gravity with fit, a focus outside 0...1.
        for (op, message) in [(#"{"op":"resize","width":10,"gravity":"west"}"#, "operations[0].mode"),
                              (#"{"op":"resize","width":10,"height":10,"mode":"fill","focus":{"x":2,"y":0.5}}"#, "operations[0].focus"),
                              (#"{"op":"resize","width":10,"height":10,"mode":"fill","gravity":"up"}"#, "gravity")] {
            let text = #"{"format":"tessera.recipe","version":2,"operations":["# + op + #"],"output":{"format":"png"}}"#
            XCTAssertThrowsError(try Recipe.decode(json: Data(text.utf8))) { e in XCTAssertTrue("\(e)".contains(message), "\(e)") }
        }
        // Recipes without gravity or focus serialise as before (their hash does not change).
        let plain = Recipe(name: "p", operations: [.resize(Resize(width: 10, height: 10, mode: .fill))])
        XCTAssertFalse(String(decoding: try plain.jsonData(), as: UTF8.self).contains("gravity"))
    }
}

/// `pad`: to a size placed by gravity, or by margins, in a colour.
final class PadTests: XCTestCase {
    func testPadToASizeAndByMargins() throws {
        let image = PixelBuffer(width: 40, height: 20, layout: .rgb)
        image.fill([10, 200, 30])
        let png = try Codec.encodePNG(image)
        func render(_ p: Padding) throws -> PixelBuffer {
            let r = Recipe(name: "p", operations: [.pad(p)], output: OutputSettings(format: .png))
            return try Renderer.decode(try Renderer.render(png, recipes: [r]).outputs[0].bytes)
        }
        let square = try render(Padding(width: 40, height: 40, background: RGBColor(r: 255, g: 0, b: 255)))
        XCTAssertEqual([square.width, square.height], [40, 40])
        XCTAssertEqual(square.pixel(x: 20, y: 5), [255, 0, 255], "band above (centred: 10 px)")
        XCTAssertEqual(square.pixel(x: 20, y: 10), [10, 200, 30], "the image starts at row 10")
        XCTAssertEqual(square.pixel(x: 20, y: 30), [255, 0, 255], "band below from row 30")
        let south = try render(Padding(width: 40, height: 40, gravity: .south))
        XCTAssertEqual(south.pixel(x: 0, y: 19), [255, 255, 255])
        XCTAssertEqual(south.pixel(x: 0, y: 20), [10, 200, 30], "south: the image at the bottom")
        let margins = try render(Padding(top: 1, right: 2, bottom: 3, left: 4, background: .black))
        XCTAssertEqual([margins.width, margins.height], [46, 24])
        XCTAssertEqual(margins.pixel(x: 3, y: 1), [0, 0, 0])
        XCTAssertEqual(margins.pixel(x: 4, y: 1), [10, 200, 30])
        XCTAssertEqual(margins.pixel(x: 43, y: 20), [10, 200, 30])
        XCTAssertEqual(margins.pixel(x: 44, y: 20), [0, 0, 0])
        XCTAssertThrowsError(try Recipe.decode(json: Data(#"{"operations":[{"op":"pad","left":-3}]}"#.utf8))) { e in
            XCTAssertTrue("\(e)".contains("operations[0].left: expected 0...10000, got -3"), "\(e)")
        }
    }
}
