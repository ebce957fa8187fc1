import CHeif
import Foundation

/// A HEIF file (HEIC, AVIF) opened with libheif: the primary image's size as displayed,
/// its metadata and colour, its thumbnails; decoding gives upright pixels (libheif applies
/// the `irot`/`imir`/`clap` transforms, which are authoritative: the EXIF orientation of
/// such files is then ignored, as libheif documents and libvips#671 learnt).
///
/// Every call into libheif is in this file; the context and handles are owned here and
/// released in `deinit`.
final class HEIFDecoder {
    /// The colour description of an `nclx` box.
    struct NCLX: Equatable {
        var primaries: Int
        var transfer: Int
        var matrix: Int
        var fullRange: Bool
        var red: (x: Double, y: Double), green: (x: Double, y: Double), blue: (x: Double, y: Double)
        var white: (x: Double, y: Double)

        static func == (a: NCLX, b: NCLX) -> Bool {
            a.primaries == b.primaries && a.transfer == b.transfer && a.matrix == b.matrix && a.fullRange == b.fullRange
        }

        /// ITU-T H.273 transfer characteristics 16 (SMPTE ST 2084, PQ) and 18 (HLG).
        var isPQ: Bool { transfer == 16 }
        var isHLG: Bool { transfer == 18 }
        var isHDR: Bool { isPQ || isHLG }
        /// BT.709 primaries and white (or unspecified): sRGB's.
        var isSRGBPrimaries: Bool { primaries == 1 || primaries == 2 }
    }

    struct Thumbnail {
        let id: UInt32
        let size: Size
    }

    let size: Size
    let hasAlpha: Bool
    let premultipliedAlpha: Bool
    let bitDepth: Int
    let iccProfile: [UInt8]?
    let nclx: NCLX?
    let exif: [UInt8]?
    let xmp: [UInt8]?
    let thumbnails: [Thumbnail]
    /// `avif` or `heif` (by the coding of the primary image).
    let isAVIF: Bool

    private let context: OpaquePointer
    private let primary: OpaquePointer

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        guard let ctx = heif_context_alloc() else { throw ImagingError(.outOfMemory, "libheif: cannot allocate a context") }
        context = ctx
        heif_context_set_maximum_image_size_limit(ctx, Int32(limits.maxDimension))
        heif_context_set_max_decoding_threads(ctx, 0)  // one task, one thread: the pool parallelises tasks
        var handle: OpaquePointer?
        do {
            try Self.check(heif_context_read_from_memory_without_copy(ctx, bytes.baseAddress, bytes.count, nil))
            try Self.check(heif_context_get_primary_image_handle(ctx, &handle))
        } catch {
            heif_context_free(ctx)
            throw error
        }
        guard let handle else {
            heif_context_free(ctx)
            throw ImagingError(.corrupt, "HEIF file without a primary image")
        }
        primary = handle
        size = Size(width: Int(heif_image_handle_get_width(handle)), height: Int(heif_image_handle_get_height(handle)))
        hasAlpha = heif_image_handle_has_alpha_channel(handle) != 0
        premultipliedAlpha = heif_image_handle_is_premultiplied_alpha(handle) != 0
        bitDepth = Int(max(8, heif_image_handle_get_luma_bits_per_pixel(handle)))

        // Colour: an ICC profile (prof, rICC) and/or an nclx box.
        var icc: [UInt8]?
        let iccSize = heif_image_handle_get_raw_color_profile_size(handle)
        if iccSize > 0, iccSize < 16 << 20 {
            var buffer = [UInt8](repeating: 0, count: iccSize)
            if heif_image_handle_get_raw_color_profile(handle, &buffer).code == heif_error_Ok { icc = buffer }
        }
        iccProfile = icc
        var nclxPointer: UnsafeMutablePointer<heif_color_profile_nclx>?
        if heif_image_handle_get_nclx_color_profile(handle, &nclxPointer).code == heif_error_Ok, let n = nclxPointer?.pointee {
            nclx = NCLX(primaries: Int(n.color_primaries.rawValue), transfer: Int(n.transfer_characteristics.rawValue),
                        matrix: Int(n.matrix_coefficients.rawValue), fullRange: n.full_range_flag != 0,
                        red: (Double(n.color_primary_red_x), Double(n.color_primary_red_y)),
                        green: (Double(n.color_primary_green_x), Double(n.color_primary_green_y)),
                        blue: (Double(n.color_primary_blue_x), Double(n.color_primary_blue_y)),
                        white: (Double(n.color_primary_white_x), Double(n.color_primary_white_y)))
            heif_nclx_color_profile_free(nclxPointer)
        } else {
            nclx = nil
        }

        exif = Self.metadata(handle, type: "Exif").map { block in
            // The Exif item starts with a 4-byte big-endian offset to the TIFF header.
            guard block.count > 4 else { return [] }
            let offset = Int(block[0]) << 24 | Int(block[1]) << 16 | Int(block[2]) << 8 | Int(block[3])
            return offset + 4 <= block.count ? Array(block[(4 + offset)...]) : []
        }.flatMap { $0.isEmpty ? nil : $0 }
        xmp = Self.metadata(handle, type: "mime")

        let count = Int(heif_image_handle_get_number_of_thumbnails(handle))
        var thumbs: [Thumbnail] = []
        if count > 0 && count < 64 {
            var ids = [heif_item_id](repeating: 0, count: count)
            let n = Int(heif_image_handle_get_list_of_thumbnail_IDs(handle, &ids, Int32(count)))
            for id in ids.prefix(n) {
                var t: OpaquePointer?
                guard heif_image_handle_get_thumbnail(handle, id, &t).code == heif_error_Ok, let t else { continue }
                thumbs.append(Thumbnail(id: id, size: Size(width: Int(heif_image_handle_get_width(t)),
                                                           height: Int(heif_image_handle_get_height(t)))))
                heif_image_handle_release(t)
            }
        }
        thumbnails = thumbs
        var brand = [UInt8](repeating: 0, count: 4)
        if bytes.count >= 12 { for i in 0..<4 { brand[i] = bytes[8 + i] } }
        let brandText = String(decoding: brand, as: UTF8.self)
        isAVIF = brandText == "avif" || brandText == "avis"
    }

    deinit {
        heif_image_handle_release(primary)
        heif_context_free(context)
    }

    /// The metadata block of `type` (`Exif`, or `mime` for XMP), if any.
    private static func metadata(_ handle: OpaquePointer, type: String) -> [UInt8]? {
        let n = Int(heif_image_handle_get_number_of_metadata_blocks(handle, type))
        guard n > 0, n < 64 else { return nil }
        var ids = [heif_item_id](repeating: 0, count: n)
        _ = heif_image_handle_get_list_of_metadata_block_IDs(handle, type, &ids, Int32(n))
        for id in ids {
            if type == "mime", let t = heif_image_handle_get_metadata_content_type(handle, id),
               String(cString: t) != "application/rdf+xml" { continue }
            let size = heif_image_handle_get_metadata_size(handle, id)
            guard size > 0, size < 16 << 20 else { continue }
            var block = [UInt8](repeating: 0, count: size)
            if heif_image_handle_get_metadata(handle, id, &block).code == heif_error_Ok { return block }
        }
        return nil
    }

    /// Decodes the primary image (or thumbnail `id`), upright, as interleaved RGB(A): 8 bits
    /// per channel, or 16 (little-endian) when the image has more than 8.
    func decode(thumbnail id: UInt32? = nil) throws -> HEIFImage {
        var handle = primary
        var thumb: OpaquePointer?
        if let id {
            try Self.check(heif_image_handle_get_thumbnail(primary, id, &thumb))
            guard let thumb else { throw ImagingError(.corrupt, "HEIF thumbnail \(id) has no handle") }
            handle = thumb
        }
        defer { if let thumb { heif_image_handle_release(thumb) } }
        let deep = heif_image_handle_get_luma_bits_per_pixel(handle) > 8
        let alpha = heif_image_handle_has_alpha_channel(handle) != 0
        let chroma: heif_chroma = deep ? (alpha ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RRGGBB_LE)
            : (alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
        let options = heif_decoding_options_alloc()
        defer { heif_decoding_options_free(options) }
        options?.pointee.strict_decoding = 0
        var image: OpaquePointer?
        try Self.check(heif_decode_image(handle, &image, heif_colorspace_RGB, chroma, options))
        guard let image else { throw ImagingError(.corrupt, "libheif returned no image") }
        var stride: Int32 = 0
        guard let plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride) else {
            heif_image_release(image)
            throw ImagingError(.corrupt, "libheif returned an image without an interleaved plane")
        }
        let w = Int(heif_image_get_width(image, heif_channel_interleaved))
        let h = Int(heif_image_get_height(image, heif_channel_interleaved))
        let bits = deep ? Int(heif_image_get_bits_per_pixel_range(image, heif_channel_interleaved)) : 8
        return HEIFImage(image: image, plane: plane, stride: Int(stride), size: Size(width: w, height: h),
                         channels: alpha ? 4 : 3, bits: bits)
    }

    /// Throws the typed error for a libheif failure.
    static func check(_ e: heif_error) throws {
        guard e.code != heif_error_Ok else { return }
        let message = e.message.map { String(cString: $0) } ?? "libheif error \(e.code.rawValue)"
        switch e.code {
        case heif_error_Invalid_input:
            if e.subcode == heif_suberror_End_of_data { throw ImagingError(.truncated, "truncated HEIF (\(message))") }
            if e.subcode == heif_suberror_Security_limit_exceeded { throw ImagingError(.limitExceeded, "HEIF: \(message)") }
            throw ImagingError(.corrupt, "corrupt HEIF (\(message))")
        case heif_error_Unsupported_filetype: throw ImagingError(.unsupportedFormat, "HEIF: \(message)")
        case heif_error_Unsupported_feature: throw ImagingError(.unsupportedFeature, "HEIF: \(message)")
        case heif_error_Memory_allocation_error: throw ImagingError(.outOfMemory, "HEIF: \(message)")
        default: throw ImagingError(.corrupt, "HEIF decoding failed (\(message))")
        }
    }

    /// Whether this build of libheif can decode HEVC (HEIC) and AV1 (AVIF), and encode AV1.
    static var canDecodeHEIC: Bool { heif_have_decoder_for_format(heif_compression_HEVC) != 0 }
    static var canDecodeAVIF: Bool { heif_have_decoder_for_format(heif_compression_AV1) != 0 }
    static var canEncodeAVIF: Bool { heif_have_encoder_for_format(heif_compression_AV1) != 0 }
    static var canEncodeHEIC: Bool { heif_have_encoder_for_format(heif_compression_HEVC) != 0 }
}

/// A decoded HEIF image: libheif's interleaved plane, read in place (no copy).
final class HEIFImage {
    private let image: OpaquePointer
    let plane: UnsafePointer<UInt8>
    let stride: Int
    let size: Size
    let channels: Int
    /// Bits per channel: 8, or 10/12 in 16-bit little-endian samples.
    let bits: Int

    init(image: OpaquePointer, plane: UnsafePointer<UInt8>, stride: Int, size: Size, channels: Int, bits: Int) {
        self.image = image
        self.plane = plane
        self.stride = stride
        self.size = size
        self.channels = channels
        self.bits = bits
    }

    deinit { heif_image_release(image) }
}
