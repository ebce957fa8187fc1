import Foundation

/// Container formats Tessera reads and writes.
public enum ImageFormat: String, Codable, Sendable, CaseIterable {
    case jpeg, png, webp, heif, avif, tiff, gif
    /// JPEG XL (bare codestream or container).
    case jxl
    /// A video (MP4/MOV/M4V, Matroska/WebM, AVI): read for a poster frame or a preview.
    case video

    /// Formats Tessera writes.
    public var isWritable: Bool { ![.heif, .tiff, .video].contains(self) }
    /// Formats an `original` or `auto` output keeps (a GIF's 256 colours are no thumbnail
    /// format: its stills become JPEG, or PNG with transparency).
    public var keptByOriginal: Bool { isWritable && self != .gif }

    /// Recognises a format from its first bytes.
    public static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        // SOI and the first marker's FF; two bytes FF D8 are a JPEG cut short (truncated, not foreign).
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes.count == 2 || bytes[2] == 0xFF { return .jpeg }
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        if bytes.count >= 8, (0..<8).allSatisfy({ bytes[$0] == png[$0] }) { return .png }
        func ascii(_ s: String, at offset: Int) -> Bool {
            let u = Array(s.utf8)
            return bytes.count >= offset + u.count && (0..<u.count).allSatisfy { bytes[offset + $0] == u[$0] }
        }
        if ascii("RIFF", at: 0) && ascii("WEBP", at: 8) { return .webp }
        // JPEG XL: a bare codestream (FF 0A) or the container's signature box.
        if bytes.count >= 2, bytes[0] == 0xFF, bytes[1] == 0x0A { return .jxl }
        if bytes.count >= 12, [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A].enumerated().allSatisfy({ bytes[$0.offset] == $0.element }) {
            return .jxl
        }
        if ascii("GIF87a", at: 0) || ascii("GIF89a", at: 0) { return .gif }
        // TIFF (version 42) and BigTIFF (43), either byte order.
        if bytes.count >= 4, (bytes[0] == 0x49 && bytes[1] == 0x49 && (bytes[2] == 42 || bytes[2] == 43) && bytes[3] == 0)
            || (bytes[0] == 0x4D && bytes[1] == 0x4D && bytes[2] == 0 && (bytes[3] == 42 || bytes[3] == 43)) {
            return .tiff
        }
        // Matroska and WebM (an EBML header); AVI (RIFF).
        if bytes.count >= 4, bytes[0] == 0x1A, bytes[1] == 0x45, bytes[2] == 0xDF, bytes[3] == 0xA3 { return .video }
        if ascii("RIFF", at: 0) && ascii("AVI ", at: 8) { return .video }
        // QuickTime without an ftyp box: its first atom is a movie, media data or padding.
        if ["moov", "mdat", "wide"].contains(where: { ascii($0, at: 4) }) { return .video }
        // ISO base media: a leading ftyp box; the major and compatible brands say HEIF or AVIF.
        if ascii("ftyp", at: 4), bytes.count >= 16 {
            let boxSize = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
            let end = min(bytes.count, max(16, min(boxSize, 256)))
            var brands: [String] = [String(decoding: (8..<12).map { bytes[$0] }, as: UTF8.self)]
            var i = 16
            while i + 4 <= end {
                brands.append(String(decoding: (i..<i + 4).map { bytes[$0] }, as: UTF8.self))
                i += 4
            }
            if brands[0] == "avif" || brands[0] == "avis" { return .avif }
            // A movie's major brand (MP4, QuickTime, M4V, 3GPP, ...).
            if videoBrands.contains(brands[0]) || brands[0].hasPrefix("3g") { return .video }
            let heif: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"]
            guard heif.contains(brands[0]) || brands.dropFirst().contains(where: { heif.contains($0) }) else {
                return brands.dropFirst().contains(where: { videoBrands.contains($0) }) ? .video : nil
            }
            return brands.contains("avif") || brands.contains("avis") ? .avif : .heif
        }
        return nil
    }

    /// ftyp brands of movies (ISO/IEC 14496-12 and -14, QuickTime, Apple M4V, Sony XAVC, DASH, Flash).
    static let videoBrands: Set<String> = [
        "isom", "iso2", "iso3", "iso4", "iso5", "iso6", "iso7", "iso8", "iso9", "mp41", "mp42", "mp71", "avc1", "qt  ",
        "M4V ", "M4VH", "M4VP", "MSNV", "mmp4", "XAVC", "dash", "f4v ", "NDAS", "hvc1", "av01",
    ]

    /// What a file name's extension (lowercased, no dot) says the format is: what planning
    /// predicts before the content is read.
    public static let byExtension: [String: ImageFormat] = [
        "jpg": .jpeg, "jpeg": .jpeg, "jpe": .jpeg, "jfif": .jpeg, "png": .png, "webp": .webp,
        "heic": .heif, "heif": .heif, "hif": .heif, "avif": .avif, "tif": .tiff, "tiff": .tiff,
        "gif": .gif, "jxl": .jxl, "mp4": .video, "m4v": .video, "mov": .video, "qt": .video, "mkv": .video, "webm": .video,
        "avi": .video, "3gp": .video, "3g2": .video,
    ]

    public var fileExtension: String {
        switch self {
        case .jpeg: return "jpg"
        case .png: return "png"
        case .webp: return "webp"
        case .heif: return "heic"
        case .avif: return "avif"
        case .tiff: return "tif"
        case .gif: return "gif"
        case .jxl: return "jxl"
        case .video: return "mp4"
        }
    }
}
