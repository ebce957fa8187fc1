import TesseraImaging
import XCTest
import TesseraModel

final class MetadataTests: XCTestCase {
    /// A photo-like JPEG with everything a camera and an editor leave behind.
    static func richJPEG(width: Int = 64, height: Int = 48, orientation: Int = 1) throws -> [UInt8] {
        let exif = Exif.build(orientation: orientation, copyright: "(c) Tessera Tests",
                              gps: (latitude: 48.8584, longitude: 2.2945), make: "TestCam",
                              thumbnail: try Codec.encodeJPEG(Fixtures.noise(width: 16, height: 12), quality: 50))
        var jpeg = try Codec.encodeJPEG(Fixtures.noise(width: width, height: height), quality: 90,
                                        icc: ICCProfiles.sRGB, exif: exif)
        let xmp = Array("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta>secret location</x:xmpmeta>".utf8)
        jpeg = Codec.insertSegment(marker: 0xE1, payload: xmp, into: jpeg)
        jpeg = Codec.insertSegment(marker: 0xFE, payload: Array("a comment".utf8), into: jpeg)
        let iptc = Array("Photoshop 3.0\0".utf8) + [0x38, 0x42, 0x49, 0x4D, 0x04, 0x04, 0, 0, 0, 0, 0, 0]
        jpeg = Codec.insertSegment(marker: 0xED, payload: iptc, into: jpeg)
        return jpeg + Array("trailing vendor data".utf8)
    }

    func testFixtureCarriesTheMetadata() throws {
        let info = try ImageInfo.inspect(try MetadataTests.richJPEG())
        XCTAssertTrue(info.hasExif)
        XCTAssertTrue(info.hasGPS)
        XCTAssertTrue(info.hasXMP)
        XCTAssertTrue(info.hasIPTC)
        XCTAssertEqual(info.comments, 1)
        XCTAssertEqual(info.copyright, "(c) Tessera Tests")
        XCTAssertEqual(info.camera, "TestCam")
        XCTAssertNotNil(info.iccProfile)
        XCTAssertNotNil(info.exifThumbnailBytes)
        XCTAssertEqual(info.trailingBytes, 20)
    }

    func testDerivedOutputsCarryNoMetadata() throws {
        let source = try MetadataTests.richJPEG()
        for preset in ["default", "thumbnail", "favicon", "widget"] {
            let r = try PresetCatalog.builtIn.recipe(named: preset)
            let out = try Renderer.render(source, recipes: [r]).outputs[0].bytes
            let info = try ImageInfo.inspect(out)
            XCTAssertFalse(info.hasExif, preset)
            XCTAssertFalse(info.hasGPS, preset)
            XCTAssertFalse(info.hasXMP, preset)
            XCTAssertFalse(info.hasIPTC, preset)
            XCTAssertEqual(info.comments, 0, preset)
            XCTAssertNil(info.iccProfile, preset)
            XCTAssertEqual(info.trailingBytes, 0, preset)
            // Nothing of the GPS or XMP text survives anywhere in the bytes.
            XCTAssertNil(String(decoding: out, as: UTF8.self).range(of: "secret location"), preset)
        }
    }

    func testKeepingCopyrightKeepsOnlyCopyright() throws {
        let out = try Renderer.render(try MetadataTests.richJPEG(orientation: 6),
                                      recipes: [recipe([fit(32, 32)]) { $0.keep = [.copyright] }]).outputs[0]
        let info = try ImageInfo.inspect(out.bytes)
        XCTAssertEqual(info.copyright, "(c) Tessera Tests")
        XCTAssertFalse(info.hasGPS)
        XCTAssertNil(info.camera)
        XCTAssertEqual(info.orientation, 1, "pixels are upright; no tag to rotate them twice")
        XCTAssertEqual(out.size, Size(width: 24, height: 32))
    }

    func testExifRoundTripThroughLibexif() throws {
        let payload = Exif.build(orientation: 8, copyright: "me", gps: (latitude: -33.9, longitude: 151.2), make: "X")
        XCTAssertEqual(Array(payload.prefix(6)), Array("Exif".utf8) + [0, 0])
        let s = try XCTUnwrap(Exif.read(payload))
        XCTAssertEqual(s.orientation, 8)
        XCTAssertEqual(s.copyright, "me")
        XCTAssertEqual(s.make, "X")
        XCTAssertTrue(s.hasGPS)
        XCTAssertFalse(try XCTUnwrap(Exif.read(Exif.build(orientation: 1))).hasGPS)
    }

    func testInspectDescribesStructure() throws {
        let progressive = try Codec.encodeJPEG(Fixtures.noise(width: 40, height: 30), quality: 80,
                                               subsampling: .s420, progressive: true, exif: Exif.build(orientation: 6))
        let info = try ImageInfo.inspect(progressive)
        XCTAssertEqual(info.format, .jpeg)
        XCTAssertTrue(info.progressive)
        XCTAssertEqual(info.codingProcess, "progressive")
        XCTAssertEqual(info.subsampling, "4:2:0")
        XCTAssertEqual(info.orientation, 6)
        XCTAssertEqual(info.displayWidth, 30)
        XCTAssertEqual(info.displayHeight, 40)
        XCTAssertEqual(info.structure.first, "SOI")
        XCTAssertEqual(info.structure.last, "EOI")
        let png = try ImageInfo.inspect(try Codec.encodePNG(Fixtures.noise(width: 5, height: 4, layout: .rgba)))
        XCTAssertEqual(png.format, .png)
        XCTAssertTrue(png.hasAlpha)
        XCTAssertEqual(png.structure, ["IHDR", "IDAT", "IEND"])
    }
}
