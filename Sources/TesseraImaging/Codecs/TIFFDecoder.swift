import CTIFF
import Foundation
import TesseraModel
import TesseraShim

/// A TIFF or BigTIFF opened with libtiff from memory: one page (directory), read row by row
/// into the pipeline's 8-bit gray, RGB or RGBA, strip by strip or tile row by tile row, so
/// memory holds one band of the source, never the whole image.
///
/// Two ways to unpack: 8-, 16-bit and 32-bit float gray, RGB and CMYK, contiguous or planar
/// (and JPEG-compressed YCbCr, which libjpeg turns into RGB), are unpacked here, with rounding
/// from 16 bits and CMYK through the file's ICC profile; everything else libtiff understands
/// (bilevel, 2- and 4-bit, palette, YCbCr, CIELab, old-style JPEG) goes through libtiff's own
/// RGBA reader. libtiff's errors and warnings are kept per file, never printed. Every call into
/// libtiff is in this file or in the shim.
final class TIFFDecoder {
    /// Pages in the file: directories that are not reduced-resolution copies of another.
    let pageCount: Int
    /// The directories were counted up to their bound (10,000): there may be more pages.
    let pageCountIsLowerBound: Bool
    /// "3 pages", "at least 10,000 pages": what a message says of the count.
    var pagesDescription: String { Self.pages(pageCount, lowerBound: pageCountIsLowerBound) }

    static func pages(_ n: Int, lowerBound: Bool) -> String {
        lowerBound ? "at least \(n.formatted()) pages" : "\(n) page\(n == 1 ? "" : "s")"
    }

    /// "a 3-page TIFF", "a TIFF of at least 10,000 pages".
    static func aTIFF(_ n: Int, lowerBound: Bool) -> String {
        lowerBound ? "a TIFF of at least \(n.formatted()) pages" : "a \(n)-page TIFF"
    }
    /// The page decoded.
    let page: Int
    /// The size of the page's full-resolution image (what outputs are planned from).
    let fullSize: Size
    /// The size of the image being read: the page's, or a reduced level's once `useLevel`.
    private(set) var size: Size
    let orientation: Orientation
    let iccProfile: [UInt8]?
    /// 1 (gray), 3 (RGB) or 4 (RGBA): what `read` produces.
    private(set) var channels: Int
    let bitsPerSample: Int
    /// `LZW`, `Deflate`, `JPEG`, …, then what the samples are (`16-bit RGB, planar, tiled`).
    let description: String
    /// Every page's size, for `inspect`.
    let pageSizes: [Size]
    /// The page's reduced-resolution images (pyramid levels), largest first: the directories
    /// after it marked reduced (NewSubfileType bit 0, as `vips tiffsave --pyramid` writes) and
    /// its SubIFDs.
    let levels: [Size]
    /// The level being read (1 is the largest reduced one), nil for the full image.
    private(set) var level: Int?
    private let levelDirectories: [Directory]
    /// The page's directory in the main chain.
    private let pageDirectory: Int

    /// Where a directory is: its index in the main chain, or a SubIFD's offset.
    private enum Directory { case main(Int), sub(UInt64) }

    /// Closes the libtiff handle once, whether `init` completes, fails before every property is
    /// set, or fails after (when Swift runs `deinit`): a fuzzed file over the band budget was
    /// closed twice when `init` closed it too.
    private final class Handle {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { ts_tiff_close(pointer) }
    }

    private let owner: Handle
    /// Damaged data libtiff decodes anyway (bad CCITT code words, a strip without its end)
    /// fails `corrupt` instead of rendering what it made of it.
    private let strict: Bool
    private var handle: OpaquePointer { owner.pointer }
    private let tif: OpaquePointer
    private var info: ts_tiff_info
    private var unpack: Unpack
    private var row = 0
    // The band of decoded rows [bandTop, bandTop + bandRows), interleaved samples.
    private var band: UnsafeMutableRawPointer?
    /// The columns the reader needs (a crop): tiles wholly outside are not read; their part
    /// of a band stays zero.
    var neededColumns: ClosedRange<Int>?
    private var bandTop = 0
    private var bandRows = 0
    private var chunk: UnsafeMutableRawPointer?
    private var rowScratch: UnsafeMutablePointer<UInt8>?
    /// RGB of a CMYK or CIELab row with alpha, before the alpha is put beside it.
    private var rgbScratch: UnsafeMutablePointer<UInt8>?
    private var cmyk: CMYKConverter?
    /// CIELab (D50) to sRGB through Little CMS.
    private lazy var lab = ColorTransform(from: .lab, .lab8, to: .sRGB, .rgb8)

    /// How the samples become pixels.
    private enum Unpack {
        /// Unpacked here: `colour` samples per pixel of `kind`, then an alpha sample when `alpha`.
        case samples(kind: Kind, alpha: Alpha)
        /// libtiff's RGBA reader (premultiplied RGBA, 8 bits).
        case rgba
    }

    private enum Kind: Equatable { case gray(inverted: Bool), rgb, cmyk, lab }
    private enum Alpha: Equatable { case none, straight, associated }

    /// The most one band (a strip, or a row of tiles) may hold, in bytes.
    static let maxBandBytes = 256 << 20

    /// - Parameter releaseReads: `bytes` map a file: drop the pages of strips and tiles once read.
    init(bytes: UnsafeRawBufferPointer, limits: Limits, page requested: Int = 0, releaseReads: Bool = false,
         strict: Bool = true) throws {
        self.strict = strict
        guard let h = ts_tiff_open(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
                                   max(64 << 20, min(limits.maxDecoderMemory, 1 << 30))) else {
            throw ImagingError(.outOfMemory, "TIFF: out of memory opening the file")
        }
        owner = Handle(h)
        guard ts_tiff_ok(h) != 0, let t = ts_tiff_handle(h) else {
            if let cut = Self.directoryPastEnd(bytes) { throw ImagingError(.truncated, "truncated TIFF (\(cut))") }
            throw TIFFDecoder.failure(String(cString: ts_tiff_message(h)), header: true)
        }
        tif = OpaquePointer(t)
        ts_tiff_release_reads(h, releaseReads ? 1 : 0)
        // Directories: libtiff 4.5 refuses an IFD chain that loops; their number is bounded anyway.
        var directories: [(size: Size, reduced: Bool)] = []
        var capped = false
        repeat {
            var i = ts_tiff_info()
            if ts_tiff_info_read(h, &i) == 0 {
                directories.append((Size(width: Int(i.width), height: Int(i.height)), i.subfile_type & 1 != 0))
            }
            guard directories.count < 10_000 else {
                capped = true
                break
            }
        } while TIFFReadDirectory(tif) != 0
        ts_tiff_clear(h)
        // Pages are the full images; a reduced image belongs to the page before it.
        var pages = directories.indices.filter { !directories[$0].reduced }
        if pages.isEmpty { pages = [0] }
        pageCount = pages.count
        pageCountIsLowerBound = capped
        pageSizes = pages.compactMap { directories.indices.contains($0) ? directories[$0].size : nil }
        guard requested >= 0, requested < pageCount else {
            throw ImagingError(.invalidRecipe, "page \(requested) of \(Self.aTIFF(pages.count, lowerBound: capped)) (pages count from 0)")
        }
        page = requested
        let first = pages[requested]
        pageDirectory = first
        var found: [(Directory, Size)] = []
        var d = first + 1
        while d < directories.count, directories[d].reduced {
            found.append((.main(d), directories[d].size))
            d += 1
        }
        guard TIFFSetDirectory(tif, UInt32(first)) != 0 else {
            throw TIFFDecoder.failure(String(cString: ts_tiff_message(h)), header: true)
        }
        var offsets = [UInt64](repeating: 0, count: 32)
        let subs = Int(ts_tiff_subifds(h, &offsets, 32))
        for o in offsets.prefix(subs) where TIFFSetSubDirectory(tif, o) != 0 {
            var i = ts_tiff_info()
            if ts_tiff_info_read(h, &i) == 0 { found.append((.sub(o), Size(width: Int(i.width), height: Int(i.height)))) }
        }
        ts_tiff_clear(h)
        if subs > 0 { _ = TIFFSetDirectory(tif, UInt32(first)) }
        var i = ts_tiff_info()
        guard ts_tiff_info_read(h, &i) == 0 else {
            throw TIFFDecoder.failure(String(cString: ts_tiff_message(h)), header: true)
        }
        let full = Size(width: Int(i.width), height: Int(i.height))
        // Levels must be smaller copies of the page (its aspect within a pixel), largest first.
        found = found.filter { _, s in
            s.width > 0 && s.height > 0 && s.width < full.width && s.height < full.height
                && abs(Double(s.height) - Double(s.width) * Double(full.height) / Double(full.width)) <= 2
        }.sorted { $0.1.width > $1.1.width }
        levels = found.map(\.1)
        levelDirectories = found.map(\.0)
        fullSize = full
        size = full
        // A pyramid is checked by what is decoded (the renderer checks the level it reads);
        // anything else by its declared size, before any pixel memory.
        if levels.isEmpty {
            try limits.checkDimensions(size)
        } else {
            var sides = limits
            sides.maxPixels = Int.max
            try sides.checkDimensions(size)
        }
        orientation = Orientation(exif: (1...8).contains(Int(i.orientation)) ? Int(i.orientation) : 1)
        iccProfile = i.icc.map { Array(UnsafeBufferPointer(start: $0, count: Int(min(i.icc_length, 16 << 20)))) }
        bitsPerSample = Int(i.bits_per_sample)
        guard TIFFIsCODECConfigured(i.compression) != 0 else {
            throw ImagingError(.unsupportedCompression,
                               "TIFF compression \(TIFFDecoder.compressionName(i.compression)) is not in this build of libtiff")
        }
        TIFFDecoder.askForRGB(i, handle: h)
        let (unpack, channels) = try TIFFDecoder.choose(i, handle: h)
        self.unpack = unpack
        self.channels = channels
        if case .samples(.cmyk, _) = unpack {
            cmyk = CMYKConverter(icc: iccProfile, adobeInverted: false)
        } else {
            cmyk = nil
        }
        info = i
        description = TIFFDecoder.describe(i, unpack: unpack)
        _ = try bandBytes()  // over the band budget: refused now, before any pixel memory
    }

    deinit {
        band?.deallocate()
        chunk?.deallocate()
        rowScratch?.deallocate()
        rgbScratch?.deallocate()
    }

    /// Reads reduced level `n` (1 is the largest) instead of the full image. A level that
    /// cannot be read as the page is (another layout, channels or a damaged directory) is not
    /// used: false, and the full image is read.
    func useLevel(_ n: Int) -> Bool {
        guard n >= 1, n <= levels.count, row == 0, band == nil else { return false }
        let ok: Bool
        switch levelDirectories[n - 1] {
        case .main(let d): ok = TIFFSetDirectory(tif, UInt32(d)) != 0
        case .sub(let o): ok = TIFFSetSubDirectory(tif, o) != 0
        }
        var i = ts_tiff_info()
        if ok, ts_tiff_info_read(handle, &i) == 0 {
            TIFFDecoder.askForRGB(i, handle: handle)
            if TIFFIsCODECConfigured(i.compression) != 0, let (u, c) = try? TIFFDecoder.choose(i, handle: handle), c == channels {
                let saved = (info, unpack, size)
                (info, unpack, size) = (i, u, Size(width: Int(i.width), height: Int(i.height)))
                if (try? bandBytes()) != nil {
                    level = n
                    return true
                }
                (info, unpack, size) = saved
            }
        }
        // Back to the page itself.
        _ = TIFFSetDirectory(tif, UInt32(pageDirectory))
        TIFFDecoder.askForRGB(info, handle: handle)
        ts_tiff_clear(handle)
        return false
    }

    /// JPEG-compressed YCbCr: libjpeg converts to RGB (and upsamples chroma) itself. Set again
    /// whenever the directory changes.
    private static func askForRGB(_ i: ts_tiff_info, handle: OpaquePointer) {
        if i.compression == UInt16(COMPRESSION_JPEG), i.photometric == UInt16(PHOTOMETRIC_YCBCR) { _ = ts_tiff_jpeg_rgb(handle) }
    }

    /// XResolution/YResolution in dots per inch, when ResolutionUnit says inch or centimetre.
    var density: PixelDensity? {
        let perInch: Double
        switch Int32(info.resolution_unit) {
        case RESUNIT_INCH: perInch = 1
        case RESUNIT_CENTIMETER: perInch = 2.54
        default: return nil
        }
        return PixelDensity(x: Double(info.x_resolution) * perInch, y: Double(info.y_resolution) * perInch)
    }

    /// Whether the page declares transparency.
    var hasAlpha: Bool { channels == 4 }

    /// What the samples are (the Photometric tag), with the samples per pixel:
    /// `min-is-white, 1 sample`, `RGB, 3 samples`, `separated (CMYK), 4 samples`, …
    var photometric: String {
        let names: [UInt16: String] = [0: "min-is-white", 1: "min-is-black", 2: "RGB", 3: "palette", 4: "mask",
                                       5: "separated (CMYK)", 6: "YCbCr", 8: "CIELab", 9: "ICCLab", 10: "ITULab",
                                       32844: "LogL", 32845: "LogLuv"]
        let n = Int(info.samples_per_pixel)
        return (names[info.photometric] ?? "photometric \(info.photometric)") + ", \(n) sample\(n == 1 ? "" : "s")"
    }

    private static func choose(_ i: ts_tiff_info, handle: OpaquePointer) throws -> (Unpack, Int) {
        let bits = Int(i.bits_per_sample), spp = Int(i.samples_per_pixel)
        guard i.has_photometric != 0 else {
            throw ImagingError(.corrupt, "TIFF without a PhotometricInterpretation tag (262): what its samples mean is not said")
        }
        let float = i.sample_format == UInt16(SAMPLEFORMAT_IEEEFP)
        let depthOK = (bits == 8 || bits == 16) && (i.sample_format == UInt16(SAMPLEFORMAT_UINT) || i.sample_format == 0)
            || (bits == 32 && float)
        var kind: Kind?
        switch Int32(i.photometric) {
        case PHOTOMETRIC_MINISBLACK, PHOTOMETRIC_MINISWHITE:
            kind = .gray(inverted: Int32(i.photometric) == PHOTOMETRIC_MINISWHITE)
        case PHOTOMETRIC_RGB:
            if spp >= 3 { kind = .rgb }
        case PHOTOMETRIC_YCBCR where i.compression == UInt16(COMPRESSION_JPEG):
            if spp >= 3 { kind = .rgb }
        case PHOTOMETRIC_SEPARATED where i.ink_set == UInt16(INKSET_CMYK) || i.ink_set == 0:
            if spp >= 4 { kind = .cmyk }
        case PHOTOMETRIC_CIELAB where !float:
            if spp >= 3 { kind = .lab }
        default:
            kind = nil
        }
        if let kind, depthOK, i.compression != UInt16(COMPRESSION_OJPEG) {
            let colour: Int
            switch kind { case .gray: colour = 1; case .rgb, .lab: colour = 3; case .cmyk: colour = 4 }
            var alpha = Alpha.none
            if spp > colour {
                switch Int32(i.extra_sample_type) {
                case EXTRASAMPLE_ASSOCALPHA: alpha = .associated
                case EXTRASAMPLE_UNASSALPHA: alpha = .straight
                // An unspecified extra sample is taken as alpha, as libvips does.
                default: alpha = i.extra_samples > 0 || spp == colour + 1 ? .straight : .none
                }
            }
            let out: Int
            switch kind { case .gray: out = alpha == .none ? 1 : 4; case .rgb, .cmyk, .lab: out = alpha == .none ? 3 : 4 }
            return (.samples(kind: kind, alpha: alpha), out)
        }
        if bits == 12 || (bits > 16 && !float) || (float && bits != 32) {
            throw ImagingError(.unsupportedFeature, "TIFF with \(bits)-bit\(float ? " floating-point" : "") samples")
        }
        guard ts_tiff_rgba_ok(handle) != 0 else {
            throw ImagingError(.unsupportedFeature, "TIFF: \(String(cString: ts_tiff_message(handle)))")
        }
        let alpha = spp > 1 && i.extra_samples > 0
        // Gray without alpha stays one channel; everything else is RGB(A).
        let gray = (Int32(i.photometric) == PHOTOMETRIC_MINISBLACK || Int32(i.photometric) == PHOTOMETRIC_MINISWHITE) && !alpha
        return (.rgba, gray ? 1 : alpha ? 4 : 3)
    }

    /// Rows per band and its bytes: a strip, or a row of tiles (every plane).
    private func bandBytes() throws -> (rows: Int, bytes: Int, chunkBytes: Int) {
        let rows: Int
        if info.tiled != 0 {
            guard info.tile_width > 0, info.tile_height > 0 else { throw ImagingError(.corrupt, "TIFF tiles of size 0") }
            rows = Int(info.tile_height)
        } else {
            rows = max(1, min(Int(info.rows_per_strip), size.height))
        }
        let samples: Int
        let sampleBytes: Int
        switch unpack {
        case .samples: samples = Int(info.samples_per_pixel); sampleBytes = Int(info.bits_per_sample) / 8
        case .rgba: samples = 4; sampleBytes = 1
        }
        let width = info.tiled != 0 ? (size.width + Int(info.tile_width) - 1) / Int(info.tile_width) * Int(info.tile_width) : size.width
        let (b1, o1) = width.multipliedReportingOverflow(by: samples * sampleBytes)
        let (bytes, o2) = b1.multipliedReportingOverflow(by: rows)
        let chunkBytes = info.tiled != 0 ? Int(TIFFTileSize64(tif)) : Int(TIFFStripSize64(tif))
        guard !o1, !o2, bytes <= Self.maxBandBytes, chunkBytes >= 0, chunkBytes <= Self.maxBandBytes else {
            throw ImagingError(.limitExceeded, "TIFF \(info.tiled != 0 ? "tiles" : "strips") of \(rows) rows of \(size.width) pixels need over \(Self.maxBandBytes >> 20) MB each")
        }
        return (rows, bytes, chunkBytes)
    }

    /// Bytes the decoder holds while reading: one band (a strip, or a row of tiles, of every
    /// plane) and one compressed chunk.
    var bandMemory: Int { (try? bandBytes()).map { $0.bytes + $0.chunkBytes } ?? 0 }

    /// Moves forward `rows` rows without decoding them: strips and tiles are read where they
    /// are, so the rows above a crop or a band cost nothing. Returns how many were skipped.
    func skip(rows: Int) -> Int {
        let n = max(0, min(rows, size.height - row))
        row += n
        return n
    }

    /// Reads up to `maxRows` rows in `channels` bytes per pixel; 0 at the end.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, maxRows: Int) throws -> Int {
        var done = 0
        while done < maxRows, row < size.height {
            if row >= bandTop + bandRows || band == nil { try loadBand(containing: row) }
            let n = min(maxRows - done, bandTop + bandRows - row)
            for r in 0..<n { convert(bandRow: row - bandTop + r, into: buffer + (done + r) * stride) }
            row += n
            done += n
        }
        return done
    }

    private func loadBand(containing y: Int) throws {
        let (rows, bytes, chunkBytes) = try bandBytes()
        if band == nil {
            band = .allocate(byteCount: max(bytes, 1), alignment: 16)
            band!.initializeMemory(as: UInt8.self, repeating: 0, count: max(bytes, 1))
            chunk = .allocate(byteCount: max(chunkBytes, 1), alignment: 16)
            rowScratch = .allocate(capacity: size.width * 4)
            rgbScratch = .allocate(capacity: size.width * 3)
        }
        bandTop = y / rows * rows
        bandRows = min(rows, size.height - bandTop)
        ts_tiff_clear(handle)
        let problems = ts_tiff_problems(handle)
        switch unpack {
        case .rgba:
            guard ts_tiff_rgba_rows(handle, UInt32(bandTop), UInt32(bandRows), band!.assumingMemoryBound(to: UInt32.self)) == 0 else {
                throw failure()
            }
        case .samples:
            try readSamples()
        }
        // The band came back, yet libtiff said its data was damaged on the way.
        if strict && ts_tiff_problems(handle) > problems {
            throw ImagingError(.corrupt, "corrupt TIFF data at row \(bandTop): \(String(cString: ts_tiff_last_problem(handle)))")
        }
    }

    /// The band's samples, interleaved, `size.width` pixels a row, from strips or tiles of every plane.
    private func readSamples() throws {
        let spp = Int(info.samples_per_pixel), sampleBytes = Int(info.bits_per_sample) / 8
        let planar = info.planar == UInt16(PLANARCONFIG_SEPARATE) && spp > 1
        let planes = planar ? spp : 1
        let pixelBytes = spp * sampleBytes
        let rowBytes = size.width * pixelBytes
        let band = self.band!, chunk = self.chunk!
        let (stripRows, _, chunkBytes) = try bandBytes()
        // Strips of every sample decode straight into the band (no copy) when a strip is its rows.
        let direct = info.tiled == 0 && !planar && chunkBytes == stripRows * rowBytes
        let chunkWidth = info.tiled != 0 ? Int(info.tile_width) : size.width
        let chunkPixelBytes = planar ? sampleBytes : pixelBytes
        let columns = info.tiled != 0 ? (size.width + chunkWidth - 1) / chunkWidth : 1
        for p in 0..<planes {
            for c in 0..<columns {
                let x0 = c * chunkWidth
                if info.tiled != 0, let needed = neededColumns, x0 > needed.upperBound || x0 + chunkWidth <= needed.lowerBound {
                    continue  // a crop's columns do not reach this tile
                }
                let index = info.tiled != 0 ? TIFFComputeTile(tif, UInt32(x0), UInt32(bandTop), 0, UInt16(p))
                    : TIFFComputeStrip(tif, UInt32(bandTop), UInt16(p))
                let target = direct ? band : chunk
                var got = tmsize_t(ts_tiff_read_lzw(handle, index, target.assumingMemoryBound(to: UInt8.self), direct ? bandRows * rowBytes : chunkBytes))
                if got < 0 {
                    got = info.tiled != 0 ? TIFFReadEncodedTile(tif, index, target, -1) : TIFFReadEncodedStrip(tif, index, target, direct ? tmsize_t(bandRows * rowBytes) : -1)
                }
                guard got >= 0 else { throw failure() }
                let width = min(chunkWidth, size.width - x0)
                let chunkRowBytes = chunkWidth * chunkPixelBytes
                // A short strip (the file ends early) leaves rows it did not fill: never read past `got`.
                let rowsIn = min(bandRows, Int(got) / max(1, chunkRowBytes))
                if rowsIn < bandRows {
                    throw ImagingError(.truncated, "TIFF \(info.tiled != 0 ? "tile" : "strip") at row \(bandTop) holds \(rowsIn) of its \(bandRows) rows")
                }
                if direct { continue }
                for r in 0..<rowsIn {
                    let src = chunk + r * chunkRowBytes
                    let dst = band + r * rowBytes + x0 * pixelBytes
                    if !planar {
                        dst.copyMemory(from: src, byteCount: width * pixelBytes)
                    } else {
                        for x in 0..<width {
                            (dst + x * pixelBytes + p * sampleBytes).copyMemory(from: src + x * sampleBytes, byteCount: sampleBytes)
                        }
                    }
                }
            }
        }
    }

    /// Row `r` of the band in `channels` 8-bit samples a pixel.
    private func convert(bandRow r: Int, into out: UnsafeMutablePointer<UInt8>) {
        let width = size.width
        switch unpack {
        case .rgba:
            let src = (band! + r * width * 4).assumingMemoryBound(to: UInt8.self)
            // Packed ABGR words are R, G, B, A bytes in memory (little-endian); premultiplied.
            switch channels {
            case 1: for x in 0..<width { out[x] = src[x * 4] }
            case 3: for x in 0..<width { out[x * 3] = src[x * 4]; out[x * 3 + 1] = src[x * 4 + 1]; out[x * 3 + 2] = src[x * 4 + 2] }
            default:
                out.update(from: src, count: width * 4)
                SourceDecoder.unpremultiply(out, count: width)
            }
        case .samples(.lab, let alpha):
            // TIFF's CIELab stores a* and b* signed; ICC's 8-bit encoding offsets them by 128.
            let spp = Int(info.samples_per_pixel), sampleBytes = Int(info.bits_per_sample) / 8
            let src = band! + r * width * spp * sampleBytes
            let scratch = rowScratch!
            for x in 0..<width {
                for k in 0..<3 {
                    let high = sampleBytes == 1 ? src.load(fromByteOffset: x * spp + k, as: UInt8.self)
                        : UInt8(src.loadUnaligned(fromByteOffset: (x * spp + k) * 2, as: UInt16.self) >> 8)
                    scratch[x * 3 + k] = k == 0 ? high : high ^ 0x80
                }
            }
            guard let lab else { return }
            if alpha == .none {
                lab.apply(scratch, out, count: width)
            } else {
                let rgb = rgbScratch!
                lab.apply(scratch, rgb, count: width)
                for x in 0..<width {
                    out[x * 4] = rgb[x * 3]; out[x * 4 + 1] = rgb[x * 3 + 1]; out[x * 4 + 2] = rgb[x * 3 + 2]
                    out[x * 4 + 3] = TIFFDecoder.eight(src, index: x * spp + 3, sampleBytes: sampleBytes, float: false)
                }
                if alpha == .associated { SourceDecoder.unpremultiply(out, count: width) }
            }
        case .samples(let kind, let alpha):
            let spp = Int(info.samples_per_pixel), sampleBytes = Int(info.bits_per_sample) / 8
            let src = band! + r * width * spp * sampleBytes
            // The common case, 8-bit gray, RGB or RGBA as the pipeline wants it: one copy.
            if sampleBytes == 1, spp == channels, kind == .rgb || kind == .gray(inverted: false) {
                out.update(from: src.assumingMemoryBound(to: UInt8.self), count: width * spp)
                if alpha == .associated { SourceDecoder.unpremultiply(out, count: width) }
                return
            }
            // 16-bit gray, RGB or RGBA: rounded to 8 bits without the general loop's branches.
            if sampleBytes == 2, spp == channels, kind == .rgb || kind == .gray(inverted: false) {
                let s16 = src.assumingMemoryBound(to: UInt16.self)
                for k in 0..<width * spp { out[k] = UInt8((UInt32(s16[k]) * 255 + 32767) / 65535) }
                if alpha == .associated { SourceDecoder.unpremultiply(out, count: width) }
                return
            }
            let colour: Int
            switch kind { case .gray: colour = 1; case .rgb, .lab: colour = 3; case .cmyk: colour = 4 }
            // Colour samples (and alpha) to 8 bits, into `channels` (CMYK: into scratch first).
            let scratch = rowScratch!
            let direct = kind == .cmyk ? scratch : out
            let stepOut = kind == .cmyk ? 4 : channels
            let take = colour + (alpha == .none ? 0 : 1)
            for x in 0..<width {
                for k in 0..<take {
                    let s = k < colour ? k : spp > colour ? colour : k  // alpha: the first extra sample
                    let v = TIFFDecoder.eight(src, index: x * spp + s, sampleBytes: sampleBytes, float: info.sample_format == UInt16(SAMPLEFORMAT_IEEEFP))
                    if k < colour {
                        direct[x * stepOut + k] = v
                    } else if kind == .cmyk {
                        out[x * 4 + 3] = v
                    } else {
                        direct[x * stepOut + stepOut - 1] = v
                    }
                }
                if case .gray(let inverted) = kind {
                    if inverted { out[x * channels] = 255 - out[x * channels] }
                    if channels == 4 { out[x * 4 + 1] = out[x * 4]; out[x * 4 + 2] = out[x * 4] }
                }
            }
            if kind == .cmyk {
                if channels == 3 {
                    cmyk!.convert(scratch, out, count: width)
                } else {
                    // RGB beside the alpha already in place: convert, then spread out.
                    let rgb = rgbScratch!
                    cmyk!.convert(scratch, rgb, count: width)
                    for x in 0..<width { out[x * 4] = rgb[x * 3]; out[x * 4 + 1] = rgb[x * 3 + 1]; out[x * 4 + 2] = rgb[x * 3 + 2] }
                }
            }
            if alpha == .associated { SourceDecoder.unpremultiply(out, count: width) }
        }
    }

    /// One sample as 8 bits: 16-bit rounded (v·255/65535), float clamped to 0…1.
    @inline(__always)
    private static func eight(_ p: UnsafeMutableRawPointer, index: Int, sampleBytes: Int, float: Bool) -> UInt8 {
        switch sampleBytes {
        case 1: return p.load(fromByteOffset: index, as: UInt8.self)
        case 2:
            let v = UInt32(p.loadUnaligned(fromByteOffset: index * 2, as: UInt16.self))
            return UInt8((v * 255 + 32767) / 65535)
        default:
            if float {
                let f = p.loadUnaligned(fromByteOffset: index * 4, as: Float.self)
                return f.isNaN ? 0 : UInt8((min(max(f, 0), 1) * 255).rounded())
            }
            return UInt8(p.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self) >> 24)
        }
    }

    /// Where the first directory lies past the file's end (a file cut short: libtiff writes
    /// its directory after the image data), said as such; nil when it is inside.
    static func directoryPastEnd(_ b: UnsafeRawBufferPointer) -> String? {
        guard b.count >= 8 else { return "\(b.count) bytes, not even a header" }
        let little = b[0] == 0x49, big = b[2] == 43 || b[3] == 43
        func uint(_ at: Int, _ n: Int) -> UInt64? {
            guard at >= 0, at + n <= b.count else { return nil }
            var v: UInt64 = 0
            for k in 0..<n { v |= UInt64(b[at + (little ? k : n - 1 - k)]) << (8 * UInt64(k)) }
            return v
        }
        guard let offset = big ? uint(8, 8) : uint(4, 4) else { return "\(b.count) bytes, not even a header" }
        let countSize = big ? 8 : 2, entrySize = big ? 20 : 12
        guard offset <= UInt64(Int.max / 2), let n = uint(Int(offset), countSize) else {
            return "its directory at byte \(offset) lies past the end of the \(b.count) bytes"
        }
        let entries = Int(offset) + countSize
        guard n < 1 << 20, entries + Int(n) * entrySize + (big ? 8 : 4) <= b.count else {
            return "its directory at byte \(offset) runs past the end of the \(b.count) bytes"
        }
        // Values too long for their entry lie elsewhere: within the file too.
        let sizes: [UInt64: UInt64] = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8]
        for e in 0..<Int(n) {
            let at = entries + e * entrySize
            guard let tag = uint(at, 2), let type = uint(at + 2, 2), let count = big ? uint(at + 4, 8) : uint(at + 8 - 4, 4),
                  let size = sizes[type], count < 1 << 40 else { continue }
            let inline = big ? 8 : 4
            guard count * size > UInt64(inline), let valueAt = big ? uint(at + 12, 8) : uint(at + 8, 4) else { continue }
            if valueAt + count * size > UInt64(b.count) {
                return "tag \(tag)'s \(count * size) bytes at byte \(valueAt) run past the end of the \(b.count) bytes"
            }
        }
        return nil
    }

    private func failure() -> ImagingError {
        TIFFDecoder.failure(String(cString: ts_tiff_message(handle)), header: false)
    }

    /// libtiff's message as a typed error: data that ends early is `truncated`, the rest `corrupt`.
    static func failure(_ message: String, header: Bool) -> ImagingError {
        let text = message.isEmpty ? "libtiff could not read it" : message
        let lower = text.lowercased()
        if lower.contains("cannot handle") || lower.contains("not supported") || lower.contains("unsupported")
            || lower.contains("sorry") {
            return ImagingError(.unsupportedFeature, "TIFF: \(text)")
        }
        if lower.contains("read error") || lower.contains("unexpected end") || lower.contains("past end")
            || lower.contains("eof") || lower.contains("seek error") || lower.contains("cannot read") {
            return ImagingError(header ? .corrupt : .truncated, "\(header ? "corrupt" : "truncated") TIFF: \(text)")
        }
        return ImagingError(.corrupt, "corrupt TIFF: \(text)")
    }

    static func compressionName(_ c: UInt16) -> String {
        switch Int32(c) {
        case COMPRESSION_NONE: return "none"
        case COMPRESSION_CCITTRLE: return "CCITT RLE"
        case COMPRESSION_CCITTFAX3: return "CCITT G3"
        case COMPRESSION_CCITTFAX4: return "CCITT G4"
        case COMPRESSION_LZW: return "LZW"
        case COMPRESSION_OJPEG: return "old-style JPEG"
        case COMPRESSION_JPEG: return "JPEG"
        case COMPRESSION_ADOBE_DEFLATE, COMPRESSION_DEFLATE: return "Deflate"
        case COMPRESSION_PACKBITS: return "PackBits"
        case COMPRESSION_LZMA: return "LZMA"
        case COMPRESSION_ZSTD: return "ZSTD"
        case COMPRESSION_WEBP: return "WebP"
        case COMPRESSION_JXL: return "JPEG XL"
        case COMPRESSION_LERC: return "LERC"
        default: return "\(c)"
        }
    }

    private static func describe(_ i: ts_tiff_info, unpack: Unpack) -> String {
        let photometric: String
        switch Int32(i.photometric) {
        case PHOTOMETRIC_MINISWHITE: photometric = "gray (white is zero)"
        case PHOTOMETRIC_MINISBLACK: photometric = i.bits_per_sample == 1 ? "bilevel" : "gray"
        case PHOTOMETRIC_RGB: photometric = "RGB"
        case PHOTOMETRIC_PALETTE: photometric = "palette"
        case PHOTOMETRIC_SEPARATED: photometric = "CMYK"
        case PHOTOMETRIC_YCBCR: photometric = "YCbCr"
        case PHOTOMETRIC_CIELAB: photometric = "CIELab"
        default: photometric = "photometric \(i.photometric)"
        }
        var parts = [compressionName(i.compression),
                     "\(i.bits_per_sample)-bit\(i.sample_format == UInt16(SAMPLEFORMAT_IEEEFP) ? " float" : "") \(photometric)"]
        if i.extra_samples > 0 {
            parts.append(Int32(i.extra_sample_type) == EXTRASAMPLE_ASSOCALPHA ? "associated alpha" : "alpha")
        }
        if i.planar == UInt16(PLANARCONFIG_SEPARATE) && i.samples_per_pixel > 1 { parts.append("planar") }
        parts.append(i.tiled != 0 ? "tiled \(i.tile_width)x\(i.tile_height)" : "strips of \(i.rows_per_strip) rows")
        return parts.joined(separator: ", ")
    }
}
