import TesseraShim
import TesseraModel

/// JPEG encoding through the libjpeg API (one call: `ts_jpeg_encode`).
enum JPEGEncoder {
    struct Settings {
        var quality: Int            // 1...100
        var progressive: Bool
        var optimize: Bool
        var subsampling: ChromaSubsampling
        var restartInterval = 0
        /// Written in the JFIF header (rounded dots per inch) when given.
        var density: PixelDensity? = nil
        /// 0: libjpeg-turbo as it comes; 1: Tessera's quantisation tables; 2: and its dead-zone
        /// quantiser and Huffman tables; 3: its trellis quantiser (`OutputSettings.jpegEffort`).
        var effort = OutputSettings.defaultJPEGEffort
        /// Effort ≥ 2, for tests: libjpeg-turbo gathers the statistics and builds the Huffman
        /// tables, as at effort 0 and 1, instead of the front end.
        var libjpegHuffman = false
    }

    /// Encodes gray or RGB pixels, attaching an ICC profile and an EXIF payload
    /// ("Exif\0\0" + TIFF) when given.
    static func encode(_ image: PixelBuffer, _ s: Settings, icc: [UInt8]? = nil, exif: [UInt8]? = nil) throws -> [UInt8] {
        precondition(image.layout != .rgba, "flatten alpha before JPEG encoding")
        return try encode(UnsafePointer(image.base), width: image.width, height: image.height, stride: image.stride,
                          channels: image.channels, s, icc: icc, exif: exif)
    }

    /// Encodes a window of a larger buffer (a tile of a band) without copying it.
    static func encode(_ pixels: UnsafePointer<UInt8>, width: Int, height: Int, stride: Int, channels: Int,
                       _ s: Settings, icc: [UInt8]? = nil, exif: [UInt8]? = nil) throws -> [UInt8] {
        precondition(channels == 1 || channels == 3, "flatten alpha before JPEG encoding")
        let sub: Int32
        switch s.subsampling {
        case .auto: sub = s.quality >= 90 ? 2 : 0
        case .s420: sub = 0
        case .s422: sub = 1
        case .s444: sub = 2
        }
        var params = ts_jpeg_enc_params(quality: Int32(max(1, min(100, s.quality))),
                                        progressive: s.progressive ? 1 : 0,
                                        optimize: s.optimize ? 1 : 0, subsampling: sub,
                                        restart_interval: Int32(s.restartInterval),
                                        x_density: Int32(s.density.map { $0.x.rounded() } ?? 0),
                                        y_density: Int32(s.density.map { $0.y.rounded() } ?? 0),
                                        effort: Int32(s.effort), libjpeg_huffman: s.libjpegHuffman ? 1 : 0)
        var out: UnsafeMutablePointer<UInt8>?
        var outLen: UInt = 0
        var message = [CChar](repeating: 0, count: 256)
        let rc = withOptionalBytes(icc) { iccPtr, iccLen in
            withOptionalBytes(exif) { exifPtr, exifLen in
                ts_jpeg_encode(pixels, Int32(width), Int32(height), stride,
                               Int32(channels), &params, iccPtr, UInt32(iccLen), exifPtr, UInt32(exifLen),
                               &out, &outLen, &message, message.count)
            }
        }
        guard rc == 0, let out else {
            let m = String(cString: message)
            throw ImagingError(m.contains("Insufficient memory") || m.contains("out of memory") ? .outOfMemory : .encodeFailed,
                               "JPEG encoding failed: \(m)")
        }
        defer { ts_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(outLen)))
    }
}

/// PNG encoding through libpng (`ts_png_encode`).
enum PNGEncoder {
    static func encode(_ image: PixelBuffer, compressionLevel: Int, icc: [UInt8]? = nil, density: PixelDensity? = nil) throws -> [UInt8] {
        try encode(UnsafePointer(image.base), width: image.width, height: image.height, stride: image.stride,
                   channels: image.channels, compressionLevel: compressionLevel, icc: icc, density: density)
    }

    /// `density` goes in a pHYs chunk (pixels per metre).
    static func encode(_ pixels: UnsafePointer<UInt8>, width: Int, height: Int, stride: Int, channels: Int,
                       compressionLevel: Int, icc: [UInt8]? = nil, density: PixelDensity? = nil) throws -> [UInt8] {
        let perMetre = density.map { (UInt32(($0.x / 0.0254).rounded()), UInt32(($0.y / 0.0254).rounded())) } ?? (0, 0)
        var out: UnsafeMutablePointer<UInt8>?
        var outLen = 0
        var message = [CChar](repeating: 0, count: 256)
        let rc = withOptionalBytes(icc) { iccPtr, iccLen in
            ts_png_encode(pixels, Int32(width), Int32(height), stride,
                          Int32(channels), Int32(max(0, min(9, compressionLevel))),
                          iccPtr, UInt32(iccLen), perMetre.0, perMetre.1, &out, &outLen, &message, message.count)
        }
        guard rc == 0, let out else {
            let m = String(cString: message)
            throw ImagingError(m.lowercased().contains("out of memory") || m.contains("Insufficient memory") ? .outOfMemory : .encodeFailed,
                               "PNG encoding failed: \(m)")
        }
        defer { ts_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: outLen))
    }
}

@inline(__always)
func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafePointer<UInt8>?, Int) -> R) -> R {
    guard let bytes, !bytes.isEmpty else { return body(nil, 0) }
    return bytes.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
}
