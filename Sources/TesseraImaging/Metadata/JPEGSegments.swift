import Foundation
import TesseraModel

/// The marker segments of a JPEG file, parsed without decoding: what `inspect`
/// reports and what lossless strip filters. Entropy-coded data stays attached to
/// the SOS segment that precedes it.
struct JPEGSegments {
    struct Segment {
        /// The marker byte (0xD8 SOI, 0xE1 APP1, 0xDA SOS, ...).
        var marker: UInt8
        /// Bytes of the whole segment, from its 0xFF to the end of any scan data.
        var range: Range<Int>
        /// The payload after the length field (empty for standalone markers).
        var payload: Range<Int>
        /// For SOS: the entropy-coded data that follows the header.
        var scanData: Range<Int>?
    }

    enum Kind: Equatable {
        case jfif, jfxx, exif, xmp, xmpExtended, icc, mpf, iptc, adobe, comment, otherApp(Int)
        case frame, scan, tables, restartInterval, other
    }

    let segments: [Segment]
    /// Bytes after EOI (e.g. MPF secondary images, gain maps, vendor data).
    let trailingBytes: Range<Int>

    /// Parses `bytes`; throws `.truncated` or `.corrupt` naming what was wrong.
    init(_ bytes: UnsafeRawBufferPointer) throws {
        let n = bytes.count
        guard n >= 2, bytes[0] == 0xFF, bytes[1] == 0xD8 else {
            throw ImagingError(.corrupt, "not a JPEG file (no SOI marker)")
        }
        var segments = [Segment(marker: 0xD8, range: 0..<2, payload: 2..<2, scanData: nil)]
        var pos = 2
        var sawEOI = false
        while pos < n {
            guard bytes[pos] == 0xFF else {
                throw ImagingError(.corrupt, "corrupt JPEG (expected a marker at byte \(pos), found 0x\(hex(bytes[pos])))")
            }
            let start = pos
            while pos < n && bytes[pos] == 0xFF { pos += 1 }  // fill bytes
            guard pos < n else { break }
            let marker = bytes[pos]
            pos += 1
            if marker == 0xD9 {
                segments.append(Segment(marker: marker, range: start..<pos, payload: pos..<pos, scanData: nil))
                sawEOI = true
                break
            }
            if (0xD0...0xD7).contains(marker) || marker == 0x01 {
                segments.append(Segment(marker: marker, range: start..<pos, payload: pos..<pos, scanData: nil))
                continue
            }
            guard pos + 2 <= n else { throw ImagingError(.truncated, "truncated JPEG (segment header cut off)") }
            let length = Int(bytes[pos]) << 8 | Int(bytes[pos + 1])
            guard length >= 2 else {
                throw ImagingError(.corrupt, "corrupt JPEG (segment 0x\(hex(marker)) has length \(length))")
            }
            guard pos + length <= n else {
                throw ImagingError(.truncated, "truncated JPEG (segment 0x\(hex(marker)) runs past the end)")
            }
            let payload = (pos + 2)..<(pos + length)
            pos += length
            var scan: Range<Int>? = nil
            if marker == 0xDA {
                let dataStart = pos
                let base = bytes.baseAddress!
                while true {
                    // Jump to the next 0xFF (memchr), then see whether it starts a marker.
                    guard pos < n, let hit = memchr(base + pos, 0xFF, n - pos) else {
                        throw ImagingError(.truncated, "truncated JPEG (scan data has no end)")
                    }
                    pos = base.distance(to: UnsafeRawPointer(hit))
                    guard pos + 1 < n else { throw ImagingError(.truncated, "truncated JPEG (scan data has no end)") }
                    let next = bytes[pos + 1]
                    if next != 0x00 && !(0xD0...0xD7).contains(next) && next != 0xFF { break }
                    pos += next == 0xFF ? 1 : 2
                }
                scan = dataStart..<pos
            }
            segments.append(Segment(marker: marker, range: start..<pos, payload: payload, scanData: scan))
        }
        guard sawEOI else { throw ImagingError(.truncated, "truncated JPEG (no EOI marker)") }
        self.segments = segments
        trailingBytes = pos..<n
    }

    /// What a segment holds, from its marker and payload signature.
    static func kind(of s: Segment, in bytes: UnsafeRawBufferPointer) -> Kind {
        func starts(_ sig: String) -> Bool {
            let u = Array(sig.utf8)
            guard s.payload.count >= u.count else { return false }
            for (i, b) in u.enumerated() where bytes[s.payload.lowerBound + i] != b { return false }
            return true
        }
        switch s.marker {
        case 0xE0: return starts("JFIF\0") ? .jfif : starts("JFXX\0") ? .jfxx : .otherApp(0)
        case 0xE1:
            if starts("Exif\0") { return .exif }
            if starts("http://ns.adobe.com/xap/1.0/\0") { return .xmp }
            if starts("http://ns.adobe.com/xmp/extension/\0") { return .xmpExtended }
            return .otherApp(1)
        case 0xE2: return starts("ICC_PROFILE\0") ? .icc : starts("MPF\0") ? .mpf : .otherApp(2)
        case 0xED: return starts("Photoshop 3.0\0") ? .iptc : .otherApp(13)
        case 0xEE: return starts("Adobe") ? .adobe : .otherApp(14)
        case 0xE3...0xEF: return .otherApp(Int(s.marker - 0xE0))
        case 0xFE: return .comment
        case 0xC0...0xC3, 0xC5...0xC7, 0xC9...0xCB, 0xCD...0xCF: return .frame
        case 0xDA: return .scan
        case 0xC4, 0xDB, 0xCC: return .tables
        case 0xDD: return .restartInterval
        default: return .other
        }
    }

    /// The frame header (SOFn) segment.
    var frame: Segment? { segments.first { (0xC0...0xCF).contains($0.marker) && ![0xC4, 0xC8, 0xCC].contains($0.marker) } }
}

@inline(__always)
func hex(_ b: UInt8) -> String {
    let s = String(b, radix: 16, uppercase: true)
    return s.count == 1 ? "0" + s : s
}
