import CJPEG
import TesseraModel

/// One source opened for decoding: header and metadata first, then rows, in one
/// of three layouts (gray, RGB, RGBA). CMYK JPEGs become RGB here (through their
/// ICC profile when they carry one), so nothing downstream sees CMYK.
final class SourceDecoder {
    let format: ImageFormat
    private(set) var storedSize: Size
    private(set) var exif: ExifSummary?
    private(set) var iccProfile: [UInt8]?
    private var orientationOverride: Orientation?
    private(set) var jpegHeader: JPEGHeader?
    private(set) var pngHeader: PNGHeader?
    /// XMP packet (HEIF `mime` item, WebP `XMP ` chunk), for `keep` rules and inspect.
    private(set) var xmp: [UInt8]?
    /// Pixels per inch the file declares (TIFF, JPEG JFIF, PNG pHYs), as stored (not oriented).
    private(set) var density: PixelDensity?

    /// The one decoder backend of the source's format.
    private enum Backend {
        case jpeg(JPEGDecoder), png(PNGDecoder), webp(WebPDecoder), heif(HEIFDecoder), tiff(TIFFDecoder), gif(GIFDecoder)
        case video(VideoDecoder), jxl(JXLDecoder)
    }

    private let backend: Backend
    private var jpeg: JPEGDecoder? { if case .jpeg(let d) = backend { d } else { nil } }
    private var png: PNGDecoder? { if case .png(let d) = backend { d } else { nil } }
    private var webp: WebPDecoder? { if case .webp(let d) = backend { d } else { nil } }
    private var heif: HEIFDecoder? { if case .heif(let d) = backend { d } else { nil } }
    private var tiff: TIFFDecoder? { if case .tiff(let d) = backend { d } else { nil } }
    private var gif: GIFDecoder? { if case .gif(let d) = backend { d } else { nil } }
    private var video: VideoDecoder? { if case .video(let d) = backend { d } else { nil } }
    private var jxl: JXLDecoder? { if case .jxl(let d) = backend { d } else { nil } }
    /// A progressive JPEG (libjpeg keeps a whole-image coefficient buffer for it).
    /// A progressive or multi-scan JPEG's whole-image coefficient arrays (nil otherwise).
    var jpegCoefficientBytes: Int? { jpeg?.header.wholeImageCoefficientBytes }
    /// A video's poster: when it was, and whether keyframes alone were decoded to find it.
    private(set) var posterTime: Double?
    /// What the record should say about the poster (a time asked for outside the video).
    private(set) var posterNote: String?
    private(set) var posterFromKeyframes = false
    /// HEIF: the thumbnail item decoded instead of the primary image, when one covers every output.
    private(set) var heifThumbnail: UInt32?
    /// What decoding a HEIF/AVIF holds per pixel at its peak (nil for other formats).
    var heifDecodeBytesPerPixel: Double? { heif?.decodeBytesPerPixel }
    /// A HEIF's Apple HDR gain map, checked (nil without one).
    var heifGainMap: UltraHDR.Found? { heif.flatMap(AppleHDR.locate) }
    private var heifImage: HEIFImage?
    private var deep: DeepToEight?
    /// An HDR source read with `hdrGain`: each batch's gain-map rows (one byte a pixel,
    /// `decodedSize.width` a row), beside its SDR rows.
    var hdrGain = false
    private(set) var gainBatch: UnsafeMutablePointer<UInt8>?
    private var gainBatchRows = 0
    /// The gain map's metadata when the rows carry one (an HDR source read with `hdrGain`).
    var hdrGainMetadata: GainMapMetadata? { hdrGain && deep?.isHDR == true ? deep?.gainMetadata : nil }
    /// Whether the source is HDR (known from its colour box before decoding).
    var isHDR: Bool { heif?.nclx?.isHDR ?? (jxl?.hdr != nil) }
    private let bytes: UnsafeRawBufferPointer
    /// Whether the 1/8 image came from the DC scans alone (progressive JPEG).
    private(set) var usedDCScans = false
    private let options: RenderOptions
    private(set) var decodedSize = Size(width: 0, height: 0)
    private(set) var channels = 0
    private(set) var scaleEighths = 8
    private var rowsRead = 0

    // CMYK conversion
    private var cmyk = false
    private var cmykConverter: CMYKConverter?
    private var scratch: UnsafeMutablePointer<UInt8>?
    private var scratchRows = 0
    // Interlaced PNG: decoded whole, then served row by row.
    private var whole: PixelBuffer?
    // A JPEG XL's 16-bit (HDR) samples, decoded whole, converted row by row.
    private var deepWhole: PixelBuffer?

    var orientation: Orientation { orientationOverride ?? Orientation(exif: exif?.orientation ?? 1) }

    /// Stands in for `main` (an EXIF thumbnail): its orientation, ICC profile and EXIF apply.
    func inherit(from main: SourceDecoder) {
        orientationOverride = main.orientation
        iccProfile = main.iccProfile
        exif = main.exif
    }

    init(bytes: UnsafeRawBufferPointer, options: RenderOptions) throws {
        self.options = options
        self.bytes = bytes
        guard bytes.count > 0 else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        try options.limits.checkInput(bytes: bytes.count)
        guard let format = ImageFormat.sniff(bytes) else {
            throw ImagingError(.unsupportedFormat, FormatDetection.unsupportedMessage(bytes))
        }
        self.format = format
        if options.frame != 0, format != .gif {
            throw ImagingError(.invalidRecipe, "frame \(options.frame) of a \(format.rawValue.uppercased()) (one frame: 0)")
        }
        if options.page != 0, format != .tiff {
            throw ImagingError(.invalidRecipe, "page \(options.page) of a \(format.rawValue.uppercased()) (one page: 0)")
        }
        switch format {
        case .jpeg:
            let d = try JPEGDecoder(bytes: bytes, limits: options.limits, strict: options.strict)
            backend = .jpeg(d)
            jpegHeader = d.header
            storedSize = Size(width: d.header.width, height: d.header.height)
            exif = d.exif.flatMap(Exif.read)
            iccProfile = try d.iccProfile()
            density = d.density
        case .png:
            let d = try PNGDecoder(bytes: bytes, limits: options.limits)
            backend = .png(d)
            pngHeader = d.header
            storedSize = Size(width: d.header.width, height: d.header.height)
            exif = d.header.exif.flatMap(Exif.read)
            iccProfile = d.header.iccProfile
            density = d.header.density
        case .webp:
            let d = try WebPDecoder(bytes: bytes, limits: options.limits)
            backend = .webp(d)
            storedSize = d.size
            exif = d.exif.flatMap(Exif.read)
            iccProfile = d.iccProfile
            xmp = d.xmp
        case .tiff:
            let d = try TIFFDecoder(bytes: bytes, limits: options.limits, page: options.page,
                                    releaseReads: options.inputIsFileMap, strict: options.strict)
            backend = .tiff(d)
            storedSize = d.fullSize
            // The Orientation tag plays EXIF's part; the ICC profile is tag 34675.
            orientationOverride = d.orientation
            iccProfile = d.iccProfile
            density = d.density
        case .gif:
            let d = try GIFDecoder(bytes: bytes, limits: options.limits)
            backend = .gif(d)
            storedSize = d.size
        case .jxl:
            let d = try JXLDecoder(bytes: bytes, limits: options.limits)
            backend = .jxl(d)
            storedSize = d.size
            // The codestream's orientation is authoritative (EXIF's is ignored, as libjxl does).
            orientationOverride = d.orientation
            exif = d.exif.flatMap(Exif.read)
            xmp = d.xmp
            iccProfile = d.iccProfile
        case .video:
            let d = try VideoDecoder(bytes: bytes, limits: options.limits, seconds: options.decodeSeconds, strict: options.strict)
            backend = .video(d)
            storedSize = d.size
            // The display matrix plays EXIF's part; the colour description becomes a profile
            // where its primaries are not sRGB's (HDR is tone-mapped when frames convert).
            orientationOverride = d.orientation
            iccProfile = d.isHDR ? nil : Self.profile(for: d.nclx)
        case .heif, .avif:
            let d = try HEIFDecoder(bytes: bytes, limits: options.limits)
            backend = .heif(d)
            storedSize = d.size
            exif = d.exif.flatMap(Exif.read)
            xmp = d.xmp
            // The HEIF transforms are applied by libheif and are authoritative: EXIF orientation is ignored.
            orientationOverride = .up
            iccProfile = d.iccProfile ?? d.nclx.flatMap(Self.profile(for:))
            guard format == .avif ? HEIFDecoder.canDecodeAVIF : HEIFDecoder.canDecodeHEIC else {
                throw ImagingError(.unsupportedFeature, "this build of libheif cannot decode \(format == .avif ? "AV1 (AVIF)" : "HEVC (HEIC)")")
            }
        }
        // A pyramidal TIFF's pixel count is checked on the level decoded (Renderer), its sides here.
        if tiff?.levels.isEmpty == false {
            var sides = options.limits
            sides.maxPixels = Int.max
            try sides.checkDimensions(storedSize)
        } else {
            try options.limits.checkDimensions(storedSize)
        }
    }

    /// An ICC profile standing for an nclx colour box that is not sRGB (other primaries,
    /// or a linear/gamma transfer); nil for sRGB, for HDR transfers (tone-mapped straight
    /// to sRGB when decoded) and for what cannot be described.
    static func profile(for nclx: HEIFDecoder.NCLX) -> [UInt8]? {
        guard !nclx.isHDR else { return nil }
        let transfer: ICCProfiles.Transfer
        switch nclx.transfer {
        case 8: transfer = .linear
        case 4: transfer = .gamma(2.2)
        case 5: transfer = .gamma(2.8)
        default: transfer = .sRGB  // 1, 6, 13, 14, 15 and unspecified: the sRGB/BT.709 family
        }
        if nclx.isSRGBPrimaries, case .sRGB = transfer { return nil }
        guard nclx.red.y > 0, nclx.green.y > 0, nclx.blue.y > 0, nclx.white.y > 0 else { return nil }
        return ICCProfiles.rgb(name: "nclx \(nclx.primaries)/\(nclx.transfer)", red: nclx.red, green: nclx.green,
                               blue: nclx.blue, white: nclx.white, transfer: transfer)
    }

    /// HEIF: decode thumbnail `id` (of `size`) instead of the primary image; the stored
    /// size stays the primary's (the thumbnail is a smaller decode of the same image).
    func useHEIFThumbnail(_ id: UInt32, size: Size) {
        heifThumbnail = id
        heifThumbnailSize = size
    }

    private var heifThumbnailSize: Size?

    /// Bits per channel of the stored image.
    var bitDepth: Int { heif?.bitDepth ?? jxl?.bitsPerSample ?? tiff?.bitsPerSample ?? pngHeader?.bitDepth ?? jpegHeader?.precision ?? 8 }

    /// Whether the image declares transparency.
    var declaresAlpha: Bool {
        heif?.hasAlpha ?? jxl?.hasAlpha ?? webp?.hasAlpha ?? tiff?.hasAlpha ?? gif?.mayHaveAlpha ?? pngHeader?.hasTransparency ?? false
    }

    /// What a video's decoder holds: its reference frames at the coded size (YUV 4:2:0 at 8 or
    /// 16 bits), a few of them.
    var videoFrameBytes: Int? {
        guard let video else { return nil }
        return storedSize.width * storedSize.height * 3 / 2 * (video.bits > 8 ? 2 : 1) * 6
    }

    /// How the image is coded, for `inspect`: `lossy`, `lossless`, `animated lossy`, `HEVC`, `AV1`, ...
    var codingDescription: String? {
        if let video {
            var parts = [video.codec, "\(video.bits)-bit \(video.pixelFormat)"]
            if let d = video.duration { parts.append(String(format: "%.2f s", d)) }
            if video.fps > 0 { parts.append(String(format: "%.3g fps", video.fps)) }
            if video.frameCount > 0 { parts.append("\(video.frameCount) frames") }
            if video.rotation != 0 { parts.append("rotated \(video.rotation)°") }
            let n = video.nclx
            parts.append("colour \(n.primaries)/\(n.transfer)/\(n.matrix)\(n.fullRange ? " full" : " limited")"
                         + (n.isPQ ? " (PQ)" : n.isHLG ? " (HLG)" : ""))
            return parts.joined(separator: ", ")
        }
        if let webp { return (webp.isAnimated ? "animated " : "") + webp.compression }
        if let jxl {
            var parts = [jxl.isAnimated ? "animated" : "still", jxl.isLossy ? "lossy (VarDCT)" : "lossless or modular",
                         "\(jxl.bitsPerSample)-bit"]
            if let h = jxl.hdr { parts.append(h.isPQ ? "PQ" : "HLG") }
            if jxl.canReconstructJPEG { parts.append("JPEG reconstructible") }
            return parts.joined(separator: ", ")
        }
        if let tiff { return tiff.description }
        if let gif {
            return gif.frameCount > 1 ? "animated, \(gif.frameCount) frames, "
                + (gif.loopCount.map { $0 == 0 ? "looping forever" : "\($0) loops" } ?? "played once")
                + ", \(Double(gif.scan.duration_cs) / 100) s" : "still"
        }
        if let heif {
            var parts = [heif.isAVIF ? "AV1" : "HEVC", "\(heif.bitDepth)-bit"]
            if let n = heif.nclx {
                parts.append("nclx \(n.primaries)/\(n.transfer)/\(n.matrix)\(n.fullRange ? " full" : " limited")"
                             + (n.isPQ ? " (PQ)" : n.isHLG ? " (HLG)" : ""))
            }
            if !heif.thumbnails.isEmpty { parts.append("thumbnails " + heif.thumbnails.map { "\($0.size)" }.joined(separator: ", ")) }
            return parts.joined(separator: ", ")
        }
        return nil
    }

    /// Top-level structure for `inspect` (WebP: which metadata chunks; HEIF: items found).
    var structure: [String] {
        var s: [String] = []
        if let video { s.append("container \(video.container)") }
        if let webp {
            s.append(webp.isAnimated ? "ANIM" : webp.compression == "lossless" ? "VP8L" : "VP8")
            if webp.iccProfile != nil { s.append("ICCP") }
            if webp.exif != nil { s.append("EXIF") }
            if webp.xmp != nil { s.append("XMP ") }
        }
        if let jxl {
            s.append(jxl.canReconstructJPEG ? "container, jbrd" : "codestream")
            if jxl.iccProfile != nil { s.append("ICC profile") }
            if jxl.exif != nil { s.append("Exif") }
            if jxl.xmp != nil { s.append("xml (XMP)") }
        }
        if let tiff {
            s.append(tiff.pagesDescription
                     + (tiff.pageCount > 1 ? ": " + tiff.pageSizes.prefix(16).map { "\($0)" }.joined(separator: ", ") : ""))
            if !tiff.levels.isEmpty { s.append("levels " + tiff.levels.map { "\($0)" }.joined(separator: ", ")) }
            if tiff.iccProfile != nil { s.append("ICC profile") }
        }
        if let gif {
            s.append("\(gif.frameCount) frame\(gif.frameCount == 1 ? "" : "s")")
            if gif.scan.interlaced != 0 { s.append("interlaced") }
            if gif.scan.transparency != 0 { s.append("transparency") }
            if gif.scan.unreadable_after != 0 { s.append("unreadable after frame \(gif.frameCount - 1)") }
        }
        if let heif {
            s.append("primary")
            if heif.hasAlpha { s.append("auxC alpha") }
            if !heif.thumbnails.isEmpty { s.append("thmb ×\(heif.thumbnails.count)") }
            if heif.iccProfile != nil { s.append("colr prof") }
            if heif.nclx != nil { s.append("colr nclx") }
            if heif.exif != nil { s.append("Exif") }
            if heif.xmp != nil { s.append("mime (XMP)") }
        }
        return s
    }

    /// The GIF frame decoded (frames count from 0), for the record's decode path.
    var gifFrame: Int? { gif != nil ? options.frame : nil }

    /// A TIFF page's reduced-resolution levels (largest first), for the renderer to choose from.
    var tiffLevels: [Size] { tiff?.levels ?? [] }
    /// The reduced level read, when one was chosen (1 is the largest).
    var tiffLevel: Int? { tiff?.level }
    /// Reads reduced level `n` instead of the full image (false: not usable, the full image is read).
    func useTIFFLevel(_ n: Int) -> Bool { tiff?.useLevel(n) ?? false }

    /// What the TIFF decoder holds while reading (one band), for tile planning.
    var tiffBandMemory: Int? { tiff?.bandMemory }

    /// HEIF thumbnails: (item, size as displayed).
    var heifThumbnails: [(id: UInt32, size: Size)] { heif?.thumbnails.map { ($0.id, $0.size) } ?? [] }

    deinit {
        scratch?.deallocate()
        gainBatch?.deallocate()
    }

    /// Starts decoding at `scaleEighths`/8 (JPEG only; PNG always decodes at 1).
    func start(scaleEighths requested: Int, maxBatchRows: Int) throws {
        if jpeg != nil, let h = jpegHeader, requested == 1, options.progressiveDC || options.fastMode,
           ProgressiveDC.applies(to: h),
           let image = try? ProgressiveDC.decode(bytes, header: h, exact: !options.fastMode) {
            // Only the DC scans matter at 1/8: libjpeg never starts (nor allocates its
            // whole-image coefficient buffer). Anything unexpected fell back to libjpeg.
            usedDCScans = true
            decodedSize = Size(width: image.width, height: image.height)
            channels = image.channels
            scaleEighths = 1
            whole = image
            return
        }
        if let jpeg, let h = jpegHeader {
            let layout: JPEGDecoder.OutputLayout
            switch h.colorSpace {
            case JCS_GRAYSCALE: layout = .gray
            case JCS_YCbCr, JCS_RGB: layout = .rgb
            case JCS_CMYK, JCS_YCCK:
                layout = .cmyk
                cmyk = true
                cmykConverter = CMYKConverter(icc: iccProfile, adobeInverted: h.adobeTransform != nil)
            default:
                throw ImagingError(.unsupportedFeature,
                                   "JPEG with \(h.components) components in colour space \(h.colorSpace.rawValue)")
            }
            decodedSize = try jpeg.start(scaleEighths: requested, layout: layout, fast: options.fastDecode)
            scaleEighths = requested
            channels = cmyk ? 3 : layout.channels
            if cmyk {
                scratch = .allocate(capacity: decodedSize.width * 4 * maxBatchRows)
                scratchRows = maxBatchRows
            }
        } else if let webp {
            // libwebp scales while decoding: to the DCT-like size the plan asked for.
            let target = Size(width: max(1, (storedSize.width * requested + 7) / 8),
                              height: max(1, (storedSize.height * requested + 7) / 8))
            let image = try webp.decode(to: webp.isAnimated ? storedSize : target)
            decodedSize = Size(width: image.width, height: image.height)
            channels = image.channels
            scaleEighths = webp.isAnimated ? 8 : requested
            whole = image
        } else if let heif {
            var image = try heif.decode(thumbnail: heifThumbnail)
            // Phones write thumbnail items that decode a pixel or two off their declared size
            // (an odd half-size rounded the other way): used at their decoded size. One further
            // off is not used: the primary image is decoded instead. Never a failure of a file
            // whose primary image is sound.
            if let thumbnail = heifThumbnailSize, image.size != thumbnail {
                if abs(image.size.width - thumbnail.width) <= 2 && abs(image.size.height - thumbnail.height) <= 2
                    && image.size.width > 0 && image.size.height > 0 {
                    heifThumbnailSize = image.size
                } else {
                    heifThumbnail = nil
                    heifThumbnailSize = nil
                    image = try heif.decode(thumbnail: nil)
                }
            }
            let declared = heifThumbnailSize ?? storedSize
            guard image.size == declared else {
                throw ImagingError(.corrupt, "HEIF image decodes to \(image.size), not the \(declared) it declares")
            }
            decodedSize = image.size
            channels = image.channels
            scaleEighths = 8
            if image.bits > 8 { deep = DeepToEight(bits: image.bits, nclx: heif.nclx) }
            heifImage = image
        } else if let jxl {
            let image = try jxl.decode()
            scaleEighths = 8
            decodedSize = storedSize
            channels = jxl.hasAlpha ? 4 : 3
            if let h = jxl.hdr {
                deep = DeepToEight(bits: 16, nclx: h)
                deepWhole = image
            } else {
                whole = image
            }
        } else if let video {
            // libswscale reduces the frame to the DCT-like size the plan asked for.
            let target = Size(width: max(1, (storedSize.width * requested + 7) / 8),
                              height: max(1, (storedSize.height * requested + 7) / 8))
            let poster = try video.poster(at: options.posterTime, target: target)
            posterTime = poster.time
            posterNote = poster.note
            posterFromKeyframes = poster.keyframesOnly
            decodedSize = target
            channels = 3
            scaleEighths = requested
            whole = poster.image
        } else if let gif {
            let image = try gif.decode(frame: options.frame, limits: options.limits)
            decodedSize = storedSize
            channels = image.channels
            scaleEighths = 8
            whole = image
        } else if let tiff {
            decodedSize = tiff.size  // the page, or the reduced level chosen
            channels = tiff.channels
            scaleEighths = 8
        } else if let png {
            let (c, wholeImage) = try png.start(correctGamma: options.correctPNGGamma)
            decodedSize = storedSize
            channels = c
            scaleEighths = 8
            if wholeImage {
                let layout: PixelLayout = c == 1 ? .gray : c == 3 ? .rgb : .rgba
                let buffer = try PixelBuffer.make(width: storedSize.width, height: storedSize.height, layout: layout)
                try png.readImage(into: buffer.base, stride: buffer.stride)
                whole = buffer
            }
        }
    }

    /// Tells the decoder which columns of the decoded image the reader uses (a crop): a tiled
    /// TIFF then reads only the tiles over them. Other formats decode whole rows.
    func limitColumns(_ columns: ClosedRange<Int>) {
        guard let tiff, whole == nil else { return }
        tiff.neededColumns = columns
    }

    /// Whether `skip(rows:)` saves work: libjpeg streaming (it still entropy-decodes the
    /// skipped rows, so damage there is reported, but does no IDCT, upsampling or colour
    /// conversion for them).
    /// TIFF: strips and tiles are read where they are, so skipped rows cost nothing.
    var skipsRows: Bool { (jpeg != nil || tiff != nil) && whole == nil }

    /// Skips up to `rows` rows (libjpeg streaming only); returns how many were skipped.
    func skip(rows: Int) throws -> Int {
        if let tiff {
            let n = tiff.skip(rows: min(rows, decodedSize.height - rowsRead))
            rowsRead += n
            return n
        }
        guard skipsRows, let jpeg else { return 0 }
        let n = try jpeg.skip(rows: min(rows, decodedSize.height - rowsRead))
        rowsRead += n
        return n
    }

    /// Reads up to `maxRows` rows of `channels` bytes per pixel; 0 at the end.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        let remaining = decodedSize.height - rowsRead
        guard remaining > 0 else { return 0 }
        let want = min(maxRows, remaining)
        var n = want
        if let deepWhole, let deep {
            let width = decodedSize.width
            for r in 0..<want {
                deep.convert(deepWhole.row(rowsRead + r), buffer + r * stride, count: width, channels: channels,
                             gain: gainRow(r, of: want, deep: deep))
            }
        } else if let whole {
            for r in 0..<want {
                (buffer + r * stride).update(from: whole.row(rowsRead + r), count: whole.stride)
            }
        } else if let jpeg {
            if cmyk {
                precondition(want <= scratchRows)
                let scratchStride = decodedSize.width * 4
                n = try jpeg.read(into: scratch!, stride: scratchStride, maxRows: want)
                for r in 0..<n {
                    cmykConverter!.convert(scratch! + r * scratchStride, buffer + r * stride, count: decodedSize.width)
                }
            } else {
                n = try jpeg.read(into: buffer, stride: stride, maxRows: want)
            }
        } else if let image = heifImage {
            let width = decodedSize.width
            for r in 0..<want {
                let src = image.plane + (rowsRead + r) * image.stride, dst = buffer + r * stride
                if image.planar != nil {
                    image.rgbRow(rowsRead + r, into: dst)
                    continue
                }
                if let deep {
                    deep.convert(src, dst, count: width, channels: channels, gain: gainRow(r, of: want, deep: deep))
                } else {
                    dst.update(from: src, count: width * channels)
                }
                if channels == 4 && heif?.premultipliedAlpha == true { Self.unpremultiply(dst, count: width) }
            }
        } else if let tiff {
            n = try tiff.read(into: buffer, stride: stride, maxRows: want)
        } else if let png {
            try png.read(into: buffer, stride: stride, rows: want)
        }
        rowsRead += n
        return n
    }

    /// Row `r` of this batch (`rows` rows) of the gain map, when an HDR source is read with
    /// `hdrGain` (the batch buffer grows to hold the batch); nil otherwise.
    private func gainRow(_ r: Int, of rows: Int, deep: DeepToEight) -> UnsafeMutablePointer<UInt8>? {
        guard hdrGain && deep.isHDR else { return nil }
        let width = decodedSize.width
        if gainBatchRows < rows {
            gainBatch?.deallocate()
            gainBatch = .allocate(capacity: width * max(rows, 16))
            gainBatchRows = max(rows, 16)
        }
        return gainBatch! + r * width
    }

    /// Premultiplied RGBA to straight alpha (the pipeline's convention), in place.
    static func unpremultiply(_ p: UnsafeMutablePointer<UInt8>, count: Int) {
        for i in 0..<count {
            let a = Int(p[i * 4 + 3])
            guard a > 0 && a < 255 else { continue }
            for c in 0..<3 { p[i * 4 + c] = UInt8(min(255, (Int(p[i * 4 + c]) * 255 + a / 2) / a)) }
        }
    }

    /// Ends decoding (reports corruption found at the end of the data in strict mode).
    func finish() throws {
        try jpeg?.finish()
        try png?.finish()
    }

}

/// CMYK (or YCCK, which libjpeg outputs as CMYK) rows to RGB: through the file's ICC
/// profile when it has a CMYK one, else the usual naive conversion (Adobe files store
/// inverted CMYK).
struct CMYKConverter {
    private let inverted: Bool
    private let transform: ColorTransform?

    init(icc: [UInt8]?, adobeInverted: Bool) {
        inverted = adobeInverted
        if let icc, let p = ICCProfile(icc), p.colorSpace == .cmyk {
            transform = ColorTransform(from: p, adobeInverted ? .cmyk8Inverted : .cmyk8, to: .sRGB, .rgb8)
        } else {
            transform = nil
        }
    }

    func convert(_ src: UnsafeMutablePointer<UInt8>, _ dst: UnsafeMutablePointer<UInt8>, count: Int) {
        if let t = transform {
            t.apply(src, dst, count: count)
            return
        }
        var s = src, d = dst
        for _ in 0..<count {
            var c = Int(s[0]), m = Int(s[1]), y = Int(s[2]), k = Int(s[3])
            if !inverted { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k }
            d[0] = UInt8((c * k + 127) / 255)
            d[1] = UInt8((m * k + 127) / 255)
            d[2] = UInt8((y * k + 127) / 255)
            s += 4
            d += 3
        }
    }
}
