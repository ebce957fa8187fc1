import TesseraModel

/// WebP through libwebp: decoded whole straight to the size the plan asked for (libwebp's
/// scaler, the WebP counterpart of JPEG's DCT scaling); an animated file gives its first
/// frame for stills, and its frames in turn (libwebp's animation decoder) for animations.
final class WebPLoader: SourceLoader {
    private let bytes: UnsafeRawBufferPointer
    private let options: RenderOptions
    private let decoder: WebPDecoder
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var whole: WholeRows?
    private(set) var warnings: [String] = []

    static let formats: Set<ImageFormat> = [.webp]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        bytes.ascii("RIFF", at: 0) && bytes.ascii("WEBP", at: 8) ? .webp : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.bytes = bytes
        self.options = options
        decoder = try WebPDecoder(bytes: bytes, limits: options.limits)
        let exif = decoder.exif.flatMap(Exif.read)
        metadata = SourceMetadata(exif: exif, iccProfile: decoder.iccProfile, xmp: decoder.xmp, density: nil)
        header = SourceHeader(format: .webp, storedSize: decoder.size, orientation: Orientation(exif: exif?.orientation ?? 1),
                              colorModel: decoder.compression == "lossless" ? "ARGB (lossless)" : "YUV 4:2:0 (lossy)",
                              bitDepth: 8, hasAlpha: decoder.hasAlpha)
        header.alternatives.scalesOnDecode = !decoder.isAnimated
        header.frames = max(1, decoder.frameCount)
        header.duration = decoder.duration
    }

    /// libwebp decodes the whole image at the size asked for.
    func decodeBytes(scaleEighths: Int) -> Int {
        let s = header.storedSize
        return (s.width * scaleEighths + 7) / 8 * ((s.height * scaleEighths + 7) / 8) * 3
    }

    func start(scaleEighths requested: Int, maxBatchRows: Int) throws -> DecodeStart {
        let stored = header.storedSize
        let target = Size(width: max(1, (stored.width * requested + 7) / 8), height: max(1, (stored.height * requested + 7) / 8))
        let (image, rows, damage) = try decoder.decode(to: decoder.isAnimated ? stored : target, lenient: !options.strict)
        whole = WholeRows(image, valid: rows, damage: damage)
        if let damage, rows >= image.height { warnings.append("\(damage.code): every row decoded (\(damage.reason))") }
        return DecodeStart(size: Size(width: image.width, height: image.height), channels: image.channels,
                           scaleEighths: decoder.isAnimated ? 8 : requested)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        try whole?.read(into: buffer, stride: stride, maxRows: maxRows) ?? 0
    }

    var decodePath: DecodePath { .webp }

    /// libwebp decodes into the image itself.
    var wholeDecodeCopyBytes: Int { 0 }

    var orientationFrom: String? { metadata.exif?.orientation != nil ? "EXIF" : nil }

    var coding: String? { (decoder.isAnimated ? "animated " : "") + decoder.compression }

    var structure: [String] {
        var s = [decoder.isAnimated ? "ANIM" : decoder.compression == "lossless" ? "VP8L" : "VP8"]
        if decoder.iccProfile != nil { s.append("ICCP") }
        if decoder.exif != nil { s.append("EXIF") }
        if decoder.xmp != nil { s.append("XMP ") }
        return s
    }

    func animation(options: RenderOptions) throws -> AnimationSource? {
        guard decoder.isAnimated else { return nil }
        let d = try AnimatedWebPDecoder(bytes: bytes, limits: options.limits)
        guard d.frameCount > 1 else { return nil }
        return AnimationSource(format: .webp, kind: "animated WebP", size: d.size, frameCount: d.frameCount, loop: d.loopCount, path: .webpFrames) { _, body in
            var shown = 0
            while let (image, end) = try d.next() {
                try body(image, max(0, end - shown))
                shown = end
            }
        }
    }

    static let name = "WebP"
    static let stripsLosslessly = true
    static func stripLosslessly(_ input: [UInt8], options: StripOptions) throws -> StripResult {
        try WebPChunks.strip(input, keepICC: options.keepICC, keepCopyright: options.keepCopyright)
    }
}
