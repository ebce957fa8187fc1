import Foundation

/// Container formats Tessera reads and writes: the names every layer shares (jobs, records,
/// the wire). What recognises and decodes each is its loader in Imaging (`SourceLoaders`).
public enum ImageFormat: String, Codable, Sendable, CaseIterable {
    case jpeg, png, webp, heif, avif, tiff, gif
    /// JPEG XL (bare codestream or container).
    case jxl
    /// A video (MP4/MOV/M4V, Matroska/WebM, AVI): read for a poster frame or a preview.
    case video
    /// A camera raw file (DNG, CR2, CR3, NEF, ARW, RAF, RW2, ORF, PEF, …) read through LibRaw.
    case raw

    /// Formats Tessera writes.
    public var isWritable: Bool { ![.heif, .tiff, .video, .raw].contains(self) }
    /// Formats an `original` or `auto` output keeps (a GIF's 256 colours are no thumbnail
    /// format: its stills become JPEG, or PNG with transparency).
    public var keptByOriginal: Bool { isWritable && self != .gif }

    /// What a file name's extension (lowercased, no dot) says the format is: what planning
    /// predicts before the content is read.
    public static let byExtension: [String: ImageFormat] = [
        "jpg": .jpeg, "jpeg": .jpeg, "jpe": .jpeg, "jfif": .jpeg, "png": .png, "webp": .webp,
        "heic": .heif, "heif": .heif, "hif": .heif, "avif": .avif, "tif": .tiff, "tiff": .tiff,
        "gif": .gif, "jxl": .jxl, "mp4": .video, "m4v": .video, "mov": .video, "qt": .video, "mkv": .video, "webm": .video,
        "avi": .video, "3gp": .video, "3g2": .video,
        "dng": .raw, "cr2": .raw, "cr3": .raw, "crw": .raw, "nef": .raw, "nrw": .raw, "arw": .raw, "srf": .raw, "sr2": .raw,
        "raf": .raw, "rw2": .raw, "orf": .raw, "pef": .raw, "srw": .raw, "x3f": .raw, "kdc": .raw, "dcr": .raw, "mrw": .raw,
        "3fr": .raw, "erf": .raw, "mef": .raw, "mos": .raw, "iiq": .raw, "rwl": .raw, "gpr": .raw,
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
        case .raw: return "dng"
        }
    }
}
