import TesseraModel

/// Videos (MP4/MOV/M4V, Matroska/WebM, AVI) through FFmpeg (opened at the first one): a
/// poster frame reduced by libswscale to the size the plan asked for, or frames sampled
/// across it for an animated preview. The display matrix plays EXIF's part.
final class VideoLoader: SourceLoader {
    private let options: RenderOptions
    private let decoder: VideoDecoder
    private(set) var header: SourceHeader
    private(set) var metadata: SourceMetadata
    private var whole: WholeRows?
    private var poster: VideoDecoder.Poster?

    /// ftyp brands of movies (ISO/IEC 14496-12 and -14, QuickTime, Apple M4V, Sony XAVC, DASH, Flash).
    static let brands: Set<String> = [
        "isom", "iso2", "iso3", "iso4", "iso5", "iso6", "iso7", "iso8", "iso9", "mp41", "mp42", "mp71", "avc1", "qt  ",
        "M4V ", "M4VH", "M4VP", "MSNV", "mmp4", "XAVC", "dash", "f4v ", "NDAS", "hvc1", "av01",
    ]

    static let formats: Set<ImageFormat> = [.video]

    static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // Matroska and WebM (an EBML header); AVI (RIFF).
        if bytes.count >= 4, bytes[0] == 0x1A, bytes[1] == 0x45, bytes[2] == 0xDF, bytes[3] == 0xA3 { return .video }
        if bytes.ascii("RIFF", at: 0) && bytes.ascii("AVI ", at: 8) { return .video }
        // QuickTime without an ftyp box: its first atom is a movie, media data or padding.
        if ["moov", "mdat", "wide"].contains(where: { bytes.ascii($0, at: 4) }) { return .video }
        // An ftyp box whose major brand is a movie's, or, without any HEIF brand, a compatible one.
        guard let b = ISOBrands.of(bytes), b[0] != "avif", b[0] != "avis" else { return nil }
        if brands.contains(b[0]) || b[0].hasPrefix("3g") { return .video }
        let heif: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"]
        guard !heif.contains(b[0]), !b.dropFirst().contains(where: { heif.contains($0) }) else { return nil }
        return b.dropFirst().contains(where: { brands.contains($0) }) ? .video : nil
    }

    init(bytes: UnsafeRawBufferPointer, format: ImageFormat, options: RenderOptions) throws {
        self.options = options
        decoder = try VideoDecoder(bytes: bytes, limits: options.limits, seconds: options.decodeSeconds, strict: options.strict)
        // The colour description becomes a profile where its primaries are not sRGB's (HDR is
        // tone-mapped when frames convert).
        metadata = SourceMetadata(exif: nil, iccProfile: decoder.isHDR ? nil : SourceDecoder.profile(for: decoder.nclx), xmp: nil,
                                  density: nil)
        header = SourceHeader(format: .video, storedSize: decoder.size, orientation: decoder.orientation,
                              colorModel: VideoLoader.colorModel(decoder.pixelFormat), bitDepth: decoder.bits, hasAlpha: false)
        header.duration = decoder.duration
        header.frames = max(1, decoder.frameCount > 0 ? decoder.frameCount : Int(((decoder.duration ?? 0) * decoder.fps).rounded()))
        header.alternatives.scalesOnDecode = true
    }

    /// `yuv420p (4:2:0)`: the pixel format and its chroma.
    static func colorModel(_ format: String) -> String {
        let f = format.lowercased()
        let chroma = f.contains("444") ? "4:4:4" : f.contains("422") ? "4:2:2" : f.contains("420") || f.hasPrefix("nv12") || f.hasPrefix("nv21")
            || f.hasPrefix("p010") ? "4:2:0" : f.contains("411") ? "4:1:1" : f.hasPrefix("gray") ? "gray" : f.hasPrefix("rgb") || f.hasPrefix("bgr")
            || f.hasPrefix("gbr") ? "RGB" : nil
        return chroma.map { "\(format) (\($0))" } ?? format
    }

    /// The frame reduced to the scale asked for, and the decoder's reference frames at the
    /// coded size (YUV 4:2:0 at 8 or 16 bits), a few of them.
    func decodeBytes(scaleEighths: Int) -> Int {
        let s = header.storedSize
        return (s.width * scaleEighths + 7) / 8 * ((s.height * scaleEighths + 7) / 8) * 3
            + s.width * s.height * 3 / 2 * (decoder.bits > 8 ? 2 : 1) * 6
    }

    func start(scaleEighths requested: Int, maxBatchRows: Int) throws -> DecodeStart {
        let stored = header.storedSize
        // libswscale reduces the frame to the DCT-like size the plan asked for.
        let target = Size(width: max(1, (stored.width * requested + 7) / 8), height: max(1, (stored.height * requested + 7) / 8))
        let p = try decoder.poster(at: options.posterTime, target: target)
        poster = p
        whole = WholeRows(p.image)
        return DecodeStart(size: target, channels: 3, scaleEighths: requested)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        try whole?.read(into: buffer, stride: stride, maxRows: maxRows) ?? 0
    }

    var decodePath: DecodePath { poster?.keyframesOnly == true ? .videoKeyframe : .videoFrame }
    var frameTime: Double? { poster?.time }
    var warnings: [String] {
        (decoder.endsEarly ? ["truncated: the video ends early (its container declares more data than the file holds)"] : [])
            + (poster?.note.map { [$0] } ?? [])
    }

    var orientationFrom: String? { header.orientation != .up ? "display matrix" : nil }

    var coding: String? {
        let video = decoder
        var parts = [video.codec, "\(video.bits)-bit \(video.pixelFormat)"]
        if let d = video.duration { parts.append(String(format: "%.2f s", d)) }
        if video.fps > 0 { parts.append(String(format: "%.3g fps", video.fps)) }
        if video.frameCount > 0 { parts.append("\(video.frameCount) frames") }
        if video.rotation != 0 { parts.append("rotated \(video.rotation)°") }
        let n = video.nclx
        parts.append("colour \(n.primaries)/\(n.transfer)/\(n.matrix)\(n.fullRange ? " full" : " limited")"
                     + (n.isPQ ? " (PQ)" : n.isHLG ? " (HLG)" : ""))
        return parts.joined(separator: ", ")
    }

    var structure: [String] { ["container \(decoder.container)"] }

    func animation(options: RenderOptions) throws -> AnimationSource? {
        // A preview: frames sampled evenly across the video, each shown 1/fps s, looping.
        let video = decoder
        let count = options.previewFrames
        let delay = max(20, Int((1000 / options.previewFPS).rounded()))
        var animation = AnimationSource(format: .video, kind: "video preview", size: video.size, frameCount: count, loop: 0, path: .videoFrames) { eighths, body in
            let target = Size(width: max(1, (video.size.width * eighths + 7) / 8), height: max(1, (video.size.height * eighths + 7) / 8))
            try video.samples(count: count, target: target) { frame, _ in try body(frame, delay) }
        }
        animation.orientation = video.orientation
        animation.scalable = true
        animation.framesHeld = 6
        return animation
    }

    func tileInfo(bytes: UnsafeRawBufferPointer, limits: Limits) throws -> TileSourceInfo {
        throw ImagingError(.unsupportedFeature, "a video is not tiled: make its poster frame with a thumbnail job, then tile that")
    }
}
