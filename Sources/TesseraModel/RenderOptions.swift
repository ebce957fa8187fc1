import Foundation

/// Settings for decoding, independent of any one output.
public struct RenderOptions: Sendable, Equatable {
    public var limits = Limits.default
    public var scalePolicy = DecodeScalePolicy.default
    /// Fail on data loss (truncation, corrupt entropy data) instead of rendering grey.
    public var strict = true
    /// Apply a PNG's gAMA chunk (converting to sRGB) when it has no ICC profile.
    public var correctPNGGamma = true
    /// libjpeg's fast integer IDCT and plain upsampling (slightly lower quality).
    public var fastDecode = false
    /// Decode progressive JPEGs planned at 1/8 scale from their DC scans (and the AC
    /// scans of 2x2-IDCT chroma): libjpeg's exact pixels, a fraction of its time and memory.
    public var progressiveDC = true
    /// Fast delivery (like a photo library's fast-format request): small outputs come
    /// from the EXIF-embedded thumbnail when it has the image's aspect ratio and covers
    /// them; progressive JPEGs at 1/8 use their DC scans only (chroma interpolated).
    /// Each result reports the path taken. Off by default: it can lower quality.
    public var fastMode = false
    /// HEIF/AVIF: decode a thumbnail item instead of the primary image when it covers every
    /// output (the image's aspect within a pixel, at least the output's pixels), as vips'
    /// `thumbnail` does. On by default; off: always the primary image.
    public var heifThumbnails = true
    /// The input bytes are a read-only map of a file: pages a decoder has read past may be
    /// dropped from the process (the file stays in the page cache), so a huge TIFF read strip
    /// by strip never holds more than a band of it. Never set for bytes in memory.
    public var inputIsFileMap = false
    /// The page of a multi-page TIFF to decode (from 0).
    public var page = 0
    /// The frame of an animated GIF to show (from 0), composited as a browser shows it.
    public var frame = 0
    /// Which decode a camera raw file gets: the cheapest that serves (`auto`), or one forced.
    public var raw = RawDecode.auto
    /// A video's poster frame: when it is taken. nil: the first frame past the first second
    /// (the start of a shorter video) that is neither near-black nor flat.
    public var posterTime: VideoTime?
    /// A video's animated preview: this many frames sampled evenly across it, shown at `previewFPS`.
    public var previewFrames = 12
    public var previewFPS = 4.0
    /// Animated sources (GIF, WebP): at most this many frames, this many seconds (0: no limit),
    /// checked before any frame is decoded.
    public var maxFrames = 0
    public var maxDuration = 0.0
    /// Seconds a video's demuxing and decoding may take (nil: no bound); past it, `timed-out`.
    public var decodeSeconds: Double?
    /// A source's gain map where the recipe does not say: kept (an Ultra HDR JPEG output) by default.
    public var gainMap = GainMapMode.keep
    /// An HDR source (PQ or HLG AVIF or HEIF): tone-mapped to SDR, or kept HDR.
    public var hdr = HDRMode.toneMap
    /// What the `describe` stage makes from the pixels already decoded: ThumbHash and
    /// BlurHash (`placeholders`), pHash, dHash and colours (`fingerprints`).
    public var placeholders = false
    public var fingerprints = false

    public init() {}

    /// Bumped whenever the same recipe would render different pixels: part of what
    /// incremental reruns compare (`Renderer.version`).
    public static let rendererVersion = "tessera-render-2"  // 2: gain maps kept by default
}

/// How a source's pixels were obtained.
/// A camera raw file's decode (`--raw`, job option `raw`).
public enum RawDecode: String, Sendable, Codable, CaseIterable {
    /// The embedded preview when it covers every output, else half size when that leaves the
    /// resampler its margin, else a full demosaic.
    case auto
    /// The embedded JPEG preview (fails typed when there is none; a warning when it is smaller than an output).
    case preview
    /// LibRaw's half size: a pixel per 2×2 CFA block, no demosaic.
    case half
    /// A full demosaic (AHD).
    case full
}

public enum DecodePath: String, Sendable, Codable {
    /// libjpeg, scaled DCT decoding.
    case jpeg
    /// A progressive JPEG at 1/8 from its DC scans (and 2×2 chroma): libjpeg's pixels, without its AC work.
    case progressiveDC = "progressive-dc"
    /// Fast mode: a progressive JPEG at 1/8 from its DC scans only, chroma interpolated.
    case progressiveDCOnly = "progressive-dc-only"
    /// The EXIF-embedded thumbnail (fast mode only).
    case exifThumbnail = "exif-thumbnail"
    case png
    /// libwebp, scaled while decoding.
    case webp
    /// libheif, the primary image (HEIC or AVIF).
    case heifPrimary = "heif-primary"
    /// libheif, a thumbnail item that covers every output.
    case heifThumbnail = "heif-thumbnail"
    /// libtiff, the page's full-resolution image, strip by strip or tile row by tile row.
    case tiff
    /// libtiff, a reduced-resolution level of a pyramidal TIFF (recorded as `tiff-level-N`).
    case tiffLevel = "tiff-level"
    /// giflib, frame N composited on the screen (recorded as `gif-frame-N`).
    case gifFrame = "gif-frame"
    /// giflib, every frame (an animated output; recorded as `gif-frames-N`, N the frame count).
    case gifFrames = "gif-frames"
    /// libjxl, the first frame at full size.
    case jxl
    /// LibRaw: a raw file's embedded JPEG preview (at its DCT scale), its half-size decode
    /// (a pixel per 2×2 CFA block), or a full AHD demosaic.
    case rawPreview = "raw-preview"
    case rawHalf = "raw-half"
    case rawFull = "raw-full"
    /// libwebp's animation decoder, every frame (an animated output; `webp-frames-N`).
    case webpFrames = "webp-frames"
    /// FFmpeg, a poster frame: keyframes only (`video-keyframe`), or every frame decoded up to
    /// it (`video-frame`); the record adds the frame's time (`video-keyframe@2.00s`).
    case videoKeyframe = "video-keyframe"
    case videoFrame = "video-frame"
    /// FFmpeg, frames sampled across a video for an animated preview (`video-frames-N`).
    case videoFrames = "video-frames"

    /// What a record says: the path, and for a pyramid level which one (`tiff-level-2`).
    public func recorded(level: Int?) -> String { level.map { "\(rawValue)-\($0)" } ?? rawValue }
}

/// How the JPEG DCT scale is chosen for an output.
///
/// The decoded region should be at least `minimumResidual` times the output, so
/// the resampler has room to anti-alias (the DCT scaling alone is a box filter).
/// Scales with SIMD IDCTs in libjpeg-turbo (1/8, 2/8, 4/8) are tried first, then
/// 5/8...7/8; when none leaves that residual, the smallest scale that still covers
/// the output is used, so a downscale never decodes full size when a scaled
/// decode covers it. See docs/decisions/001-dct-scale.md for the measurements.
public struct DecodeScalePolicy: Sendable, Equatable, Codable {
    public var preferredEighths: [Int] = [1, 2, 3, 4]
    public var fallbackEighths: [Int] = [5, 6, 7]
    public var minimumResidual: Double = 1.35

    public init(preferredEighths: [Int] = [1, 2, 3, 4], fallbackEighths: [Int] = [5, 6, 7],
                minimumResidual: Double = 1.35) {
        self.preferredEighths = preferredEighths
        self.fallbackEighths = fallbackEighths
        self.minimumResidual = minimumResidual
    }

    public static let `default` = DecodeScalePolicy()
}

/// When in a video its poster frame is taken: seconds from the start, or a fraction of its
/// length. Written `1.5`, `1.5s` or `10%`.
public enum VideoTime: Sendable, Equatable, Codable, CustomStringConvertible {
    case seconds(Double)
    case fraction(Double)
    /// Seconds before the end (`-1`, `-1.5s`), as ffmpeg's `-sseof` counts.
    case fromEnd(Double)

    public init?(_ text: String) {
        guard case .success(let t) = VideoTime.parse(text) else { return nil }
        self = t
    }

    /// The time `text` says, or what is wrong with it (the range, named).
    public static func parse(_ text: String) -> Result<VideoTime, VideoTimeError> {
        var t = text.trimmingCharacters(in: .whitespaces)
        let expected = "expected seconds (1.5, 1.5s), seconds before the end (-2) or a percentage of the video (0% to 100%)"
        if t.hasSuffix("%") {
            t.removeLast()
            guard let p = Double(t.trimmingCharacters(in: .whitespaces)), p.isFinite else { return .failure(VideoTimeError("\(expected), got \"\(text)\"")) }
            guard (0...100).contains(p) else { return .failure(VideoTimeError("a percentage of the video is 0% to 100%, got \(text)")) }
            return .success(.fraction(p / 100))
        }
        if t.hasSuffix("s") { t.removeLast() }
        guard let s = Double(t.trimmingCharacters(in: .whitespaces)), s.isFinite else { return .failure(VideoTimeError("\(expected), got \"\(text)\"")) }
        guard abs(s) <= 1e7 else { return .failure(VideoTimeError("a time is at most 10000000 s either way, got \(text)")) }
        return .success(s < 0 || (s == 0 && t.hasPrefix("-")) ? .fromEnd(-s) : .seconds(s))
    }

    /// Seconds from the start of a video lasting `duration` (unknown: a fraction or a time from
    /// the end means the start).
    public func seconds(of duration: Double?) -> Double {
        switch self {
        case .seconds(let s): return s
        case .fraction(let f): return (duration ?? 0) * f
        case .fromEnd(let s): return max(0, (duration ?? s) - s)
        }
    }

    public var description: String {
        switch self {
        case .seconds(let s): return "\(s)s"
        case .fraction(let f): return "\(f * 100)%"
        case .fromEnd(let s): return "-\(s)s"
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let s = try? c.decode(Double.self), let t = VideoTime("\(s)") {
            self = t
            return
        }
        let text = try c.decode(String.self)
        switch VideoTime.parse(text) {
        case .success(let t): self = t
        case .failure(let e): throw DecodingError.dataCorruptedError(in: c, debugDescription: e.description)
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// Why a time (`--at`, `options.at`) was refused.
public struct VideoTimeError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ d: String) { description = d }
}
