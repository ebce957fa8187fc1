/// What a file's first bytes say it is, for formats Tessera reads and for the common ones
/// it does not (so an error can name what it found without echoing the file's content).
public enum FormatDetection {
    /// A format Tessera does not read, by its usual name (`BMP`, `JPEG XL`, ...), or nil.
    public static func foreignFormat(_ b: UnsafeRawBufferPointer) -> String? {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + prefix.count && prefix.enumerated().allSatisfy { b[offset + $0.offset] == $0.element }
        }
        func ascii(_ s: String, at offset: Int = 0) -> Bool { starts(Array(s.utf8), at: offset) }
        if ascii("BM") && b.count >= 14 { return "BMP" }

        if ascii("ftyp", at: 4) && b.count >= 12 {
            let brand = String(decoding: (8..<12).map { b[$0] }, as: UTF8.self)
            switch brand {
            case "avif", "avis": return "AVIF"
            case "heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1": return "HEIF"
            default: return "ISO media (\(brand.filter { $0.isLetter || $0.isNumber }))"
            }
        }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) { return "JPEG 2000" }
        if ascii("%PDF") { return "PDF" }
        if ascii("8BPS") { return "Photoshop (PSD)" }
        if starts([0x00, 0x00, 0x01, 0x00]) && b.count >= 6 { return "ICO" }
        if ascii("qoif") { return "QOI" }
        if ascii("PK\u{03}\u{04}") { return "ZIP archive" }
        if starts([0x1F, 0x8B]) { return "gzip data" }
        if ascii("<?xml") || ascii("<svg") { return "XML/SVG" }
        if ascii("P1") || ascii("P2") || ascii("P3") || ascii("P4") || ascii("P5") || ascii("P6") { return "PNM" }
        // Mostly printable bytes: a text file, whatever it says.
        let head = b.prefix(64)
        if !head.isEmpty, head.allSatisfy({ $0 == 9 || $0 == 10 || $0 == 13 || (32..<127).contains($0) }) { return "text" }
        return nil
    }

    /// The message for a file that is not a format Tessera reads: names what it looks like,
    /// never its bytes (they could be anything, /etc/shadow included).
    public static func unsupportedMessage(_ b: UnsafeRawBufferPointer) -> String {
        if let name = foreignFormat(b) { return "not a \(readable) file (it looks like \(name), which is not supported)" }
        return "not a \(readable) file (unrecognised content)"
    }

    /// The formats Tessera reads, for messages.
    public static let readable = "JPEG, PNG, WebP, HEIF, AVIF, TIFF, GIF, JPEG XL, camera raw or video"
}
