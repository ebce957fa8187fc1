import CJXL
import Foundation
import TesseraModel

/// A JPEG XL file opened with libjxl: its header, colour and metadata boxes first, then its
/// pixels — the first frame, composed on the canvas (an animation gives its first frame) —
/// at full size. Every libjxl call is in this file.
///
/// No smaller decode for thumbnails: libjxl 0.7 gives the DC pass (the 1/8 image) only as a
/// full-resolution flush, which costs more than the AC it skips (12 MP, one thread: DC in
/// 38 ms, then the flush 236 ms; the whole decode 269 ms). Decision 022.
///
/// Colour: pixels arrive in the colour space libjxl says they are in (`TARGET_DATA`). A
/// lossy (XYB) file whose original was an ICC profile is asked for sRGB (libjxl would give
/// linear light, which 8 bits cannot hold); otherwise the described space becomes an ICC
/// profile (converted by the pipeline) or, for PQ and HLG, the HDR tone map of HEIF sources
/// (16-bit samples, `DeepToEight`). Orientation is left to the pipeline (`keepOrientation`).
final class JXLDecoder {
    /// As stored (before orientation).
    let size: Size
    let hasAlpha: Bool
    let bitsPerSample: Int
    let orientation: Orientation
    let isAnimated: Bool
    /// VarDCT (XYB) coded: lossy, with a DC pass.
    let isLossy: Bool
    /// The file holds the data to give back the JPEG it was made from (a `jbrd` box).
    let canReconstructJPEG: Bool
    let iccProfile: [UInt8]?
    /// The colour of the pixels when it is PQ or HLG (tone-mapped to SDR while reading).
    let hdr: HEIFDecoder.NCLX?
    let exif: [UInt8]?
    let xmp: [UInt8]?
    private let preferSRGB: Bool
    private let bytes: UnsafeRawBufferPointer

    /// Metadata boxes larger than this are not read (left in the file).
    static let maxBoxBytes = 16 << 20

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        self.bytes = bytes
        try LazyCodecs.requireJXL()
        guard let dec = JxlDecoderCreate(nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create a decoder") }
        defer { JxlDecoderDestroy(dec) }
        let events = JXL_DEC_BASIC_INFO.rawValue | JXL_DEC_COLOR_ENCODING.rawValue | JXL_DEC_BOX.rawValue
        try Self.check(JxlDecoderSubscribeEvents(dec, Int32(events)), "subscribing to events")
        _ = JxlDecoderSetKeepOrientation(dec, 1)
        _ = JxlDecoderSetDecompressBoxes(dec, 1)
        try Self.check(JxlDecoderSetInput(dec, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count), "reading")
        JxlDecoderCloseInput(dec)

        var info = JxlBasicInfo()
        var gotInfo = false
        // Exif and XMP boxes, read through a fixed scratch buffer libjxl writes into.
        let scratchSize = 1 << 16
        let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: scratchSize)
        defer { scratch.deallocate() }
        var boxType = ""
        var bufferSet = false
        var box: [UInt8] = []
        var exifBox: [UInt8]?, xmpBox: [UInt8]?, jbrd = false
        var icc: [UInt8]?, hdrColour: HEIFDecoder.NCLX?, srgb = false
        /// Takes back the scratch buffer and what libjxl wrote into it (a box over the cap is dropped).
        func drain() {
            guard bufferSet else { return }
            bufferSet = false
            let written = scratchSize - JxlDecoderReleaseBoxBuffer(dec)
            guard !boxType.isEmpty else { return }
            if box.count + written > Self.maxBoxBytes {
                boxType = ""
                box = []
                return
            }
            box.append(contentsOf: UnsafeBufferPointer(start: scratch, count: written))
        }
        /// Ends the current box: what it held, when it is one we keep.
        func closeBox() {
            drain()
            guard !boxType.isEmpty else { return }
            if boxType == "Exif" { exifBox = box } else if boxType == "xml " { xmpBox = box }
            boxType = ""
            box = []
        }
        loop: while true {
            let status = JxlDecoderProcessInput(dec)
            switch status {
            case JXL_DEC_BASIC_INFO:
                try Self.check(JxlDecoderGetBasicInfo(dec, &info), "reading the header")
                gotInfo = true
                try limits.checkDimensions(Size(width: Int(info.xsize), height: Int(info.ysize)))
            case JXL_DEC_BOX:
                closeBox()
                var type: JxlBoxType = (0, 0, 0, 0)
                let got = withUnsafeMutableBytes(of: &type) {
                    JxlDecoderGetBoxType(dec, $0.baseAddress!.assumingMemoryBound(to: CChar.self), 1)
                }
                guard got == JXL_DEC_SUCCESS else { continue }
                let name = String(decoding: withUnsafeBytes(of: type) { Array($0) }, as: UTF8.self)
                if name == "jbrd" { jbrd = true }
                guard name == "Exif" || name == "xml " else { continue }
                boxType = name
                try Self.check(JxlDecoderSetBoxBuffer(dec, scratch, scratchSize), "reading a box")
                bufferSet = true
            case JXL_DEC_BOX_NEED_MORE_OUTPUT:
                drain()
                try Self.check(JxlDecoderSetBoxBuffer(dec, scratch, scratchSize), "reading a box")
                bufferSet = true
            case JXL_DEC_COLOR_ENCODING:
                closeBox()
                (icc, hdrColour, srgb) = try Self.colour(dec, lossy: info.uses_original_profile == 0)
                break loop
            case JXL_DEC_SUCCESS:
                break loop
            case JXL_DEC_NEED_MORE_INPUT:
                throw ImagingError(.truncated, "truncated JPEG XL (the data ends in its \(gotInfo ? "colour description" : "header"))")
            default:
                throw ImagingError(.corrupt, "corrupt JPEG XL (libjxl cannot read its header)")
            }
        }
        guard gotInfo else { throw ImagingError(.corrupt, "corrupt JPEG XL (no image header)") }
        size = Size(width: Int(info.xsize), height: Int(info.ysize))
        hasAlpha = info.alpha_bits > 0
        bitsPerSample = Int(info.bits_per_sample)
        orientation = Orientation(exif: Int(info.orientation.rawValue))
        isAnimated = info.have_animation != 0
        isLossy = info.uses_original_profile == 0
        canReconstructJPEG = jbrd
        iccProfile = icc
        hdr = hdrColour
        preferSRGB = srgb
        // The Exif box starts with the offset of the TIFF header (usually 0).
        if let e = exifBox, e.count > 4 {
            let offset = Int(e[0]) << 24 | Int(e[1]) << 16 | Int(e[2]) << 8 | Int(e[3])
            exif = offset < e.count - 4 ? Array(e[(4 + offset)...]) : nil
        } else {
            exif = nil
        }
        xmp = xmpBox
    }

    /// The colour of the decoded pixels: an ICC profile, or PQ/HLG, or sRGB asked for.
    private static func colour(_ dec: OpaquePointer, lossy: Bool) throws -> ([UInt8]?, HEIFDecoder.NCLX?, Bool) {
        var encoding = JxlColorEncoding()
        let described = JxlDecoderGetColorAsEncodedProfile(dec, nil, JXL_COLOR_PROFILE_TARGET_DATA, &encoding) == JXL_DEC_SUCCESS
        if described {
            let transfer = Int(encoding.transfer_function.rawValue)
            let nclx = HEIFDecoder.NCLX(
                primaries: Int(encoding.primaries.rawValue), transfer: transfer, matrix: 0, fullRange: true,
                red: (encoding.primaries_red_xy.0, encoding.primaries_red_xy.1),
                green: (encoding.primaries_green_xy.0, encoding.primaries_green_xy.1),
                blue: (encoding.primaries_blue_xy.0, encoding.primaries_blue_xy.1),
                white: (encoding.white_point_xy.0, encoding.white_point_xy.1))
            if encoding.color_space == JXL_COLOR_SPACE_GRAY {
                var gray = nclx
                gray.primaries = 1
                gray.red = (0.64, 0.33); gray.green = (0.30, 0.60); gray.blue = (0.15, 0.06)
                if gray.isHDR { return (nil, gray, false) }
            }
            if nclx.isHDR { return (nil, nclx, false) }
            // Linear light from a lossy file (an original described as linear): asked for sRGB.
            if lossy && encoding.transfer_function == JXL_TRANSFER_FUNCTION_LINEAR {
                try askForSRGB(dec)
                return (nil, nil, true)
            }
        } else if lossy {
            // The original was an ICC profile; libjxl would give linear sRGB.
            try askForSRGB(dec)
            return (nil, nil, true)
        }
        var iccSize = 0
        guard JxlDecoderGetICCProfileSize(dec, nil, JXL_COLOR_PROFILE_TARGET_DATA, &iccSize) == JXL_DEC_SUCCESS,
              iccSize > 0, iccSize < 16 << 20 else { return (nil, nil, false) }
        var profile = [UInt8](repeating: 0, count: iccSize)
        guard profile.withUnsafeMutableBufferPointer({
            JxlDecoderGetColorAsICCProfile(dec, nil, JXL_COLOR_PROFILE_TARGET_DATA, $0.baseAddress, iccSize)
        }) == JXL_DEC_SUCCESS else { return (nil, nil, false) }
        // sRGB needs no profile (the pipeline's own).
        if described, encoding.color_space == JXL_COLOR_SPACE_RGB, encoding.primaries == JXL_PRIMARIES_SRGB,
           encoding.white_point == JXL_WHITE_POINT_D65, encoding.transfer_function == JXL_TRANSFER_FUNCTION_SRGB {
            return (nil, nil, false)
        }
        if described, encoding.color_space == JXL_COLOR_SPACE_GRAY, encoding.transfer_function == JXL_TRANSFER_FUNCTION_SRGB {
            return (nil, nil, false)
        }
        return (profile, nil, false)
    }

    private static func askForSRGB(_ dec: OpaquePointer) throws {
        var srgb = JxlColorEncoding()
        JxlColorEncodingSetToSRGB(&srgb, 0)
        try check(JxlDecoderSetPreferredColorProfile(dec, &srgb), "choosing sRGB output")
    }

    /// The decoded first frame: RGB or RGBA, 8 bits — or, for HDR (`hdr` says how to read
    /// them), 16 bits a sample, little-endian, in a buffer twice as wide.
    func decode() throws -> PixelBuffer { try decode(lenient: false).image }

    /// The first frame; `lenient`: a file cut short gives what libjxl decoded of it (its
    /// progressive flush, gray where nothing came), with why it is not whole (`damage`).
    func decode(lenient: Bool) throws -> (image: PixelBuffer, damage: ImagingError?) {
        try LibraryOutput.capturing("libjxl") { try decodeFrame(lenient: lenient) }
    }

    private func decodeFrame(lenient: Bool) throws -> (image: PixelBuffer, damage: ImagingError?) {
        try LazyCodecs.requireJXL()
        guard let dec = JxlDecoderCreate(nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create a decoder") }
        defer { JxlDecoderDestroy(dec) }
        try Self.check(JxlDecoderSubscribeEvents(dec, Int32(JXL_DEC_COLOR_ENCODING.rawValue | JXL_DEC_FULL_IMAGE.rawValue)),
                       "subscribing to events")
        _ = JxlDecoderSetKeepOrientation(dec, 1)
        _ = JxlDecoderSetUnpremultiplyAlpha(dec, 1)
        try Self.check(JxlDecoderSetInput(dec, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count), "reading")
        // The input is left open: data that ends early asks for more (truncated, not
        // corrupt), and what decoded so far can be flushed (lenient).

        let channels = hasAlpha ? 4 : 3
        let deep = hdr != nil
        var format = JxlPixelFormat(num_channels: UInt32(channels), data_type: deep ? JXL_TYPE_UINT16 : JXL_TYPE_UINT8,
                                    endianness: JXL_LITTLE_ENDIAN, align: 0)
        let layout: PixelLayout = hasAlpha ? .rgba : .rgb
        let buffer = try PixelBuffer.make(width: deep ? size.width * 2 : size.width, height: size.height, layout: layout)
        var bufferSet = false
        while true {
            switch JxlDecoderProcessInput(dec) {
            case JXL_DEC_COLOR_ENCODING:
                if preferSRGB { try Self.askForSRGB(dec) }
            case JXL_DEC_NEED_IMAGE_OUT_BUFFER:
                var needed = 0
                try Self.check(JxlDecoderImageOutBufferSize(dec, &format, &needed), "sizing the image")
                guard buffer.stride * size.height == needed else {
                    throw ImagingError(.corrupt, "corrupt JPEG XL (its frame needs \(needed) bytes, not the \(size)'s)")
                }
                if lenient { buffer.base.initialize(repeating: deep ? 0x80 : 128, count: buffer.byteCount) }
                try Self.check(JxlDecoderSetImageOutBuffer(dec, &format, buffer.base, needed), "setting the image buffer")
                bufferSet = true
            case JXL_DEC_FULL_IMAGE:
                return (buffer, nil)
            case JXL_DEC_SUCCESS:
                throw ImagingError(.corrupt, "corrupt JPEG XL (no frame)")
            case JXL_DEC_NEED_MORE_INPUT:
                let cut = ImagingError(.truncated, "truncated JPEG XL (the data ends in its image)")
                guard lenient, bufferSet, JxlDecoderFlushImage(dec) == JXL_DEC_SUCCESS else { throw cut }
                return (buffer, cut)
            default:
                throw ImagingError(.corrupt, "corrupt JPEG XL (libjxl cannot decode its image)")
            }
        }
    }

    /// The JPEG a recompressed file was made from, byte for byte (nil: the file holds none).
    static func reconstructJPEG(_ jxl: UnsafeRawBufferPointer) throws -> [UInt8]? {
        try LazyCodecs.requireJXL()
        guard let dec = JxlDecoderCreate(nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create a decoder") }
        defer { JxlDecoderDestroy(dec) }
        try check(JxlDecoderSubscribeEvents(dec, Int32(JXL_DEC_JPEG_RECONSTRUCTION.rawValue | JXL_DEC_FULL_IMAGE.rawValue)),
                  "subscribing to events")
        try check(JxlDecoderSetInput(dec, jxl.baseAddress?.assumingMemoryBound(to: UInt8.self), jxl.count), "reading")
        JxlDecoderCloseInput(dec)
        var out = [UInt8](repeating: 0, count: max(1 << 16, jxl.count * 2))
        var filled = 0
        var reconstructing = false
        while true {
            let status = JxlDecoderProcessInput(dec)
            switch status {
            case JXL_DEC_JPEG_RECONSTRUCTION:
                reconstructing = true
                try out.withUnsafeMutableBufferPointer {
                    try check(JxlDecoderSetJPEGBuffer(dec, $0.baseAddress, $0.count), "reconstructing the JPEG")
                }
            case JXL_DEC_JPEG_NEED_MORE_OUTPUT:
                let remaining = JxlDecoderReleaseJPEGBuffer(dec)
                filled = out.count - remaining
                guard out.count < 1 << 30 else { throw ImagingError(.limitExceeded, "the reconstructed JPEG is over 1 GiB") }
                out += [UInt8](repeating: 0, count: out.count)
                try out.withUnsafeMutableBufferPointer {
                    try check(JxlDecoderSetJPEGBuffer(dec, $0.baseAddress! + filled, $0.count - filled), "reconstructing the JPEG")
                }
            case JXL_DEC_FULL_IMAGE, JXL_DEC_SUCCESS:
                guard reconstructing else { return nil }
                let remaining = JxlDecoderReleaseJPEGBuffer(dec)
                return Array(out.prefix(out.count - remaining))
            case JXL_DEC_NEED_IMAGE_OUT_BUFFER:
                // No JPEG reconstruction data: the pixels would be decoded.
                return nil
            case JXL_DEC_NEED_MORE_INPUT:
                throw ImagingError(.truncated, "truncated JPEG XL")
            default:
                throw ImagingError(.corrupt, "corrupt JPEG XL (its JPEG cannot be reconstructed)")
            }
        }
    }

    static func check(_ status: JxlDecoderStatus, _ what: String) throws {
        guard status == JXL_DEC_SUCCESS else { throw ImagingError(.corrupt, "corrupt JPEG XL (libjxl failed \(what))") }
    }
}

/// JPEG XL encoding with libjxl: pixels (lossy from a quality, or lossless) and JPEG
/// bitstreams recompressed losslessly. One thread (a worker runs one task per core).
enum JXLEncoder {
    struct Settings {
        /// 1...100, mapped to a Butteraugli distance as `cjxl -q` maps it.
        var quality: Int
        var lossless: Bool = false
        /// libjxl's effort, 1 (fastest) ... 9 (slowest, smallest).
        var effort: Int
        /// The codestream's orientation (EXIF values 1...8): outputs are upright (1); fixtures turn.
        var orientation = 1
    }

    /// cjxl's quality → distance: 100 is lossless (0), 90 is 1.0 (visually lossless),
    /// 30 and below steepen.
    static func distance(quality q: Int) -> Float {
        let q = Double(max(1, min(100, q)))
        if q >= 100 { return 0 }
        if q >= 30 { return Float(0.1 + (100 - q) * 0.09) }
        return Float(min(25, 6.4 + pow(2.5, (30 - q) / 5) / 6.25))
    }

    static func encode(_ image: PixelBuffer, _ s: Settings, icc: [UInt8]? = nil) throws -> [UInt8] {
        try LazyCodecs.requireJXL()
        guard let enc = JxlEncoderCreate(nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create an encoder") }
        defer { JxlEncoderDestroy(enc) }
        let lossless = s.lossless || s.quality >= 100
        let channels = image.layout == .gray ? 1 : image.layout == .rgb ? 3 : 4
        var info = JxlBasicInfo()
        JxlEncoderInitBasicInfo(&info)
        info.xsize = UInt32(image.width)
        info.ysize = UInt32(image.height)
        info.bits_per_sample = 8
        info.num_color_channels = channels == 1 ? 1 : 3
        info.uses_original_profile = lossless ? 1 : 0
        info.orientation = JxlOrientation(rawValue: UInt32(max(1, min(8, s.orientation))))
        if channels == 4 {
            info.num_extra_channels = 1
            info.alpha_bits = 8
        }
        try check(JxlEncoderSetBasicInfo(enc, &info), enc, "setting the header")
        if let icc, !icc.isEmpty {
            try icc.withUnsafeBufferPointer { try check(JxlEncoderSetICCProfile(enc, $0.baseAddress, $0.count), enc, "attaching the ICC profile") }
        } else {
            var srgb = JxlColorEncoding()
            JxlColorEncodingSetToSRGB(&srgb, channels == 1 ? 1 : 0)
            try check(JxlEncoderSetColorEncoding(enc, &srgb), enc, "setting sRGB")
        }
        guard let frame = JxlEncoderFrameSettingsCreate(enc, nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create frame settings") }
        _ = JxlEncoderFrameSettingsSetOption(frame, JXL_ENC_FRAME_SETTING_EFFORT, Int64(max(1, min(9, s.effort))))
        if lossless {
            try check(JxlEncoderSetFrameLossless(frame, 1), enc, "choosing lossless")
        } else {
            try check(JxlEncoderSetFrameDistance(frame, distance(quality: s.quality)), enc, "setting the distance")
        }
        var format = JxlPixelFormat(num_channels: UInt32(channels), data_type: JXL_TYPE_UINT8, endianness: JXL_NATIVE_ENDIAN,
                                    align: image.stride)
        try check(JxlEncoderAddImageFrame(frame, &format, image.base, image.stride * image.height), enc, "adding the image")
        JxlEncoderCloseInput(enc)
        return try output(enc)
    }

    /// A JPEG recompressed losslessly (its DCT coefficients coded again, with what gives back
    /// its bytes exactly), in a container; throws when libjxl cannot take this JPEG.
    static func recompress(jpeg: UnsafeRawBufferPointer, effort: Int) throws -> [UInt8] {
        try LazyCodecs.requireJXL()
        guard let enc = JxlEncoderCreate(nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create an encoder") }
        defer { JxlEncoderDestroy(enc) }
        try check(JxlEncoderUseContainer(enc, 1), enc, "using a container")
        try check(JxlEncoderStoreJPEGMetadata(enc, 1), enc, "keeping the JPEG reconstruction data")
        guard let frame = JxlEncoderFrameSettingsCreate(enc, nil) else { throw ImagingError(.outOfMemory, "libjxl: cannot create frame settings") }
        _ = JxlEncoderFrameSettingsSetOption(frame, JXL_ENC_FRAME_SETTING_EFFORT, Int64(max(1, min(9, effort))))
        guard JxlEncoderAddJPEGFrame(frame, jpeg.baseAddress?.assumingMemoryBound(to: UInt8.self), jpeg.count) == JXL_ENC_SUCCESS else {
            // A valid JPEG using what JPEG XL's JPEG mode cannot hold: libjxl's reason follows (LibraryOutput).
            throw ImagingError(.unsupportedFeature, "this JPEG cannot be recompressed losslessly to JPEG XL: libjxl cannot store it "
                               + "or what rebuilds its bytes; no output written")
        }
        JxlEncoderCloseInput(enc)
        return try output(enc)
    }

    private static func output(_ enc: OpaquePointer) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 1 << 16)
        var used = 0
        while true {
            var status = JXL_ENC_ERROR
            out.withUnsafeMutableBufferPointer { b in
                var next: UnsafeMutablePointer<UInt8>? = b.baseAddress! + used
                var avail = b.count - used
                status = JxlEncoderProcessOutput(enc, &next, &avail)
                used = b.count - avail
            }
            if status == JXL_ENC_SUCCESS { return Array(out.prefix(used)) }
            guard status == JXL_ENC_NEED_MORE_OUTPUT else {
                throw ImagingError(.encodeFailed, "JPEG XL encoding failed (libjxl error \(JxlEncoderGetError(enc).rawValue))")
            }
            out += [UInt8](repeating: 0, count: out.count)
        }
    }

    private static func check(_ status: JxlEncoderStatus, _ enc: OpaquePointer, _ what: String) throws {
        guard status == JXL_ENC_SUCCESS else {
            throw ImagingError(.encodeFailed, "JPEG XL encoding failed \(what) (libjxl error \(JxlEncoderGetError(enc).rawValue))")
        }
    }
}

/// JPEG → JPEG XL without loss: the JPEG's coefficients coded again (libjxl's JPEG
/// recompression: about a fifth smaller), with what gives back its bytes exactly. The
/// result is checked before it is returned: decoded back to a JPEG, byte for byte the
/// input — an original is never replaced by something that cannot give it back.
public enum LosslessJXL {
    /// libjxl's default effort (cjxl's): effort 9 saves under 1 % more at several times the time.
    public static let effort = 7

    /// - Parameter limits: the JPEG's pixels and the memory libjxl will hold for it (its DCT
    ///   coefficients, 2 bytes each, and as much again while coding), checked before libjxl sees it.
    public static func recompress(_ jpeg: UnsafeRawBufferPointer, effort: Int = LosslessJXL.effort,
                                  limits: Limits = Limits()) throws -> [UInt8] {
        guard jpeg.count > 0 else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        guard let format = ImageFormat.sniff(jpeg) else {
            throw ImagingError(.unsupportedFormat, FormatDetection.unsupportedMessage(jpeg))
        }
        guard format == .jpeg else {
            throw ImagingError(.unsupportedFeature, "only JPEGs recompress losslessly to JPEG XL (this is \(format.rawValue.uppercased()); "
                               + "render it with --format jxl --lossless instead)")
        }
        // The header first: a truncated or hostile JPEG fails here, with our reasons, not libjxl's.
        try limits.checkInput(bytes: jpeg.count)
        let header = try JPEGDecoder(bytes: jpeg, limits: limits, strict: false).header
        try limits.checkDimensions(Size(width: header.width, height: header.height))
        if limits.maxMemoryBytes > 0 {
            // Coefficients of every component at its sampling, 2 bytes each, twice (libjxl's
            // copy while it codes), the output and the check's reconstruction.
            let maxH = max(1, header.samplingFactors.map(\.h).max() ?? 1), maxV = max(1, header.samplingFactors.map(\.v).max() ?? 1)
            let samples = header.samplingFactors.reduce(0) { $0 + header.width * $1.h / maxH * (header.height * $1.v / maxV) }
            let need = samples * 2 * 2 + jpeg.count * 3 + (16 << 20)
            guard need <= limits.maxMemoryBytes else {
                throw ImagingError(.outOfMemory, "recompressing this \(header.width)x\(header.height) JPEG needs about \((need + (1 << 20) - 1) >> 20) MB, "
                                   + "over this worker's memory budget of \(limits.maxMemoryBytes >> 20) MB per task")
            }
        }
        // What JPEG XL cannot hold (its JPEG mode is 8-bit Huffman-coded gray or YCbCr/RGB).
        if header.arithmetic {
            throw ImagingError(.unsupportedFeature, "an arithmetic-coded JPEG cannot be recompressed losslessly to JPEG XL; no output written")
        }
        if header.components == 4 {
            throw ImagingError(.unsupportedFeature, "a CMYK JPEG (4 components) cannot be recompressed losslessly to JPEG XL; no output written")
        }
        // JPEG XL subsamples chroma by at most 2 each way (4:4:4, 4:2:2, 4:2:0, 4:4:0).
        let maxH = header.samplingFactors.map(\.h).max() ?? 1, maxV = header.samplingFactors.map(\.v).max() ?? 1
        if header.samplingFactors.contains(where: { $0.h < 1 || $0.v < 1 || maxH % $0.h != 0 || maxV % $0.v != 0 || maxH / $0.h > 2 || maxV / $0.v > 2 }) {
            let factors = header.samplingFactors.map { "\($0.h)x\($0.v)" }.joined(separator: ",")
            throw ImagingError(.unsupportedFeature, "its chroma subsampling (\(header.subsampling), sampling factors \(factors)) cannot be "
                               + "recompressed losslessly to JPEG XL, which keeps 4:4:4, 4:2:2, 4:2:0 and 4:4:0; no output written")
        }
        let jxl: [UInt8]
        do {
            jxl = try LibraryOutput.capturing("libjxl") { try JXLEncoder.recompress(jpeg: jpeg, effort: effort) }
        } catch let refusal as ImagingError where refusal.code == .unsupportedFeature {
            // libjxl refuses damaged JPEGs and sound ones it cannot hold alike: libjpeg tells
            // which (the whole entropy-coded data read, at 1/8 for speed).
            try checkWhole(jpeg, limits: limits)
            throw refusal
        }
        let back: [UInt8]?
        do {
            back = try LibraryOutput.capturing("libjxl") { try jxl.withUnsafeBytes { try JXLDecoder.reconstructJPEG($0) } }
        } catch var e as ImagingError where e.code == .corrupt || e.code == .truncated {
            // The JPEG XL was just made from a sound JPEG: what fails is what libjxl can hold of it.
            e.code = .unsupportedFeature
            e.reason = "libjxl cannot give this JPEG back from the JPEG XL it made of it: " + e.reason + "; no output written"
            throw e
        }
        guard let back, back.count == jpeg.count, back.withUnsafeBytes({ $0.elementsEqual(jpeg) }) else {
            throw ImagingError(.unsupportedFeature, "the JPEG XL made from this JPEG does not give back its bytes exactly "
                               + "(\(back.map { "\($0.count)" } ?? "no") bytes reconstructed of \(jpeg.count)): JPEG XL cannot hold it "
                               + "without loss; no output written")
        }
        return jxl
    }

    /// Fails typed (`truncated`, `corrupt`) when libjpeg, strict, cannot read all of `jpeg`.
    static func checkWhole(_ jpeg: UnsafeRawBufferPointer, limits: Limits) throws {
        let d = try JPEGDecoder(bytes: jpeg, limits: limits, strict: true)
        let layout: JPEGDecoder.OutputLayout = d.header.components == 1 ? .gray : d.header.components == 4 ? .cmyk : .rgb
        let size = try d.start(scaleEighths: 1, layout: layout)
        let rows = 16, stride = size.width * layout.channels
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * rows)
        defer { buffer.deallocate() }
        while try d.read(into: buffer, stride: stride, maxRows: rows) > 0 {}
        try d.finish()
    }

    /// The JPEG a recompressed JPEG XL holds, byte for byte (nil: it holds none).
    public static func reconstructJPEG(_ jxl: UnsafeRawBufferPointer) throws -> [UInt8]? {
        try JXLDecoder.reconstructJPEG(jxl)
    }
}
