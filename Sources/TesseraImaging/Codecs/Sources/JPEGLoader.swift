import CJPEG
import TesseraModel

/// JPEG through libjpeg-turbo: scaled IDCT decoding (the plan's eighths), a progressive
/// file's 1/8 from its DC scans alone, CMYK and YCCK converted to RGB (through the file's
/// CMYK profile when it has one), rows skipped without their IDCT; for tiles, bands that
/// start at a restart marker.
final class JPEGLoader: SourceLoader {
    private let bytes: UnsafeRawBufferPointer
    private let options: RenderOptions
    private let decoder: JPEGDecoder
    let jpegHeader: JPEGHeader
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var usedDCScans = false
    /// The 1/8 image of the DC scans, served row by row.
    private var whole: WholeRows?
    // CMYK: rows decode into `scratch` (4 bytes a pixel), then convert.
    private var cmyk: CMYKConverter?
    private var scratch: UnsafeMutablePointer<UInt8>?
    private var scratchRows = 0
    private var width = 0
    private var height = 0

    static let formats: Set<ImageFormat> = [.jpeg]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // SOI and the first marker's FF; two bytes FF D8 are a JPEG cut short (truncated, not foreign).
        bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8 && (bytes.count == 2 || bytes[2] == 0xFF) ? .jpeg : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.bytes = bytes
        self.options = options
        decoder = try JPEGDecoder(bytes: bytes, limits: options.limits, strict: options.strict)
        let h = decoder.header
        jpegHeader = h
        let exif = decoder.exif.flatMap(Exif.read)
        metadata = SourceMetadata(exif: exif, iccProfile: try decoder.iccProfile(), xmp: nil, density: decoder.density)
        header = SourceHeader(format: .jpeg, storedSize: Size(width: h.width, height: h.height),
                              orientation: Orientation(exif: exif?.orientation ?? 1), colorModel: JPEGLoader.colorModel(h),
                              bitDepth: h.precision, hasAlpha: false)
        header.progressive = h.progressive
        header.alternatives.scalesOnDecode = true
        header.alternatives.exactEighths = true
        header.alternatives.exifThumbnailBytes = exif?.thumbnail?.count
    }

    deinit { scratch?.deallocate() }

    static func colorModel(_ h: JPEGHeader) -> String {
        switch h.colorSpace {
        case JCS_GRAYSCALE: return "gray"
        case JCS_RGB: return "RGB"
        case JCS_YCbCr: return "YCbCr " + h.subsampling
        case JCS_CMYK: return "CMYK"
        case JCS_YCCK: return "YCCK " + h.subsampling
        default: return "\(h.components) components"
        }
    }

    /// A progressive or multi-scan file's whole-image coefficient arrays; the DC scans'
    /// 1/8 image when that is what decodes.
    func decodeBytes(scaleEighths: Int) -> Int { jpegHeader.wholeImageCoefficientBytes ?? 0 }

    func start(scaleEighths requested: Int, maxBatchRows: Int) throws -> DecodeStart {
        let h = jpegHeader
        if requested == 1, options.progressiveDC || options.fastMode, ProgressiveDC.applies(to: h),
           let image = try? ProgressiveDC.decode(bytes, header: h, exact: !options.fastMode) {
            // Only the DC scans matter at 1/8: libjpeg never starts (nor allocates its
            // whole-image coefficient buffer). Anything unexpected fell back to libjpeg.
            usedDCScans = true
            whole = WholeRows(image)
            return DecodeStart(size: Size(width: image.width, height: image.height), channels: image.channels, scaleEighths: 1)
        }
        let layout: JPEGDecoder.OutputLayout
        switch h.colorSpace {
        case JCS_GRAYSCALE: layout = .gray
        case JCS_YCbCr, JCS_RGB: layout = .rgb
        case JCS_CMYK, JCS_YCCK:
            layout = .cmyk
            cmyk = CMYKConverter(icc: metadata.iccProfile, adobeInverted: h.adobeTransform != nil)
        default:
            throw ImagingError(.unsupportedFeature, "JPEG with \(h.components) components in colour space \(h.colorSpace.rawValue)")
        }
        let size = try decoder.start(scaleEighths: requested, layout: layout, fast: options.fastDecode)
        width = size.width
        height = size.height
        if cmyk != nil {
            scratch = .allocate(capacity: size.width * 4 * maxBatchRows)
            scratchRows = maxBatchRows
        }
        return DecodeStart(size: size, channels: cmyk != nil ? 3 : layout.channels, scaleEighths: requested)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        if whole != nil { return try whole!.read(into: buffer, stride: stride, maxRows: maxRows) }
        guard let cmyk, let scratch else { return try decoder.read(into: buffer, stride: stride, maxRows: maxRows) }
        precondition(maxRows <= scratchRows)
        let n = try decoder.read(into: scratch, stride: width * 4, maxRows: maxRows)
        for r in 0..<n { cmyk.convert(scratch + r * width * 4, buffer + r * stride, count: width) }
        return n
    }

    /// libjpeg streaming: skipped rows are still entropy-decoded (damage there is reported)
    /// but get no IDCT, upsampling or colour conversion.
    var skipsRows: Bool { whole == nil }

    func skip(rows: Int) throws -> Int { try decoder.skip(rows: rows) }

    func finish() throws {
        if whole == nil { try decoder.finish() }
    }

    /// An Ultra HDR JPEG's gain map (MPF, `hdrgm` XMP or ISO 21496-1).
    func gainMap(bytes: UnsafeRawBufferPointer, limits: Limits) -> UltraHDR.Found? { UltraHDR.locate(bytes, limits: limits) }

    /// Lenient: what libjpeg padded with gray (it decodes past damage itself), as every
    /// format's record says it: `truncated: 212 of 480 rows (…)`.
    var warnings: [String] {
        guard !usedDCScans, let loss = decoder.loss else { return [] }
        let code = loss.ended ? "truncated" : "corrupt"
        if jpegHeader.progressive || loss.row == 0 && loss.scan > 1 {
            return ["\(code): scan \(loss.scan) on, every row coarser or gray (\(loss.message))"]
        }
        return ["\(code): \(min(loss.row, height)) of \(height) rows (\(loss.message))"]
    }

    var decodePath: DecodePath { usedDCScans ? (options.fastMode ? .progressiveDCOnly : .progressiveDC) : .jpeg }

    static func rowSource(bytes: UnsafeRawBufferPointer, scaleEighths: Int, startRow: Int, limits: Limits, strict: Bool) throws -> RowSource? {
        try JPEGRowSource(bytes: bytes, scaleEighths: scaleEighths, startRow: startRow, limits: limits, strict: strict)
    }

    /// A level shrunk 2^k: the DCT scale (8>>k eighths, down to 1/8), then a box shrink.
    static func tileDecodePlan(shrink k: Int) -> (eighths: Int, boxShift: Int) { (8 >> min(k, 3), max(0, k - 3)) }

    func tileInfo(bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo {
        // Parts read different stretches of the file: check its end once, here, so that a
        // truncated file fails every part alike instead of leaving the top of a pyramid.
        guard TileSourceInfo.endsLikeAnImage(bytes, marker: [0xFF, 0xD9]) else {
            throw ImagingError(.truncated, "truncated JPEG (no end-of-image marker)")
        }
        let h = jpegHeader
        let blocks = (h.width + 7) / 8 * ((h.height + 7) / 8)
        var coefficients = 0
        if h.progressive {
            let (mh, mv) = h.components == 1 ? (1, 1) : h.maxSampling
            for f in h.samplingFactors { coefficients += blocks * f.h * f.v / max(1, mh * mv) * 128 }
        }
        // Restart starts help only when they come often: at most every 1024 rows.
        let mcuHeight = 8 * (h.components == 1 ? 1 : h.maxSampling.v)
        let seekable = !h.progressive && !h.arithmetic && h.restartInterval > 0
            && h.componentsInFirstScan == h.components && JPEGRowSource.frameHeightOffset(bytes) != nil
            && (JPEGRowSource.restartStep(h) ?? Int.max) * mcuHeight <= 1024
        var info = TileSourceInfo(format: .jpeg, width: h.width, height: h.height, progressive: h.progressive,
                                  restartSeekable: seekable, wholeImageBytes: coefficients,
                                  channels: h.components == 1 ? 1 : 3)  // CMYK converts to RGB
        info.headerBytes = decoder.entropyOffset ?? 0
        info.scalesOnDecode = true
        // Measured on a 108 MP q90 JPEG: skipping a row costs 0.45 of decoding it.
        info.skipCost = 0.45
        return info
    }
}

extension JPEGLoader {
    /// `inspect` from the markers (no libjpeg: what a damaged or unusual file has is still shown).
    static func inspect(_ raw: UnsafeRawBufferPointer) throws -> ImageInfo? {
        let parsed = try JPEGSegments(raw)
        guard let sof = parsed.frame, sof.payload.count >= 6 else {
            throw ImagingError(.corrupt, "JPEG has no frame header (SOF)")
        }
        let p = sof.payload.lowerBound
        let precision = Int(raw[p])
        let height = Int(raw[p + 1]) << 8 | Int(raw[p + 2])
        let width = Int(raw[p + 3]) << 8 | Int(raw[p + 4])
        let nc = Int(raw[p + 5])
        var factors: [(h: Int, v: Int)] = []
        for i in 0..<nc where p + 6 + i * 3 + 2 < sof.payload.upperBound {
            let f = raw[p + 6 + i * 3 + 1]
            factors.append((Int(f >> 4), Int(f & 0x0F)))
        }
        var info = ImageInfo(format: .jpeg, bytes: raw.count, width: width, height: height, orientation: 1,
                             displayWidth: width, displayHeight: height, colorSpace: "", components: nc,
                             subsampling: nil, progressive: false, codingProcess: nil, bitDepth: precision,
                             restartInterval: nil, interlaced: nil, hasAlpha: false, pngGamma: nil,
                             iccProfile: nil, iccColorSpace: nil, iccBytes: nil, hasExif: false, hasGPS: false,
                             exifThumbnailBytes: nil, copyright: nil, camera: nil, hasXMP: false, hasIPTC: false,
                             comments: 0, trailingBytes: parsed.trailingBytes.count, structure: [])
        let m = sof.marker
        info.progressive = [0xC2, 0xC6, 0xCA, 0xCE].contains(m)
        info.scan = info.progressive ? "progressive" : "sequential"
        let process = [0xC0: "baseline", 0xC1: "extended", 0xC2: "progressive", 0xC3: "lossless",
                       0xC9: "extended", 0xCA: "progressive", 0xCB: "lossless"][Int(m)] ?? "SOF\(m & 0x0F)"
        info.codingProcess = m >= 0xC9 ? process + "-arithmetic" : process
        let header = JPEGHeader(width: width, height: height, components: nc, colorSpace: .init(0),
                                progressive: info.progressive, arithmetic: m >= 0xC9, precision: precision,
                                adobeTransform: nil, samplingFactors: factors, restartInterval: 0)
        info.subsampling = header.subsampling
        var iccChunks: [(seq: UInt8, bytes: ArraySlice<UInt8>)] = []
        var adobeTransform: Int?
        for s in parsed.segments {
            let kind = JPEGSegments.kind(of: s, in: raw)
            info.structure.append(ImageInfo.name(of: s.marker, kind))
            switch kind {
            case .exif:
                info.hasExif = true
                if let e = Exif.read(Array(raw[s.payload])) { ImageInfo.apply(e, to: &info) }
            case .xmp, .xmpExtended: info.hasXMP = true
            case .iptc: info.hasIPTC = true
            case .comment: info.comments += 1
            case .icc where s.payload.count >= 14:
                // "ICC_PROFILE\0", sequence number, count, data: reassemble in sequence order.
                iccChunks.append((raw[s.payload.lowerBound + 12], Array(raw[s.payload])[14...]))
            case .adobe where s.payload.count >= 12: adobeTransform = Int(raw[s.payload.lowerBound + 11])
            case .restartInterval where s.payload.count >= 2:
                info.restartInterval = Int(raw[s.payload.lowerBound]) << 8 | Int(raw[s.payload.lowerBound + 1])
            default: break
            }
        }
        switch nc {
        case 1: info.colorSpace = "gray"
        case 3: info.colorSpace = adobeTransform == 0 ? "rgb" : "ycbcr"
        case 4: info.colorSpace = adobeTransform == 2 ? "ycck" : "cmyk"
        default: info.colorSpace = "\(nc) components"
        }
        if !iccChunks.isEmpty {
            ImageInfo.describeICC(iccChunks.sorted { $0.seq < $1.seq }.flatMap(\.bytes), into: &info)
        }
        info.alternatives = ["DCT scales 1/8-8/8"] + (info.exifThumbnailBytes.map { ["EXIF thumbnail \($0) bytes"] } ?? [])
        switch UltraHDR.locate(raw, limits: Limits()) {
        case .usable(let m)?:
            info.gainMap = m.info
            info.gainMapMetadata = m.metadata
        case .unusable(let i)?: info.gainMap = i
        case nil: break
        }
        return info
    }

    static func wholeDecodeAdvice(_ info: TileSourceInfo) -> String {
        "a progressive JPEG keeps all its coefficients (\(info.wholeImageBytes >> 20) MB) while decoding; convert it to baseline (jpegtran) or raise tiles.memoryBudgetMB"
    }

    static let name = "JPEG"
    static let stripsLosslessly = true
    static func stripLosslessly(_ input: [UInt8], options: StripOptions) throws -> StripResult {
        try LosslessStrip.stripJPEG(input, options)
    }
}
