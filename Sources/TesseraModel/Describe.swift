/// What a photo library stores besides its thumbnails, made from the pixels a task already
/// decoded (the `describe` stage): placeholders to paint before a thumbnail arrives, and
/// fingerprints to find near-duplicates by.
public struct Placeholders: Sendable, Codable, Equatable {
    /// ThumbHash (Evan Wallace's), its bytes in standard base64: the colours, a little detail
    /// and the aspect ratio in about 25 bytes.
    public var thumbhash: String
    /// BlurHash (Wolt's), in its base-83 text; components 4 on the longer side.
    public var blurhash: String

    public init(thumbhash: String, blurhash: String) {
        self.thumbhash = thumbhash
        self.blurhash = blurhash
    }
}

public struct Fingerprints: Sendable, Codable, Equatable {
    /// 64-bit DCT perceptual hash (pHash: the 8×8 lowest frequencies of a 32×32 gray image
    /// against their median), 16 hex digits as Python's `imagehash` prints it.
    public var phash: String
    /// 64-bit difference hash (dHash: a 9×8 gray image, each pixel brighter than its left
    /// neighbour), 16 hex digits.
    public var dhash: String
    /// The mean colour (averaged in linear light), `#rrggbb`.
    public var averageColor: String
    /// The colour most of the picture has (the fullest cell of an 8×8×8 histogram, its mean), `#rrggbb`.
    public var dominantColor: String

    public init(phash: String, dhash: String, averageColor: String, dominantColor: String) {
        self.phash = phash
        self.dhash = dhash
        self.averageColor = averageColor
        self.dominantColor = dominantColor
    }

    /// Bits that differ between two 16-hex-digit hashes (nil: not such hashes).
    public static func distance(_ a: String, _ b: String) -> Int? {
        guard let x = UInt64(a, radix: 16), let y = UInt64(b, radix: 16) else { return nil }
        return (x ^ y).nonzeroBitCount
    }
}
