import TesseraModel

/// GIF through giflib's record reader (Tessera composites the frames): frame N decoded whole
/// onto the screen's RGBA canvas (then RGB when opaque) for stills, every frame in turn for
/// animations.
final class GIFLoader: SourceLoader {
    private let options: RenderOptions
    private let decoder: GIFDecoder
    private(set) var header: SourceHeader
    let metadata = SourceMetadata()
    private var whole: WholeRows?
    private(set) var warnings: [String] = []

    static let formats: Set<ImageFormat> = [.gif]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        bytes.ascii("GIF87a", at: 0) || bytes.ascii("GIF89a", at: 0) ? .gif : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.options = options
        decoder = try GIFDecoder(bytes: bytes, limits: options.limits, lenient: !options.strict)
        // Strict: the file whole (its trailer there), not only the frame read. Data past the
        // frames that is not GIF is said (a warning), as vips says it.
        if options.strict, let damage = decoder.damage, damage.code == .truncated { throw damage }
        header = SourceHeader(format: .gif, storedSize: decoder.size, orientation: .up, colorModel: "palette", bitDepth: 8,
                              hasAlpha: decoder.mayHaveAlpha)
        header.progressive = decoder.scan.interlaced != 0
        header.frames = max(1, decoder.frameCount)
        if decoder.frameCount > 1 { header.duration = Double(decoder.scan.duration_cs) / 100 }
    }

    /// The frame is composited whole on an RGBA canvas (then its RGB copy), from its palette indices.
    func decodeBytes(scaleEighths: Int) -> Int { header.storedSize.width * header.storedSize.height * (4 + 3 + 1) }

    func start(scaleEighths: Int, maxBatchRows: Int) throws -> DecodeStart {
        let image = try decoder.decode(frame: options.frame, limits: options.limits)
        if let cut = decoder.cut {
            // Lenient: the rows the frame drew whole, then why the rest are not its.
            let code: ImagingError.Code = cut.reason.contains("ends") ? .truncated : .corrupt
            let damage = ImagingError(code, "GIF \(cut.reason)")
            if cut.row >= image.height { warnings.append("\(code): \(cut.reason)") }
            whole = WholeRows(image, valid: cut.row, damage: damage)
        } else {
            whole = WholeRows(image)
            if let damage = decoder.damage { warnings.append("\(damage.code): \(damage.reason)") }
        }
        return DecodeStart(size: header.storedSize, channels: image.channels, scaleEighths: 8)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        try whole?.read(into: buffer, stride: stride, maxRows: maxRows) ?? 0
    }

    var decodePath: DecodePath { .gifFrame }
    var decodeLevel: Int? { options.frame }

    var coding: String? {
        decoder.frameCount > 1 ? "animated, \(decoder.frameCount) frames, "
            + (decoder.loopCount.map { $0 == 0 ? "looping forever" : "\($0) loops" } ?? "played once")
            + ", \(Double(decoder.scan.duration_cs) / 100) s" : "still"
    }

    var structure: [String] {
        var s = ["\(decoder.frameCount) frame\(decoder.frameCount == 1 ? "" : "s")"]
        if decoder.scan.interlaced != 0 { s.append("interlaced") }
        if decoder.scan.transparency != 0 { s.append("transparency") }
        if decoder.scan.unreadable_after != 0 { s.append("unreadable after frame \(decoder.frameCount - 1)") }
        return s
    }

    func animation(options: RenderOptions) throws -> AnimationSource? {
        guard decoder.frameCount > 1 else { return nil }
        // A GIF without a loop count plays once.
        let gif = decoder
        var animation = AnimationSource(format: .gif, kind: "animated GIF", size: gif.size, frameCount: gif.frameCount,
                                        loop: gif.loopCount ?? 1, path: .gifFrames) { _, body in
            try gif.frames(limits: options.limits) { _, canvas, delay in try body(canvas, delay) }
        }
        animation.paletted = true
        return animation
    }
}
