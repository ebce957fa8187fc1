import CWebP
import Foundation
import TesseraModel

/// A WebP file opened with libwebp: its features, its VP8X metadata (ICC, EXIF, XMP) and a
/// decode straight to the size the resampler needs (`use_scaling`: the WebP counterpart of
/// JPEG's DCT scaling). An animated WebP gives its first frame, composed on its canvas.
/// Every call into libwebp is in this file.
final class WebPDecoder {
    let size: Size
    let hasAlpha: Bool
    let isAnimated: Bool
    /// `lossy`, `lossless` or `mixed` (animations may mix).
    let compression: String
    let iccProfile: [UInt8]?
    let exif: [UInt8]?
    let xmp: [UInt8]?
    /// Frames of an animation (1 for a still).
    private(set) var frameCount = 1
    /// Seconds an animation lasts (nil: a still).
    private(set) var duration: Double?
    private let bytes: UnsafeRawBufferPointer

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        self.bytes = bytes
        // An extended file's canvas is checked against the limits before libwebp reads further.
        if bytes.count >= 30, bytes.ascii("VP8X", at: 12) {
            func u24(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 }
            try limits.checkDimensions(Size(width: u24(24) + 1, height: u24(27) + 1))
        }
        var features = WebPBitstreamFeatures()
        let status = WebPGetFeaturesInternal(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
                                             &features, WEBP_DECODER_ABI_VERSION)
        try Self.check(status, "reading the WebP header")
        size = Size(width: Int(features.width), height: Int(features.height))
        hasAlpha = features.has_alpha != 0
        isAnimated = features.has_animation != 0
        compression = features.format == 1 ? "lossy" : features.format == 2 ? "lossless" : "mixed"
        try limits.checkDimensions(size)
        // VP8X chunks (only extended files have them).
        var data = WebPData(bytes: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        var icc: [UInt8]?, exifChunk: [UInt8]?, xmpChunk: [UInt8]?
        if let demux = WebPDemuxInternal(&data, 0, nil, WEBP_DEMUX_ABI_VERSION) {
            defer { WebPDemuxDelete(demux) }
            func chunk(_ fourcc: String) -> [UInt8]? {
                var it = WebPChunkIterator()
                guard WebPDemuxGetChunk(demux, fourcc, 1, &it) != 0 else { return nil }
                defer { WebPDemuxReleaseChunkIterator(&it) }
                guard let p = it.chunk.bytes, it.chunk.size > 0, it.chunk.size < 16 << 20 else { return nil }
                return Array(UnsafeBufferPointer(start: p, count: it.chunk.size))
            }
            icc = chunk("ICCP")
            exifChunk = chunk("EXIF")
            xmpChunk = chunk("XMP ")
            // The canvas of an extended file must hold its image (a VP8 frame that disagrees
            // with the header is corrupt).
            let canvas = Size(width: Int(WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH)),
                              height: Int(WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT)))
            if canvas.width > 0, canvas != size {
                throw ImagingError(.corrupt, "corrupt WebP: canvas \(canvas) but image \(size)")
            }
            frameCount = max(1, Int(WebPDemuxGetI(demux, WEBP_FF_FRAME_COUNT)))
            if frameCount > 1 {
                // The animation's length: its frames' durations.
                var total = 0
                var it = WebPIterator()
                if WebPDemuxGetFrame(demux, 1, &it) != 0 {
                    repeat { total += Int(it.duration) } while WebPDemuxNextFrame(&it) != 0
                    WebPDemuxReleaseIterator(&it)
                }
                duration = Double(total) / 1000
            }
        }
        iccProfile = icc
        // Some writers store EXIF with the JPEG APP1 "Exif\0\0" prefix, most without.
        exif = exifChunk
        xmp = xmpChunk
    }

    /// Decodes at `target` (≤ the image size; libwebp's scaler), RGB or RGBA.
    func decode(to target: Size) throws -> PixelBuffer { try decode(to: target, lenient: false).image }

    /// Decodes at `target`; `lenient`: a still cut short or damaged gives the rows libwebp's
    /// incremental decoder made of it (`rows`), and why the rest did not come (`damage`).
    func decode(to target: Size, lenient: Bool) throws -> (image: PixelBuffer, rows: Int, damage: ImagingError?) {
        let layout: PixelLayout = hasAlpha ? .rgba : .rgb
        if isAnimated {
            let image = try decodeFirstFrame(layout: layout)
            return (image, image.height, nil)
        }
        let out = try PixelBuffer.make(width: target.width, height: target.height, layout: layout)
        var config = WebPDecoderConfig()
        guard WebPInitDecoderConfigInternal(&config, WEBP_DECODER_ABI_VERSION) != 0 else {
            throw ImagingError(.corrupt, "libwebp: version mismatch")
        }
        if target != size {
            config.options.use_scaling = 1
            config.options.scaled_width = Int32(target.width)
            config.options.scaled_height = Int32(target.height)
        }
        // One thread: a worker runs one task per core. (libvips lets libwebp filter on a
        // second thread: 1.16 CPU-seconds per our 1.00 on the same files, decision 012.)
        config.options.use_threads = 0
        config.output.colorspace = hasAlpha ? MODE_RGBA : MODE_RGB
        config.output.is_external_memory = 1
        config.output.u.RGBA.rgba = out.base
        config.output.u.RGBA.stride = Int32(out.stride)
        config.output.u.RGBA.size = out.byteCount
        let data = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let status = WebPDecode(data, bytes.count, &config)
        WebPFreeDecBuffer(&config.output)
        guard status != VP8_STATUS_OK else { return (out, out.height, nil) }
        let damage: ImagingError
        do { try Self.check(status, "decoding") ; return (out, out.height, nil) } catch let e as ImagingError { damage = e }
        guard lenient, damage.code == .truncated || damage.code == .corrupt else { throw damage }
        // Again, incrementally: the rows decoded before the data ran out or went wrong.
        out.base.initialize(repeating: 128, count: out.byteCount)
        guard let idec = WebPIDecode(nil, 0, &config) else { throw damage }
        defer { WebPIDelete(idec) }
        _ = WebPIUpdate(idec, data, bytes.count)
        var lastY: Int32 = 0
        guard WebPIDecGetRGB(idec, &lastY, nil, nil, nil) != nil, lastY > 0 else { throw damage }
        return (out, Int(lastY), damage)
    }

    /// The first frame of an animation, composed on the full canvas (WebPAnimDecoder).
    private func decodeFirstFrame(layout: PixelLayout) throws -> PixelBuffer {
        var data = WebPData(bytes: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        var options = WebPAnimDecoderOptions()
        guard WebPAnimDecoderOptionsInitInternal(&options, WEBP_DEMUX_ABI_VERSION) != 0 else {
            throw ImagingError(.corrupt, "libwebp: version mismatch")
        }
        options.color_mode = MODE_RGBA
        options.use_threads = 0
        guard let decoder = WebPAnimDecoderNewInternal(&data, &options, WEBP_DEMUX_ABI_VERSION) else {
            throw ImagingError(.corrupt, "corrupt animated WebP (cannot read its frames)")
        }
        defer { WebPAnimDecoderDelete(decoder) }
        var frame: UnsafeMutablePointer<UInt8>?
        var timestamp: Int32 = 0
        guard WebPAnimDecoderGetNext(decoder, &frame, &timestamp) != 0, let frame else {
            throw ImagingError(.corrupt, "corrupt animated WebP (its first frame does not decode)")
        }
        let out = try PixelBuffer.make(width: size.width, height: size.height, layout: layout)
        let canvasStride = size.width * 4
        for y in 0..<size.height {
            let src = frame + y * canvasStride, dst = out.row(y)
            if layout == .rgba {
                dst.update(from: src, count: canvasStride)
            } else {
                for x in 0..<size.width { dst[x * 3] = src[x * 4]; dst[x * 3 + 1] = src[x * 4 + 1]; dst[x * 3 + 2] = src[x * 4 + 2] }
            }
        }
        return out
    }

    static func check(_ status: VP8StatusCode, _ what: String) throws {
        switch status {
        case VP8_STATUS_OK: return
        case VP8_STATUS_NOT_ENOUGH_DATA: throw ImagingError(.truncated, "truncated WebP (\(what): not enough data)")
        case VP8_STATUS_OUT_OF_MEMORY: throw ImagingError(.outOfMemory, "WebP: out of memory \(what)")
        case VP8_STATUS_UNSUPPORTED_FEATURE: throw ImagingError(.unsupportedFeature, "WebP: unsupported feature (\(what))")
        default: throw ImagingError(.corrupt, "corrupt WebP (\(what): status \(status.rawValue))")
        }
    }
}
