import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel

/// Ultra HDR JPEGs: gain maps found, checked, resized with the image and written again,
/// and the HDR rendition they give (the spec's formula, below) kept through a thumbnail.
final class GainMapTests: XCTestCase {
    static let metadata = GainMapMetadata(minLog2: [0], maxLog2: [2.5], gamma: [1], offsetSDR: [1.0 / 64], offsetHDR: [1.0 / 64],
                                          capacityMinLog2: 0, capacityMaxLog2: 2.5)

    /// An image whose left half is dark and right half bright, stored; the map the same
    /// (0 left, 255 right), at ¼ size, so the map's and the image's layout can be compared.
    static func halves(width: Int, height: Int, left: [UInt8], right: [UInt8]) -> PixelBuffer {
        let layout: PixelLayout = left.count == 1 ? .gray : .rgb
        let image = PixelBuffer(width: width, height: height, layout: layout)
        for y in 0..<height { for x in 0..<width { image.setPixel(x: x, y: y, x < width / 2 ? left : right) } }
        return image
    }

    /// An Ultra HDR JPEG made by the project's own writer.
    static func ultraHDR(width: Int = 512, height: Int = 384, orientation: Int? = nil,
                         metadata: GainMapMetadata = metadata, map: PixelBuffer? = nil) throws -> [UInt8] {
        let settings = JPEGEncoder.Settings(quality: 92, progressive: false, optimize: true, subsampling: .s444)
        let primary = try JPEGEncoder.encode(halves(width: width, height: height, left: [40, 60, 90], right: [220, 200, 180]),
                                             settings, exif: orientation.map { Exif.build(orientation: $0) })
        let m = map ?? halves(width: width / 4, height: height / 4, left: [0], right: [255])
        return UltraHDR.assemble(primary: primary, map: try JPEGEncoder.encode(m, settings), metadata: metadata)
    }

    static func located(_ file: [UInt8]) -> UltraHDR.Found? { file.withUnsafeBytes { UltraHDR.locate($0, limits: Limits()) } }

    static func usable(_ file: [UInt8], file path: StaticString = #filePath, line: UInt = #line) throws -> GainMapSource {
        switch located(file) {
        case .usable(let s)?: return s
        case .unusable(let i)?: XCTFail("unusable: \(i.problem ?? "")", file: path, line: line)
        case nil: XCTFail("no gain map found", file: path, line: line)
        }
        throw ImagingError(.corrupt, "no usable gain map")
    }

    /// The map of an Ultra HDR file, decoded.
    static func mapPixels(_ file: [UInt8]) throws -> PixelBuffer {
        let s = try usable(file)
        return try Renderer.decode(Array(file[s.range]))
    }

    // MARK: Reading and writing

    func testMetadataRoundTripsThroughISOAndXMP() throws {
        let three = GainMapMetadata(minLog2: [-0.5, 0, 0.25], maxLog2: [3, 3.5, 4], gamma: [1, 1.2, 0.8],
                                    offsetSDR: [0.01, 0.02, 0.03], offsetHDR: [0, 0.01, 0.02],
                                    capacityMinLog2: 0.5, capacityMaxLog2: 4)
        for m in [Self.metadata, three] {
            let file = try Self.ultraHDR(metadata: m)
            let found = try Self.usable(file)
            XCTAssertEqual(found.info.metadata, ["hdrgm", "iso21496"])
            XCTAssertEqual(found.info.width, 128)
            XCTAssertEqual(found.info.height, 96)
            XCTAssertEqual(found.info.headroom, m.capacityMaxLog2, accuracy: 1e-3)
            assertClose(found.metadata, m)  // read from ISO 21496-1
            // The XMP alone gives the same values (a reader of hdrgm only).
            let xmp = UltraHDR.mapXMP(m)
            guard case .success(let fromXMP)? = UltraHDR.hdrgm(xmp) else { return XCTFail("hdrgm XMP did not parse: \(xmp)") }
            assertClose(fromXMP, m)
        }
    }

    func assertClose(_ a: GainMapMetadata, _ b: GainMapMetadata, file: StaticString = #filePath, line: UInt = #line) {
        for (x, y) in [(a.minLog2, b.minLog2), (a.maxLog2, b.maxLog2), (a.gamma, b.gamma), (a.offsetSDR, b.offsetSDR), (a.offsetHDR, b.offsetHDR)] {
            for c in 0..<3 { XCTAssertEqual(x[c], y[c], accuracy: 1e-6, file: file, line: line) }
        }
        XCTAssertEqual(a.capacityMinLog2, b.capacityMinLog2, accuracy: 1e-6, file: file, line: line)
        XCTAssertEqual(a.capacityMaxLog2, b.capacityMaxLog2, accuracy: 1e-6, file: file, line: line)
        XCTAssertEqual(a.baseIsHDR, b.baseIsHDR, file: file, line: line)
    }

    /// A 2048x1536 image with a 512x384 map: at 1024 px the map keeps its ¼; at 256 px it
    /// keeps 160 px on its long side (`GainMapStep.minimumLongSide`).
    func testARenderKeepsAResizedMapAndInspectReportsIt() throws {
        let file = try Self.ultraHDR(width: 2048, height: 1536)
        let result = try Renderer.render(file, recipes: [recipe([fit(1024, nil)]), recipe([fit(256, nil)])])
        XCTAssertEqual(result.gainMap?.width, 512)
        for (out, map) in zip(result.outputs, [Size(width: 256, height: 192), Size(width: 160, height: 120)]) {
            XCTAssertEqual(out.file.record.gainMap?.action, "kept")
            XCTAssertEqual(out.file.record.gainMap?.width, map.width)
            XCTAssertEqual(out.file.record.gainMap?.height, map.height)
            let pixels = try Self.mapPixels(out.bytes)
            XCTAssertEqual(Size(width: pixels.width, height: pixels.height), map)
            XCTAssertEqual(pixels.layout, .gray)
            let third = map.width / 3
            XCTAssertLessThan(pixels.mean(x: 0, y: 0, width: third, height: map.height)[0], 8)    // dark half stays 0
            XCTAssertGreaterThan(pixels.mean(x: map.width - third, y: 0, width: third, height: map.height)[0], 247)
        }
        let out = result.outputs[1]
        XCTAssertEqual(out.size, Size(width: 256, height: 192))
        let found = try Self.usable(out.bytes)
        assertClose(found.metadata, Self.metadata)
        let info = try ImageInfo.inspect(out.bytes)
        XCTAssertEqual(info.gainMap?.width, 160)
        XCTAssertEqual(info.gainMap?.metadata, ["hdrgm", "iso21496"])
        XCTAssertNil(info.gainMap?.problem)
        // Dropped on request: a plain JPEG, said so.
        var drop = RenderOptions()
        drop.gainMap = .drop
        let plain = try Renderer.render(file, recipes: [recipe([fit(256, nil)])], options: drop).outputs[0]
        XCTAssertNil(Self.located(plain.bytes))
        XCTAssertEqual(plain.file.record.gainMap?.action, "dropped")
        XCTAssertLessThan(plain.bytes.count, out.bytes.count)
    }

    /// EXIF orientation 6 (90° clockwise): the map turns with the image (stored left half
    /// dark in both: displayed, the top half is dark in both).
    func testTheMapTurnsWithTheImage() throws {
        let file = try Self.ultraHDR(orientation: 6)
        let out = try Renderer.render(file, recipes: [recipe([fit(192, 256)])]).outputs[0]
        XCTAssertEqual(out.size, Size(width: 192, height: 256))
        let image = try Renderer.decode(out.bytes)
        let map = try Self.mapPixels(out.bytes)
        // All of the source's 128x96 map (160 px would be more than it has), upright.
        XCTAssertEqual(map.width, 96)
        XCTAssertEqual(map.height, 128)
        XCTAssertLessThan(image.mean(x: 0, y: 0, width: 192, height: 110)[0], 80)
        XCTAssertGreaterThan(image.mean(x: 0, y: 146, width: 192, height: 110)[0], 180)
        XCTAssertLessThan(map.mean(x: 0, y: 0, width: 96, height: 56)[0], 8)
        XCTAssertGreaterThan(map.mean(x: 0, y: 72, width: 96, height: 56)[0], 247)
    }

    /// A crop takes the map's part of the region: the right half of the image has only the bright map.
    func testACropTakesTheMapsRegion() throws {
        let file = try Self.ultraHDR()
        let crop = RecipeOperation.crop(Crop(x: 300, y: 0, width: 200, height: 384))
        let out = try Renderer.render(file, recipes: [recipe([crop, fit(100, nil)])]).outputs[0]
        let map = try Self.mapPixels(out.bytes)
        XCTAssertEqual(map.width, 50)  // the map's 50 columns under the crop, no more
        XCTAssertEqual(map.height, 96)
        XCTAssertGreaterThan(map.mean(x: 0, y: 0, width: 25, height: map.height)[0], 250)
    }

    func testWhatDropsTheMapSaysWhy() throws {
        let file = try Self.ultraHDR()
        let adjust = RecipeOperation.adjust(ColourAdjustment(brightness: 0.1))
        let cases: [(Recipe, String)] = [
            (recipe([fit(256, nil), adjust]), "adjust"),
            (recipe([fit(256, nil)], format: .webp), "WEBP cannot carry"),
            (recipe([fit(256, nil)], format: .avif), "libheif"),
            (PresetCatalog.builtIn["widget"]!, "widgets are SDR"),
        ]
        for (r, reason) in cases {
            let out = try Renderer.render(file, recipes: [r]).outputs[0]
            XCTAssertEqual(out.file.record.gainMap?.action, "dropped", reason)
            XCTAssertTrue(out.file.record.gainMap?.reason?.contains(reason) ?? false, "\(out.file.record.gainMap?.reason ?? "nil") lacks \(reason)")
            XCTAssertNil(Self.located(out.bytes), reason)
        }
        // Sharpening keeps it; a byte budget counts both images.
        let sharp = try Renderer.render(file, recipes: [recipe([fit(256, nil), .sharpen(UnsharpMask())])]).outputs[0]
        XCTAssertEqual(sharp.file.record.gainMap?.action, "kept")
        let unbounded = try Renderer.render(file, recipes: [recipe([fit(512, nil)], quality: 1.0)]).outputs[0]
        let budget = unbounded.bytes.count - 1
        let fitted = try Renderer.render(file, recipes: [recipe([fit(512, nil)], quality: 1.0) { $0.maxBytes = budget }]).outputs[0]
        XCTAssertEqual(fitted.file.record.gainMap?.action, "kept")
        XCTAssertLessThanOrEqual(fitted.bytes.count, budget)
        XCTAssertLessThan(fitted.quality ?? 100, 100)
    }

    func testStripKeepsTheMapUnlessTold() throws {
        var file = try Self.ultraHDR()
        // Some metadata to strip: a comment after SOI.
        file.insert(contentsOf: [0xFF, 0xFE, 0x00, 0x07] + Array("hello".utf8), at: 2)
        let kept = try LosslessStrip.strip(file)
        XCTAssertEqual(kept.gainMap?.action, "kept")
        XCTAssertTrue(kept.removed.contains("COM"))
        XCTAssertEqual(try Self.mapPixels(kept.bytes).bytes, try Self.mapPixels(file).bytes)  // the map's pixels untouched
        XCTAssertEqual(try Renderer.decode(kept.bytes).bytes, try Renderer.decode(file).bytes)
        let dropped = try LosslessStrip.strip(file, options: StripOptions(keepGainMap: false))
        XCTAssertEqual(dropped.gainMap?.action, "dropped")
        XCTAssertNil(Self.located(dropped.bytes))
    }

    /// `apply`: the HDR rendition as a PQ AVIF — the dark half (map 0) at its SDR light, the
    /// bright half (map 255) 2.5 stops up, SDR white at 203 cd/m².
    func testApplyWritesTheHDRRenditionInPQ() throws {
        guard AVIFEncoder.isAvailable else { throw XCTSkip("no AV1 encoder") }
        let file = try Self.ultraHDR()
        var options = RenderOptions()
        options.gainMap = .apply
        let out = try Renderer.render(file, recipes: [recipe([fit(256, nil)], format: .original, quality: 0.95)], options: options).outputs[0]
        XCTAssertEqual(out.format, .avif)
        XCTAssertEqual(out.file.record.gainMap?.action, "applied")
        let image = try out.bytes.withUnsafeBytes { try HEIFDecoder(bytes: $0, limits: Limits()).decode() }
        XCTAssertEqual(image.bits, AVIFEncoder.hdrBits)
        func nits(x: Int, y: Int, channel: Int) -> Double {
            let raw = UnsafeRawPointer(image.plane + y * image.stride)
            let code = Double(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: (x * image.channels + channel) * 2, as: UInt16.self)))
            let e = pow(code / Double((1 << image.bits) - 1), 1 / 78.84375)  // the PQ EOTF
            return 10000 * pow(max(0, e - 0.8359375) / (18.8515625 - 18.6875 * e), 1 / 0.1593017578125)
        }
        func expected(_ srgb: UInt8, stops: Double) -> Double {
            (SRGB.decode(Double(srgb) / 255) + 1.0 / 64) * exp2(stops) * 203 - 203.0 / 64
        }
        for (x, colour, stops) in [(40, [40, 60, 90] as [UInt8], 0.0), (216, [220, 200, 180], 2.5)] {
            for c in 0..<3 {
                let got = nits(x: x, y: 96, channel: c), want = expected(colour[c], stops: stops)
                XCTAssertEqual(got, want, accuracy: want * 0.06 + 0.5, "x \(x) channel \(c)")
            }
        }
        // Formats that cannot hold it keep the SDR image and say why.
        let jpeg = try Renderer.render(file, recipes: [recipe([fit(256, nil)])], options: options).outputs[0]
        XCTAssertEqual(jpeg.format, .jpeg)
        XCTAssertTrue(jpeg.file.record.gainMap?.reason?.contains("HDR AVIF") ?? false)
    }

    /// The light of a PQ AVIF's pixel, in cd/m².
    static func pqNits(_ bytes: [UInt8], x: Int, y: Int, channel: Int) throws -> Double {
        let image = try bytes.withUnsafeBytes { try HEIFDecoder(bytes: $0, limits: Limits()).decode() }
        let raw = UnsafeRawPointer(image.plane + y * image.stride)
        let code = Double(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: (x * image.channels + channel) * 2, as: UInt16.self)))
        let e = pow(code / Double((1 << image.bits) - 1), 1 / 78.84375)
        return 10000 * pow(max(0, e - 0.8359375) / (18.8515625 - 18.6875 * e), 1 / 0.1593017578125)
    }

    /// `--hdr keep`: an HDR AVIF (PQ) source keeps its light — as an Ultra HDR JPEG (the tone
    /// map undone by a generated gain map) and as a PQ AVIF — where tone-mapping would cap it
    /// at SDR white.
    func testAnHDRSourceKeptHDR() throws {
        guard AVIFEncoder.isAvailable, HEIFDecoder.canDecodeAVIF else { throw XCTSkip("no AV1 encoder") }
        // The source: dark half at SDR light, bright half 2 stops up (up to 812 cd/m²).
        let meta = GainMapMetadata(minLog2: [0], maxLog2: [2], gamma: [1], offsetSDR: [0], offsetHDR: [0], capacityMaxLog2: 2)
        let samples = HDRRendition.pq(sdr: Self.halves(width: 512, height: 384, left: [40, 60, 90], right: [220, 200, 180]),
                                      map: Self.halves(width: 128, height: 96, left: [0], right: [255]), metadata: meta,
                                      headroomStops: 2, bits: AVIFEncoder.hdrBits)
        let source = try samples.withUnsafeBufferPointer {
            try AVIFEncoder.encodeHDR($0, width: 512, height: 384, .init(quality: 95, speed: 8, subsampling: .s444), nclx: (1, 16, 1))
        }
        func expected(_ srgb: UInt8, stops: Double) -> Double { SRGB.decode(Double(srgb) / 255) * exp2(stops) * 203 }
        var options = RenderOptions()
        options.hdr = .keep
        let result = try Renderer.render(source, recipes: [recipe([fit(256, nil)]), recipe([fit(256, nil)], format: .avif, quality: 0.95)],
                                         options: options)
        XCTAssertEqual(result.gainMap?.kind, "hdr")
        let (jpeg, avif) = (result.outputs[0], result.outputs[1])
        XCTAssertEqual(jpeg.file.record.gainMap?.action, "kept")
        XCTAssertEqual(avif.file.record.gainMap?.action, "applied")
        let found = try Self.usable(jpeg.bytes)
        let hdr = HDR.reconstruct(sdr: try Renderer.decode(jpeg.bytes), map: try Self.mapPixels(jpeg.bytes), metadata: found.metadata)
        for (x, colour, stops) in [(40, [40, 60, 90] as [UInt8], 0.0), (216, [220, 200, 180], 2.0)] {
            for c in 0..<3 {
                let want = expected(colour[c], stops: stops)
                XCTAssertEqual(Double(hdr[(96 * 256 + x) * 3 + c]) * 203, want, accuracy: want * 0.08 + 1, "JPEG x \(x) channel \(c)")
                XCTAssertEqual(try Self.pqNits(avif.bytes, x: x, y: 96, channel: c), want, accuracy: want * 0.08 + 1, "AVIF x \(x) channel \(c)")
            }
        }
        // Tone-mapped (the default), the bright half stays within SDR white.
        let sdr = try Renderer.render(source, recipes: [recipe([fit(256, nil)])]).outputs[0]
        XCTAssertNil(sdr.file.record.gainMap)
        XCTAssertNil(Self.located(sdr.bytes))
    }

    // MARK: Apple's HEIC gain maps

    /// An EXIF payload (TIFF, big-endian) whose Exif IFD holds Apple's maker note with tags
    /// 33 and 48 as SRATIONALs.
    static func appleExif(maker33: Double, maker48: Double) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func u32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        // The maker note: signature, version, "MM", an IFD of two SRATIONAL entries, their values.
        var note = Array("Apple iOS\0".utf8) + [0, 1] + Array("MM".utf8)
        note += u16(2)
        let values = 16 + 2 * 12 + 4
        note += u16(33) + u16(10) + u32(1) + u32(values)
        note += u16(48) + u16(10) + u32(1) + u32(values + 8)
        note += u32(0)
        note += u32(Int(maker33 * 1_000_000)) + u32(1_000_000) + u32(Int(maker48 * 1_000_000)) + u32(1_000_000)
        // TIFF: IFD0 (Make, ExifIFD pointer), the Exif IFD (MakerNote), the data.
        var tiff = Array("MM".utf8) + u16(42) + u32(8)
        let ifd0 = 8, exifIFD = ifd0 + 2 + 2 * 12 + 4, make = exifIFD + 2 + 12 + 4, noteAt = make + 6
        tiff += u16(2) + u16(0x010F) + u16(2) + u32(6) + u32(make) + u16(0x8769) + u16(4) + u32(1) + u32(exifIFD) + u32(0)
        tiff += u16(1) + u16(0x927C) + u16(7) + u32(note.count) + u32(noteAt) + u32(0)
        tiff += Array("Apple\0".utf8)
        tiff += note
        return Array("Exif\0\0".utf8) + tiff
    }

    func testAppleHeadroomAndItsISOForm() throws {
        // Apple's piecewise formula at its four branches.
        XCTAssertEqual(AppleHDR.headroomStops(maker33: 0.5, maker48: 0.005), 1.7, accuracy: 1e-9)
        XCTAssertEqual(AppleHDR.headroomStops(maker33: 0.5, maker48: 0.1), 1.5909, accuracy: 1e-9)
        XCTAssertEqual(AppleHDR.headroomStops(maker33: 1.2, maker48: 0.005), 2.65, accuracy: 1e-9)
        XCTAssertEqual(AppleHDR.headroomStops(maker33: 1.2, maker48: 0.5), 2.1515, accuracy: 1e-9)
        XCTAssertEqual(AppleHDR.headroomStops(maker33: 1.2, maker48: 9), 0)
        // The maker note read back from an EXIF payload.
        let values = try XCTUnwrap(AppleHDR.makerValues(exif: Self.appleExif(maker33: 1.2, maker48: 0.005)))
        XCTAssertEqual(values.0, 1.2, accuracy: 1e-6)
        XCTAssertEqual(values.1, 0.005, accuracy: 1e-6)
        XCTAssertNil(AppleHDR.makerValues(exif: Exif.build(orientation: 6)))
        // The recoded map gives Apple's rendition through ISO 21496-1's formula.
        let stops = 2.65, table = AppleHDR.recode(stops: stops), m = AppleHDR.metadata(stops: stops)
        XCTAssertNil(m.problem())
        XCTAssertEqual(table[0], 0)
        XCTAssertEqual(table[255], 255)
        for v in [0, 40, 128, 200, 255] {
            let x = Double(v) / 255
            let gain = x < 0.081 ? x / 4.5 : pow((x + 0.099) / 1.099, 1 / 0.45)
            let apple = 1 + (exp2(stops) - 1) * gain
            let iso = exp2(m.maxLog2[0] * Double(table[v]) / 255)
            XCTAssertEqual(iso, apple, accuracy: apple * 0.02, "value \(v)")
        }
    }

    /// An iPhone-like HEIF: the image with Apple's maker note in its Exif item and the gain
    /// map as an auxiliary image (assembled from two files libheif wrote: 1.15 cannot write
    /// an auxiliary image). It becomes an Ultra HDR JPEG whose map reads as Apple's.
    func testAnAppleHEIFGainMapBecomesUltraHDR() throws {
        guard AVIFEncoder.isAvailable, HEIFDecoder.canDecodeAVIF else { throw XCTSkip("no AV1 encoder") }
        try appleHEIF(hevc: false)
        // HEVC, as iPhones write it, where this libheif has x265.
        if HEIFDecoder.canEncodeHEIC && HEIFDecoder.canDecodeHEIC { try appleHEIF(hevc: true) }
    }

    func appleHEIF(hevc: Bool) throws {
        var extras = AVIFEncoder.Extras()
        extras.hevc = hevc
        extras.exif = Array(Self.appleExif(maker33: 1.2, maker48: 0.005).dropFirst(6))
        let image = try AVIFEncoder.encode(Self.halves(width: 512, height: 384, left: [40, 60, 90], right: [220, 200, 180]),
                                           .init(quality: 90, speed: 8, subsampling: .s444), extras: extras)
        var mono = AVIFEncoder.Extras()
        mono.monochrome = true
        mono.hevc = hevc
        let map = try AVIFEncoder.encode(Self.halves(width: 128, height: 96, left: [0], right: [255]),
                                         .init(quality: 95, speed: 8, subsampling: .s444), extras: mono)
        let heif = HEIFAssembly.addAuxiliary(to: image, map, type: HEIFDecoder.appleGainMapType)
        let info = try ImageInfo.inspect(heif)
        XCTAssertEqual(info.gainMap?.kind, "apple")
        XCTAssertNil(info.gainMap?.problem, info.gainMap?.problem ?? "")
        XCTAssertEqual(info.gainMap?.width, 128)
        XCTAssertEqual(info.gainMap?.headroom ?? 0, 2.65, accuracy: 1e-3)
        let out = try Renderer.render(heif, recipes: [recipe([fit(256, nil)], format: .jpeg)]).outputs[0]
        XCTAssertEqual(out.format, .jpeg)
        XCTAssertEqual(out.file.record.gainMap?.action, "kept")
        let found = try Self.usable(out.bytes)
        XCTAssertEqual(found.metadata.maxLog2[0], 2.65, accuracy: 1e-5)
        XCTAssertEqual(found.metadata.offsetSDR[0], 0)
        let pixels = try Self.mapPixels(out.bytes)
        XCTAssertEqual(pixels.width, 128)  // the whole map (160 px would be more than it has)
        XCTAssertLessThan(pixels.mean(x: 0, y: 0, width: 40, height: 96)[0], 10)
        XCTAssertGreaterThan(pixels.mean(x: 88, y: 0, width: 40, height: 96)[0], 245)
        // Without the maker note's headroom the map is unusable, and says why.
        var plain = AVIFEncoder.Extras()
        plain.hevc = hevc
        let bare = HEIFAssembly.addAuxiliary(to: try AVIFEncoder.encode(Self.halves(width: 512, height: 384, left: [1, 2, 3], right: [4, 5, 6]),
                                                                         .init(quality: 50, speed: 9, subsampling: .s420), extras: plain),
                                             map, type: HEIFDecoder.appleGainMapType)
        XCTAssertTrue(try ImageInfo.inspect(bare).gainMap?.problem?.contains("tags 33 and 48") ?? false)
        // A maker note giving hundreds of stops: unusable, said so.
        var wild = AVIFEncoder.Extras()
        wild.hevc = hevc
        wild.exif = Array(Self.appleExif(maker33: 1.2, maker48: -1000).dropFirst(6))
        let huge = HEIFAssembly.addAuxiliary(to: try AVIFEncoder.encode(Self.halves(width: 512, height: 384, left: [1, 2, 3], right: [4, 5, 6]),
                                                                         .init(quality: 50, speed: 9, subsampling: .s420), extras: wild),
                                             map, type: HEIFDecoder.appleGainMapType)
        XCTAssertTrue(try ImageInfo.inspect(huge).gainMap?.problem?.contains("headroom of") ?? false)
        let sdr = try Renderer.render(bare, recipes: [recipe([fit(64, nil)])]).outputs[0]
        XCTAssertEqual(sdr.file.record.gainMap?.action, "dropped", hevc ? "HEVC" : "AV1")
    }

    // MARK: Hostile files

    func testBrokenMapsAreDroppedWithTheReasonNeverACrash() throws {
        let good = try Self.ultraHDR()
        let found = try Self.usable(good)
        func problem(_ file: [UInt8]) -> String? {
            if case .unusable(let i)? = Self.located(file) { return i.problem }
            return nil
        }
        // The map cut off: MPF points past the end.
        let cut = Array(good[..<(found.range.lowerBound + 200)])
        XCTAssertTrue(problem(cut)?.contains("outside the file") ?? false, problem(cut) ?? "nil")
        // The map's frame claims 60,000 x 60,000 pixels (the image is 512x384).
        var huge = good
        let sof = try XCTUnwrap(UltraHDR.headerSegments(UnsafeRawBufferPointer(rebasing: good.withUnsafeBytes { $0 }[found.range]))
            .first(where: UltraHDR.isFrame))
        let at = found.range.lowerBound + sof.payload.lowerBound
        huge[at + 1] = 0xEA; huge[at + 2] = 0x60; huge[at + 3] = 0xEA; huge[at + 4] = 0x60
        XCTAssertTrue(problem(huge)?.contains("larger than the image") ?? false, problem(huge) ?? "nil")
        // NaN, infinite and contradictory values (the XMP and the ISO block both said so).
        for (m, words) in [
            (GainMapMetadata(minLog2: [3], maxLog2: [1], capacityMaxLog2: 2), "above GainMapMax"),
            (GainMapMetadata(minLog2: [0], maxLog2: [40], capacityMaxLog2: 2), "16 stops"),
            (GainMapMetadata(minLog2: [0], maxLog2: [2], capacityMinLog2: 2, capacityMaxLog2: 2), "not below"),
            (GainMapMetadata(minLog2: [0], maxLog2: [2], gamma: [0], capacityMaxLog2: 2), "Gamma"),
        ] {
            let bad = try Self.ultraHDR(metadata: m)
            XCTAssertTrue(problem(bad)?.contains(words) ?? false, "\(problem(bad) ?? "nil") lacks \(words)")
            let out = try Renderer.render(bad, recipes: [recipe([fit(64, nil)])]).outputs[0]
            XCTAssertEqual(out.file.record.gainMap?.action, "dropped")
        }
        if case .failure(let p)? = UltraHDR.hdrgm(UltraHDR.mapXMP(Self.metadata).replacingOccurrences(of: "GainMapMax=\"2.5\"", with: "GainMapMax=\"nan\"")) {
            XCTFail("parsed nan as a failure: \(p.reason)")
        } else if case .success(let m)? = UltraHDR.hdrgm(UltraHDR.mapXMP(Self.metadata).replacingOccurrences(of: "GainMapMax=\"2.5\"", with: "GainMapMax=\"nan\"")) {
            XCTAssertTrue(m.problem()?.contains("nan") ?? false)
        }
        // Capacities just over a thousandth of a stop apart stay usable once written in millionths.
        let close = GainMapMetadata(minLog2: [0], maxLog2: [0.5], capacityMinLog2: 0.0079756, capacityMaxLog2: 0.0089764)
        XCTAssertNil(close.problem())
        _ = try Self.usable(try Self.ultraHDR(metadata: close))
        // A NaN or huge capacity: unusable, and the record's headroom stays a number JSON can write.
        for value in ["nan", "1e308"] {
            var xmpOnly = try Self.ultraHDR()
            let text = Array("hdrgm:HDRCapacityMax=\"2.5\"".utf8), bad = Array("hdrgm:HDRCapacityMax=\"\(value)\"".utf8)
            if let at = (0...(xmpOnly.count - text.count)).first(where: { Array(xmpOnly[$0..<($0 + text.count)]) == text }) {
                xmpOnly.replaceSubrange(at..<(at + text.count), with: bad)
            }
            // The ISO block wins over the XMP: take it away (rename its signature).
            let iso = UltraHDR.isoSignature
            var k = 0
            while k + iso.count <= xmpOnly.count {
                if Array(xmpOnly[k..<(k + iso.count)]) == iso { xmpOnly[k + 4] = UInt8(ascii: "x") }
                k += 1
            }
            guard case .unusable(let info)? = Self.located(xmpOnly) else { XCTFail("\(value) was usable"); continue }
            XCTAssertTrue(info.headroom.isFinite)
            XCTAssertNoThrow(try JSONEncoder().encode(info))
        }
        // A zero denominator in the ISO block.
        var iso = UltraHDR.isoMetadata(Self.metadata)
        iso.replaceSubrange(5..<9, with: [0, 0, 0, 0])
        let zero = iso.withUnsafeBytes { UltraHDR.iso21496($0, 0..<iso.count) }
        guard case .failure(let z) = zero else { return XCTFail("a zero denominator was accepted") }
        XCTAssertTrue(z.reason.contains("zero denominator"))
        // Every prefix of the ISO block fails typed, none crashes.
        for n in 0..<iso.count {
            let prefix = Array(UltraHDR.isoMetadata(Self.metadata)[..<n])
            if case .success = prefix.withUnsafeBytes({ UltraHDR.iso21496($0, 0..<n) }) { XCTFail("a \(n)-byte ISO block parsed") }
        }
        // A map whose scan data is damaged: the image renders, the map is dropped with the reason.
        var damaged = good
        let sos = try XCTUnwrap(UltraHDR.headerSegments(UnsafeRawBufferPointer(rebasing: good.withUnsafeBytes { $0 }[found.range]))
            .last)  // the segment before the scan: the scan data starts a little after it
        let scan = found.range.lowerBound + sos.range.upperBound + 40
        XCTAssertLessThan(scan + 2, found.range.upperBound)
        damaged[scan] = 0xFF
        damaged[scan + 1] = 0xD9  // an EOI in the middle of the map's scan
        let out = try Renderer.render(damaged, recipes: [recipe([fit(128, nil)])]).outputs[0]
        XCTAssertEqual(out.file.record.gainMap?.action, "dropped")
        XCTAssertTrue(out.file.record.gainMap?.reason?.contains("does not decode") ?? false, out.file.record.gainMap?.reason ?? "nil")
    }

    /// A camera's MPF preview image is not a gain map.
    func testAnMPFPreviewIsNotAGainMap() throws {
        var file = try Self.ultraHDR()
        for (from, to) in [("urn:iso:std:iso:ts:21496:-1", "urn:xxx:std:iso:ts:21496:-1"), ("hdr-gain-map", "hdr-gain-mop")] {
            let f = Array(from.utf8), t = Array(to.utf8)
            var i = 0
            while i + f.count <= file.count {
                if Array(file[i..<(i + f.count)]) == f { file.replaceSubrange(i..<(i + f.count), with: t) }
                i += 1
            }
        }
        XCTAssertNil(Self.located(file))
        let out = try Renderer.render(file, recipes: [recipe([fit(64, nil)])]).outputs[0]
        XCTAssertNil(out.file.record.gainMap)
    }

    // MARK: The HDR rendition

    /// The corpus' Ultra HDR JPEG (sharp's fixture): thumbnails at 256 px and 1280x720 carry
    /// a map of ¼ their size, and the HDR rendition rebuilt from each matches the source's
    /// own, resized: PSNR ≥ 35 dB in linear light.
    func testCorpusReconstructionMatchesTheSource() throws {
        guard let dir = Fixtures.corpus("photos") else { throw XCTSkip("no ../shared/corpus") }
        let source = try bytes(of: dir.appendingPathComponent("sharp_gain-map.jpg"))
        let found = try Self.usable(source)
        XCTAssertEqual(found.info.width, 960)
        XCTAssertEqual(found.info.headroom, 6.644, accuracy: 0.01)
        // The source's rendition at the map's resolution (the image decoded at ¼), the reference.
        var full = RenderOptions()
        full.gainMap = .drop
        let sdr = try Renderer.decode(source, recipe: recipe([fit(960, 540)]), options: full)
        let map = try Renderer.decode(Array(source[found.range]))
        let reference = HDR.reconstruct(sdr: sdr, map: map, metadata: found.metadata)
        for box in [(256, 256), (1280, 720)] {
            let out = try Renderer.render(source, recipes: [recipe([fit(box.0, box.1)], quality: 0.85)]).outputs[0]
            let outMap = try Self.usable(out.bytes)
            // ¼ of the image, at least 160 px on the long side.
            let long = max(160, out.size.width / 4)
            XCTAssertEqual(outMap.info.width, long)
            XCTAssertEqual(outMap.info.height, (out.size.height * long + out.size.width / 2) / out.size.width)
            let rendition = HDR.reconstruct(sdr: try Renderer.decode(out.bytes), map: try Self.mapPixels(out.bytes),
                                            metadata: outMap.metadata)
            let expected = HDR.resize(reference, width: 960, height: 540, to: out.size.width, out.size.height)
            let psnr = HDR.psnr(rendition, expected)
            XCTAssertGreaterThanOrEqual(psnr, 35, "\(box): \(psnr) dB")
        }
    }
}

/// The Ultra HDR / ISO 21496-1 reconstruction, written from the spec for the tests: the
/// SDR image in linear light, the map upsampled bilinearly to it, full headroom.
enum HDR {
    static func reconstruct(sdr: PixelBuffer, map: PixelBuffer, metadata m: GainMapMetadata) -> [Float] {
        let w = sdr.width, h = sdr.height
        var out = [Float](repeating: 0, count: w * h * 3)
        let sx = Double(map.width) / Double(w), sy = Double(map.height) / Double(h)
        let weight = m.weight(displayHeadroomStops: m.capacityMaxLog2)
        let s = sdr.bytes, g = map.bytes
        let linear = (0..<256).map { Float(SRGB.decode(Double($0) / 255)) }
        for y in 0..<h {
            let fy = max(0, (Double(y) + 0.5) * sy - 0.5)
            let y0 = min(Int(fy), map.height - 1), y1 = min(y0 + 1, map.height - 1), ty = fy - Double(y0)
            for x in 0..<w {
                let fx = max(0, (Double(x) + 0.5) * sx - 0.5)
                let x0 = min(Int(fx), map.width - 1), x1 = min(x0 + 1, map.width - 1), tx = fx - Double(x0)
                for c in 0..<3 {
                    func at(_ xx: Int, _ yy: Int) -> Double {
                        Double(g[yy * map.stride + xx * map.channels + (map.channels == 3 ? c : 0)]) / 255
                    }
                    let v = (at(x0, y0) * (1 - tx) + at(x1, y0) * tx) * (1 - ty) + (at(x0, y1) * (1 - tx) + at(x1, y1) * tx) * ty
                    let recovery = pow(v, 1 / m.gamma[c])
                    let logBoost = (m.minLog2[c] * (1 - recovery) + m.maxLog2[c] * recovery) * weight
                    let base = Double(linear[Int(s[y * sdr.stride + x * sdr.channels + (sdr.channels == 3 ? c : 0)])])
                    out[(y * w + x) * 3 + c] = Float((base + m.offsetSDR[c]) * exp2(logBoost) - m.offsetHDR[c])
                }
            }
        }
        return out
    }

    /// Area-average resize of linear RGB floats (the reference resized as a resampler would).
    static func resize(_ image: [Float], width: Int, height: Int, to ow: Int, _ oh: Int) -> [Float] {
        var out = [Float](repeating: 0, count: ow * oh * 3)
        let kx = Double(width) / Double(ow), ky = Double(height) / Double(oh)
        for oy in 0..<oh {
            let y0 = Double(oy) * ky, y1 = y0 + ky
            for ox in 0..<ow {
                let x0 = Double(ox) * kx, x1 = x0 + kx
                var sum = [Double](repeating: 0, count: 3), area = 0.0
                for y in Int(y0)..<min(height, Int(y1.rounded(.up))) {
                    let wy = min(Double(y + 1), y1) - max(Double(y), y0)
                    for x in Int(x0)..<min(width, Int(x1.rounded(.up))) {
                        let wx = min(Double(x + 1), x1) - max(Double(x), x0)
                        for c in 0..<3 { sum[c] += Double(image[(y * width + x) * 3 + c]) * wx * wy }
                        area += wx * wy
                    }
                }
                for c in 0..<3 { out[(oy * ow + ox) * 3 + c] = Float(sum[c] / area) }
            }
        }
        return out
    }

    /// PSNR against `reference`, its brightest value the peak.
    static func psnr(_ a: [Float], _ reference: [Float]) -> Double {
        var mse = 0.0, peak = 0.0
        for i in 0..<a.count {
            let d = Double(a[i]) - Double(reference[i])
            mse += d * d
            peak = max(peak, Double(reference[i]))
        }
        mse /= Double(a.count)
        return 10 * log10(peak * peak / max(mse, 1e-20))
    }
}
