import Foundation
import TesseraImaging
import XCTest
import TesseraModel

final class RecipeTests: XCTestCase {
    func testRecipeRoundTripsThroughJSON() throws {
        let r = Recipe(name: "card", operations: [.rotate(degrees: 90), fill(300, 200), .flip(.vertical),
                                                  .flatten(background: RGBColor(hex: "#102030")!)],
                       output: OutputSettings(format: .png, quality: 0.7, progressive: true, maxBytes: 50_000,
                                              keep: [.icc, .copyright]))
        let json = try r.jsonData()
        let text = String(decoding: json, as: UTF8.self)
        XCTAssertTrue(text.contains("\"format\" : \"tessera.recipe\""))
        XCTAssertTrue(text.contains("\"version\" : 2"))
        XCTAssertEqual(try Recipe.decode(json: json), r)
    }

    func testMinimalJSONGetsDefaults() throws {
        let r = try Recipe.decode(json: Data(#"{"operations": [{"op": "resize", "width": 100}]}"#.utf8))
        XCTAssertEqual(r.resize, Resize(width: 100, height: nil))
        XCTAssertEqual(r.output.format, .jpeg)
        XCTAssertEqual(r.output.keep, [])
    }

    func testValidationErrorsNameTheField() {
        func message(_ json: String) -> String {
            do {
                _ = try Recipe.decode(json: Data(json.utf8))
                return "no error"
            } catch let e as ImagingError {
                XCTAssertEqual(e.code, .invalidRecipe)
                return e.reason
            } catch { return "\(error)" }
        }
        XCTAssertTrue(message(#"{"operations": [{"op": "resize", "width": 0}]}"#).contains("operations[0].width"))
        XCTAssertTrue(message(#"{"operations": [{"op": "emboss"}]}"#).contains("unknown operation \"emboss\""))
        XCTAssertTrue(message(#"{"format": "other"}"#).contains("format"))
        XCTAssertTrue(message(#"{"version": 7}"#).contains("version"))
        XCTAssertTrue(message(#"{"output": {"quality": "high"}}"#).contains("output.quality"))
        XCTAssertTrue(message(#"{"output": {"background": "red"}}"#).contains("#rrggbb"))
        XCTAssertTrue(message(#"{"operations": [{"op": "resize", "width": 10, "mode": "fill"}]}"#).contains("fill"))
    }

    func testBuiltInPresetsMatchTheSeed() throws {
        let p = PresetCatalog.builtIn
        XCTAssertEqual(p.names, ["default", "highDefinition", "thumbnail", "compressedThumbnail", "favicon",
                                 "compressedFavicon", "widget", "web", "webThumbnail"])
        let web = try p.recipe(named: "webThumbnail")
        XCTAssertEqual(web.resize, Resize(width: 320, height: 320))
        XCTAssertEqual(web.output.formats, [FormatChoice(.avif, quality: 0.6), FormatChoice(.webp, quality: 0.75),
                                            FormatChoice(.jpeg, quality: 0.8)])
        XCTAssertNil(try p.recipe(named: "default").resize)
        XCTAssertEqual(try p.recipe(named: "default").output.format, .original)
        XCTAssertEqual(try p.recipe(named: "highDefinition").resize, Resize(width: 1920, height: 1080))
        XCTAssertEqual(try p.recipe(named: "thumbnail").resize, Resize(width: 1280, height: 720))
        XCTAssertEqual(try p.recipe(named: "thumbnail").output.jpegQuality, 100)
        XCTAssertEqual(try p.recipe(named: "compressedThumbnail").output.jpegQuality, 80)
        XCTAssertEqual(try p.recipe(named: "favicon").resize, Resize(width: 64, height: 64, mode: .fill))
        XCTAssertEqual(try p.recipe(named: "compressedFavicon").output.jpegQuality, 80)
        let widget = try p.recipe(named: "widget")
        XCTAssertEqual(widget.resize?.width, 1024)
        XCTAssertEqual(widget.resize?.scale, 1)
        XCTAssertEqual(widget.output.maxBytes, 999_999)
        XCTAssertEqual(widget.output.format, .jpegOrPNG, "the widget rule: JPEG or PNG")
        XCTAssertEqual(widget.output.keep, [])
        XCTAssertNotNil(widget.flattenBackground)
        for name in p.names { XCTAssertNoThrow(try p.recipe(named: name).validate(), name) }
    }

    func testPresetFilesAddPresets() throws {
        var catalog = PresetCatalog.builtIn
        let file = #"""
        {"format": "tessera.presets", "version": 1, "presets": {
          "retina": {"operations": [{"op": "resize", "width": 320, "height": 320, "scale": 2}],
                     "output": {"quality": 0.85}}}}
        """#
        try catalog.load(json: Data(file.utf8), source: "extra.json")
        let r = try catalog.recipe(named: "retina")
        XCTAssertEqual(r.name, "retina")
        XCTAssertEqual(r.resize?.scale, 2)
        XCTAssertTrue(catalog.names.contains("retina"))
        XCTAssertEqual(try catalog.recipe(named: "THUMBNAIL").name, "thumbnail", "case-insensitive lookup")
        do {
            _ = try catalog.recipe(named: "thumbnial")
            XCTFail("expected an error")
        } catch let e as ImagingError {
            XCTAssertTrue(e.reason.contains("known: default"), e.reason)
        }
        XCTAssertThrowsError(try catalog.load(json: Data(#"{"format": "tessera.presets", "version": 1, "presets": {"x": {"operations": [{"op": "rotate", "degrees": 33}]}}}"#.utf8), source: "bad.json")) {
            XCTAssertEqual(($0 as? ImagingError)?.file, "bad.json")
        }
    }

    /// A recipe stored next to an output re-renders the same bytes from the original.
    func testRecipeReRendersIdentically() throws {
        let source = try Codec.encodeJPEG(Fixtures.noise(width: 400, height: 300), quality: 90)
        let r = Recipe(name: "x", operations: [fit(120, 120), .rotate(degrees: 270)],
                       output: OutputSettings(quality: 0.8))
        let first = try Renderer.render(source, recipes: [r]).outputs[0].bytes
        let stored = try Recipe.decode(json: try r.jsonData())
        XCTAssertEqual(try Renderer.render(source, recipes: [stored]).outputs[0].bytes, first)
    }
}
