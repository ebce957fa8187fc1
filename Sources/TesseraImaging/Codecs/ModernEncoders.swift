import CHeif
import CWebP
import Foundation
import TesseraModel

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

    /// What fixtures may add (tests and tools): the codec, orientation boxes, an nclx
    /// colour box, a thumbnail item, an Exif item.
    struct Extras {
        var hevc = false
        /// EXIF-style orientation 1...8 written as `irot`/`imir`.
        var orientation = 1
        /// nclx (primaries, transfer, matrix); nil: libheif's sRGB default.
        var nclx: (primaries: UInt16, transfer: UInt16, matrix: UInt16)?
        /// A thumbnail item fitting this box, if > 0.
        var thumbnailBox = 0
        /// A TIFF/EXIF payload for an `Exif` item.
        var exif: [UInt8]?
        /// A gray image coded as monochrome (4:0:0), as gain maps and depth maps are.
        var monochrome = false
    }

    static var isAvailable: Bool { HEIFDecoder.canEncodeAVIF }

    static func encode(_ image: PixelBuffer, _ s: Settings, icc: [UInt8]? = nil, extras: Extras = Extras()) throws -> [UInt8] {
        try LazyCodecs.requireHEIF()
        if extras.monochrome && image.layout == .gray {
            var heifImage: OpaquePointer?
            try HEIFDecoder.check(heif_image_create(Int32(image.width), Int32(image.height), heif_colorspace_monochrome,
                                                    heif_chroma_monochrome, &heifImage))
            guard let heifImage else { throw ImagingError(.outOfMemory, "libheif: cannot create an image") }
            defer { heif_image_release(heifImage) }
            try HEIFDecoder.check(heif_image_add_plane(heifImage, heif_channel_Y, Int32(image.width), Int32(image.height), 8))
            var stride: Int32 = 0
            guard let plane = heif_image_get_plane(heifImage, heif_channel_Y, &stride) else {
                throw ImagingError(.outOfMemory, "libheif: no plane")
            }
            for y in 0..<image.height { (plane + y * Int(stride)).update(from: image.row(y), count: image.width) }
            return try encode(heifImage, s, alpha: false, extras: extras)
        }
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
        if let n = extras.nclx { setNCLX(heifImage, n) }
        return try encode(heifImage, s, alpha: alpha, extras: extras)
    }

    /// An HDR AVIF from interleaved RGB samples (0...1023, `width` × `height` × 3) already in
    /// the transfer `nclx` names (PQ: 16, HLG: 18), full range: the Y'CbCr planes (BT.709
    /// matrix; 4:2:0, or 4:4:4 when the settings say) made here, encoded by libaom directly
    /// (`AVIFWriter`): Debian's libheif 1.15 picks the AV1 profile of a 10-bit image from its
    /// storage size (16 bits), asks aom for profile 2, and aom 3.6 aborts the process.
    static let hdrBits = 10

    static func encodeHDR(_ samples: UnsafeBufferPointer<UInt16>, width: Int, height: Int, _ s: Settings,
                          nclx: (primaries: UInt16, transfer: UInt16, matrix: UInt16)) throws -> [UInt8] {
        precondition(samples.count == width * height * 3)
        let full = s.subsampling == .s444 || (s.subsampling == .auto && s.quality >= 90)
        let cw = full ? width : (width + 1) / 2, ch = full ? height : (height + 1) / 2
        var y = [UInt16](repeating: 0, count: width * height)
        var cb = [UInt16](repeating: 512, count: cw * ch), cr = [UInt16](repeating: 512, count: cw * ch)
        func code(_ v: Double) -> UInt16 { UInt16(min(1023, max(0, v.rounded()))) }
        // BT.709: Y' = .2126 R' + .7152 G' + .0722 B'; Cb, Cr full range around 512.
        for i in 0..<(width * height) {
            let r = Double(samples[i * 3]), g = Double(samples[i * 3 + 1]), b = Double(samples[i * 3 + 2])
            y[i] = code(0.2126 * r + 0.7152 * g + 0.0722 * b)
        }
        let step = full ? 1 : 2
        for cy in 0..<ch {
            for cx in 0..<cw {
                var r = 0.0, g = 0.0, b = 0.0, n = 0.0
                for py in (cy * step)..<min(height, cy * step + step) {
                    for px in (cx * step)..<min(width, cx * step + step) {
                        let i = (py * width + px) * 3
                        r += Double(samples[i]); g += Double(samples[i + 1]); b += Double(samples[i + 2]); n += 1
                    }
                }
                r /= n; g /= n; b /= n
                let luma = 0.2126 * r + 0.7152 * g + 0.0722 * b
                cb[cy * cw + cx] = code((b - luma) / 1.8556 + 512)
                cr[cy * cw + cx] = code((r - luma) / 1.5748 + 512)
            }
        }
        return try AVIFWriter.encode(y: y, cb: cb, cr: cr, width: width, height: height, subsampled: !full,
                                     quality: s.quality, speed: s.speed, nclx: nclx)
    }

    /// An nclx colour box (full range) on the image.
    private static func setNCLX(_ heifImage: OpaquePointer, _ n: (primaries: UInt16, transfer: UInt16, matrix: UInt16)) {
        guard let profile = heif_nclx_color_profile_alloc() else { return }
        defer { heif_nclx_color_profile_free(profile) }
        _ = heif_nclx_color_profile_set_color_primaries(profile, n.primaries)
        _ = heif_nclx_color_profile_set_transfer_characteristics(profile, n.transfer)
        _ = heif_nclx_color_profile_set_matrix_coefficients(profile, n.matrix)
        profile.pointee.full_range_flag = 1
        _ = heif_image_set_nclx_color_profile(heifImage, profile)
    }

    /// Encodes a filled libheif image as the primary item, with `extras`' thumbnail and EXIF.
    private static func encode(_ heifImage: OpaquePointer, _ s: Settings, alpha: Bool, extras: Extras) throws -> [UInt8] {
        let format = extras.hevc ? heif_compression_HEVC : heif_compression_AV1
        guard heif_have_encoder_for_format(format) != 0 else {
            throw ImagingError(.unsupportedFeature, extras.hevc ? "this build of libheif has no HEVC encoder (x265)"
                                                                : "this build of libheif has no AV1 encoder (aom)")
        }
        guard let ctx = heif_context_alloc() else { throw ImagingError(.outOfMemory, "libheif: cannot allocate a context") }
        defer { heif_context_free(ctx) }
        var encoder: OpaquePointer?
        try HEIFDecoder.check(heif_context_get_encoder_for_format(ctx, format, &encoder))
        guard let encoder else { throw ImagingError(.unsupportedFeature, "no AV1 encoder") }
        defer { heif_encoder_release(encoder) }
        try HEIFDecoder.check(heif_encoder_set_lossy_quality(encoder, Int32(max(1, min(100, s.quality)))))
        if !extras.hevc {
            _ = heif_encoder_set_parameter_integer(encoder, "speed", Int32(max(0, min(9, s.speed))))
            _ = heif_encoder_set_parameter_integer(encoder, "threads", 1)
        }
        let chroma: String
        switch s.subsampling {
        case .auto: chroma = s.quality >= 90 ? "444" : "420"
        case .s420: chroma = "420"
        case .s422: chroma = "422"
        case .s444: chroma = "444"
        }
        _ = heif_encoder_set_parameter_string(encoder, "chroma", chroma)

        let options = heif_encoding_options_alloc()
        defer { heif_encoding_options_free(options) }
        options?.pointee.save_alpha_channel = alpha ? 1 : 0
        options?.pointee.image_orientation = heif_orientation(rawValue: UInt32(max(1, min(8, extras.orientation))))
        var primaryHandle: OpaquePointer?
        try HEIFDecoder.check(heif_context_encode_image(ctx, heifImage, encoder, options, &primaryHandle))
        defer { if let primaryHandle { heif_image_handle_release(primaryHandle) } }
        if extras.thumbnailBox > 0, let primaryHandle {
            var thumb: OpaquePointer?
            try HEIFDecoder.check(heif_context_encode_thumbnail(ctx, heifImage, primaryHandle, encoder, options,
                                                                Int32(extras.thumbnailBox), &thumb))
            if let thumb { heif_image_handle_release(thumb) }
        }
        if let exif = extras.exif, let primaryHandle {
            try exif.withUnsafeBytes { try HEIFDecoder.check(heif_context_add_exif_metadata(ctx, primaryHandle, $0.baseAddress, Int32($0.count))) }
        }

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

/// WebP metadata chunks without re-encoding (WebPMux): EXIF and XMP removed, the ICC
/// profile kept unless asked, a minimal EXIF with the Orientation (and Copyright) tag
/// kept so the image still displays as before.
enum WebPChunks {
    static func strip(_ input: [UInt8], keepICC: Bool, keepCopyright: Bool) throws -> StripResult {
        try input.withUnsafeBufferPointer { buffer in
            var data = WebPData(bytes: buffer.baseAddress, size: buffer.count)
            guard let mux = WebPMuxCreateInternal(&data, 1, WEBP_MUX_ABI_VERSION) else {
                throw ImagingError(.corrupt, "corrupt WebP (its chunks do not parse)")
            }
            defer { WebPMuxDelete(mux) }
            func chunk(_ fourcc: String) -> [UInt8]? {
                var d = WebPData()
                guard WebPMuxGetChunk(mux, fourcc, &d) == WEBP_MUX_OK, let p = d.bytes else { return nil }
                return Array(UnsafeBufferPointer(start: p, count: d.size))
            }
            var removed: [String] = []
            var orientation = 1
            var copyright: String?
            if let exif = chunk("EXIF") {
                if let s = Exif.read(exif) {
                    orientation = s.orientation.map { (1...8).contains($0) ? $0 : 1 } ?? 1
                    copyright = keepCopyright ? s.copyright : nil
                }
                _ = WebPMuxDeleteChunk(mux, "EXIF")
                removed.append("EXIF")
                if orientation != 1 || copyright != nil {
                    let payload = Array(Exif.build(orientation: orientation != 1 ? orientation : nil, copyright: copyright).dropFirst(6))
                    try payload.withUnsafeBufferPointer { p in
                        var d = WebPData(bytes: p.baseAddress, size: p.count)
                        guard WebPMuxSetChunk(mux, "EXIF", &d, 1) == WEBP_MUX_OK else {
                            throw ImagingError(.transformFailed, "WebP: cannot write the orientation")
                        }
                    }
                }
            }
            if chunk("XMP ") != nil {
                _ = WebPMuxDeleteChunk(mux, "XMP ")
                removed.append("XMP")
            }
            if !keepICC, chunk("ICCP") != nil {
                _ = WebPMuxDeleteChunk(mux, "ICCP")
                removed.append("ICCP")
            }
            var out = WebPData()
            guard WebPMuxAssemble(mux, &out) == WEBP_MUX_OK, let bytes = out.bytes else {
                throw ImagingError(.transformFailed, "WebP: cannot reassemble the file")
            }
            defer { WebPDataClear(&out) }
            return StripResult(bytes: Array(UnsafeBufferPointer(start: bytes, count: out.size)), format: .webp,
                               removed: removed, orientation: orientation, transformed: false)
        }
    }
}
