import CJPEG

/// Container formats Tessera reads and writes.
public enum ImageFormat: String, Codable, Sendable {
    case jpeg, png

    /// Recognises a format from its first bytes.
    public static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // SOI and the first marker's FF; two bytes FF D8 are a JPEG cut short (truncated, not foreign).
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes.count == 2 || bytes[2] == 0xFF { return .jpeg }
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        if bytes.count >= 8, (0..<8).allSatisfy({ bytes[$0] == png[$0] }) { return .png }
        return nil
    }

    public var fileExtension: String { self == .jpeg ? "jpg" : "png" }
}

/// One source opened for decoding: header and metadata first, then rows, in one
/// of three layouts (gray, RGB, RGBA). CMYK JPEGs become RGB here (through their
/// ICC profile when they carry one), so nothing downstream sees CMYK.
final class SourceDecoder {
    let format: ImageFormat
    let storedSize: Size
    private(set) var exif: ExifSummary?
    private(set) var iccProfile: [UInt8]?
    private var orientationOverride: Orientation?
    private(set) var jpegHeader: JPEGHeader?
    private(set) var pngHeader: PNGHeader?

    private let jpeg: JPEGDecoder?
    /// A progressive JPEG (libjpeg keeps a whole-image coefficient buffer for it).
    var isProgressive: Bool { jpeg?.header.progressive ?? false }
    private let png: PNGDecoder?
    private let bytes: UnsafeRawBufferPointer
    /// Whether the 1/8 image came from the DC scans alone (progressive JPEG).
    private(set) var usedDCScans = false
    private let options: RenderOptions
    private(set) var decodedSize = Size(width: 0, height: 0)
    private(set) var channels = 0
    private(set) var scaleEighths = 8
    private var rowsRead = 0

    // CMYK conversion
    private var cmyk = false
    private var cmykConverter: CMYKConverter?
    private var scratch: UnsafeMutablePointer<UInt8>?
    private var scratchRows = 0
    // Interlaced PNG: decoded whole, then served row by row.
    private var whole: PixelBuffer?

    var orientation: Orientation { orientationOverride ?? Orientation(exif: exif?.orientation ?? 1) }

    /// Stands in for `main` (an EXIF thumbnail): its orientation, ICC profile and EXIF apply.
    func inherit(from main: SourceDecoder) {
        orientationOverride = main.orientation
        iccProfile = main.iccProfile
        exif = main.exif
    }

    init(bytes: UnsafeRawBufferPointer, options: RenderOptions) throws {
        self.options = options
        self.bytes = bytes
        guard bytes.count > 0 else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        try options.limits.checkInput(bytes: bytes.count)
        guard let format = ImageFormat.sniff(bytes) else {
            throw ImagingError(.unsupportedFormat, FormatDetection.unsupportedMessage(bytes))
        }
        self.format = format
        switch format {
        case .jpeg:
            let d = try JPEGDecoder(bytes: bytes, limits: options.limits, strict: options.strict)
            jpeg = d
            png = nil
            jpegHeader = d.header
            storedSize = Size(width: d.header.width, height: d.header.height)
            exif = d.exif.flatMap(Exif.read)
            iccProfile = try d.iccProfile()
        case .png:
            let d = try PNGDecoder(bytes: bytes, limits: options.limits)
            png = d
            jpeg = nil
            pngHeader = d.header
            storedSize = Size(width: d.header.width, height: d.header.height)
            exif = d.header.exif.flatMap(Exif.read)
            iccProfile = d.header.iccProfile
        }
        try options.limits.checkDimensions(storedSize)
    }

    deinit { scratch?.deallocate() }

    /// Starts decoding at `scaleEighths`/8 (JPEG only; PNG always decodes at 1).
    func start(scaleEighths requested: Int, maxBatchRows: Int) throws {
        if jpeg != nil, let h = jpegHeader, requested == 1, options.progressiveDC || options.fastMode,
           ProgressiveDC.applies(to: h),
           let image = try? ProgressiveDC.decode(bytes, header: h, exact: !options.fastMode) {
            // Only the DC scans matter at 1/8: libjpeg never starts (nor allocates its
            // whole-image coefficient buffer). Anything unexpected fell back to libjpeg.
            usedDCScans = true
            decodedSize = Size(width: image.width, height: image.height)
            channels = image.channels
            scaleEighths = 1
            whole = image
            return
        }
        if let jpeg, let h = jpegHeader {
            let layout: JPEGDecoder.OutputLayout
            switch h.colorSpace {
            case JCS_GRAYSCALE: layout = .gray
            case JCS_YCbCr, JCS_RGB: layout = .rgb
            case JCS_CMYK, JCS_YCCK:
                layout = .cmyk
                cmyk = true
                cmykConverter = CMYKConverter(icc: iccProfile, adobeInverted: h.adobeTransform != nil)
            default:
                throw ImagingError(.unsupportedFeature,
                                   "JPEG with \(h.components) components in colour space \(h.colorSpace.rawValue)")
            }
            decodedSize = try jpeg.start(scaleEighths: requested, layout: layout, fast: options.fastDecode)
            scaleEighths = requested
            channels = cmyk ? 3 : layout.channels
            if cmyk {
                scratch = .allocate(capacity: decodedSize.width * 4 * maxBatchRows)
                scratchRows = maxBatchRows
            }
        } else if let png {
            let (c, wholeImage) = try png.start(correctGamma: options.correctPNGGamma)
            decodedSize = storedSize
            channels = c
            scaleEighths = 8
            if wholeImage {
                let layout: PixelLayout = c == 1 ? .gray : c == 3 ? .rgb : .rgba
                let buffer = try PixelBuffer.make(width: storedSize.width, height: storedSize.height, layout: layout)
                try png.readImage(into: buffer.base, stride: buffer.stride)
                whole = buffer
            }
        }
    }

    /// Reads up to `maxRows` rows of `channels` bytes per pixel; 0 at the end.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        let remaining = decodedSize.height - rowsRead
        guard remaining > 0 else { return 0 }
        let want = min(maxRows, remaining)
        var n = want
        if let whole {
            for r in 0..<want {
                (buffer + r * stride).update(from: whole.row(rowsRead + r), count: whole.stride)
            }
        } else if let jpeg {
            if cmyk {
                precondition(want <= scratchRows)
                let scratchStride = decodedSize.width * 4
                n = try jpeg.read(into: scratch!, stride: scratchStride, maxRows: want)
                for r in 0..<n {
                    cmykConverter!.convert(scratch! + r * scratchStride, buffer + r * stride, count: decodedSize.width)
                }
            } else {
                n = try jpeg.read(into: buffer, stride: stride, maxRows: want)
            }
        } else if let png {
            try png.read(into: buffer, stride: stride, rows: want)
        }
        rowsRead += n
        return n
    }

    /// Ends decoding (reports corruption found at the end of the data in strict mode).
    func finish() throws {
        try jpeg?.finish()
        try png?.finish()
    }

}

/// CMYK (or YCCK, which libjpeg outputs as CMYK) rows to RGB: through the file's ICC
/// profile when it has a CMYK one, else the usual naive conversion (Adobe files store
/// inverted CMYK).
struct CMYKConverter {
    private let inverted: Bool
    private let transform: ColorTransform?

    init(icc: [UInt8]?, adobeInverted: Bool) {
        inverted = adobeInverted
        if let icc, let p = ICCProfile(icc), p.colorSpace == .cmyk {
            transform = ColorTransform(from: p, adobeInverted ? .cmyk8Inverted : .cmyk8, to: .sRGB, .rgb8)
        } else {
            transform = nil
        }
    }

    func convert(_ src: UnsafeMutablePointer<UInt8>, _ dst: UnsafeMutablePointer<UInt8>, count: Int) {
        if let t = transform {
            t.apply(src, dst, count: count)
            return
        }
        var s = src, d = dst
        for _ in 0..<count {
            var c = Int(s[0]), m = Int(s[1]), y = Int(s[2]), k = Int(s[3])
            if !inverted { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k }
            d[0] = UInt8((c * k + 127) / 255)
            d[1] = UInt8((m * k + 127) / 255)
            d[2] = UInt8((y * k + 127) / 255)
            s += 4
            d += 3
        }
    }
}
