import Foundation

/// How a stripped file keeps displaying upright.
public enum OrientationHandling: String, Sendable, Codable {
    /// Keep a minimal EXIF holding only the Orientation tag (scan data untouched).
    case tag
    /// Rotate the DCT coefficients losslessly (TurboJPEG) when the image is a whole
    /// number of MCUs in the directions that move; otherwise fall back to `tag`.
    case transform
}

public struct StripOptions: Sendable, Codable, Equatable {
    /// Keep the ICC profile (dropping it would change how colours display).
    public var keepICC = true
    /// Keep the EXIF Copyright tag.
    public var keepCopyright = false
    public var orientation = OrientationHandling.tag
    /// Keep an Ultra HDR JPEG's gain map: it is image data (the HDR rendition), not metadata.
    public var keepGainMap = true
    public init(keepICC: Bool = true, keepCopyright: Bool = false, orientation: OrientationHandling = .tag, keepGainMap: Bool = true) {
        self.keepICC = keepICC
        self.keepCopyright = keepCopyright
        self.orientation = orientation
        self.keepGainMap = keepGainMap
    }

    enum CodingKeys: String, CodingKey { case keepICC, keepCopyright, orientation, keepGainMap }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        keepICC = try c.decodeIfPresent(Bool.self, forKey: .keepICC) ?? true
        keepCopyright = try c.decodeIfPresent(Bool.self, forKey: .keepCopyright) ?? false
        orientation = try c.decodeIfPresent(OrientationHandling.self, forKey: .orientation) ?? .tag
        keepGainMap = try c.decodeIfPresent(Bool.self, forKey: .keepGainMap) ?? true
    }
}
