import Foundation

/// The filter a resampler uses.
public enum ResampleFilter: String, Sendable, Codable {
    /// Lanczos-3: sharp, little ringing; the default.
    case lanczos3
    /// Catmull-Rom cubic.
    case cubic
    /// Triangle (bilinear when enlarging).
    case linear
}

/// Chroma subsampling of an encoded JPEG.
public enum ChromaSubsampling: String, Sendable, Codable {
    /// 4:2:0 below quality 0.9, 4:4:4 from 0.9 (libvips' rule).
    case auto
    case s420 = "4:2:0"
    case s422 = "4:2:2"
    case s444 = "4:4:4"
}
