import TesseraModel

/// HEIC and AVIF through libheif (opened at the first one): the primary image — or a
/// thumbnail item that covers every output — decoded whole, served row by row (8-bit
/// straight from the planes where the chroma allows, 10/12-bit converted down, HDR
/// tone-mapped with the gain map that undoes it when asked); the HEIF transforms are
/// libheif's, applied before the rows.
final class HEIFLoader: SourceLoader {
    private let options: RenderOptions
    let decoder: HEIFDecoder
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var thumbnail: (id: UInt32, size: Size)?
    private var image: HEIFImage?
    private var deep: DeepToEight?
    private var row = 0
    private var channels = 0
    private let gain = GainRows()

    static let formats: Set<ImageFormat> = [.heif, .avif]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // ISO base media: a leading ftyp box whose major or compatible brands say HEIF or AVIF.
        guard let brands = ISOBrands.of(bytes) else { return nil }
        if brands[0] == "avif" || brands[0] == "avis" { return .avif }
        let heif: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"]
        guard heif.contains(brands[0]) || brands.dropFirst().contains(where: { heif.contains($0) }) else { return nil }
        return brands.contains("avif") || brands.contains("avis") ? .avif : .heif
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.options = options
        decoder = try HEIFDecoder(bytes: bytes, limits: options.limits)
        let exif = decoder.exif.flatMap(Exif.read)
        metadata = SourceMetadata(exif: exif, iccProfile: decoder.iccProfile ?? decoder.nclx.flatMap(SourceDecoder.profile(for:)),
                                  xmp: decoder.xmp, density: nil)
        // The HEIF transforms are applied by libheif and are authoritative: EXIF orientation is ignored.
        header = SourceHeader(format: format, storedSize: decoder.size, orientation: .up,
                              colorModel: HEIFLoader.colorModel(decoder.coding.samplesPerPixel), bitDepth: decoder.bitDepth,
                              hasAlpha: decoder.hasAlpha)
        header.alternatives.thumbnails = decoder.thumbnails.map { ($0.id, $0.size) }
        guard format == .avif ? HEIFDecoder.canDecodeAVIF : HEIFDecoder.canDecodeHEIC else {
            throw ImagingError(.unsupportedFeature, "this build of libheif cannot decode \(format == .avif ? "AV1 (AVIF)" : "HEVC (HEIC)")")
        }
    }

    static func colorModel(_ samplesPerPixel: Double) -> String {
        switch samplesPerPixel {
        case 1: return "monochrome"
        case 1.5: return "YCbCr 4:2:0"
        case 2: return "YCbCr 4:2:2"
        default: return "YCbCr 4:4:4"
        }
    }

    /// libheif decodes whole: the decoder's picture, its copies and the RGB it converts to.
    func decodeBytes(scaleEighths: Int) -> Int {
        let s = thumbnail?.size ?? header.storedSize
        return Int(Double(s.width * s.height) * decoder.decodeBytesPerPixel)
    }

    func use(_ choice: SourceChoice) -> Bool {
        guard case .thumbnail(let id, let size) = choice else { return false }
        thumbnail = (id, size)
        return true
    }

    var isHDR: Bool { decoder.nclx?.isHDR ?? false }
    var hdrGain: Bool {
        get { gain.enabled }
        set { gain.enabled = newValue }
    }
    var gainBatch: UnsafeMutablePointer<UInt8>? { gain.batch }
    var hdrGainMetadata: GainMapMetadata? { gain.enabled && deep?.isHDR == true ? deep?.gainMetadata : nil }

    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart {
        var decoded = try decoder.decode(thumbnail: thumbnail?.id)
        // Phones write thumbnail items that decode a pixel or two off their declared size
        // (an odd half-size rounded the other way): used at their decoded size. One further
        // off is not used: the primary image is decoded instead. Never a failure of a file
        // whose primary image is sound.
        if let t = thumbnail, decoded.size != t.size {
            if abs(decoded.size.width - t.size.width) <= 2 && abs(decoded.size.height - t.size.height) <= 2
                && decoded.size.width > 0 && decoded.size.height > 0 {
                thumbnail = (t.id, decoded.size)
            } else {
                thumbnail = nil
                decoded = try decoder.decode(thumbnail: nil)
            }
        }
        let declared = thumbnail?.size ?? header.storedSize
        guard decoded.size == declared else {
            throw ImagingError(.corrupt, "HEIF image decodes to \(decoded.size), not the \(declared) it declares")
        }
        channels = decoded.channels
        if decoded.bits > 8 { deep = DeepToEight(bits: decoded.bits, nclx: decoder.nclx) }
        image = decoded
        return DecodeStart(size: decoded.size, channels: decoded.channels, scaleEighths: 8)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        guard let image else { return 0 }
        let width = image.size.width
        let n = max(0, min(maxRows, image.size.height - row))
        for r in 0..<n {
            let src = image.plane + (row + r) * image.stride, dst = buffer + r * stride
            if image.planar != nil {
                image.rgbRow(row + r, into: dst)
                continue
            }
            if let deep {
                deep.convert(src, dst, count: width, channels: channels, gain: gain.row(r, of: n, width: width, hdr: deep.isHDR))
            } else {
                dst.update(from: src, count: width * channels)
            }
            if channels == 4 && decoder.premultipliedAlpha { SourceDecoder.unpremultiply(dst, count: width) }
        }
        row += n
        return n
    }

    var decodePath: DecodePath { thumbnail != nil ? .heifThumbnail : .heifPrimary }

    /// An iPhone's HDR gain map (an auxiliary image with the maker note's headroom).
    func gainMap(bytes: UnsafeRawBufferPointer, limits: Limits) -> UltraHDR.Found? {
        decoder.gainMap.flatMap { AppleHDR.locate(map: $0, exif: decoder.exif, imageSize: decoder.size) }
    }

    func decodeAuxiliary(id: UInt32, limits: Limits) throws -> PixelBuffer {
        try decoder.decodeAuxiliary(id, limits: limits)
    }

    var orientationFrom: String? { decoder.coding.transformed ? "irot/imir, applied by libheif" : nil }

    var coding: String? {
        var parts = [decoder.isAVIF ? "AV1" : "HEVC", "\(decoder.bitDepth)-bit"]
        if let n = decoder.nclx {
            parts.append("nclx \(n.primaries)/\(n.transfer)/\(n.matrix)\(n.fullRange ? " full" : " limited")"
                         + (n.isPQ ? " (PQ)" : n.isHLG ? " (HLG)" : ""))
        }
        if !decoder.thumbnails.isEmpty { parts.append("thumbnails " + decoder.thumbnails.map { "\($0.size)" }.joined(separator: ", ")) }
        return parts.joined(separator: ", ")
    }

    var structure: [String] {
        var s = ["primary"]
        if decoder.hasAlpha { s.append("auxC alpha") }
        if !decoder.thumbnails.isEmpty { s.append("thmb ×\(decoder.thumbnails.count)") }
        if decoder.iccProfile != nil { s.append("colr prof") }
        if decoder.nclx != nil { s.append("colr nclx") }
        if decoder.exif != nil { s.append("Exif") }
        if decoder.xmp != nil { s.append("mime (XMP)") }
        return s
    }

}

/// The gain-map rows an HDR source gives beside its tone-mapped rows (`hdrGain`): one byte a
/// pixel, a batch at a time.
final class GainRows {
    var enabled = false
    private(set) var batch: UnsafeMutablePointer<UInt8>?
    private var rows = 0

    /// Row `r` of a batch of `count` rows, `width` wide (the buffer grows to hold the batch);
    /// nil unless enabled for an HDR source.
    func row(_ r: Int, of count: Int, width: Int, hdr: Bool) -> UnsafeMutablePointer<UInt8>? {
        guard enabled && hdr else { return nil }
        if rows < count {
            batch?.deallocate()
            batch = .allocate(capacity: width * max(count, 16))
            rows = max(count, 16)
        }
        return batch! + r * width
    }

    deinit { batch?.deallocate() }
}

/// The brands of an ISO base media file's leading `ftyp` box: the major one first.
enum ISOBrands {
    static func of(_ bytes: UnsafeRawBufferPointer) -> [String]? {
        guard bytes.ascii("ftyp", at: 4), bytes.count >= 16 else { return nil }
        let boxSize = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        let end = min(bytes.count, max(16, min(boxSize, 256)))
        var brands: [String] = [String(decoding: (8..<12).map { bytes[$0] }, as: UTF8.self)]
        var i = 16
        while i + 4 <= end {
            brands.append(String(decoding: (i..<i + 4).map { bytes[$0] }, as: UTF8.self))
            i += 4
        }
        return brands
    }
}
