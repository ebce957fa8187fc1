import Foundation
import TesseraModel

/// One source opened for decoding, through its format's loader (`SourceLoaders`), with
/// what is the same for every format: the limits checked from the header before any
/// allocation (size, frames, duration), the cheaper decode the plan chose, strict or lenient
/// reading, rows in one of three layouts (gray, RGB, RGBA), and what the record says of it.
final class SourceDecoder {
    let format: ImageFormat
    private(set) var loader: any SourceLoader
    private let options: RenderOptions
    private var orientationOverride: Orientation?
    private var metadataOverride: SourceMetadata?
    private(set) var decodedSize = Size(width: 0, height: 0)
    private(set) var channels = 0
    private(set) var scaleEighths = 8
    private var rowsRead = 0
    /// The processor time decoding has used (this thread's, so that a worker stopped or
    /// starved does not count): over `options.decodeSeconds` (the task's timeout) it fails
    /// `timed-out` between batches, for every format.
    private var decodeStart = SourceDecoder.threadSeconds()

    static func threadSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
    /// Rows the decoder could not give (lenient): filled, and said in `warnings`.
    private var filledFrom: Int?
    private var policyWarnings: [String] = []

    var header: SourceHeader { loader.header }
    var storedSize: Size { loader.header.storedSize }
    var orientation: Orientation { orientationOverride ?? loader.header.orientation }
    var exif: ExifSummary? { (metadataOverride ?? loader.metadata).exif }
    var iccProfile: [UInt8]? { (metadataOverride ?? loader.metadata).iccProfile }
    var xmp: [UInt8]? { (metadataOverride ?? loader.metadata).xmp }
    var density: PixelDensity? { (metadataOverride ?? loader.metadata).density }

    /// Stands in for `main` (an EXIF thumbnail, a raw file's preview): its orientation (or
    /// `orientation`), ICC profile and EXIF apply.
    func inherit(from main: SourceDecoder, orientation: Orientation? = nil, keepProfile: Bool = false) {
        orientationOverride = orientation ?? main.orientation
        metadataOverride = SourceMetadata(exif: main.exif, iccProfile: keepProfile ? loader.metadata.iccProfile : main.iccProfile,
                                          xmp: loader.metadata.xmp, density: loader.metadata.density)
    }

    /// The orientation an embedded preview is shown with: its own EXIF orientation when it
    /// says one; none when it is stored upright already (turned against the image's stored
    /// shape, the way the image is shown); else the image's (`main`).
    static func previewOrientation(_ preview: SourceDecoder, of main: SourceDecoder) -> Orientation {
        if let own = preview.loader.metadata.exif?.orientation, (1...8).contains(own) { return Orientation(exif: own) }
        let p = preview.storedSize, stored = main.storedSize, shown = main.orientation.apply(to: stored)
        let landscape = { (s: Size) in s.width >= s.height }
        if landscape(stored) != landscape(shown), landscape(p) == landscape(shown) { return .up }
        return main.orientation
    }

    init(bytes: UnsafeRawBufferPointer, options: RenderOptions) throws {
        self.options = options
        guard bytes.count > 0 else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        try options.limits.checkInput(bytes: bytes.count)
        guard let (kind, format) = SourceLoaders.sniff(bytes) else {
            throw ImagingError(.unsupportedFormat, FormatDetection.unsupportedMessage(bytes))
        }
        self.format = format
        if options.frame != 0, format != .gif {
            throw ImagingError(.invalidRecipe, "frame \(options.frame) of a \(format.rawValue.uppercased()) (one frame: 0)")
        }
        if options.page != 0, format != .tiff {
            throw ImagingError(.invalidRecipe, "page \(options.page) of a \(format.rawValue.uppercased()) (one page: 0)")
        }
        loader = try kind.init(bytes: bytes, format: format, options: options)
        let h = loader.header
        // Animations and videos longer than asked are refused from the header, whatever is made of them.
        if options.maxFrames > 0, h.frames > options.maxFrames {
            throw ImagingError(.limitExceeded, "\(Self.noun(h)) of \(h.frames) frames, over the limit of \(options.maxFrames) (maxFrames)")
        }
        if options.maxDuration > 0, let d = h.duration, d > options.maxDuration {
            throw ImagingError(.limitExceeded, "\(Self.noun(h)) of \(d) s, over the limit of \(options.maxDuration) s (maxDuration)")
        }
        // A pyramidal TIFF's pixel count is checked on the level decoded (Renderer), its sides here.
        if !h.alternatives.levels.isEmpty {
            var sides = options.limits
            sides.maxPixels = Int.max
            try sides.checkDimensions(h.storedSize)
        } else {
            try options.limits.checkDimensions(h.storedSize)
        }
    }

    /// "video", "animated GIF": what a length limit names.
    static func noun(_ h: SourceHeader) -> String {
        h.format == .video ? "video" : "animated \(h.format == .jxl ? "JPEG XL" : h.format.rawValue.uppercased())"
    }

    /// An ICC profile standing for an nclx colour box that is not sRGB (other primaries,
    /// or a linear/gamma transfer); nil for sRGB, for HDR transfers (tone-mapped straight
    /// to sRGB when decoded) and for what cannot be described.
    static func profile(for nclx: HEIFDecoder.NCLX) -> [UInt8]? {
        guard !nclx.isHDR else { return nil }
        let transfer: ICCProfiles.Transfer
        switch nclx.transfer {
        case 8: transfer = .linear
        case 4: transfer = .gamma(2.2)
        case 5: transfer = .gamma(2.8)
        default: transfer = .sRGB  // 1, 6, 13, 14, 15 and unspecified: the sRGB/BT.709 family
        }
        if nclx.isSRGBPrimaries, case .sRGB = transfer { return nil }
        guard nclx.red.y > 0, nclx.green.y > 0, nclx.blue.y > 0, nclx.white.y > 0 else { return nil }
        return ICCProfiles.rgb(name: "nclx \(nclx.primaries)/\(nclx.transfer)", red: nclx.red, green: nclx.green,
                               blue: nclx.blue, white: nclx.white, transfer: transfer)
    }

    /// Decodes a cheaper alternative the header lists instead of the full image.
    @discardableResult
    func use(_ choice: SourceChoice) -> Bool { loader.use(choice) }

    /// Whether the source is HDR (known from its colour box before decoding).
    var isHDR: Bool { loader.isHDR }
    /// An HDR source read with `hdrGain`: each batch's gain-map rows (one byte a pixel,
    /// `decodedSize.width` a row), beside its SDR rows.
    var hdrGain: Bool {
        get { loader.hdrGain }
        set { loader.hdrGain = newValue }
    }
    var gainBatch: UnsafeMutablePointer<UInt8>? { loader.gainBatch }
    /// The gain map's metadata when the rows carry one (an HDR source read with `hdrGain`).
    var hdrGainMetadata: GainMapMetadata? { loader.hdrGainMetadata }

    /// How the image was decoded, the level or frame read, a video's poster time.
    var decodePath: DecodePath { loader.decodePath }
    var decodeLevel: Int? { loader.decodeLevel }
    var frameTime: Double? { loader.frameTime }
    /// What the record says beside the outputs.
    var warnings: [String] { loader.warnings + policyWarnings }

    /// Starts decoding at `scaleEighths`/8 (loaders that cannot scale decode whole).
    func start(scaleEighths requested: Int, maxBatchRows: Int) throws {
        decodeStart = Self.threadSeconds()
        let started = try loader.start(scaleEighths: requested, maxBatchRows: maxBatchRows)
        decodedSize = started.size
        channels = started.channels
        scaleEighths = started.scaleEighths
    }

    /// Tells the decoder which columns of the decoded image the reader uses (a crop): a tiled
    /// TIFF then reads only the tiles over them. Other formats decode whole rows.
    func limitColumns(_ columns: ClosedRange<Int>) { loader.limitColumns(columns) }

    /// Whether `skip(rows:)` saves work.
    var skipsRows: Bool { loader.skipsRows && filledFrom == nil }

    /// Skips up to `rows` rows; returns how many were skipped.
    func skip(rows: Int) throws -> Int {
        guard skipsRows else { return 0 }
        let n = try loader.skip(rows: min(rows, decodedSize.height - rowsRead))
        rowsRead += n
        return n
    }

    /// Reads up to `maxRows` rows of `channels` bytes per pixel; 0 at the end.
    ///
    /// Strict (the default), data that ends early or goes wrong fails the read, typed
    /// (`truncated`, `corrupt`). Lenient, the rows decoded before it are kept and the rest
    /// are filled gray, as libjpeg fills what it never got — the same for every format —
    /// and `warnings` says how many rows were the file's: `truncated: 212 of 480 rows (…)`.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        let remaining = decodedSize.height - rowsRead
        guard remaining > 0 else { return 0 }
        let want = min(maxRows, remaining)
        if filledFrom != nil { return fill(buffer, stride: stride, rows: want) }
        let n: Int
        do {
            n = try loader.read(into: buffer, stride: stride, maxRows: want)
        } catch let e as ImagingError where !options.strict && (e.code == .truncated || e.code == .corrupt) && rowsRead > 0 {
            filledFrom = rowsRead
            policyWarnings.append("\(e.code): \(rowsRead) of \(decodedSize.height) rows (\(e.reason))")
            return fill(buffer, stride: stride, rows: want)
        }
        rowsRead += n
        if let limit = options.decodeSeconds, Self.threadSeconds() - decodeStart > limit {
            throw ImagingError(.timedOut, "decoding took longer than the task may (\(rowsRead) of \(decodedSize.height) rows in "
                               + "\(String(format: "%.1f", Self.threadSeconds() - decodeStart)) s of processor time, timeout \(limit) s)")
        }
        return n
    }

    /// Whether `readLinear` gives 16-bit linear rows (a raw file's).
    var linearRows: Bool { loader.linearRows }

    /// Up to `maxRows` rows of 16-bit linear samples (`channels` a pixel); 0 at the end.
    func readLinear(into buffer: UnsafeMutablePointer<UInt16>, stride: Int, maxRows: Int) throws -> Int {
        let remaining = decodedSize.height - rowsRead
        guard remaining > 0 else { return 0 }
        let n = try loader.readLinear(into: buffer, stride: stride, maxRows: min(maxRows, remaining))
        rowsRead += n
        if let limit = options.decodeSeconds, Self.threadSeconds() - decodeStart > limit {
            throw ImagingError(.timedOut, "decoding took longer than the task may (\(rowsRead) of \(decodedSize.height) rows, timeout \(limit) s)")
        }
        return n
    }

    /// Rows that never decoded: gray (opaque), as libjpeg pads a file cut short.
    private func fill(_ buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) -> Int {
        let width = decodedSize.width * channels
        for r in 0..<rows {
            let row = buffer + r * stride
            row.initialize(repeating: 128, count: width)
            if channels == 4 { for x in 0..<decodedSize.width { row[x * 4 + 3] = 255 } }
        }
        rowsRead += rows
        return rows
    }

    /// Ends decoding. Strict, damage found at the end of the data (a PNG without IEND)
    /// fails; lenient, it is a warning.
    func finish() throws {
        guard filledFrom == nil else { return }
        do {
            try loader.finish()
        } catch let e as ImagingError where !options.strict && (e.code == .truncated || e.code == .corrupt) {
            policyWarnings.append("\(e.code): every row decoded; \(e.reason)")
        }
    }

    /// Premultiplied RGBA to straight alpha (the pipeline's convention), in place.
    static func unpremultiply(_ p: UnsafeMutablePointer<UInt8>, count: Int) {
        for i in 0..<count {
            let a = Int(p[i * 4 + 3])
            guard a > 0 && a < 255 else { continue }
            for c in 0..<3 { p[i * 4 + c] = UInt8(min(255, (Int(p[i * 4 + c]) * 255 + a / 2) / a)) }
        }
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
