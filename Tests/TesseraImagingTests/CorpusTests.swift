import TesseraImaging
import XCTest
import TesseraModel

/// The shared corpus, when present: every edge case renders or fails clearly;
/// every photo renders to the thumbnail and widget presets.
final class CorpusTests: XCTestCase {
    func testEveryEdgeCaseRendersOrFailsClearly() throws {
        let files = Fixtures.corpusFiles("edge")
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        let expectedFailures = ["12bit_monkey12.jpg", "lossless_sof3_testimgl.jpg"]  // libjpeg-turbo 2.1 cannot decode
        let recipes = [try PresetCatalog.builtIn.recipe(named: "thumbnail"), try PresetCatalog.builtIn.recipe(named: "favicon")]
        for file in files {
            let source = try bytes(of: file)
            do {
                let result = try Renderer.render(source, recipes: recipes)
                XCTAssertFalse(expectedFailures.contains(file.lastPathComponent), file.lastPathComponent)
                let info = try ImageInfo.inspect(source)
                // Upright: output aspect follows the displayed (oriented) size.
                let thumb = result.outputs[0].size
                if info.displayWidth > 1 && info.displayHeight > 1 && thumb.width > 1 && thumb.height > 1 {
                    XCTAssertEqual(info.displayWidth > info.displayHeight, thumb.width > thumb.height, file.lastPathComponent)
                }
                XCTAssertLessThanOrEqual(thumb.width, 1280)
                XCTAssertLessThanOrEqual(thumb.height, 720)
                for out in result.outputs {
                    let decoded = try Renderer.decode(out.bytes)
                    XCTAssertEqual(Size(width: decoded.width, height: decoded.height), out.size)
                    XCTAssertFalse(try ImageInfo.inspect(out.bytes).hasExif)
                }
            } catch let e as ImagingError {
                XCTAssertTrue(expectedFailures.contains(file.lastPathComponent), "\(file.lastPathComponent): \(e)")
                XCTAssertEqual(e.code, .unsupportedFeature)
            }
        }
    }

    func testEveryPhotoRendersToThumbnailAndWidget() throws {
        let files = Fixtures.corpusFiles("photos")
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        let thumb = try PresetCatalog.builtIn.recipe(named: "thumbnail")
        let widget = try PresetCatalog.builtIn.recipe(named: "widget")
        for file in files {
            let result = try Renderer.render(try bytes(of: file), recipes: [thumb, widget])
            let name = file.lastPathComponent
            let t = result.outputs[0].size, w = result.outputs[1]
            XCTAssertTrue((t.width == 1280 && t.height <= 720) || (t.height == 720 && t.width <= 1280)
                          || result.source.storedSize.pixels <= 1280 * 720, "\(name) thumbnail \(t)")
            XCTAssertLessThanOrEqual(w.size.width, 1024, name)
            XCTAssertLessThan(w.bytes.count, 1_000_000, name)
            XCTAssertFalse(try ImageInfo.inspect(w.bytes).hasExif, name)
            if result.source.format == .jpeg && result.source.storedSize.pixels > 4_000_000 {
                XCTAssertLessThan(result.scaleEighths, 8, "\(name): thumbnails never decode full size")
            }
        }
    }
}
