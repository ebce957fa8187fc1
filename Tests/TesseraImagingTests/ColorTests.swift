import Foundation
import TesseraImaging
import XCTest
import TesseraModel

final class ColorTests: XCTestCase {
    /// Display P3 -> sRGB with an independent matrix (both D65), for in-gamut colours.
    func expectedSRGB(fromP3 p: [UInt8]) -> [UInt8] {
        func lin(_ v: UInt8) -> Double {
            let x = Double(v) / 255
            return x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4)
        }
        func enc(_ v: Double) -> UInt8 {
            let x = max(0, min(1, v))
            let s = x <= 0.0031308 ? x * 12.92 : 1.055 * pow(x, 1 / 2.4) - 0.055
            return UInt8((s * 255).rounded())
        }
        let (r, g, b) = (lin(p[0]), lin(p[1]), lin(p[2]))
        return [enc(1.2249 * r - 0.2247 * g),
                enc(-0.0420 * r + 1.0419 * g),
                enc(-0.0197 * r - 0.0786 * g + 1.0979 * b)]
    }

    func testDisplayP3IsConvertedToSRGBAndTheProfileDropped() throws {
        let colors: [[UInt8]] = [[200, 100, 50], [60, 160, 90], [128, 128, 200], [240, 240, 240]]
        for c in colors {
            let p3 = try Codec.encodePNG(Fixtures.solid(width: 40, height: 30, c), icc: ICCProfiles.displayP3)
            let result = try Renderer.render(p3, recipes: [recipe([fit(20, 20)], format: .png)])
            XCTAssertTrue(result.source.convertedToSRGB)
            XCTAssertEqual(result.source.iccName, "Display P3")
            let out = result.outputs[0]
            XCTAssertNil(try ImageInfo.inspect(out.bytes).iccProfile, "converted outputs carry no profile")
            let px = try Renderer.decode(out.bytes)
            assertColor(px.pixel(x: 10, y: 7), expectedSRGB(fromP3: c), tolerance: 2, "P3 \(c)")
        }
        // The same through JPEG (with the conversion after the resize).
        let jpeg = try Codec.encodeJPEG(Fixtures.solid(width: 64, height: 64, [200, 100, 50]), quality: 100,
                                        subsampling: .s444, icc: ICCProfiles.displayP3)
        let px = try renderAndDecode(jpeg, recipe([fit(32, 32)], quality: 1.0)).pixels
        assertColor(px.pixel(x: 16, y: 16), expectedSRGB(fromP3: [200, 100, 50]), tolerance: 3)
    }

    func testKeepingICCAttachesTheProfileAndLeavesPixels() throws {
        let p3 = try Codec.encodePNG(Fixtures.solid(width: 40, height: 30, [200, 100, 50]), icc: ICCProfiles.displayP3)
        let r = recipe([fit(20, 20)], format: .png) { $0.keep = [.icc] }
        let result = try Renderer.render(p3, recipes: [r])
        XCTAssertFalse(result.source.convertedToSRGB)
        let out = result.outputs[0].bytes
        XCTAssertEqual(try ImageInfo.inspect(out).iccProfile, "Display P3")
        // Decoding the output converts it (it carries P3), so read its raw pixels with keep-ICC too.
        let raw = try Renderer.decode(out, recipe: recipe([], format: .png) { $0.keep = [.icc] })
        assertColor(raw.pixel(x: 10, y: 7), [200, 100, 50], tolerance: 1)
        // JPEG keeps it as APP2 chunks.
        let jpg = try Renderer.render(p3, recipes: [recipe([fit(20, 20)]) { $0.keep = [.icc] }]).outputs[0].bytes
        XCTAssertEqual(try ImageInfo.inspect(jpg).iccProfile, "Display P3")
    }

    func testSRGBProfiledSourcesAreNotConverted() throws {
        let image = Fixtures.noise(width: 30, height: 20)
        let png = try Codec.encodePNG(image, icc: ICCProfiles.sRGB)
        let result = try Renderer.render(png, recipes: [recipe([], format: .png)])
        XCTAssertFalse(result.source.convertedToSRGB)
        XCTAssertEqual(try Renderer.decode(result.outputs[0].bytes).bytes, image.bytes)
    }

    /// The corpus' CMYK files (Adobe-inverted YCCK, one with a CMYK profile) come out
    /// as RGB of the same picture, never with the CMYK profile attached.
    func testCMYKBecomesRGB() throws {
        guard let dir = Fixtures.corpus("edge") else { throw XCTSkip("corpus not present") }
        let keep = recipe([fit(250, 250)]) { $0.keep = [.icc] }
        let withICC = try Renderer.render(try bytes(of: dir.appendingPathComponent("cmyk_ycck_icc.jpg")), recipes: [keep])
        let without = try Renderer.render(try bytes(of: dir.appendingPathComponent("cmyk_no_icc.jpg")), recipes: [keep])
        let a = try Renderer.decode(withICC.outputs[0].bytes), b = try Renderer.decode(without.outputs[0].bytes)
        XCTAssertEqual(a.layout, .rgb)
        XCTAssertNil(try ImageInfo.inspect(withICC.outputs[0].bytes).iccProfile, "a CMYK profile on RGB output")
        // Same picture: close, and certainly not inverted (which would differ by ~100+).
        XCTAssertLessThan(meanAbsoluteDifference(a, b), 25)
        // Grass in the lower left is green.
        let grass = a.mean(x: 5, y: a.height - 40, width: 40, height: 20)
        XCTAssertGreaterThan(grass[1], grass[0])
        XCTAssertGreaterThan(grass[1], grass[2])
    }

    /// gAMA 0.35 and 2.5 versions of one pngsuite image decode to similar sRGB.
    func testPNGGammaIsCorrected() throws {
        guard let dir = Fixtures.corpus("edge") else { throw XCTSkip("corpus not present") }
        let a = try Renderer.decode(try bytes(of: dir.appendingPathComponent("png_gamma_0.35.png")))
        let b = try Renderer.decode(try bytes(of: dir.appendingPathComponent("png_gamma_2.50.png")))
        XCTAssertLessThan(meanAbsoluteDifference(a, b), 8)
        var raw = RenderOptions()
        raw.correctPNGGamma = false
        let c = try Renderer.decode(try bytes(of: dir.appendingPathComponent("png_gamma_0.35.png")), options: raw)
        let d = try Renderer.decode(try bytes(of: dir.appendingPathComponent("png_gamma_2.50.png")), options: raw)
        XCTAssertGreaterThan(meanAbsoluteDifference(c, d), 20, "uncorrected they differ")
    }
}
