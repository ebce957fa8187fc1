import TesseraModel

/// What a source is, from its header alone, before any pixel is decoded: one value for
/// every format. The plan, the limits, the memory budget and `inspect` read it.
struct SourceHeader {
    var format: ImageFormat
    /// The size of the decoder's rows (a HEIF's and a video's: as displayed, their transforms
    /// applied by the decoder; the others: as stored).
    var storedSize: Size
    /// How the stored rows are turned to be displayed.
    var orientation: Orientation
    /// How the samples are coded, as the format says it: `YCbCr 4:2:0`, `gray`, `CMYK`,
    /// `palette`, `RGB`, `min-is-white`, `yuv420p (4:2:0)`, …
    var colorModel: String
    /// Bits per sample as stored.
    var bitDepth: Int
    var hasAlpha: Bool
    /// Progressive (JPEG), interlaced (PNG, GIF) or otherwise coded coarse to fine.
    var progressive = false
    /// The scan order where the format has a choice, for `inspect`: `progressive`,
    /// `sequential`, `interlaced (Adam7)`, `not interlaced`; nil where it has none.
    var scan: String?
    /// Pages (TIFF); `pagesAtLeast`: counted up to a bound, there may be more.
    var pages = 1
    var pagesAtLeast = false
    /// Frames (GIF, animated WebP and JPEG XL, video); a still has one.
    var frames = 1
    /// Seconds an animation or a video lasts (nil: a still, or not said).
    var duration: Double?
    /// Cheaper decodes the file offers.
    var alternatives = SourceAlternatives()

    /// The size as displayed.
    var displaySize: Size { orientation.apply(to: storedSize) }
}

/// The cheaper decodes a file offers beside its full image (the plan chooses among them
/// with small pure helpers, as libvips' thumbnail chooses shrink-on-load).
struct SourceAlternatives {
    /// The decoder shrinks while decoding, by eighths (JPEG's scaled IDCT, libwebp's and
    /// libswscale's scalers): the plan's DCT-like scale applies.
    var scalesOnDecode = false
    /// The shrunk image is exactly eighths of the stored one (each 8×8 block becomes m×m
    /// pixels; the last, partial block rounds the decoded size up): JPEG. Else its geometry
    /// is the decoded size over the stored one.
    var exactEighths = false
    /// Reduced-resolution copies of the image (a pyramidal TIFF's levels), largest first.
    var levels: [Size] = []
    /// Thumbnail items (HEIF), with their size as displayed.
    var thumbnails: [(id: UInt32, size: Size)] = []
    /// An EXIF thumbnail (bytes), a JPEG that may stand in for small outputs in fast mode.
    var exifThumbnailBytes: Int?
    /// An embedded JPEG preview (a raw file's), its size as stored: it stands in for every
    /// output it covers (`embeddedPreview` gives its bytes).
    var preview: Size?
    /// The format carries such previews (a raw file): `--raw preview` without one fails typed.
    var carriesPreviews = false
}

/// What a file says besides its pixels, read with the header.
struct SourceMetadata {
    var exif: ExifSummary?
    var iccProfile: [UInt8]?
    var xmp: [UInt8]?
    /// Pixels per inch, as stored (not oriented).
    var density: PixelDensity?
}

/// A cheaper decode chosen from `SourceAlternatives`.
enum SourceChoice {
    /// Reduced level `n` (1 is the largest).
    case level(Int)
    /// Thumbnail item `id`, of `size`.
    case thumbnail(id: UInt32, size: Size)
}

/// What `start` made ready: the rows `read` will give.
struct DecodeStart {
    var size: Size
    /// 1 (gray), 3 (RGB) or 4 (RGBA).
    var channels: Int
    /// The scale decoded at, in eighths (8: full size).
    var scaleEighths: Int
}

/// One format's decoder behind the contract every format plugs into (libvips' loaders:
/// `is_a`, `header`, `load`): recognised by content (`sniff`), described by its header
/// before any pixel is decoded (`header`, `metadata`, `decodeBytes`), then decoded at the
/// cheapest option the plan chose (`use`, `start`, rows). Each loader is one file under
/// `Codecs/Sources/`, listed once in `SourceLoaders.all`; what is the same for every format
/// (strict or lenient, limits, typed errors, warnings) is `SourceDecoder`'s.
protocol SourceLoader: AnyObject {
    /// The formats this loader reads.
    static var formats: Set<ImageFormat> { get }
    /// The format `bytes` are, when this loader reads them (content only, never a name).
    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat?
    /// Reads the header and metadata; no pixel is decoded. `bytes` outlive the loader.
    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws
    var header: SourceHeader { get }
    var metadata: SourceMetadata { get }
    /// What decoding at `scaleEighths` holds at its peak besides the rows it hands out
    /// (buffers, coefficient arrays, a whole decoded image), bytes: the memory plan's part.
    func decodeBytes(scaleEighths: Int) -> Int
    /// Decodes the alternative instead of the full image; false when it cannot.
    func use(_ choice: SourceChoice) -> Bool
    /// Starts decoding at `scaleEighths`/8 (loaders that do not scale decode at 8).
    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart
    /// Up to `maxRows` rows of `channels` bytes a pixel; 0 at the end.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int
    /// Whether `readLinear` gives the rows as 16-bit linear light (a raw file's): they go into
    /// the resamplers without an 8-bit round trip. `read` still gives 8-bit sRGB.
    var linearRows: Bool { get }
    func readLinear(into buffer: UnsafeMutablePointer<UInt16>, stride: Int, maxRows: Int) throws -> Int
    /// The embedded preview's bytes (a JPEG), read when the plan chose it.
    func embeddedPreview() throws -> [UInt8]?
    /// How the picture was taken (camera, lens, exposure, date, GPS), for `inspect`.
    var capture: CaptureFacts? { get }
    /// Whether `skip` saves work (rows never produced: JPEG's IDCT, TIFF's strips).
    var skipsRows: Bool { get }
    func skip(rows: Int) throws -> Int
    /// The columns the reader uses (a crop): a tiled TIFF reads only the tiles under them.
    func limitColumns(_ columns: ClosedRange<Int>)
    /// Ends decoding; damage found at the end is reported here in strict mode.
    func finish() throws
    /// How the image was decoded, for the record (after `start`).
    var decodePath: DecodePath { get }
    /// The level, page or frame read, for the record's decode path.
    var decodeLevel: Int? { get }
    /// A video's poster time, once decoded.
    var frameTime: Double? { get }
    /// What went differently from what was asked, for the record.
    var warnings: [String] { get }
    /// `inspect` of a format that reads more than its header value gives (segments, chunks);
    /// nil: `inspect` is made from the header value.
    static func inspect(_ bytes: UnsafeRawBufferPointer) throws -> ImageInfo?
    /// Where the orientation comes from, for `inspect` (nil: the format has none).
    var orientationFrom: String? { get }
    /// `inspect`'s lines: how it is coded, and its structure (chunks, boxes, items).
    var coding: String? { get }
    var structure: [String] { get }
    /// HDR sources: whether the rows are tone-mapped from HDR, and with `hdrGain` set before
    /// `start`, each batch's gain-map rows beside them.
    var isHDR: Bool { get }
    var hdrGain: Bool { get set }
    var gainBatch: UnsafeMutablePointer<UInt8>? { get }
    var hdrGainMetadata: GainMapMetadata? { get }
    /// An HDR gain map the file carries beside its image (Ultra HDR, Apple's), found without decoding it.
    func gainMap(bytes: UnsafeRawBufferPointer, limits: Limits) -> UltraHDR.Found?
    /// An auxiliary image the gain map names (a HEIF's), decoded whole as stored.
    func decodeAuxiliary(id: UInt32, limits: Limits) throws -> PixelBuffer
    /// Its frames one by one, for animated outputs (nil: a still).
    func animation(options: RenderOptions) throws -> AnimationSource?
    /// Rows of a pyramid level for tiles from `startRow`, when this format streams them itself
    /// (nil: the image is decoded whole through `SourceDecoder` and served row by row).
    static func rowSource(bytes: UnsafeRawBufferPointer, scaleEighths: Int, startRow: Int, limits: Limits, strict: Bool) throws -> RowSource?
    /// How a pyramid's level shrunk 2^k is decoded: at `eighths` (a scaled decode), then box-shrunk by 2^`boxShift`.
    static func tileDecodePlan(shrink k: Int) -> (eighths: Int, boxShift: Int)
    /// What a pyramid of this source needs to know before any part is made.
    func tileInfo(bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo
    /// What decoding whole holds beside the image, for a pyramid's budget.
    var wholeDecodeCopyBytes: Int { get }
    /// Why a pyramid part of this source needs `info.wholeImageBytes` whatever its band, and what to do.
    static func wholeDecodeAdvice(_ info: TileSourceInfo) -> String
    /// Whether `stripLosslessly` works for this format (else `strip` says to render it).
    static var stripsLosslessly: Bool { get }
    /// The file with its metadata removed and its image data copied byte for byte.
    static func stripLosslessly(_ input: [UInt8], options: StripOptions) throws -> StripResult
    /// Its name in messages: "JPEG".
    static var name: String { get }
    /// What `strip` says of this format when it does not strip it (nil: the general advice).
    static var stripRefusal: String? { get }
}

extension SourceLoader {
    func decodeBytes(scaleEighths: Int) -> Int { 0 }
    func use(_ choice: SourceChoice) -> Bool { false }
    var linearRows: Bool { false }
    func readLinear(into buffer: UnsafeMutablePointer<UInt16>, stride: Int, maxRows: Int) throws -> Int { 0 }
    func embeddedPreview() throws -> [UInt8]? { nil }
    var capture: CaptureFacts? { nil }
    static var stripRefusal: String? { nil }
    var skipsRows: Bool { false }
    func skip(rows: Int) throws -> Int { 0 }
    func limitColumns(_ columns: ClosedRange<Int>) {}
    func finish() throws {}
    var decodeLevel: Int? { nil }
    var frameTime: Double? { nil }
    var warnings: [String] { [] }
    static func inspect(_ bytes: UnsafeRawBufferPointer) throws -> ImageInfo? { nil }
    var orientationFrom: String? { nil }
    var coding: String? { nil }
    var structure: [String] { [] }
    var isHDR: Bool { false }
    var hdrGain: Bool {
        get { false }
        set {}
    }
    var gainBatch: UnsafeMutablePointer<UInt8>? { nil }
    var hdrGainMetadata: GainMapMetadata? { nil }
    func gainMap(bytes: UnsafeRawBufferPointer, limits: Limits) -> UltraHDR.Found? { nil }
    func decodeAuxiliary(id: UInt32, limits: Limits) throws -> PixelBuffer {
        throw ImagingError(.unsupportedFeature, "\(header.format.rawValue.uppercased()) has no auxiliary images")
    }
    func animation(options: RenderOptions) throws -> AnimationSource? { nil }
    static func rowSource(bytes: UnsafeRawBufferPointer, scaleEighths: Int, startRow: Int, limits: Limits, strict: Bool) throws -> RowSource? { nil }
    static func tileDecodePlan(shrink k: Int) -> (eighths: Int, boxShift: Int) { (8, k) }
    static var stripsLosslessly: Bool { false }
    static func stripLosslessly(_ input: [UInt8], options: StripOptions) throws -> StripResult {
        throw ImagingError(.unsupportedFeature, "\(name) is not stripped losslessly")
    }
    static var name: String { formats.map { $0.rawValue.uppercased() }.sorted().joined(separator: "/") }
    static func wholeDecodeAdvice(_ info: TileSourceInfo) -> String {
        "a \(info.format.rawValue.uppercased()) image is decoded whole (\(info.wholeImageBytes >> 20) MB); convert it to JPEG or raise tiles.memoryBudgetMB"
    }

    /// A source with no streaming decoder: decoded whole (once per part), within the budget.
    func tileInfo(bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo {
        let h = header
        let channels = h.hasAlpha ? 4 : 3
        let size = h.storedSize
        return TileSourceInfo(format: h.format, width: size.width, height: size.height, progressive: true, restartSeekable: false,
                              wholeImageBytes: size.width * size.height * channels * (h.bitDepth > 8 ? 2 : 1) + wholeDecodeCopyBytes,
                              channels: channels)
    }

    /// What a whole decode holds beside the image (libheif's and giflib's planes).
    var wholeDecodeCopyBytes: Int {
        let s = header.storedSize
        return s.width * s.height * 3 / 2 * (header.bitDepth > 8 ? 2 : 1)
    }
}

/// Rows served from an image decoded whole. A lenient decode that stopped short serves the
/// rows that decoded (`valid`), then throws why (`damage`): `SourceDecoder` fills the rest
/// and says so, the same for every format.
struct WholeRows {
    let image: PixelBuffer
    private(set) var row = 0
    let valid: Int
    let damage: ImagingError?

    init(_ image: PixelBuffer, valid: Int? = nil, damage: ImagingError? = nil) {
        self.image = image
        self.valid = min(image.height, valid ?? image.height)
        self.damage = damage
    }

    mutating func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        let n = max(0, min(maxRows, valid - row))
        if n == 0, row < image.height, let damage { throw damage }
        for r in 0..<n { (buffer + r * stride).update(from: image.row(row + r), count: image.stride) }
        row += n
        return n
    }
}

/// Every format Tessera reads, in the order they are sniffed: the one list of formats.
/// Adding a format is a loader and a line here.
enum SourceLoaders {
    static let all: [any SourceLoader.Type] = [
        JPEGLoader.self, PNGLoader.self, WebPLoader.self, JXLLoader.self, GIFLoader.self, RawLoader.self, TIFFLoader.self,
        VideoLoader.self, HEIFLoader.self,
    ]

    /// The formats `strip` handles without re-encoding, for messages: "JPEG, PNG and WebP".
    static var strippable: String {
        let names = all.filter { $0.stripsLosslessly }.map { $0.name }
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }

    /// The loader of `format`.
    static func loader(for format: ImageFormat) -> any SourceLoader.Type {
        all.first { $0.formats.contains(format) }!
    }

    /// The loader and format of `bytes`, by content.
    static func sniff(_ bytes: UnsafeRawBufferPointer) -> (loader: any SourceLoader.Type, format: ImageFormat)? {
        for loader in all {
            if let format = loader.sniff(bytes) { return (loader, format) }
        }
        return nil
    }
}

extension ImageFormat {
    /// The format of `bytes` by their content, as the loaders recognise it.
    public static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? { SourceLoaders.sniff(bytes)?.format }
}

extension UnsafeRawBufferPointer {
    /// Whether the ASCII text `s` is at `offset`.
    func ascii(_ s: String, at offset: Int) -> Bool {
        let u = Array(s.utf8)
        return count >= offset + u.count && (0..<u.count).allSatisfy { self[offset + $0] == u[$0] }
    }
}
