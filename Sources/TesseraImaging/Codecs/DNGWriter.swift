import Foundation
import TesseraModel

/// Bayer-mosaic DNGs for tests and benchmarks (`Codec.encodeDNG`), as a camera's sensor gives
/// them: the picture's sRGB curve undone, one colour per photosite in a 2×2 pattern, values
/// over a black level, a ColorMatrix1 for linear sRGB (so LibRaw's demosaic gives the picture
/// back), an Orientation tag, and optionally a JPEG preview in a second IFD (as cameras
/// embed theirs). Little-endian classic TIFF, uncompressed strips of 16 rows.
enum DNGWriter {
    struct Entry {
        var tag: Int, type: Int
        var values: [Int]
        var bytes: [UInt8]? = nil  // BYTE / ASCII payload
    }

    static func encode(_ image: PixelBuffer, pattern: String, bits: Int, orientation: Int, preview: [UInt8]?) throws -> [UInt8] {
        guard image.layout == .rgb, image.width >= 2, image.height >= 2 else {
            throw ImagingError(.invalidRecipe, "a DNG fixture is made of an RGB image of at least 2x2")
        }
        let p = Array(pattern.uppercased())
        guard p.count == 4, p.allSatisfy({ "RGB".contains($0) }), (8...16).contains(bits) else {
            throw ImagingError(.invalidRecipe, "pattern is four of R, G, B (RGGB); bits 8 to 16")
        }
        let w = image.width & ~1, h = image.height & ~1
        let white = (1 << bits) - 1, black = white / 16
        let linear = (0..<256).map { i -> Int in black + Int((SRGB.decode(Double(i) / 255) * Double(white - black)).rounded()) }
        let channel = p.map { $0 == "R" ? 0 : $0 == "G" ? 1 : 2 }
        var sensor = [UInt8](repeating: 0, count: w * h * 2)
        for y in 0..<h {
            let row = image.row(y)
            for x in 0..<w {
                let v = linear[Int(row[x * 3 + channel[(y & 1) * 2 + (x & 1)]])]
                sensor[(y * w + x) * 2] = UInt8(v & 0xFF)
                sensor[(y * w + x) * 2 + 1] = UInt8(v >> 8)
            }
        }
        let rowsPerStrip = 16
        let strips = stride(from: 0, to: h, by: rowsPerStrip).map { top in (top * w * 2, min(rowsPerStrip, h - top) * w * 2) }
        // XYZ (D65) -> linear sRGB: the camera's space is linear sRGB.
        let matrix = [3.2406, -1.5372, -0.4986, -0.9689, 1.8758, 0.0415, 0.0557, -0.2040, 1.0570]
        var raw: [Entry] = [
            Entry(tag: 254, type: 4, values: [0]), Entry(tag: 256, type: 4, values: [w]), Entry(tag: 257, type: 4, values: [h]),
            Entry(tag: 258, type: 3, values: [16]), Entry(tag: 259, type: 3, values: [1]), Entry(tag: 262, type: 3, values: [32803]),
            Entry(tag: 271, type: 2, values: [], bytes: Array("Tessera\0".utf8)),
            Entry(tag: 272, type: 2, values: [], bytes: Array("Fixture CFA\0".utf8)),
            Entry(tag: 273, type: 4, values: []),  // strip offsets, placed below
            Entry(tag: 274, type: 3, values: [max(1, min(8, orientation))]),
            Entry(tag: 277, type: 3, values: [1]), Entry(tag: 278, type: 4, values: [rowsPerStrip]),
            Entry(tag: 279, type: 4, values: strips.map(\.1)), Entry(tag: 284, type: 3, values: [1]),
            Entry(tag: 33421, type: 3, values: [2, 2]),
            Entry(tag: 33422, type: 1, values: [], bytes: channel.map(UInt8.init)),
            Entry(tag: 50706, type: 1, values: [], bytes: [1, 4, 0, 0]),
            Entry(tag: 50707, type: 1, values: [], bytes: [1, 2, 0, 0]),
            Entry(tag: 50708, type: 2, values: [], bytes: Array("Tessera Fixture CFA\0".utf8)),
            Entry(tag: 50714, type: 4, values: [black]), Entry(tag: 50717, type: 4, values: [white]),
            Entry(tag: 50721, type: 10, values: matrix.flatMap { [Int(($0 * 10000).rounded()), 10000] }),
            Entry(tag: 50728, type: 5, values: [1, 1, 1, 1, 1, 1]),
            Entry(tag: 50730, type: 10, values: [0, 1]),
            Entry(tag: 50778, type: 3, values: [21]),
        ]
        // Layout: header, the sensor data, the preview, then each IFD with its long values.
        var out: [UInt8] = [0x49, 0x49, 42, 0, 0, 0, 0, 0]
        let dataStart = out.count
        out += sensor
        raw[raw.firstIndex { $0.tag == 273 }!].values = strips.map { dataStart + $0.0 }
        var ifds: [[Entry]] = [raw]
        if let preview {
            let at = out.count
            out += preview
            if out.count % 2 == 1 { out.append(0) }
            let size = try preview.withUnsafeBytes { raw -> Size in
                var o = RenderOptions()
                o.limits.maxPixels = Int.max
                return try SourceDecoder(bytes: raw, options: o).storedSize
            }
            ifds.append([
                Entry(tag: 254, type: 4, values: [1]), Entry(tag: 256, type: 4, values: [size.width]),
                Entry(tag: 257, type: 4, values: [size.height]), Entry(tag: 258, type: 3, values: [8, 8, 8]),
                Entry(tag: 259, type: 3, values: [7]), Entry(tag: 262, type: 3, values: [6]),
                Entry(tag: 273, type: 4, values: [at]), Entry(tag: 277, type: 3, values: [3]),
                Entry(tag: 278, type: 4, values: [size.height]), Entry(tag: 279, type: 4, values: [preview.count]),
                Entry(tag: 284, type: 3, values: [1]),
            ])
        }
        func put(_ v: Int, _ n: Int, at i: Int) { for k in 0..<n { out[i + k] = UInt8(truncatingIfNeeded: v >> (8 * k)) } }
        func append(_ v: Int, _ n: Int) { for k in 0..<n { out.append(UInt8(truncatingIfNeeded: v >> (8 * k))) } }
        var pointer = 4
        for entries in ifds {
            if out.count % 2 == 1 { out.append(0) }
            put(out.count, 4, at: pointer)
            let ifd = out.count
            append(entries.count, 2)
            out += [UInt8](repeating: 0, count: entries.count * 12)
            pointer = out.count
            append(0, 4)
            for (i, e) in entries.sorted(by: { $0.tag < $1.tag }).enumerated() {
                let at = ifd + 2 + i * 12
                var payload: [UInt8] = e.bytes ?? []
                if e.bytes == nil {
                    let size = e.type == 3 ? 2 : 4
                    for v in e.values { for k in 0..<size { payload.append(UInt8(truncatingIfNeeded: v >> (8 * k))) } }
                }
                let count = e.type == 5 || e.type == 10 ? e.values.count / 2 : e.bytes?.count ?? e.values.count
                put(e.tag, 2, at: at)
                put(e.type, 2, at: at + 2)
                put(count, 4, at: at + 4)
                if payload.count <= 4 {
                    for (k, b) in payload.enumerated() { out[at + 8 + k] = b }
                } else {
                    if out.count % 2 == 1 { out.append(0) }
                    put(out.count, 4, at: at + 8)
                    out += payload
                }
            }
        }
        return out
    }
}

extension Codec {
    /// A Bayer-mosaic DNG of `image` (8-bit RGB sRGB) for tests and benchmarks: `pattern`
    /// (RGGB, BGGR, GRBG, GBRG), `bits` of signal (8–16, stored in 16), an EXIF-style
    /// `orientation`, and an embedded JPEG `preview`.
    public static func encodeDNG(_ image: PixelBuffer, pattern: String = "RGGB", bits: Int = 12, orientation: Int = 1,
                                 preview: [UInt8]? = nil) throws -> [UInt8] {
        try DNGWriter.encode(image, pattern: pattern, bits: bits, orientation: orientation, preview: preview)
    }
}
