import Foundation
import CExif

/// What Tessera reads from EXIF (through libexif).
public struct ExifSummary: Sendable, Equatable {
    /// The Orientation tag (1...8), nil when absent.
    public var orientation: Int?
    /// Whether a GPS IFD with any entry is present.
    public var hasGPS: Bool
    /// The Copyright tag.
    public var copyright: String?
    public var make: String?
    public var model: String?
    /// The embedded thumbnail (usually a small JPEG), if any.
    public var thumbnail: [UInt8]?
    public var entryCount: Int
}

/// EXIF reading and writing through libexif.
public enum Exif {
    /// Parses a TIFF-structured EXIF payload (with or without the "Exif\0\0" prefix).
    /// Damaged EXIF yields nil: metadata never stops pixels from rendering.
    public static func read(_ payload: [UInt8]) -> ExifSummary? {
        loaded(payload) { ed in summary(ed) }
    }

    /// `body` on libexif's parse of `payload` (with or without the "Exif\0\0" prefix), maker
    /// notes left as stored; nil when libexif cannot allocate.
    private static func loaded<R>(_ payload: [UInt8], _ body: (UnsafeMutablePointer<ExifData>) -> R?) -> R? {
        var data = payload
        if !(data.count >= 6 && data[0] == 0x45 && data[1] == 0x78 && data[2] == 0x69 && data[3] == 0x66) {
            data = Array("Exif".utf8) + [0, 0] + data
        }
        guard let ed = exif_data_new() else { return nil }
        defer { exif_data_unref(ed) }
        exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION)
        exif_data_set_option(ed, EXIF_DATA_OPTION_DONT_CHANGE_MAKER_NOTE)
        data.withUnsafeBufferPointer { exif_data_load_data(ed, $0.baseAddress, UInt32($0.count)) }
        return body(ed)
    }

    private static func summary(_ ed: UnsafeMutablePointer<ExifData>) -> ExifSummary? {
        let order = exif_data_get_byte_order(ed)
        var summary = ExifSummary(orientation: nil, hasGPS: false, copyright: nil, make: nil, model: nil,
                                  thumbnail: nil, entryCount: 0)
        for i in 0..<Int(EXIF_IFD_COUNT.rawValue) {
            if let c = ifd(ed, i) { summary.entryCount += Int(c.pointee.count) }
        }
        if let ifd0 = ifd(ed, Int(EXIF_IFD_0.rawValue)) {
            if let e = exif_content_get_entry(ifd0, EXIF_TAG_ORIENTATION), e.pointee.format == EXIF_FORMAT_SHORT,
               e.pointee.components >= 1, let d = e.pointee.data {
                summary.orientation = Int(exif_get_short(d, order))
            }
            summary.copyright = string(ifd0, EXIF_TAG_COPYRIGHT)
            summary.make = string(ifd0, EXIF_TAG_MAKE)
            summary.model = string(ifd0, EXIF_TAG_MODEL)
        }
        if let gps = ifd(ed, Int(EXIF_IFD_GPS.rawValue)) { summary.hasGPS = gps.pointee.count > 0 }
        if let thumb = ed.pointee.data, ed.pointee.size > 0 {
            summary.thumbnail = Array(UnsafeBufferPointer(start: thumb, count: Int(ed.pointee.size)))
        }
        return summary
    }

    /// The MakerNote tag's bytes (EXIF IFD, tag 0x927C), as stored.
    static func makerNote(_ payload: [UInt8]) -> [UInt8]? {
        loaded(payload) { ed in
            guard let sub = ifd(ed, Int(EXIF_IFD_EXIF.rawValue)), let e = exif_content_get_entry(sub, EXIF_TAG_MAKER_NOTE),
                  let d = e.pointee.data, e.pointee.size > 0 else { return nil }
            return Array(UnsafeBufferPointer(start: d, count: Int(e.pointee.size)))
        }
    }

    /// Longest copyright kept, in UTF-8 bytes (an APP1 segment holds at most 65,533).
    public static let maxCopyrightBytes = 4096

    /// Builds a complete APP1 payload ("Exif\0\0" + TIFF) holding only what is given.
    public static func build(orientation: Int? = nil, copyright: String? = nil,
                             gps: (latitude: Double, longitude: Double)? = nil,
                             make: String? = nil, thumbnail: [UInt8]? = nil) -> [UInt8] {
        guard let ed = exif_data_new() else { return [] }
        defer { exif_data_unref(ed) }
        exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION)
        exif_data_set_byte_order(ed, EXIF_BYTE_ORDER_INTEL)
        let order = EXIF_BYTE_ORDER_INTEL
        guard let ifd0 = ifd(ed, Int(EXIF_IFD_0.rawValue)) else { return [] }
        if let orientation {
            let e = add(ifd0, EXIF_TAG_ORIENTATION, EXIF_FORMAT_SHORT, components: 1, size: 2)
            exif_set_short(e, order, ExifShort(orientation))
        }
        if let make { addASCII(ifd0, EXIF_TAG_MAKE, make) }
        if let copyright {
            var bytes = Array(copyright.utf8.prefix(maxCopyrightBytes))
            while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
            addASCII(ifd0, EXIF_TAG_COPYRIGHT, String(decoding: bytes, as: UTF8.self))
        }
        if let gps, let g = ifd(ed, Int(EXIF_IFD_GPS.rawValue)) {
            addASCII(g, ExifTag(rawValue: 1), gps.latitude >= 0 ? "N" : "S")      // GPSLatitudeRef
            addRationals(g, ExifTag(rawValue: 2), degrees: abs(gps.latitude), order: order)
            addASCII(g, ExifTag(rawValue: 3), gps.longitude >= 0 ? "E" : "W")     // GPSLongitudeRef
            addRationals(g, ExifTag(rawValue: 4), degrees: abs(gps.longitude), order: order)
        }
        if let thumbnail, !thumbnail.isEmpty, let mem = exif_mem_new_default() {
            defer { exif_mem_unref(mem) }
            if let p = exif_mem_alloc(mem, ExifLong(thumbnail.count))?.assumingMemoryBound(to: UInt8.self) {
                p.update(from: thumbnail, count: thumbnail.count)
                ed.pointee.data = p
                ed.pointee.size = UInt32(thumbnail.count)
            }
        }
        var out: UnsafeMutablePointer<UInt8>?
        var size: UInt32 = 0
        exif_data_save_data(ed, &out, &size)
        guard let out else { return [] }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(size)))
    }

    // MARK: libexif plumbing

    private static func ifd(_ ed: UnsafeMutablePointer<ExifData>, _ i: Int) -> UnsafeMutablePointer<ExifContent>? {
        withUnsafeBytes(of: ed.pointee.ifd) { $0.bindMemory(to: UnsafeMutablePointer<ExifContent>?.self)[i] }
    }

    private static func string(_ c: UnsafeMutablePointer<ExifContent>, _ tag: ExifTag) -> String? {
        guard let e = exif_content_get_entry(c, tag), e.pointee.format == EXIF_FORMAT_ASCII,
              let d = e.pointee.data, e.pointee.size > 0 else { return nil }
        let bytes = UnsafeBufferPointer(start: d, count: Int(e.pointee.size))
        let trimmed = Array(bytes.prefix { $0 != 0 })
        // EXIF ASCII is often UTF-8 in practice; anything else is read as Latin-1
        // (one character per byte, so a value never grows when written back).
        let text = String(validating: trimmed, as: UTF8.self)
            ?? String(trimmed.map { Character(Unicode.Scalar($0)) })
        let s = text.trimmingCharacters(in: .whitespaces)
        return s.isEmpty ? nil : s
    }

    @discardableResult
    private static func add(_ c: UnsafeMutablePointer<ExifContent>, _ tag: ExifTag, _ format: ExifFormat,
                            components: Int, size: Int) -> UnsafeMutablePointer<UInt8> {
        let e = exif_entry_new()!
        let mem = exif_mem_new_default()!
        defer { exif_mem_unref(mem) }
        let data = exif_mem_alloc(mem, ExifLong(size))!.assumingMemoryBound(to: UInt8.self)
        e.pointee.tag = tag
        e.pointee.format = format
        e.pointee.components = UInt(components)
        e.pointee.size = UInt32(size)
        e.pointee.data = data
        exif_content_add_entry(c, e)
        exif_entry_unref(e)
        return data
    }

    private static func addASCII(_ c: UnsafeMutablePointer<ExifContent>, _ tag: ExifTag, _ value: String) {
        let bytes = Array(value.utf8) + [0]
        let d = add(c, tag, EXIF_FORMAT_ASCII, components: bytes.count, size: bytes.count)
        d.update(from: bytes, count: bytes.count)
    }

    private static func addRationals(_ c: UnsafeMutablePointer<ExifContent>, _ tag: ExifTag, degrees: Double,
                                     order: ExifByteOrder) {
        let d = add(c, tag, EXIF_FORMAT_RATIONAL, components: 3, size: 24)
        let deg = degrees.rounded(.down)
        let minutes = ((degrees - deg) * 60).rounded(.down)
        let seconds = ((degrees - deg) * 60 - minutes) * 60
        let parts = [(UInt32(deg), UInt32(1)), (UInt32(minutes), UInt32(1)), (UInt32(seconds * 100), UInt32(100))]
        for (i, p) in parts.enumerated() {
            exif_set_rational(d + i * 8, order, ExifRational(numerator: p.0, denominator: p.1))
        }
    }
}
