import TesseraModel
/// When an EXIF-embedded thumbnail may stand in for the image (fast mode only).
enum ExifThumbnail {
    /// The thumbnail has the image's aspect ratio (so no letterbox bars) within a pixel.
    static func matches(_ thumb: Size, _ image: Size) -> Bool {
        guard thumb.width > 0, thumb.height > 0, thumb.width < image.width else { return false }
        let expected = Double(thumb.width) * Double(image.height) / Double(image.width)
        return abs(expected - Double(thumb.height)) <= 1
    }

    /// Cheap checks before decoding the thumbnail's header: a JPEG, and big enough that
    /// every output is at most the thumbnail's size (in stored orientation).
    static func usable(_ bytes: [UInt8], for image: Size, plans: [OutputPlan]) -> Bool {
        guard bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8,
              let size = jpegSize(bytes), matches(size, image) else { return false }
        let k = Double(size.width) / Double(image.width)
        return plans.allSatisfy { p in
            p.resamples && p.storedRegion.width * k >= Double(p.storedOutputSize.width)
                && p.storedRegion.height * k >= Double(p.storedOutputSize.height)
        }
    }

    /// The frame size from a JPEG's SOF, without libjpeg.
    static func jpegSize(_ b: [UInt8]) -> Size? {
        var i = 2
        while i + 9 < b.count {
            guard b[i] == 0xFF else { return nil }
            let m = b[i + 1]
            if m == 0xD8 || m == 0x01 || (0xD0...0xD7).contains(m) { i += 2; continue }
            let len = Int(b[i + 2]) << 8 | Int(b[i + 3])
            if (0xC0...0xCF).contains(m) && m != 0xC4 && m != 0xC8 && m != 0xCC {
                let h = Int(b[i + 5]) << 8 | Int(b[i + 6]), w = Int(b[i + 7]) << 8 | Int(b[i + 8])
                return w > 0 && h > 0 ? Size(width: w, height: h) : nil
            }
            if m == 0xDA { return nil }
            i += 2 + len
        }
        return nil
    }
}
