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

    public init() {}

    /// Bumped whenever the same recipe would render different pixels: part of what
    /// incremental reruns compare (`Renderer.version`).
    public static let rendererVersion = "tessera-render-1"
}

/// How a source's pixels were obtained.
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
    /// libwebp's animation decoder, every frame (an animated output; `webp-frames-N`).
    case webpFrames = "webp-frames"

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
