import TesseraModel
/// What `tessera inspect` reports about a file, read from its headers and
/// metadata without decoding pixels.
public struct ImageInfo: Sendable, Codable {
    public var format: ImageFormat
    public var bytes: Int
    public var width: Int
    public var height: Int
    /// EXIF orientation (1 when absent).
    public var orientation: Int
    /// Size as displayed (width and height swapped for orientations 5-8).
    public var displayWidth: Int
    public var displayHeight: Int
    public var colorSpace: String
    public var components: Int?
    /// Chroma subsampling ("4:2:0", ...), JPEG only.
    public var subsampling: String?
    public var progressive: Bool
    /// "baseline", "extended", "progressive", "lossless", with "-arithmetic" when so coded.
    public var codingProcess: String?
    public var bitDepth: Int
    public var restartInterval: Int?
    public var interlaced: Bool?
    public var hasAlpha: Bool
    public var pngGamma: Double?
    public var iccProfile: String?
    public var iccColorSpace: String?
    public var iccBytes: Int?
    public var hasExif: Bool
    public var hasGPS: Bool
    public var exifThumbnailBytes: Int?
    public var copyright: String?
    public var camera: String?
    public var hasXMP: Bool
    public var hasIPTC: Bool
    public var comments: Int
    /// Bytes after the JPEG EOI marker (MPF images, gain maps, vendor data).
    public var trailingBytes: Int
    /// Marker segments (JPEG) or chunk types (PNG) in file order.
    public var structure: [String]
    /// An HDR gain map (Ultra HDR JPEG): its size, headroom and metadata, or why it is unusable.
    public var gainMap: GainMapInfo? = nil
    /// Its metadata, when usable (log2 boosts and capacities, as ISO 21496-1 gives them).
    public var gainMapMetadata: GainMapMetadata? = nil

    /// Reads what it can; throws only when the file is not a readable JPEG or PNG.
    public static func inspect(_ input: [UInt8]) throws -> ImageInfo {
        guard !input.isEmpty else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        return try input.withUnsafeBytes { raw in
            switch ImageFormat.sniff(raw) {
            case .jpeg: return try jpeg(raw)
            case .png: return try png(raw)
            case .webp, .heif, .avif, .tiff, .gif, .jxl, .video: return try modern(raw)
            case nil:
                throw ImagingError(.unsupportedFormat, FormatDetection.unsupportedMessage(raw))
            }
        }
    }

    private static func jpeg(_ raw: UnsafeRawBufferPointer) throws -> ImageInfo {
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
            info.structure.append(name(of: s.marker, kind))
            switch kind {
            case .exif:
                info.hasExif = true
                if let e = Exif.read(Array(raw[s.payload])) { apply(e, to: &info) }
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
            describeICC(iccChunks.sorted { $0.seq < $1.seq }.flatMap(\.bytes), into: &info)
        }
        switch UltraHDR.locate(raw, limits: Limits()) {
        case .usable(let m)?:
            info.gainMap = m.info
            info.gainMapMetadata = m.metadata
        case .unusable(let i)?: info.gainMap = i
        case nil: break
        }
        return info
    }

    private static func png(_ raw: UnsafeRawBufferPointer) throws -> ImageInfo {
        let decoder = try PNGDecoder(bytes: raw, limits: Limits())
        let h = decoder.header
        let chunks = (try? PNGChunks(raw))?.chunks ?? []
        var info = ImageInfo(format: .png, bytes: raw.count, width: h.width, height: h.height, orientation: 1,
                             displayWidth: h.width, displayHeight: h.height, colorSpace: h.colorTypeName,
                             components: nil, subsampling: nil, progressive: false, codingProcess: nil,
                             bitDepth: h.bitDepth, restartInterval: nil, interlaced: h.interlaced,
                             hasAlpha: h.hasTransparency, pngGamma: h.gamma, iccProfile: nil, iccColorSpace: nil,
                             iccBytes: nil, hasExif: h.exif != nil, hasGPS: false, exifThumbnailBytes: nil,
                             copyright: nil, camera: nil, hasXMP: false, hasIPTC: false, comments: 0,
                             trailingBytes: 0, structure: chunks.map(\.type))
        if let e = h.exif.flatMap(Exif.read) { apply(e, to: &info) }
        if let icc = h.iccProfile { describeICC(icc, into: &info) }
        for c in chunks where c.type == "iTXt" || c.type == "tEXt" || c.type == "zTXt" {
            let keyword = String(decoding: raw[c.data].prefix { $0 != 0 }, as: UTF8.self)
            if keyword == "XML:com.adobe.xmp" { info.hasXMP = true } else { info.comments += 1 }
        }
        return info
    }

    /// WebP, HEIF, AVIF, TIFF, GIF and videos, through their decoders' headers (no pixels decoded).
    private static func modern(_ raw: UnsafeRawBufferPointer) throws -> ImageInfo {
        // Nothing is decoded: any size can be described.
        var options = RenderOptions()
        options.limits.maxPixels = Int.max
        let source = try SourceDecoder(bytes: raw, options: options)
        let size = source.storedSize
        var info = ImageInfo(format: source.format, bytes: raw.count, width: size.width, height: size.height, orientation: 1,
                             displayWidth: size.width, displayHeight: size.height, colorSpace: "RGB",
                             components: nil, subsampling: nil, progressive: false, codingProcess: source.codingDescription,
                             bitDepth: source.bitDepth, restartInterval: nil, interlaced: nil,
                             hasAlpha: source.declaresAlpha, pngGamma: nil, iccProfile: nil, iccColorSpace: nil,
                             iccBytes: nil, hasExif: source.exif != nil, hasGPS: false, exifThumbnailBytes: nil,
                             copyright: nil, camera: nil, hasXMP: source.xmp != nil, hasIPTC: false, comments: 0,
                             trailingBytes: 0, structure: source.structure)
        if let e = source.exif { apply(e, to: &info) }
        if source.format == .tiff || source.format == .video || source.format == .jxl {
            // TIFF: the Orientation tag (274) in the page's own directory; a video: its display
            // matrix; JPEG XL: its codestream's.
            let o = source.orientation.exifValue
            info.orientation = o
            if o >= 5 {
                info.displayWidth = size.height
                info.displayHeight = size.width
            }
        } else if source.format != .webp {
            // HEIF: the size is as displayed (irot/imir applied); EXIF orientation does not apply.
            info.orientation = 1
            info.displayWidth = size.width
            info.displayHeight = size.height
        }
        if let icc = source.iccProfile { describeICC(icc, into: &info) }
        switch source.heifGainMap {
        case .usable(let m)?:
            info.gainMap = m.info
            info.gainMapMetadata = m.metadata
        case .unusable(let i)?: info.gainMap = i
        case nil: break
        }
        return info
    }

    private static func apply(_ e: ExifSummary, to info: inout ImageInfo) {
        let o = e.orientation.map { (1...8).contains($0) ? $0 : 1 } ?? 1
        info.orientation = o
        if o >= 5 {
            info.displayWidth = info.height
            info.displayHeight = info.width
        }
        info.hasGPS = e.hasGPS
        info.copyright = e.copyright
        info.exifThumbnailBytes = e.thumbnail?.count
        let make = e.make.flatMap { m in e.model?.hasPrefix(m) == true ? nil : m }
        let camera = [make, e.model].compactMap { $0 }.joined(separator: " ")
        info.camera = camera.isEmpty ? nil : camera
    }

    private static func describeICC(_ bytes: [UInt8], into info: inout ImageInfo) {
        info.iccBytes = bytes.count
        guard let p = ICCProfile(bytes) else {
            info.iccProfile = "unreadable"
            return
        }
        info.iccProfile = p.name
        switch p.colorSpace {
        case .rgb: info.iccColorSpace = p.isEffectivelySRGB ? "rgb (sRGB)" : "rgb"
        case .gray: info.iccColorSpace = "gray"
        case .cmyk: info.iccColorSpace = "cmyk"
        case .other: info.iccColorSpace = "other"
        }
    }

    private static func name(of marker: UInt8, _ kind: JPEGSegments.Kind) -> String {
        switch kind {
        case .jfif: return "APP0 JFIF"
        case .jfxx: return "APP0 JFXX"
        case .exif: return "APP1 EXIF"
        case .xmp: return "APP1 XMP"
        case .xmpExtended: return "APP1 XMP-ext"
        case .icc: return "APP2 ICC"
        case .mpf: return "APP2 MPF"
        case .iptc: return "APP13 IPTC"
        case .adobe: return "APP14 Adobe"
        case .comment: return "COM"
        case .otherApp(let n): return "APP\(n)"
        default:
            let names: [UInt8: String] = [0xD8: "SOI", 0xD9: "EOI", 0xDA: "SOS", 0xDB: "DQT", 0xC4: "DHT",
                                          0xDD: "DRI", 0xCC: "DAC"]
            if let n = names[marker] { return n }
            if (0xC0...0xCF).contains(marker) { return "SOF\(marker & 0x0F)" }
            return "0x" + hex(marker)
        }
    }
}
