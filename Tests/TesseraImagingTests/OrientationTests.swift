import TesseraImaging
import XCTest
import TesseraModel

final class OrientationTests: XCTestCase {
    /// A displayed image with coloured quadrants, stored rotated/flipped and tagged
    /// with each EXIF orientation, must come out upright at the displayed size.
    func testEveryExifOrientationComesOutUpright() throws {
        let displayed = Fixtures.quadrants(width: 64, height: 48)
        for value in 1...8 {
            let o = Orientation(exif: value)
            let stored = try o.inverse.apply(to: displayed)
            XCTAssertEqual(stored.width, value >= 5 ? 48 : 64)
            let jpeg = try Codec.encodeJPEG(stored, quality: 95, subsampling: .s444,
                                            exif: Exif.build(orientation: value))
            let cases: [(Recipe, Size)] = [
                (recipe([]), Size(width: 64, height: 48)),
                (recipe([fit(32, 32)]), Size(width: 32, height: 24)),
                (recipe([fill(24, 24)]), Size(width: 24, height: 24)),
            ]
            for (r, size) in cases {
                let (out, pixels) = try renderAndDecode(jpeg, r)
                XCTAssertEqual(out.size, size, "orientation \(value)")
                XCTAssertEqual(Size(width: pixels.width, height: pixels.height), size)
                let w = pixels.width, h = pixels.height
                let probes: [(Quadrant, Int, Int)] = [(.topLeft, w / 4, h / 4), (.topRight, 3 * w / 4, h / 4),
                                                      (.bottomLeft, w / 4, 3 * h / 4), (.bottomRight, 3 * w / 4, 3 * h / 4)]
                for (q, x, y) in probes {
                    assertColor(pixels.pixel(x: x, y: y), q.color, tolerance: 24, "orientation \(value) \(q) at \(size)")
                }
                // No output keeps a tag that would rotate it twice.
                let info = try ImageInfo.inspect(out.bytes)
                XCTAssertEqual(info.orientation, 1)
                XCTAssertFalse(info.hasExif)
            }
        }
    }

    func testOrientationAlgebra() throws {
        let image = Fixtures.noise(width: 7, height: 5)
        for a in 1...8 {
            let oa = Orientation(exif: a)
            XCTAssertEqual(oa.then(oa.inverse), .up, "\(a)")
            XCTAssertEqual(Orientation(exif: oa.exifValue), oa)
            for b in 1...8 {
                let ob = Orientation(exif: b)
                let stepwise = try ob.apply(to: oa.apply(to: image))
                let composed = try oa.then(ob).apply(to: image)
                XCTAssertEqual(stepwise.bytes, composed.bytes, "\(a) then \(b)")
                XCTAssertEqual(stepwise.width, composed.width)
            }
        }
        XCTAssertEqual(Orientation.rotation(degrees: 90).exifValue, 6)
        XCTAssertEqual(Orientation.rotation(degrees: -90).exifValue, 8)
        XCTAssertEqual(Orientation(exif: 0), .up, "invalid values count as 1")
        XCTAssertEqual(Orientation(exif: 9), .up)
    }

    func testRecipeRotationsAfterTheExifOrientation() throws {
        let displayed = Fixtures.quadrants(width: 64, height: 48)
        let jpeg = try Codec.encodeJPEG(try Orientation(exif: 6).inverse.apply(to: displayed), quality: 95,
                                        subsampling: .s444, exif: Exif.build(orientation: 6))
        // Rotate 90° clockwise after making it upright: top-left becomes bottom-left's colour.
        let (out, px) = try renderAndDecode(jpeg, recipe([fit(32, 32), .rotate(degrees: 90), .flip(.horizontal)]))
        XCTAssertEqual(out.size, Size(width: 24, height: 32))
        // Rotated 90 CW then mirrored = transpose: top-left stays red, top-right is blue.
        assertColor(px.pixel(x: 5, y: 6), Quadrant.topLeft.color, tolerance: 24)
        assertColor(px.pixel(x: 18, y: 6), Quadrant.bottomLeft.color, tolerance: 24)
        assertColor(px.pixel(x: 5, y: 26), Quadrant.topRight.color, tolerance: 24)
    }

    /// The corpus' orientation examples are one picture stored eight ways: rendered,
    /// every one must look like the untransformed one.
    func testCorpusOrientationExamplesMatchTheUprightOne() throws {
        guard let dir = Fixtures.corpus("edge") else { throw XCTSkip("corpus not present") }
        for kind in ["landscape", "portrait"] {
            let r = recipe([fit(180, 180)])
            let reference = try renderAndDecode(try bytes(of: dir.appendingPathComponent("orient_\(kind)_1.jpg")), r).pixels
            for n in [0, 2, 3, 4, 5, 6, 7, 8] {
                let file = dir.appendingPathComponent("orient_\(kind)_\(n).jpg")
                let px = try renderAndDecode(try bytes(of: file), r).pixels
                XCTAssertEqual(px.width, reference.width, file.lastPathComponent)
                XCTAssertEqual(px.height, reference.height, file.lastPathComponent)
                XCTAssertLessThan(meanAbsoluteDifference(px, reference), 6, file.lastPathComponent)
            }
        }
    }
}
