import CHeif
import Foundation
import TesseraShim
import TesseraModel

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
    /// Apple's HDR gain map (an auxiliary image), its item and size.
    let gainMap: (id: heif_item_id, size: Size)?
    /// `avif` or `heif` (by the coding of the primary image).
    let isAVIF: Bool
    /// What the `hvcC`/`av1C` boxes say is stored (libheif 1.15 cannot say, and asked
    /// for 4:2:0 would subsample a 4:4:4 image).
    let coding: HEIFCodecConfigs.Summary
    /// Bytes per pixel of the primary image that decoding holds at its peak: the decoder's
    /// picture and libheif's copy of the planes (another when it rotates or mirrors), the
    /// interleaved RGB it converts to unless the planes are read directly, and the
    /// decoder's own buffers (dav1d keeps more than libde265). Within 20 % of the measured
    /// growth on 2-20 MP HEIC and AVIF (docs/decisions/012).
    var decodeBytesPerPixel: Double {
        let sampleBytes = bitDepth > 8 ? 2.0 : 1.0
        let samples = coding.samplesPerPixel + (hasAlpha ? 1 : 0)
        let copies = coding.transformed ? 3.0 : 2.0
        let planar = coding.allEightBit420 && !hasAlpha && (nclx.map { ($0.matrix == 5 || $0.matrix == 6) && $0.fullRange } ?? !isAVIF)
        let rgb = planar ? 0 : Double(hasAlpha ? 4 : 3)
        return sampleBytes * (samples * copies + rgb + (isAVIF ? 3 : 1))
    }

    private let context: OpaquePointer
    private let primary: OpaquePointer

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        try LazyCodecs.requireHEIF()
        guard let ctx = heif_context_alloc() else { throw ImagingError(.outOfMemory, "libheif: cannot allocate a context") }
        context = ctx
        coding = HEIFCodecConfigs.summary(bytes)
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
        gainMap = Self.auxiliary(of: handle, type: Self.appleGainMapType)
        var brand = [UInt8](repeating: 0, count: 4)
        if bytes.count >= 12 { for i in 0..<4 { brand[i] = bytes[8 + i] } }
        let brandText = String(decoding: brand, as: UTF8.self)
        isAVIF = brandText == "avif" || brandText == "avis"
    }

    deinit {
        heif_image_handle_release(primary)
        heif_context_free(context)
    }

    /// Apple's HDR gain map: an auxiliary image of the primary (iPhone HEICs since iOS 14.1).
    static let appleGainMapType = "urn:com:apple:photo:2020:aux:hdrgainmap"

    /// The first auxiliary image of `handle` whose type is `type`, with its size.
    private static func auxiliary(of handle: OpaquePointer, type: String) -> (id: heif_item_id, size: Size)? {
        let filter = Int32(LIBHEIF_AUX_IMAGE_FILTER_OMIT_ALPHA | LIBHEIF_AUX_IMAGE_FILTER_OMIT_DEPTH)
        let count = Int(heif_image_handle_get_number_of_auxiliary_images(handle, filter))
        guard count > 0, count < 64 else { return nil }
        var ids = [heif_item_id](repeating: 0, count: count)
        let n = Int(heif_image_handle_get_list_of_auxiliary_image_IDs(handle, filter, &ids, Int32(count)))
        for id in ids.prefix(n) {
            var aux: OpaquePointer?
            guard heif_image_handle_get_auxiliary_image_handle(handle, id, &aux).code == heif_error_Ok, let aux else { continue }
            defer { heif_image_handle_release(aux) }
            var name: UnsafePointer<CChar>?
            guard heif_image_handle_get_auxiliary_type(aux, &name).code == heif_error_Ok, let text = name.map({ String(cString: $0) }) else { continue }
            heif_image_handle_free_auxiliary_types(aux, &name)
            if text == type {
                return (id, Size(width: Int(heif_image_handle_get_width(aux)), height: Int(heif_image_handle_get_height(aux))))
            }
        }
        return nil
    }

    /// `handle` decoded by libheif (lenient: damage shows, it does not fail) in `colorspace`
    /// and `chroma`; the caller releases the image.
    private static func decodeImage(_ handle: OpaquePointer, _ colorspace: heif_colorspace, _ chroma: heif_chroma) throws -> OpaquePointer {
        let options = heif_decoding_options_alloc()
        defer { heif_decoding_options_free(options) }
        options?.pointee.strict_decoding = 0
        var image: OpaquePointer?
        try check(heif_decode_image(handle, &image, colorspace, chroma, options))
        guard let image else { throw ImagingError(.corrupt, "libheif returned no image") }
        return image
    }

    /// An auxiliary image decoded to 8-bit gray (a gain map), as libheif transforms it.
    func decodeAuxiliary(_ id: heif_item_id, limits: Limits) throws -> PixelBuffer {
        var aux: OpaquePointer?
        try Self.check(heif_image_handle_get_auxiliary_image_handle(primary, id, &aux))
        guard let aux else { throw ImagingError(.corrupt, "HEIF auxiliary image \(id) has no handle") }
        defer { heif_image_handle_release(aux) }
        try limits.checkDimensions(Size(width: Int(heif_image_handle_get_width(aux)), height: Int(heif_image_handle_get_height(aux))))
        let image = try Self.decodeImage(aux, heif_colorspace_monochrome, heif_chroma_monochrome)
        defer { heif_image_release(image) }
        var stride: Int32 = 0
        guard let plane = heif_image_get_plane_readonly(image, heif_channel_Y, &stride) else {
            throw ImagingError(.corrupt, "libheif returned an auxiliary image without a Y plane")
        }
        let w = Int(heif_image_get_width(image, heif_channel_Y)), h = Int(heif_image_get_height(image, heif_channel_Y))
        let bits = Int(heif_image_get_bits_per_pixel_range(image, heif_channel_Y))
        let out = try PixelBuffer.make(width: w, height: h, layout: .gray)
        for y in 0..<h {
            let src = plane + y * Int(stride), dst = out.row(y)
            if bits <= 8 {
                dst.update(from: src, count: w)
            } else {
                let raw = UnsafeRawPointer(src)
                for x in 0..<w {
                    let v = Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: x * 2, as: UInt16.self)))
                    dst[x] = UInt8(min(255, (v * 255 + (1 << (bits - 1))) / ((1 << bits) - 1)))
                }
            }
        }
        return out
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

    /// Decodes the primary image (or thumbnail `id`), upright. 8-bit opaque images come as
    /// their Y, Cb, Cr planes (converted to RGB row by row as they are read: no whole RGB
    /// copy, a third less memory); the others as interleaved RGB(A), 8 bits per channel or
    /// 16 (little-endian) when the image has more than 8.
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
        // HEIC from phones is 4:2:0 HEVC: asked for as such, libheif converts nothing.
        if !deep && !alpha && planarIsExact(handle), let planar = try decodePlanar(handle) { return planar }
        let chroma: heif_chroma = deep ? (alpha ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RRGGBB_LE)
            : (alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
        let image = try Self.decodeImage(handle, heif_colorspace_RGB, chroma)
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

    /// Whether reading the Y'CbCr planes ourselves gives what libheif's RGB conversion
    /// would: 8-bit 4:2:0 stored, and BT.601 full range (libheif 1.15's default) declared
    /// by the item's nclx box, or no box in an HEIC. libheif 1.15 resolves other matrices
    /// between the stream's VUI / sequence header and the box in ways that differ
    /// between its RGB and Y'CbCr outputs, so those images go through its RGB path.
    private func planarIsExact(_ handle: OpaquePointer) -> Bool {
        guard coding.allEightBit420 else { return false }
        var n: UnsafeMutablePointer<heif_color_profile_nclx>?
        guard heif_image_handle_get_nclx_color_profile(handle, &n).code == heif_error_Ok, let p = n?.pointee else { return !isAVIF }
        defer { heif_nclx_color_profile_free(n) }
        return (p.matrix_coefficients == heif_matrix_coefficients_ITU_R_BT_601_6
            || p.matrix_coefficients == heif_matrix_coefficients_ITU_R_BT_470_6_System_B_G) && p.full_range_flag != 0
    }

    /// The Y'CbCr 4:2:0 planes as stored (see `planarIsExact`), BT.601 full range; nil
    /// when libheif returns anything else (the caller asks libheif for RGB).
    private func decodePlanar(_ handle: OpaquePointer) throws -> HEIFImage? {
        let image = try Self.decodeImage(handle, heif_colorspace_YCbCr, heif_chroma_420)
        let space = heif_image_get_colorspace(image), chroma = heif_image_get_chroma_format(image)
        let shifts: (x: Int, y: Int)?
        switch chroma {
        case heif_chroma_420: shifts = (1, 1)
        case heif_chroma_422: shifts = (1, 0)
        case heif_chroma_444: shifts = (0, 0)
        case heif_chroma_monochrome: shifts = nil
        default:
            heif_image_release(image)
            return nil
        }
        guard space == heif_colorspace_YCbCr || space == heif_colorspace_monochrome,
              heif_image_get_bits_per_pixel_range(image, heif_channel_Y) == 8 else {
            heif_image_release(image)
            return nil
        }
        var yStride: Int32 = 0, cbStride: Int32 = 0, crStride: Int32 = 0
        guard let y = heif_image_get_plane_readonly(image, heif_channel_Y, &yStride) else {
            heif_image_release(image)
            return nil
        }
        var cb: UnsafePointer<UInt8>?, cr: UnsafePointer<UInt8>?
        if shifts != nil {
            cb = heif_image_get_plane_readonly(image, heif_channel_Cb, &cbStride)
            cr = heif_image_get_plane_readonly(image, heif_channel_Cr, &crStride)
            guard cb != nil, cr != nil, cbStride == crStride else {
                heif_image_release(image)
                return nil
            }
        }
        let w = Int(heif_image_get_width(image, heif_channel_Y)), h = Int(heif_image_get_height(image, heif_channel_Y))
        let planar = HEIFImage.Planar(y: y, cb: cb, cr: cr, yStride: Int(yStride), cStride: Int(cbStride),
                                      shifts: shifts ?? (0, 0), converter: YCbCrToRGB(kr: 0.299, kb: 0.114))
        return HEIFImage(image: image, planar: planar, size: Size(width: w, height: h))
    }

    /// Throws the typed error for a libheif failure.
    static func check(_ e: heif_error) throws {
        guard e.code != heif_error_Ok else { return }
        let message = e.message.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "libheif error \(e.code.rawValue)"
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
    static var canDecodeHEIC: Bool { LazyCodecs.hasHEIF && heif_have_decoder_for_format(heif_compression_HEVC) != 0 }
    static var canDecodeAVIF: Bool { LazyCodecs.hasHEIF && heif_have_decoder_for_format(heif_compression_AV1) != 0 }
    static var canEncodeAVIF: Bool { LazyCodecs.hasHEIF && heif_have_encoder_for_format(heif_compression_AV1) != 0 }
    static var canEncodeHEIC: Bool { LazyCodecs.hasHEIF && heif_have_encoder_for_format(heif_compression_HEVC) != 0 }
}

/// The codec configuration boxes (`hvcC`, `av1C`) in a HEIF file's item properties.
enum HEIFCodecConfigs {
    struct Summary {
        /// At least one configuration, and every one 8-bit 4:2:0.
        var allEightBit420 = false
        /// The most Y'CbCr samples per pixel any says (3 for 4:4:4, 1.5 for 4:2:0); 3 if none.
        var samplesPerPixel = 3.0
        /// Whether an `irot` or `imir` property is present (libheif makes a transformed copy).
        var transformed = false
    }

    static func summary(_ bytes: UnsafeRawBufferPointer) -> Summary {
        var configs = 0, all420 = true, samples = 0.0, transformed = false
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        }
        /// Calls `body(type, payloadStart, end)` for each box in start..<end.
        func boxes(_ start: Int, _ end: Int, _ body: (String, Int, Int) -> Void) {
            var at = start
            while at + 8 <= end {
                var size = u32(at), header = 8
                if size == 1, at + 16 <= end {
                    size = Int(truncatingIfNeeded: UInt64(u32(at + 8)) << 32 | UInt64(u32(at + 12)))
                    header = 16
                } else if size == 0 {
                    size = end - at
                }
                guard size >= header, size <= end - at else { return }
                let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
                body(type, at + header, at + size)
                at += size
            }
        }
        boxes(0, bytes.count) { type, start, end in
            guard type == "meta", end - start > 4 else { return }
            boxes(start + 4, end) { type, start, end in  // meta is a full box
                guard type == "iprp" else { return }
                boxes(start, end) { type, start, end in
                    guard type == "ipco" else { return }
                    boxes(start, end) { type, start, end in
                        switch type {
                        case "hvcC" where end - start > 18:
                            // chroma_format_idc in byte 16, bit_depth_luma_minus8 in byte 17 (low bits).
                            configs += 1
                            let chroma = bytes[start + 16] & 3
                            if chroma != 1 || bytes[start + 17] & 7 != 0 { all420 = false }
                            samples = max(samples, [1, 1.5, 2, 3][Int(chroma)])
                        case "av1C" where end - start >= 4:
                            // high_bitdepth, twelve_bit, monochrome, subsampling_x, subsampling_y.
                            configs += 1
                            let flags = bytes[start + 2]
                            if flags & 0b0111_1100 != 0b0000_1100 { all420 = false }
                            samples = max(samples, flags & 0b1_0000 != 0 ? 1 : flags & 0b1000 == 0 ? 3 : flags & 0b100 == 0 ? 2 : 1.5)
                        case "irot" where end - start >= 1:
                            if bytes[start] & 3 != 0 { transformed = true }
                        case "imir":
                            transformed = true
                        default: break
                        }
                    }
                }
            }
        }
        return Summary(allEightBit420: configs > 0 && all420, samplesPerPixel: configs > 0 ? samples : 3, transformed: transformed)
    }
}

/// A decoded HEIF image, read in place (no copy): libheif's interleaved RGB(A) plane, or
/// its Y'CbCr planes converted a row at a time.
final class HEIFImage {
    struct Planar {
        let y: UnsafePointer<UInt8>
        let cb: UnsafePointer<UInt8>?
        let cr: UnsafePointer<UInt8>?
        let yStride: Int
        let cStride: Int
        let shifts: (x: Int, y: Int)
        let converter: YCbCrToRGB
    }

    private let image: OpaquePointer
    let plane: UnsafePointer<UInt8>
    let stride: Int
    let size: Size
    let channels: Int
    /// Bits per channel: 8, or 10/12 in 16-bit little-endian samples.
    let bits: Int
    let planar: Planar?

    init(image: OpaquePointer, plane: UnsafePointer<UInt8>, stride: Int, size: Size, channels: Int, bits: Int) {
        self.image = image
        self.plane = plane
        self.stride = stride
        self.size = size
        self.channels = channels
        self.bits = bits
        planar = nil
    }

    init(image: OpaquePointer, planar: Planar, size: Size) {
        self.image = image
        self.planar = planar
        plane = planar.y
        stride = planar.yStride
        self.size = size
        channels = 3
        bits = 8
    }

    deinit { heif_image_release(image) }

    /// Row `y` as interleaved RGB into `dst` (planar images).
    func rgbRow(_ row: Int, into dst: UnsafeMutablePointer<UInt8>) {
        guard let p = planar else { return }
        let yRow = p.y + row * p.yStride
        guard let cb = p.cb, let cr = p.cr else {
            p.converter.gray(yRow, dst, count: size.width)
            return
        }
        let cRow = row >> p.shifts.y
        p.converter.convert(y: yRow, cb: cb + cRow * p.cStride, cr: cr + cRow * p.cStride, xShift: p.shifts.x,
                            into: dst, count: size.width)
    }
}

/// Full-range 8-bit Y'CbCr to R'G'B' with a matrix's Kr and Kb, in 16.16 fixed point
/// (the row kernel is C: `ts_ycbcr_row_to_rgb`). Chroma is taken from the co-sited
/// sample (nearest), as libheif does.
struct YCbCrToRGB {
    private let coefficients: (Int32, Int32, Int32, Int32)

    init(kr: Double, kb: Double) {
        let kg = 1 - kr - kb
        func fixed(_ v: Double) -> Int32 { Int32((v * 65536).rounded()) }
        coefficients = (fixed(2 * (1 - kr)), fixed(2 * (1 - kb) * kb / kg), fixed(2 * (1 - kr) * kr / kg), fixed(2 * (1 - kb)))
    }

    func convert(y: UnsafePointer<UInt8>, cb: UnsafePointer<UInt8>, cr: UnsafePointer<UInt8>, xShift: Int,
                 into dst: UnsafeMutablePointer<UInt8>, count: Int) {
        withUnsafeBytes(of: coefficients) { c in
            ts_ycbcr_row_to_rgb(y, cb, cr, Int32(xShift), dst, Int32(count), c.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
    }

    func gray(_ y: UnsafePointer<UInt8>, _ dst: UnsafeMutablePointer<UInt8>, count: Int) {
        for x in 0..<count {
            dst[x * 3] = y[x]
            dst[x * 3 + 1] = y[x]
            dst[x * 3 + 2] = y[x]
        }
    }
}
