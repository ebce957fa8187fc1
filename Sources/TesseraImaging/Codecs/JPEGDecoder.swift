import CJPEG
import TesseraShim
import TesseraModel

/// The frame header of a JPEG, as libjpeg reads it.
struct JPEGHeader {
    var width: Int
    var height: Int
    var components: Int
    var colorSpace: J_COLOR_SPACE
    var progressive: Bool
    var arithmetic: Bool
    var precision: Int
    var adobeTransform: Int?       // nil without an Adobe APP14 marker
    var samplingFactors: [(h: Int, v: Int)]
    var restartInterval: Int
    /// Components in the first scan (all of them: one interleaved scan, as baseline files have).
    var componentsInFirstScan: Int = 0
    var maxSampling: (h: Int, v: Int) = (1, 1)

    /// The whole-image coefficient arrays libjpeg keeps for a progressive or multi-scan
    /// image (nil for one interleaved scan, decoded a row of blocks at a time): 64
    /// coefficients of 2 bytes per 8×8 block of each component, at its own sampling.
    var wholeImageCoefficientBytes: Int? {
        guard progressive || (componentsInFirstScan > 0 && componentsInFirstScan < components) else { return nil }
        let maxH = max(1, maxSampling.h), maxV = max(1, maxSampling.v)
        var bytes = 0
        for i in 0..<components {
            let f = i < samplingFactors.count ? samplingFactors[i] : (h: maxH, v: maxV)
            // Blocks across and down, rounded up to whole MCUs as libjpeg allocates them.
            let across = (width * f.h + maxH * 8 - 1) / (maxH * 8), down = (height * f.v + maxV * 8 - 1) / (maxV * 8)
            bytes += ((across + f.h - 1) / f.h * f.h) * ((down + f.v - 1) / f.v * f.v) * 128
        }
        return bytes
    }

    /// "4:2:0" and friends, or the raw factors when unusual.
    var subsampling: String {
        guard components >= 3 else { return components == 1 ? "gray" : "\(components) components" }
        let f = samplingFactors
        guard f.count == components else { return "\(components) components, \(f.count) described" }
        if components == 3, f[1] == (1, 1), f[2] == (1, 1) {
            switch (f[0].h, f[0].v) {
            case (1, 1): return "4:4:4"
            case (2, 1): return "4:2:2"
            case (2, 2): return "4:2:0"
            case (1, 2): return "4:4:0"
            case (4, 1): return "4:1:1"
            default: break
            }
        }
        return f.map { "\($0.h)x\($0.v)" }.joined(separator: ",")
    }
}

/// Owns one libjpeg decompressor (through the C shim) over bytes it does not own.
/// Wraps `jpeg_read_header`, `jpeg_start_decompress`, `jpeg_read_scanlines`.
final class JPEGDecoder {
    private let handle: OpaquePointer
    private(set) var header: JPEGHeader

    /// Reads the header. `bytes` must outlive the decoder. With `body`, `bytes` is only a
    /// header and the entropy-coded data comes from `body` (which must outlive it too).
    init(bytes: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer? = nil, limits: Limits, strict: Bool = true) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw ImagingError(.empty, "the file is empty")
        }
        guard let h = ts_jpeg_dec_create(base.assumingMemoryBound(to: UInt8.self), bytes.count,
                                         strict ? 1 : 0, Int32(limits.maxProgressiveScans),
                                         limits.maxDecoderMemory) else {
            throw ImagingError(.limitExceeded, "cannot allocate a JPEG decoder")
        }
        handle = h
        if let body, let b = body.baseAddress {
            ts_jpeg_dec_set_body(h, b.assumingMemoryBound(to: UInt8.self), body.count)
        }
        var raw = ts_jpeg_header()
        guard ts_jpeg_dec_read_header(h, &raw) == 0 else {
            let error = JPEGDecoder.error(message: String(cString: ts_jpeg_dec_message(h)))
            ts_jpeg_dec_destroy(h)
            throw error
        }
        var factors: [(Int, Int)] = []
        withUnsafeBytes(of: raw.h_samp) { hs in
            withUnsafeBytes(of: raw.v_samp) { vs in
                let hh = hs.bindMemory(to: Int32.self), vv = vs.bindMemory(to: Int32.self)
                for i in 0..<min(Int(raw.num_components), 4) { factors.append((Int(hh[i]), Int(vv[i]))) }
            }
        }
        header = JPEGHeader(
            width: Int(raw.width), height: Int(raw.height), components: Int(raw.num_components),
            colorSpace: J_COLOR_SPACE(rawValue: UInt32(raw.jpeg_color_space)),
            progressive: raw.progressive != 0, arithmetic: raw.arith_code != 0,
            precision: Int(raw.data_precision),
            adobeTransform: raw.saw_adobe_marker != 0 ? Int(raw.adobe_transform) : nil,
            samplingFactors: factors, restartInterval: Int(raw.restart_interval),
            componentsInFirstScan: Int(raw.comps_in_scan), maxSampling: (Int(raw.max_h_samp), Int(raw.max_v_samp)))
    }

    deinit { ts_jpeg_dec_destroy(handle) }

    /// The JFIF header's density, when it gives one in dots per inch or per centimetre.
    var density: PixelDensity? {
        var unit: Int32 = 0, x: Int32 = 0, y: Int32 = 0
        guard ts_jpeg_dec_density(handle, &unit, &x, &y) == 1 else { return nil }
        let perInch = unit == 2 ? 2.54 : 1
        return PixelDensity(x: Double(x) * perInch, y: Double(y) * perInch)
    }

    /// After the header: the offset of the entropy-coded data of a single-scan file.
    var entropyOffset: Int? {
        let o = ts_jpeg_dec_input_offset(handle)
        return o >= 0 ? o : nil
    }

    /// The EXIF payload (TIFF structure, without the "Exif\0\0" prefix), if any.
    var exif: [UInt8]? {
        var len: UInt32 = 0
        guard let p = ts_jpeg_dec_exif(handle, &len), len > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: p, count: Int(len)))
    }

    /// The reassembled ICC profile (APP2 chunks), if any. Wraps `jpeg_read_icc_profile`.
    func iccProfile() throws -> [UInt8]? {
        var p: UnsafeMutablePointer<UInt8>?
        var len: UInt32 = 0
        guard ts_jpeg_dec_icc(handle, &p, &len) == 0 else { throw failure() }
        guard let p else { return nil }
        defer { ts_free(p) }
        return Array(UnsafeBufferPointer(start: p, count: Int(len)))
    }

    enum OutputLayout: Int32 {
        case gray = 0, rgb = 1, rgbx = 2, cmyk = 3
        var channels: Int { self == .gray ? 1 : self == .rgb ? 3 : 4 }
    }

    /// Starts decompression at `scale`/8 (libjpeg-turbo's scaled IDCT); returns the output size.
    func start(scaleEighths: Int, layout: OutputLayout, fast: Bool = false) throws -> Size {
        var w: Int32 = 0, h: Int32 = 0, c: Int32 = 0
        guard ts_jpeg_dec_start(handle, Int32(scaleEighths), 8, layout.rawValue, fast ? 1 : 0, &w, &h, &c) == 0 else {
            throw failure()
        }
        precondition(Int(c) == layout.channels, "libjpeg returned \(c) components for \(layout)")
        return Size(width: Int(w), height: Int(h))
    }

    /// Reads up to `maxRows` rows into `buffer`; returns how many were read.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        var rows: Int32 = 0
        guard ts_jpeg_dec_read(handle, buffer, stride, Int32(maxRows), &rows) == 0 else { throw failure() }
        return Int(rows)
    }

    /// Skips `rows` rows without producing them (wraps `jpeg_skip_scanlines`).
    func skip(rows: Int) throws -> Int {
        var n: Int32 = 0
        guard ts_jpeg_dec_skip(handle, Int32(rows), &n) == 0 else { throw failure() }
        return Int(n)
    }

    /// Ends decompression (wraps `jpeg_finish_decompress`).
    /// Lenient: the first damage libjpeg decoded past (it pads what it never got with gray):
    /// the rows output before it, the scan, and whether the data ended there.
    var loss: (row: Int, scan: Int, ended: Bool, message: String)? {
        var row: Int32 = 0, scan: Int32 = 0, eof: Int32 = 0
        guard let m = ts_jpeg_dec_loss(handle, &row, &scan, &eof) else { return nil }
        return (Int(row), Int(scan), eof != 0, String(cString: m))
    }

    func finish() throws {
        guard ts_jpeg_dec_finish(handle) == 0 else { throw failure() }
    }

    private func failure() -> ImagingError {
        JPEGDecoder.error(message: String(cString: ts_jpeg_dec_message(handle)))
    }

    /// Classifies a libjpeg message.
    static func error(message: String) -> ImagingError {
        let m = message.isEmpty ? "JPEG decoding failed" : message
        if m.contains("Premature end of JPEG file") {
            return ImagingError(.truncated, "truncated JPEG (\(m))")
        }
        // Before "not supported": libjpeg says "Backing store not supported" when an image's
        // coefficient arrays exceed the decoder's memory limit.
        if m.contains("Backing store") {
            return ImagingError(.limitExceeded, "the image needs more decoder memory than the limit allows (\(m))")
        }
        if m.contains("more than") {
            return ImagingError(.limitExceeded, m)
        }
        if m.hasPrefix("Unsupported") || m.contains("not supported") || m.contains("Unsupported JPEG") {
            return ImagingError(.unsupportedFeature, m)
        }
        if m.contains("Insufficient memory") {
            return ImagingError(.outOfMemory, "the JPEG decoder ran out of memory (\(m))")
        }
        if m.contains("Maximum supported image dimension") {
            return ImagingError(.limitExceeded, m)
        }
        return ImagingError(.corrupt, "corrupt JPEG (\(m))")
    }
}
