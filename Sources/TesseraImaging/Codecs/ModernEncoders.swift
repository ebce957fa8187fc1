import CHeif
import CWebP
import Foundation

/// WebP encoding through libwebp (`WebPEncode` into a memory writer; `WebPMux` to attach
/// an ICC profile).
enum WebPEncoder {
    struct Settings {
        /// 1...100 (lossy); for lossless, the compression effort.
        var quality: Int
        var lossless: Bool
        /// libwebp's method 0 (fast) ... 6 (slowest, smallest).
        var method: Int
    }

    static func encode(_ image: PixelBuffer, _ s: Settings, icc: [UInt8]? = nil) throws -> [UInt8] {
        var config = WebPConfig()
        guard WebPConfigInitInternal(&config, WEBP_PRESET_DEFAULT, Float(s.quality), WEBP_ENCODER_ABI_VERSION) != 0 else {
            throw ImagingError(.encodeFailed, "libwebp: version mismatch")
        }
        config.lossless = s.lossless ? 1 : 0
        config.method = Int32(max(0, min(6, s.method)))
        config.quality = Float(max(0, min(100, s.quality)))
        config.thread_level = 0
        guard WebPValidateConfig(&config) != 0 else { throw ImagingError(.encodeFailed, "libwebp: invalid settings") }
        var picture = WebPPicture()
        guard WebPPictureInitInternal(&picture, WEBP_ENCODER_ABI_VERSION) != 0 else {
            throw ImagingError(.encodeFailed, "libwebp: version mismatch")
        }
        defer { WebPPictureFree(&picture) }
        picture.width = Int32(image.width)
        picture.height = Int32(image.height)
        picture.use_argb = s.lossless ? 1 : 0
        let imported: Int32
        switch image.layout {
        case .rgba: imported = WebPPictureImportRGBA(&picture, image.base, Int32(image.stride))
        case .rgb: imported = WebPPictureImportRGB(&picture, image.base, Int32(image.stride))
        case .gray:
            let rgb = try PixelBuffer.make(width: image.width, height: image.height, layout: .rgb)
            for y in 0..<image.height {
                let s = image.row(y), d = rgb.row(y)
                for x in 0..<image.width { d[x * 3] = s[x]; d[x * 3 + 1] = s[x]; d[x * 3 + 2] = s[x] }
            }
            imported = WebPPictureImportRGB(&picture, rgb.base, Int32(rgb.stride))
        }
        guard imported != 0 else { throw ImagingError(.outOfMemory, "WebP: cannot import \(image.width)x\(image.height) pixels") }
        var writer = WebPMemoryWriter()
        WebPMemoryWriterInit(&writer)
        defer { WebPMemoryWriterClear(&writer) }
        let ok = withUnsafeMutablePointer(to: &writer) { w -> Int32 in
            picture.writer = WebPMemoryWrite
            picture.custom_ptr = UnsafeMutableRawPointer(w)
            return WebPEncode(&config, &picture)
        }
        guard ok != 0, let mem = writer.mem else {
            throw ImagingError(picture.error_code == VP8_ENC_ERROR_OUT_OF_MEMORY ? .outOfMemory : .encodeFailed,
                               "WebP encoding failed (error \(picture.error_code.rawValue))")
        }
        let encoded = Array(UnsafeBufferPointer(start: mem, count: writer.size))
        guard let icc, !icc.isEmpty else { return encoded }
        return try attach(icc: icc, to: encoded)
    }

    /// Adds an ICCP chunk (WebPMux: the file becomes VP8X).
    private static func attach(icc: [UInt8], to webp: [UInt8]) throws -> [UInt8] {
        try webp.withUnsafeBufferPointer { image in
            try icc.withUnsafeBufferPointer { profile in
                var imageData = WebPData(bytes: image.baseAddress, size: image.count)
                guard let mux = WebPMuxCreateInternal(&imageData, 0, WEBP_MUX_ABI_VERSION) else {
                    throw ImagingError(.encodeFailed, "WebP: cannot attach the ICC profile")
                }
                defer { WebPMuxDelete(mux) }
                var iccData = WebPData(bytes: profile.baseAddress, size: profile.count)
                var out = WebPData()
                guard WebPMuxSetChunk(mux, "ICCP", &iccData, 1) == WEBP_MUX_OK,
                      WebPMuxAssemble(mux, &out) == WEBP_MUX_OK, let bytes = out.bytes else {
                    throw ImagingError(.encodeFailed, "WebP: cannot attach the ICC profile")
                }
                defer { WebPDataClear(&out) }
                return Array(UnsafeBufferPointer(start: bytes, count: out.size))
            }
        }
    }
}

/// AVIF encoding through libheif's AV1 encoder (aom): 8-bit, 4:2:0 (4:4:4 from quality
/// 0.9, as for JPEG), alpha kept, an sRGB `nclx` box (or the ICC profile when kept).
enum AVIFEncoder {
    struct Settings {
        var quality: Int            // 1...100
        var speed: Int              // aom: 0 (slowest) ... 9
        var subsampling: ChromaSubsampling
    }

    static var isAvailable: Bool { HEIFDecoder.canEncodeAVIF }

    static func encode(_ image: PixelBuffer, _ s: Settings, icc: [UInt8]? = nil) throws -> [UInt8] {
        guard isAvailable else { throw ImagingError(.unsupportedFeature, "this build of libheif has no AV1 encoder (aom)") }
        guard let ctx = heif_context_alloc() else { throw ImagingError(.outOfMemory, "libheif: cannot allocate a context") }
        defer { heif_context_free(ctx) }
        var encoder: OpaquePointer?
        try HEIFDecoder.check(heif_context_get_encoder_for_format(ctx, heif_compression_AV1, &encoder))
        guard let encoder else { throw ImagingError(.unsupportedFeature, "no AV1 encoder") }
        defer { heif_encoder_release(encoder) }
        try HEIFDecoder.check(heif_encoder_set_lossy_quality(encoder, Int32(max(1, min(100, s.quality)))))
        _ = heif_encoder_set_parameter_integer(encoder, "speed", Int32(max(0, min(9, s.speed))))
        _ = heif_encoder_set_parameter_integer(encoder, "threads", 1)
        let chroma: String
        switch s.subsampling {
        case .auto: chroma = s.quality >= 90 ? "444" : "420"
        case .s420: chroma = "420"
        case .s422: chroma = "422"
        case .s444: chroma = "444"
        }
        _ = heif_encoder_set_parameter_string(encoder, "chroma", chroma)

        // The pixels, as interleaved RGB(A) (gray becomes RGB).
        let alpha = image.layout == .rgba
        var heifImage: OpaquePointer?
        try HEIFDecoder.check(heif_image_create(Int32(image.width), Int32(image.height), heif_colorspace_RGB,
                                                alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB, &heifImage))
        guard let heifImage else { throw ImagingError(.outOfMemory, "libheif: cannot create an image") }
        defer { heif_image_release(heifImage) }
        try HEIFDecoder.check(heif_image_add_plane(heifImage, heif_channel_interleaved, Int32(image.width), Int32(image.height), 8))
        var stride: Int32 = 0
        guard let plane = heif_image_get_plane(heifImage, heif_channel_interleaved, &stride) else {
            throw ImagingError(.outOfMemory, "libheif: no plane")
        }
        let outChannels = alpha ? 4 : 3
        for y in 0..<image.height {
            let src = image.row(y), dst = plane + y * Int(stride)
            if image.layout == .gray {
                for x in 0..<image.width { dst[x * 3] = src[x]; dst[x * 3 + 1] = src[x]; dst[x * 3 + 2] = src[x] }
            } else {
                dst.update(from: src, count: image.width * outChannels)
            }
        }
        if let icc, !icc.isEmpty {
            _ = icc.withUnsafeBytes { heif_image_set_raw_color_profile(heifImage, "prof", $0.baseAddress, $0.count) }
        }
        let options = heif_encoding_options_alloc()
        defer { heif_encoding_options_free(options) }
        options?.pointee.save_alpha_channel = alpha ? 1 : 0
        try HEIFDecoder.check(heif_context_encode_image(ctx, heifImage, encoder, options, nil))

        // Write to memory.
        let sink = ByteSink()
        var writer = heif_writer()
        writer.writer_api_version = 1
        writer.write = { _, data, size, userData in
            let sink = Unmanaged<ByteSink>.fromOpaque(userData!).takeUnretainedValue()
            if let data, size > 0 { sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size)) }
            return heif_error(code: heif_error_Ok, subcode: heif_suberror_Unspecified, message: nil)
        }
        try HEIFDecoder.check(heif_context_write(ctx, &writer, Unmanaged.passUnretained(sink).toOpaque()))
        return sink.bytes
    }

    private final class ByteSink {
        var bytes: [UInt8] = []
    }
}
