import Foundation
import TesseraModel

/// Camera raw (DNG, CR2, CR3, NEF, ARW, RAF, RW2, ORF, PEF and the rest LibRaw reads)
/// through LibRaw, opened at the first raw file. Three decodes, the cheapest that serves
/// chosen by the renderer before any pixel is touched (`RawPlan`): the embedded JPEG preview
/// (decoded at its own DCT scale), LibRaw's half size (a pixel per 2×2 CFA block, no demosaic:
/// the raw counterpart of a scaled DCT decode), or a full AHD demosaic. Rows are 16-bit linear
/// sRGB (white balance as shot, the camera's matrices, highlights clipped, the DNG baseline
/// exposure applied); 8-bit sRGB rows for the readers that want them.
final class RawLoader: SourceLoader {
    private let bytes: UnsafeRawBufferPointer
    private let options: RenderOptions
    let decoder: RawDecoder
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var image: RawImage?
    private var row = 0
    private var half = false
    /// Half size streamed from the mosaic (`RawDecoder.beginHalf`): its size.
    private var streamed: Size?
    private var scratch: UnsafeMutablePointer<UInt16>?
    private var scratchRows = 0
    /// 2^BaselineExposure, applied to the linear samples.
    private let gain: Float

    static let formats: Set<ImageFormat> = [.raw]
    static let name = "raw"

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? { RawContainer.sniff(bytes) ? .raw : nil }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.bytes = bytes
        self.options = options
        decoder = try RawDecoder(bytes: bytes, limits: options.limits)
        let i = decoder.info
        let cfa = RawDecoder.string(i.cdesc)
        header = SourceHeader(format: .raw, storedSize: decoder.size, orientation: decoder.orientation,
                              colorModel: i.filters != 0 ? "CFA \(cfa.isEmpty ? "RGB" : cfa) (Bayer mosaic)" : "linear RGB",
                              bitDepth: max(8, Int(log2(Double(max(1, Int(i.maximum)))).rounded(.up))), hasAlpha: false)
        header.alternatives.scalesOnDecode = true
        header.alternatives.carriesPreviews = true
        // The preview's format is known once it is read: a bitmap one is not used (`embeddedPreview`).
        if i.thumb_format != 2, i.thumb_length > 0, i.thumb_width > 0, i.thumb_height > 0 {
            header.alternatives.preview = Size(width: Int(i.thumb_width), height: Int(i.thumb_height))
        }
        var exif = ExifSummary(orientation: decoder.orientation.exifValue, hasGPS: i.has_gps != 0, copyright: nil,
                               make: decoder.make.isEmpty ? nil : decoder.make, model: decoder.model.isEmpty ? nil : decoder.model,
                               thumbnail: nil, entryCount: 0)
        exif.entryCount = 1
        metadata = SourceMetadata(exif: exif, iccProfile: nil, xmp: nil, density: nil)
        let be = i.baseline_exposure
        gain = be.isFinite && abs(be) <= 8 ? Float(pow(2.0, Double(be))) : 1
    }

    /// What each decode holds: LibRaw's copy of the sensor data (2 bytes a photosite) and its
    /// working image (4 × 2 bytes a pixel, a quarter of them at half size), read in place.
    func decodeBytes(scaleEighths: Int) -> Int {
        let i = decoder.info
        let sensor = Int(i.raw_width) * Int(i.raw_height) * 2
        // Half size of a Bayer mosaic streams from the sensor data: nothing more.
        if useHalf(scaleEighths), i.colors == 3, i.filters >= 1000 { return sensor }
        let pixels = header.storedSize.width * header.storedSize.height / (useHalf(scaleEighths) ? 4 : 1)
        return sensor + pixels * 8
    }

    deinit { scratch?.deallocate() }

    private func useHalf(_ scaleEighths: Int) -> Bool {
        switch options.raw {
        case .half: return true
        case .full: return false
        case .auto, .preview: return scaleEighths <= 4
        }
    }

    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart {
        // The container first: LibRaw "decodes" sensor data the file does not hold as noise.
        if let missing = RawContainer.missingData(bytes, size: header.storedSize, bits: header.bitDepth) {
            throw ImagingError(.truncated, "truncated raw file: \(missing)")
        }
        half = useHalf(scaleEighths)
        if half, let size = try LibraryOutput.capturing("LibRaw", {
            try decoder.beginHalf(cpuSeconds: options.decodeSeconds, release: options.inputIsFileMap)
        }) {
            streamed = size
            return DecodeStart(size: size, channels: 3, scaleEighths: 4)
        }
        let decoded = try LibraryOutput.capturing("LibRaw") { try decoder.decode(half: half, cpuSeconds: options.decodeSeconds, release: options.inputIsFileMap) }
        guard decoded.channels == 3 || decoded.channels == 1, decoded.width > 0, decoded.height > 0 else {
            throw ImagingError(.corrupt, "corrupt raw file: LibRaw gave a \(decoded.width)x\(decoded.height) image of \(decoded.channels) colours")
        }
        image = decoded
        return DecodeStart(size: Size(width: decoded.width, height: decoded.height), channels: decoded.channels,
                           scaleEighths: half ? 4 : 8)
    }

    var linearRows: Bool { true }

    func readLinear(into buffer: UnsafeMutablePointer<UInt16>, stride: Int, maxRows: Int) throws -> Int {
        if let streamed {
            let n = max(0, min(maxRows, streamed.height - row))
            if n > 0 { try decoder.halfRows(row, n, into: buffer, stride: stride) }
            if gain != 1 { applyGain(buffer, stride: stride, rows: n, count: streamed.width * 3) }
            row += n
            return n
        }
        guard let image else { return 0 }
        let n = max(0, min(maxRows, image.height - row))
        for r in 0..<n { image.copyRow(row + r, to: buffer + r * stride, gain: gain) }
        row += n
        return n
    }

    private func applyGain(_ buffer: UnsafeMutablePointer<UInt16>, stride: Int, rows: Int, count: Int) {
        for r in 0..<rows {
            let p = buffer + r * stride
            for k in 0..<count { p[k] = UInt16(min(65535, Float(p[k]) * gain + 0.5)) }
        }
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        if let streamed {
            // 8-bit sRGB rows (a reader that wants them): the linear rows through the table.
            let width = streamed.width * 3
            if scratchRows < maxRows {
                scratch?.deallocate()
                scratch = .allocate(capacity: width * maxRows)
                scratchRows = maxRows
            }
            let n = try readLinear(into: scratch!, stride: width, maxRows: maxRows)
            let table = SRGB.fromLinear
            for r in 0..<n {
                let src = scratch! + r * width, dst = buffer + r * stride
                for k in 0..<width { dst[k] = table[Int(src[k])] }
            }
            return n
        }
        guard let image else { return 0 }
        let n = max(0, min(maxRows, image.height - row))
        let count = image.width * image.channels
        if scratchRows < 1 {
            scratch?.deallocate()
            scratch = .allocate(capacity: count)
            scratchRows = 1
        }
        let table = SRGB.fromLinear  // 65,536 linear codes -> sRGB
        for r in 0..<n {
            image.copyRow(row + r, to: scratch!, gain: gain)
            let dst = buffer + r * stride
            for k in 0..<count { dst[k] = table[Int(scratch![k])] }
        }
        row += n
        return n
    }

    var decodePath: DecodePath { half ? .rawHalf : .rawFull }

    func embeddedPreview() throws -> [UInt8]? {
        guard let p = try decoder.preview(), p.jpeg else { return nil }
        return p.bytes
    }

    var orientationFrom: String? { header.orientation != .up ? "raw container" : nil }

    var coding: String? {
        let i = decoder.info
        var parts = [decoder.decoderName.isEmpty ? "raw" : decoder.decoderName]
        parts.append("sensor \(i.raw_width)x\(i.raw_height)")
        if i.is_dng != 0 { parts.append("DNG") }
        return parts.joined(separator: ", ")
    }

    var structure: [String] {
        let i = decoder.info
        var s: [String] = []
        if header.alternatives.preview != nil { s.append("preview JPEG \(i.thumb_width)x\(i.thumb_height), \(i.thumb_length) bytes") }
        else if i.thumb_format == 2 { s.append("preview bitmap \(i.thumb_width)x\(i.thumb_height) (not used)") }
        return s
    }

    /// Facts a raw file's maker notes and EXIF give LibRaw, for `inspect`.
    var capture: CaptureFacts? {
        let i = decoder.info
        return CaptureFacts(make: decoder.make, model: decoder.model, lens: decoder.lens,
                        takenUnixSeconds: i.timestamp > 0 ? Double(i.timestamp) : nil,
                        iso: i.iso > 0 ? Double(i.iso) : nil, shutterSeconds: i.shutter > 0 ? Double(i.shutter) : nil,
                        aperture: i.aperture > 0 ? Double(i.aperture) : nil, focalLength: i.focal > 0 ? Double(i.focal) : nil,
                        gps: i.has_gps != 0 ? [i.latitude, i.longitude, i.altitude] : nil)
    }

    /// A half-size or full decode is decoded whole; a tile pyramid of a raw file decodes it so.
    var wholeDecodeCopyBytes: Int { decodeBytes(scaleEighths: 8) }

    static let stripRefusal: String? = "raw files are not rewritten: lossless stripping handles JPEG, PNG and WebP; no output "
        + "written. Render it instead: tessera render FILE --format jpeg -o DIR writes a JPEG with no metadata copied"
}

/// How a picture was taken, as its file says (a raw file's: LibRaw's reading of its EXIF and maker notes).
public struct CaptureFacts: Sendable, Codable, Equatable {
    public var make: String
    public var model: String
    public var lens: String
    public var takenUnixSeconds: Double?
    public var iso: Double?
    public var shutterSeconds: Double?
    public var aperture: Double?
    public var focalLength: Double?
    /// Latitude, longitude (degrees, south and west negative), altitude (m).
    public var gps: [Double]?
}

/// The decode a raw file gets, chosen from its header and the outputs before any pixel is
/// read, as a JPEG's DCT scale is: its embedded preview when it covers every output (the
/// preview's JPEG then decoded at its own DCT scale), else half size when the outputs
/// leave the resampler its margin at half the size (the plan's scale ≤ 4/8), else a full
/// demosaic.
enum RawPlan {
    /// Previews smaller than this on their long side are thumbnails for file browsers, never used.
    static let minimumPreviewSide = 160

    /// Whether the preview (`preview`, stored orientation, of a `main`-size image) covers
    /// every plan's output without enlarging it, with the image's aspect.
    static func previewCovers(_ preview: Size, main: Size, plans: [OutputPlan]) -> Bool {
        guard max(preview.width, preview.height) >= minimumPreviewSide, preview.width > 0, preview.height > 0 else { return false }
        // A preview turned against the image (some cameras store it upright): compared turned back.
        let p = (preview.width > preview.height) == (main.width > main.height) || main.width == main.height
            ? preview : Size(width: preview.height, height: preview.width)
        let expectedHeight = Double(p.width) * Double(main.height) / Double(main.width)
        guard abs(Double(p.height) - expectedHeight) <= max(2, expectedHeight * 0.02) else { return false }
        let k = Double(p.width) / Double(main.width)
        return plans.allSatisfy { plan in
            Double(plan.storedOutputSize.width) <= plan.storedRegion.width * k + 0.5
                && Double(plan.storedOutputSize.height) <= plan.storedRegion.height * k + 0.5
        }
    }
}
