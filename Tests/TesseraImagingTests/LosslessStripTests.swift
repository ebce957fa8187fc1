import TesseraImaging
import XCTest
import TesseraModel

final class LosslessStripTests: XCTestCase {
    func testStripRemovesMetadataAndKeepsScanDataIdentical() throws {
        let source = try MetadataTests.richJPEG(orientation: 6)
        let result = try LosslessStrip.strip(source)
        XCTAssertEqual(try Codec.jpegScanData(result.bytes), try Codec.jpegScanData(source))
        XCTAssertFalse(result.transformed)
        XCTAssertEqual(result.orientation, 6)
        for removed in ["EXIF", "XMP", "IPTC", "COM"] { XCTAssertTrue(result.removed.contains(removed), removed) }
        let info = try ImageInfo.inspect(result.bytes)
        XCTAssertFalse(info.hasGPS)
        XCTAssertFalse(info.hasXMP)
        XCTAssertFalse(info.hasIPTC)
        XCTAssertEqual(info.comments, 0)
        XCTAssertNil(info.copyright)
        XCTAssertNil(info.camera)
        XCTAssertNil(info.exifThumbnailBytes)
        XCTAssertEqual(info.trailingBytes, 0)
        XCTAssertEqual(info.orientation, 6, "still displays upright: the orientation tag is kept")
        XCTAssertNotNil(info.iccProfile, "ICC kept by default")
        XCTAssertLessThan(result.bytes.count, source.count)
        // Same pixels, as displayed.
        XCTAssertEqual(try Renderer.decode(result.bytes).bytes, try Renderer.decode(source).bytes)
    }

    func testStripCanDropICCAndKeepCopyright() throws {
        let result = try LosslessStrip.strip(try MetadataTests.richJPEG(),
                                             options: StripOptions(keepICC: false, keepCopyright: true))
        let info = try ImageInfo.inspect(result.bytes)
        XCTAssertNil(info.iccProfile)
        XCTAssertEqual(info.copyright, "(c) Tessera Tests")
        XCTAssertFalse(info.hasGPS)
        XCTAssertEqual(info.orientation, 1)
    }

    func testTransformRotatesLosslesslyWhenMCUsAllow() throws {
        // 64x48 4:2:0 is whole MCUs (16x16): the rotation is exact in the DCT domain.
        let displayed = Fixtures.quadrants(width: 48, height: 64)
        let source = try Codec.encodeJPEG(Orientation(exif: 6).inverse.apply(to: displayed), quality: 90,
                                          subsampling: .s420, exif: Exif.build(orientation: 6, gps: (1, 2)))
        let result = try LosslessStrip.strip(source, options: StripOptions(orientation: .transform))
        XCTAssertTrue(result.transformed)
        XCTAssertEqual(result.orientation, 1)
        let info = try ImageInfo.inspect(result.bytes)
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 48, height: 64))
        XCTAssertFalse(info.hasExif)
        let rotated = try Renderer.decode(result.bytes)
        let reference = try Renderer.decode(source)  // orientation applied by the decoder
        XCTAssertLessThan(meanAbsoluteDifference(rotated, reference), 2)
        assertColor(rotated.pixel(x: 6, y: 6), Quadrant.topLeft.color, tolerance: 24)
    }

    func testTransformFallsBackToTheTagForPartialMCUs() throws {
        let source = try Codec.encodeJPEG(Fixtures.noise(width: 65, height: 49), quality: 90, subsampling: .s420,
                                          exif: Exif.build(orientation: 6))
        let result = try LosslessStrip.strip(source, options: StripOptions(orientation: .transform))
        XCTAssertFalse(result.transformed)
        XCTAssertEqual(result.orientation, 6)
        XCTAssertEqual(try Codec.jpegScanData(result.bytes), try Codec.jpegScanData(source))
    }

    func testPNGStripKeepsImageDataAndOrientation() throws {
        var png = try Codec.encodePNG(Fixtures.noise(width: 20, height: 10))
        // Insert eXIf (orientation 8 + GPS) and a tEXt chunk after IHDR (8 + 25 bytes).
        let exif = Array(Exif.build(orientation: 8, gps: (10, 20)).dropFirst(6))
        let extra = pngChunk("eXIf", exif) + pngChunk("tEXt", Array("Author\0someone".utf8))
        png.insert(contentsOf: extra, at: 33)
        let before = try ImageInfo.inspect(png)
        XCTAssertTrue(before.hasGPS)
        XCTAssertEqual(before.orientation, 8)
        let result = try LosslessStrip.strip(png)
        let info = try ImageInfo.inspect(result.bytes)
        XCTAssertFalse(info.hasGPS)
        XCTAssertEqual(info.orientation, 8)
        XCTAssertEqual(info.comments, 0)
        XCTAssertEqual(info.structure, ["IHDR", "eXIf", "IDAT", "IEND"])
        XCTAssertEqual(try Renderer.decode(result.bytes).bytes, try Renderer.decode(png).bytes)
    }

    func testStripRefusesNonImages() {
        assertThrowsImagingError(.empty, try LosslessStrip.strip([]))
        assertThrowsImagingError(.unsupportedFormat, try LosslessStrip.strip(Array("BM............".utf8)))
        // A GIF is read, but not stripped in place: render it.
        assertThrowsImagingError(.unsupportedFeature, try LosslessStrip.strip(Array("GIF89a....".utf8)))
        assertThrowsImagingError(.truncated, try LosslessStrip.strip([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A]))
    }
}

/// A PNG chunk with its CRC-32 (written here independently of the library).
func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    var table = [UInt32](repeating: 0, count: 256)
    for n in 0..<256 {
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        table[n] = c
    }
    let body = Array(type.utf8) + data
    var crc: UInt32 = 0xFFFF_FFFF
    for b in body { crc = table[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
    crc ^= 0xFFFF_FFFF
    func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
    return be(UInt32(data.count)) + body + be(crc)
}
