import TesseraModel

/// PNG through libpng: rows as they decode, expanded to 8-bit gray, RGB or RGBA (16-bit
/// samples reduced); an interlaced file is decoded whole, then served row by row.
final class PNGLoader: SourceLoader {
    private let options: RenderOptions
    private let decoder: PNGDecoder
    let pngHeader: PNGHeader
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var whole: WholeRows?
    private var row = 0
    /// Lenient: why the rows stopped (thrown at the next read, once the rows before are given).
    private var damage: ImagingError?
    private(set) var warnings: [String] = []

    static let formats: Set<ImageFormat> = [.png]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        return bytes.count >= 8 && (0..<8).allSatisfy({ bytes[$0] == signature[$0] }) ? .png : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.options = options
        decoder = try PNGDecoder(bytes: bytes, limits: options.limits, lenient: !options.strict)
        let h = decoder.header
        pngHeader = h
        let exif = h.exif.flatMap(Exif.read)
        metadata = SourceMetadata(exif: exif, iccProfile: h.iccProfile, xmp: nil, density: h.density)
        header = SourceHeader(format: .png, storedSize: Size(width: h.width, height: h.height),
                              orientation: Orientation(exif: exif?.orientation ?? 1), colorModel: h.colorTypeName,
                              bitDepth: h.bitDepth, hasAlpha: h.hasTransparency)
        header.progressive = h.interlaced
    }

    /// The memory plan counts a PNG whole (an interlaced one is; libpng's rows beside).
    func decodeBytes(scaleEighths: Int) -> Int { header.storedSize.width * header.storedSize.height * 3 }

    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart {
        let (channels, wholeImage) = try decoder.start(correctGamma: options.correctPNGGamma)
        let size = header.storedSize
        if wholeImage {
            let layout: PixelLayout = channels == 1 ? .gray : channels == 3 ? .rgb : .rgba
            let buffer = try PixelBuffer.make(width: size.width, height: size.height, layout: layout)
            if options.strict {
                try decoder.readImage(into: buffer.base, stride: buffer.stride)
            } else {
                // Lenient: the passes that decoded, over gray where none reached.
                buffer.base.initialize(repeating: 128, count: buffer.byteCount)
                do {
                    try decoder.readImage(into: buffer.base, stride: buffer.stride)
                } catch let e as ImagingError where e.code == .truncated || e.code == .corrupt {
                    warnings.append("\(e.code): the interlaced image decoded in part (\(e.reason))")
                }
            }
            whole = WholeRows(buffer)
        }
        return DecodeStart(size: size, channels: channels, scaleEighths: 8)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        if whole != nil { return try whole!.read(into: buffer, stride: stride, maxRows: maxRows) }
        if let damage { throw damage }
        let n = max(0, min(maxRows, header.storedSize.height - row))
        let (got, error) = decoder.readSome(into: buffer, stride: stride, rows: n)
        row += got
        if let error {
            // The rows before the damage are given first; the next read says why no more come.
            guard got > 0 else { throw error }
            damage = error
        }
        return got
    }

    func finish() throws {
        do {
            try decoder.finish()
        } catch let e as ImagingError where e.code == .truncated {
            throw ImagingError(.truncated, "truncated PNG (the file ends after its image data, without IEND)")
        }
    }

    var decodePath: DecodePath { .png }

    static func rowSource(bytes: UnsafeRawBufferPointer, scaleEighths: Int, startRow: Int, limits: Limits, strict: Bool) throws -> RowSource? {
        let source = try PNGRowSource(bytes: bytes, limits: limits)
        try source.seek(to: startRow)
        return source
    }

    func tileInfo(bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo {
        guard TileSourceInfo.endsLikeAnImage(bytes, marker: Array("IEND".utf8)) else {
            throw ImagingError(.truncated, "truncated PNG (no IEND chunk)")
        }
        let h = pngHeader
        let channels = h.hasTransparency ? 4 : (h.colorType == 0 ? 1 : 3)
        return TileSourceInfo(format: .png, width: h.width, height: h.height, progressive: h.interlaced, restartSeekable: false,
                              wholeImageBytes: h.interlaced ? h.width * h.height * channels : 0, channels: channels)
    }
}

extension PNGLoader {
    /// `inspect` from libpng's header and the chunk list.
    static func inspect(_ raw: UnsafeRawBufferPointer) throws -> ImageInfo? {
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
        info.scan = h.interlaced ? "interlaced (Adam7)" : "not interlaced"
        if let e = h.exif.flatMap(Exif.read) { ImageInfo.apply(e, to: &info) }
        if let icc = h.iccProfile { ImageInfo.describeICC(icc, into: &info) }
        for c in chunks where c.type == "iTXt" || c.type == "tEXt" || c.type == "zTXt" {
            let keyword = String(decoding: raw[c.data].prefix { $0 != 0 }, as: UTF8.self)
            if keyword == "XML:com.adobe.xmp" { info.hasXMP = true } else { info.comments += 1 }
        }
        return info
    }

    static func wholeDecodeAdvice(_ info: TileSourceInfo) -> String {
        "an interlaced PNG is decoded whole (\(info.wholeImageBytes >> 20) MB); save it non-interlaced or raise tiles.memoryBudgetMB"
    }

    static let name = "PNG"
    static let stripsLosslessly = true
    static func stripLosslessly(_ input: [UInt8], options: StripOptions) throws -> StripResult {
        try LosslessStrip.stripPNG(input, options)
    }
}
