import TesseraShim
import TesseraModel

/// The IHDR and the ancillary chunks Tessera cares about.
struct PNGHeader {
    var width: Int
    var height: Int
    var bitDepth: Int
    var colorType: Int
    var interlaced: Bool
    var hasTransparency: Bool
    var gamma: Double?
    var hasSRGBChunk: Bool
    var iccProfile: [UInt8]?
    var exif: [UInt8]?
    /// pHYs in pixels per metre, when it says a unit.
    var density: PixelDensity?

    var colorTypeName: String {
        switch colorType {
        case 0: return "gray"
        case 2: return "rgb"
        case 3: return "palette"
        case 4: return "gray+alpha"
        case 6: return "rgba"
        default: return "type \(colorType)"
        }
    }
}

/// Owns one libpng reader (through the C shim) over bytes it does not own.
final class PNGDecoder {
    private let handle: OpaquePointer
    let header: PNGHeader

    /// Wraps `png_read_info`; `bytes` must outlive the decoder.
    /// `lenient`: chunks with bad CRCs and data with a bad Adler-32 are used as they are.
    init(bytes: UnsafeRawBufferPointer, limits: Limits, lenient: Bool = false) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw ImagingError(.empty, "the file is empty")
        }
        try PNGDecoder.checkChunksBeforeImageData(bytes)
        guard let h = ts_png_dec_create(base.assumingMemoryBound(to: UInt8.self), bytes.count) else {
            throw ImagingError(.limitExceeded, "cannot allocate a PNG decoder")
        }
        handle = h
        if lenient { ts_png_dec_set_lenient(h) }
        var raw = ts_png_header()
        let maxSide = UInt32(min(limits.maxDimension, Int(UInt32.max)))
        guard ts_png_dec_read_header(h, maxSide, maxSide, &raw) == 0 else {
            let error = PNGDecoder.error(message: String(cString: ts_png_dec_message(h)))
            ts_png_dec_destroy(h)
            throw error
        }
        header = PNGHeader(
            width: Int(raw.width), height: Int(raw.height), bitDepth: Int(raw.bit_depth),
            colorType: Int(raw.color_type), interlaced: raw.interlaced != 0,
            hasTransparency: raw.has_trns != 0 || raw.color_type & 4 != 0,
            gamma: raw.has_gama != 0 ? raw.gama : nil, hasSRGBChunk: raw.has_srgb != 0,
            iccProfile: raw.icc.map { Array(UnsafeBufferPointer(start: $0, count: Int(raw.icc_len))) },
            exif: raw.exif.map { Array(UnsafeBufferPointer(start: $0, count: Int(raw.exif_len))) },
            density: raw.phys_unit == 1 ? PixelDensity(x: Double(raw.phys_x) * 0.0254, y: Double(raw.phys_y) * 0.0254) : nil)
    }

    deinit { ts_png_dec_destroy(handle) }

    /// The chunks before the first IDAT (everything `png_read_info` reads) must lie inside
    /// the file: libpng allocates a text chunk's declared length before reading it (a
    /// 900-byte file declaring a 1.6 GB tEXt made it ask for 1.6 GB; found by fuzzing).
    static func checkChunksBeforeImageData(_ bytes: UnsafeRawBufferPointer) throws {
        var pos = 8
        while pos + 8 <= bytes.count {
            let length = Int(bytes[pos]) << 24 | Int(bytes[pos + 1]) << 16 | Int(bytes[pos + 2]) << 8 | Int(bytes[pos + 3])
            let type = (bytes[pos + 4], bytes[pos + 5], bytes[pos + 6], bytes[pos + 7])
            if type == (0x49, 0x44, 0x41, 0x54) { return }  // IDAT: truncated image data is libpng's to report
            guard length <= bytes.count - pos - 12 else {
                let name = String(decoding: [type.0, type.1, type.2, type.3], as: UTF8.self)
                    .map { $0.isASCII && $0.isLetter ? $0 : "?" }
                throw ImagingError(.truncated, "truncated PNG (\(String(name)) chunk of \(length) bytes at byte \(pos) runs past the end)")
            }
            pos += 12 + length
        }
    }

    /// Sets up expansion to 8-bit gray, RGB or RGBA; returns the channel count and
    /// whether the whole image must be read at once (interlaced files).
    func start(correctGamma: Bool) throws -> (channels: Int, wholeImage: Bool) {
        var channels: Int32 = 0, whole: Int32 = 0
        guard ts_png_dec_start(handle, correctGamma ? 1 : 0, &channels, &whole) == 0 else { throw failure() }
        return (Int(channels), whole != 0)
    }

    /// Reads `rows` rows (non-interlaced files). Wraps `png_read_row`.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) throws {
        let (_, error) = readSome(into: buffer, stride: stride, rows: rows)
        if let error { throw error }
    }

    /// Reads up to `rows` rows: those read, and why it stopped short.
    func readSome(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) -> (rows: Int, error: ImagingError?) {
        let rc = Int(ts_png_dec_read_rows(handle, buffer, stride, Int32(rows)))
        return rc >= 0 ? (rc, nil) : (-1 - rc, failure())
    }

    /// Reads every row. Wraps `png_read_image`.
    func readImage(into buffer: UnsafeMutablePointer<UInt8>, stride: Int) throws {
        guard ts_png_dec_read_image(handle, buffer, stride) == 0 else { throw failure() }
    }

    /// Reads the chunks after the image data up to IEND (wraps `png_read_end`).
    func finish() throws {
        guard ts_png_dec_finish(handle) == 0 else { throw failure() }
    }

    private func failure() -> ImagingError {
        PNGDecoder.error(message: String(cString: ts_png_dec_message(handle)))
    }

    static func error(message: String) -> ImagingError {
        let m = message.isEmpty ? "PNG decoding failed" : message
        if m.contains("truncated") || m.contains("Not enough image data") || m.contains("unexpected end") {
            return ImagingError(.truncated, "truncated PNG (\(m))")
        }
        if m.contains("exceeds user limit") || m.contains("Image width is too large")
            || m.contains("Image height is too large") || m.contains("chunk data is too large") {
            return ImagingError(.limitExceeded, "PNG over the configured limits (\(m))")
        }
        return ImagingError(.corrupt, "corrupt PNG (\(m))")
    }
}
