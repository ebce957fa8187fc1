import TesseraModel

/// JPEG XL through libjxl (opened at the first one): the first frame decoded whole at full
/// size, 8-bit, or 16-bit for HDR (PQ, HLG), tone-mapped row by row with the gain map that
/// undoes it when asked. The codestream's orientation is authoritative.
final class JXLLoader: SourceLoader {
    private let decoder: JXLDecoder
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var whole: WholeRows?
    private let options: RenderOptions
    private(set) var warnings: [String] = []
    private var deepWhole: PixelBuffer?
    private var deep: DeepToEight?
    private var row = 0
    private var channels = 0
    private let gain = GainRows()

    static let formats: Set<ImageFormat> = [.jxl]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // A bare codestream (FF 0A) or the container's signature box.
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] == 0x0A { return .jxl }
        let box: [UInt8] = [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
        return bytes.count >= 12 && box.indices.allSatisfy({ bytes[$0] == box[$0] }) ? .jxl : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.options = options
        decoder = try JXLDecoder(bytes: bytes, limits: options.limits)
        // The codestream's orientation is authoritative (EXIF's is ignored, as libjxl does).
        metadata = SourceMetadata(exif: decoder.exif.flatMap(Exif.read), iccProfile: decoder.iccProfile, xmp: decoder.xmp, density: nil)
        header = SourceHeader(format: .jxl, storedSize: decoder.size, orientation: decoder.orientation,
                              colorModel: decoder.isLossy ? "XYB (VarDCT)" : "modular", bitDepth: decoder.bitsPerSample,
                              hasAlpha: decoder.hasAlpha)
    }

    /// libjxl renders into a whole-image buffer (16-bit for HDR) and holds its own planes
    /// (floats, 3 × 4 bytes a pixel) while decoding.
    func decodeBytes(scaleEighths: Int) -> Int {
        let s = header.storedSize
        return s.width * s.height * (3 * (isHDR ? 2 : 1) + 12)
    }

    var wholeDecodeCopyBytes: Int { header.storedSize.width * header.storedSize.height * 12 }

    var isHDR: Bool { decoder.hdr != nil }
    var hdrGain: Bool {
        get { gain.enabled }
        set { gain.enabled = newValue }
    }
    var gainBatch: UnsafeMutablePointer<UInt8>? { gain.batch }
    var hdrGainMetadata: GainMapMetadata? { gain.enabled && deep?.isHDR == true ? deep?.gainMetadata : nil }

    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart {
        let (image, damage) = try decoder.decode(lenient: !options.strict)
        // Lenient: a file cut short shows what libjxl's flush made of it (its groups are not rows: no row count).
        if let damage { warnings.append("\(damage.code): shown as far as it decoded (\(damage.reason))") }
        channels = decoder.hasAlpha ? 4 : 3
        if let h = decoder.hdr {
            deep = DeepToEight(bits: 16, nclx: h)
            deepWhole = image
        } else {
            whole = WholeRows(image)
        }
        return DecodeStart(size: header.storedSize, channels: channels, scaleEighths: 8)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        if whole != nil { return try whole!.read(into: buffer, stride: stride, maxRows: maxRows) }
        guard let deepWhole, let deep else { return 0 }
        let width = header.storedSize.width
        let n = max(0, min(maxRows, deepWhole.height - row))
        for r in 0..<n {
            deep.convert(deepWhole.row(row + r), buffer + r * stride, count: width, channels: channels,
                         gain: gain.row(r, of: n, width: width, hdr: deep.isHDR))
        }
        row += n
        return n
    }

    var decodePath: DecodePath { .jxl }

    var orientationFrom: String? { header.orientation != .up ? "codestream" : nil }

    var coding: String? {
        var parts = [decoder.isAnimated ? "animated" : "still", decoder.isLossy ? "lossy (VarDCT)" : "lossless or modular",
                     "\(decoder.bitsPerSample)-bit"]
        if let h = decoder.hdr { parts.append(h.isPQ ? "PQ" : "HLG") }
        if decoder.canReconstructJPEG { parts.append("JPEG reconstructible") }
        return parts.joined(separator: ", ")
    }

    var structure: [String] {
        var s = [decoder.canReconstructJPEG ? "container, jbrd" : "codestream"]
        if decoder.iccProfile != nil { s.append("ICC profile") }
        if decoder.exif != nil { s.append("Exif") }
        if decoder.xmp != nil { s.append("xml (XMP)") }
        return s
    }
}
