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
    /// Where the orientation comes from (`EXIF`, `TIFF tag`, `display matrix`, `codestream`,
    /// `HEIF transforms`); nil when the format has none.
    public var orientationFrom: String? = nil
    /// Pages (TIFF); `pagesAtLeast`: counted up to the bound, there may be more.
    public var pages = 1
    public var pagesAtLeast: Bool? = nil
    /// Frames (animations, videos; 1 for a still) and seconds (nil for a still).
    public var frames = 1
    public var durationSeconds: Double? = nil
    /// Cheaper decodes the file offers: `DCT scales 1/8-8/8`, `thumbnail 320x240`,
    /// `level 1024x768`, `EXIF thumbnail 12.3 kB`.
    public var alternatives: [String] = []
    /// The scan order where the format has a choice (`progressive`, `sequential`,
    /// `interlaced (Adam7)`, `not interlaced`); nil where it has none.
    public var scan: String? = nil
    /// How the picture was taken, where the format's loader reads it (camera raw files):
    /// make, model, lens, date, exposure, GPS.
    public var capture: CaptureFacts? = nil

    /// Reads what it can from the headers (no pixel is decoded): what every format has from
    /// its loader's header value, what only some have (segments, chunks) from their loader.
    public static func inspect(_ input: [UInt8]) throws -> ImageInfo {
        guard !input.isEmpty else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        return try input.withUnsafeBytes { raw in
            guard let (kind, _) = SourceLoaders.sniff(raw) else {
                throw ImagingError(.unsupportedFormat, FormatDetection.unsupportedMessage(raw))
            }
            if let info = try kind.inspect(raw) { return info }
            return try fromHeader(raw)
        }
    }

    /// What a format's loader says of it: its header value, metadata and structure.
    static func fromHeader(_ raw: UnsafeRawBufferPointer) throws -> ImageInfo {
        // Nothing is decoded: any size can be described.
        var options = RenderOptions()
        options.limits.maxPixels = Int.max
        // A damaged file is described, not refused: what its header says is shown.
        options.strict = false
        let source = try SourceDecoder(bytes: raw, options: options)
        let h = source.header
        let size = h.storedSize, shown = h.displaySize
        var info = ImageInfo(format: h.format, bytes: raw.count, width: size.width, height: size.height,
                             orientation: h.orientation.exifValue, displayWidth: shown.width, displayHeight: shown.height,
                             colorSpace: h.colorModel, components: nil, subsampling: nil, progressive: h.progressive,
                             codingProcess: source.loader.coding, bitDepth: h.bitDepth, restartInterval: nil,
                             interlaced: nil, hasAlpha: h.hasAlpha, pngGamma: nil, iccProfile: nil, iccColorSpace: nil,
                             iccBytes: nil, hasExif: source.exif != nil, hasGPS: false, exifThumbnailBytes: nil,
                             copyright: nil, camera: nil, hasXMP: source.xmp != nil, hasIPTC: false, comments: 0,
                             trailingBytes: 0, structure: source.loader.structure)
        if let e = source.exif { apply(e, to: &info, orientation: false) }
        info.orientationFrom = source.loader.orientationFrom
        info.scan = h.scan
        info.capture = source.loader.capture
        info.setLength(h)
        if let icc = source.iccProfile { describeICC(icc, into: &info) }
        switch source.loader.gainMap(bytes: raw, limits: Limits()) {
        case .usable(let m)?:
            info.gainMap = m.info
            info.gainMapMetadata = m.metadata
        case .unusable(let i)?: info.gainMap = i
        case nil: break
        }
        return info
    }

    /// Pages, frames, duration and the cheaper decodes, from a header.
    mutating func setLength(_ h: SourceHeader) {
        pages = h.pages
        pagesAtLeast = h.pagesAtLeast ? true : nil
        frames = h.frames
        durationSeconds = h.duration
        alternatives = []
        if h.alternatives.exactEighths { alternatives.append("DCT scales 1/8-8/8") }
        else if h.alternatives.carriesPreviews { alternatives.append("half size (a pixel per 2x2 block, no demosaic)") }
        else if h.alternatives.scalesOnDecode { alternatives.append("scaled while decoding") }
        if let p = h.alternatives.preview { alternatives.append("preview \(p)") }
        alternatives += h.alternatives.thumbnails.map { "thumbnail \($0.size)" }
        alternatives += h.alternatives.levels.map { "level \($0)" }
        if let t = h.alternatives.exifThumbnailBytes { alternatives.append("EXIF thumbnail \(t) bytes") }
    }

    /// EXIF's facts; with `orientation`, its Orientation tag too (a format whose orientation is EXIF's).
    static func apply(_ e: ExifSummary, to info: inout ImageInfo, orientation: Bool = true) {
        if orientation, let tag = e.orientation {
            let o = (1...8).contains(tag) ? tag : 1
            info.orientation = o
            info.orientationFrom = "EXIF"
            if o >= 5 {
                info.displayWidth = info.height
                info.displayHeight = info.width
            }
        }
        info.hasGPS = e.hasGPS
        info.copyright = e.copyright
        info.exifThumbnailBytes = e.thumbnail?.count
        let make = e.make.flatMap { m in e.model?.hasPrefix(m) == true ? nil : m }
        let camera = [make, e.model].compactMap { $0 }.joined(separator: " ")
        info.camera = camera.isEmpty ? nil : camera
    }

    static func describeICC(_ bytes: [UInt8], into info: inout ImageInfo) {
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

    static func name(of marker: UInt8, _ kind: JPEGSegments.Kind) -> String {
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
