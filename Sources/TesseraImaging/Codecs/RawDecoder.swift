import Foundation
import TesseraModel
import TesseraShim

/// A camera raw file opened with LibRaw (`raw_shim.c`, LibRaw opened at the first raw file):
/// its header and metadata, the embedded preview, and a decode to 16-bit linear sRGB — half
/// size (a pixel per 2×2 CFA block, no demosaic) or a full AHD demosaic. Sensor data that
/// the file does not hold is found before LibRaw reads it (`RawContainer.missingData`):
/// LibRaw would "decode" the bytes it lacks as zeros or noise.
final class RawDecoder {
    let info: ts_raw_info
    /// The image LibRaw makes (its crop of the sensor), stored orientation.
    let size: Size
    let orientation: Orientation
    private let owner: Handle
    private let bytes: UnsafeRawBufferPointer

    private final class Handle {
        let pointer: OpaquePointer
        init(_ p: OpaquePointer) { pointer = p }
        deinit { ts_raw_close(pointer) }
    }
    private var handle: OpaquePointer { owner.pointer }

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        self.bytes = bytes
        var code: Int32 = 0
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let h = ts_raw_open(base, bytes.count, &code) else {
            throw ImagingError(.outOfMemory, "out of memory opening the raw file")
        }
        owner = Handle(h)
        if code != 0 { throw Self.error(code, h, stage: "reading its header") }
        var i = ts_raw_info()
        ts_raw_info_get(h, &i)
        info = i
        size = Size(width: Int(i.width), height: Int(i.height))
        guard size.width > 0, size.height > 0 else { throw ImagingError(.corrupt, "raw file with an empty image (\(size))") }
        try limits.checkDimensions(size)
        orientation = Self.orientation(flip: Int(i.flip))
    }

    /// LibRaw's `flip` as an EXIF orientation: 3 turned 180°, 5 turned 90° counter-clockwise
    /// (EXIF 8), 6 turned 90° clockwise (EXIF 6).
    static func orientation(flip: Int) -> Orientation {
        switch flip {
        case 3: return Orientation(exif: 3)
        case 5: return Orientation(exif: 8)
        case 6: return Orientation(exif: 6)
        default: return .up
        }
    }

    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    var make: String { Self.string(info.make).trimmingCharacters(in: .whitespaces) }
    var model: String { Self.string(info.model).trimmingCharacters(in: .whitespaces) }
    var lens: String { Self.string(info.lens).trimmingCharacters(in: .whitespaces) }
    var decoderName: String { Self.string(info.decoder) }

    /// The embedded preview LibRaw finds (the largest JPEG or bitmap the file holds), copied.
    func preview() throws -> (bytes: [UInt8], jpeg: Bool, size: Size)? {
        // The format is known once read (LibRaw says 0 until then).
        guard info.thumb_length > 0 else { return nil }
        var p: UnsafePointer<UInt8>?
        var length = 0
        var format: Int32 = 0, w: Int32 = 0, h: Int32 = 0
        let code = ts_raw_preview(handle, &p, &length, &format, &w, &h)
        if code == Int32(TS_RAW_NO_PREVIEW) { return nil }
        if code != 0 { throw Self.error(code, handle, stage: "reading its preview") }
        guard let p, length > 0 else { return nil }
        return (Array(UnsafeBufferPointer(start: p, count: length)), format == 1, Size(width: Int(w), height: Int(h)))
    }

    /// Starts half size straight from the mosaic, row by row (nil: not a 2×2 Bayer mosaic of
    /// 16-bit values; `decode` then goes through LibRaw). `release`: the input's pages are
    /// handed back once LibRaw holds the sensor data (a mapped file: read again if needed).
    func beginHalf(cpuSeconds: Double?, release: Bool) throws -> Size? {
        var w: Int32 = 0, h: Int32 = 0
        ts_raw_release_input(handle, release ? 1 : 0)
        let code = ts_raw_half_begin(handle, cpuSeconds ?? 0, &w, &h)
        if code > 0 { throw Self.error(code, handle, stage: "reading the sensor data") }
        if release { releaseInput() }
        return code == 0 ? Size(width: Int(w), height: Int(h)) : nil
    }

    /// Half-size rows `first..<first+count`, 3 16-bit linear sRGB samples a pixel.
    func halfRows(_ first: Int, _ count: Int, into buffer: UnsafeMutablePointer<UInt16>, stride: Int) throws {
        let code = ts_raw_half_rows(handle, Int32(first), Int32(count), buffer, stride)
        if code != 0 { throw Self.error(code, handle, stage: "decoding at half size") }
    }

    /// Hands the input's pages back to the kernel (a private file mapping: they are read
    /// again from the file if touched), once LibRaw has copied the sensor data.
    private func releaseInput() {
        guard let base = bytes.baseAddress else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: base) + page - 1) / page * page
        let end = (Int(bitPattern: base) + bytes.count) / page * page
        guard end > start, let p = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = madvise(p, end - start, MADV_DONTNEED)
    }

    /// Decodes to 16-bit linear sRGB: `half` (a pixel per 2×2 block) or a full demosaic.
    func decode(half: Bool, cpuSeconds: Double?, release: Bool) throws -> RawImage {
        var image = ts_raw_image()
        ts_raw_release_input(handle, release ? 1 : 0)
        // LibRaw's quality 3: AHD, its default and rawpy's (decision 030).
        let code = ts_raw_decode(handle, half ? 1 : 0, 3, cpuSeconds ?? 0, &image)
        if code != 0 { throw Self.error(code, handle, stage: half ? "decoding at half size" : "demosaicing") }
        return RawImage(image)
    }

    static func error(_ code: Int32, _ h: OpaquePointer, stage: String) -> ImagingError {
        let m = String(cString: ts_raw_message(h))
        switch Int(code) {
        case Int(TS_RAW_UNAVAILABLE): return ImagingError(.unsupportedFeature, m)
        case Int(TS_RAW_UNSUPPORTED):
            return ImagingError(.unsupportedFormat, "a raw file LibRaw \(String(cString: ts_raw_version())) does not read (\(m))")
        case Int(TS_RAW_TRUNCATED): return ImagingError(.truncated, "truncated raw file: \(m) (\(stage))")
        case Int(TS_RAW_NOMEM): return ImagingError(.outOfMemory, "raw file: \(m) (\(stage))")
        case Int(TS_RAW_TOO_BIG): return ImagingError(.limitExceeded, "raw file: \(m) (\(stage))")
        case Int(TS_RAW_TIMEOUT): return ImagingError(.timedOut, "raw file: \(m) (\(stage))")
        default: return ImagingError(.corrupt, "corrupt raw file: \(m) (\(stage))")
        }
    }
}

/// A decoded raw image: 16-bit linear sRGB samples, `step` apart (4 where it is LibRaw's own
/// working image, which lives as long as the `RawDecoder`), owned by LibRaw until freed.
final class RawImage {
    private var image: ts_raw_image
    let width: Int
    let height: Int
    let channels: Int
    let step: Int
    var pixels: UnsafePointer<UInt16> { image.pixels }

    init(_ image: ts_raw_image) {
        self.image = image
        width = Int(image.width)
        height = Int(image.height)
        channels = Int(image.colors)
        step = max(Int(image.step), Int(image.colors))
    }

    /// Row `y`'s samples, `channels` a pixel packed, times `gain`, into `dst`.
    func copyRow(_ y: Int, to dst: UnsafeMutablePointer<UInt16>, gain: Float) {
        let src = pixels + y * width * step
        if step == channels && gain == 1 {
            dst.update(from: src, count: width * channels)
        } else if gain == 1 {
            for x in 0..<width { for c in 0..<channels { dst[x * channels + c] = src[x * step + c] } }
        } else {
            for x in 0..<width {
                for c in 0..<channels { dst[x * channels + c] = UInt16(min(65535, Float(src[x * step + c]) * gain + 0.5)) }
            }
        }
    }

    deinit { ts_raw_image_free(&image) }
}

/// What the container of a raw file says before LibRaw reads it: whether the bytes are a
/// raw file at all (by content: TIFF-based raw files are told from TIFFs by their CFA or
/// LinearRaw image, DNG version or CR2 mark), and whether the sensor data they declare is there.
enum RawContainer {
    /// Whether `b` is a camera raw file (not a TIFF, not a JPEG).
    static func sniff(_ b: UnsafeRawBufferPointer) -> Bool {
        if b.ascii("FUJIFILMCCD-RAW", at: 0) || b.ascii("ftypcrx ", at: 4) || b.ascii("HEAPCCDR", at: 6)
            || b.ascii("\0MRM", at: 0) || b.ascii("FOVb", at: 0) || b.ascii("ARRI", at: 0) {
            return true
        }
        // Panasonic (IIU), Olympus (IIRO, IIRS, MMOR): TIFF-like headers of their own.
        if b.ascii("IIU\0", at: 0) || b.ascii("IIRO", at: 0) || b.ascii("IIRS", at: 0) || b.ascii("MMOR", at: 0) { return true }
        guard let tiff = TIFFWalk(b) else { return false }
        if b.count >= 10, b[8] == 0x43, b[9] == 0x52 { return true }  // "CR": Canon CR2
        return tiff.isRaw
    }

    /// Why the sensor data is not all there (nil: it is, as far as the container says).
    static func missingData(_ b: UnsafeRawBufferPointer, size: Size, bits: Int) -> String? {
        if let tiff = TIFFWalk(b), let raw = tiff.rawImage, !raw.chunks.isEmpty {
            let total = raw.chunks.reduce(0) { $0 + $1.1 }
            for (offset, length) in raw.chunks where offset + length > b.count || offset > b.count {
                return "its sensor data (\(raw.width)x\(raw.height), \(total) bytes from byte "
                    + "\(raw.chunks.first?.0 ?? 0)) runs past the end of the \(b.count)-byte file"
            }
            // Strips or tiles that say fewer bytes than the pixels take (uncompressed: their
            // bits; compressed, lossy DNGs too: half a bit a pixel at the least).
            let least = raw.compression == 1 ? raw.width * raw.height * max(1, raw.samples) * max(1, raw.bits) / 8
                : raw.width * raw.height / 16
            if total < least {
                return "its sensor data (\(raw.width)x\(raw.height)) is \(total) bytes, not the \(least) it takes at the least"
            }
            return nil
        }
        // No map of the data (other containers): a raw image of fewer bytes than half a bit a
        // pixel has lost its sensor data (lossless raw data takes 6 to 14 bits a pixel, lossy
        // 3 or more).
        let pixels = size.width * size.height
        if b.count < pixels / 16 {
            return "it declares \(size.width)x\(size.height) pixels and holds \(b.count) bytes: its sensor data is missing"
        }
        return nil
    }

    /// The TIFF structure of a TIFF-based raw file: every IFD reached from the first one,
    /// their SubIFDs and the EXIF IFD's neighbours, bounded.
    struct TIFFWalk {
        struct Image {
            var width = 0, height = 0, photometric = 0, subfile = 0, compression = 1, bits = 8, samples = 1
            var chunks: [(Int, Int)] = []
        }
        var images: [Image] = []
        var dngVersion = false

        init?(_ b: UnsafeRawBufferPointer) {
            guard b.count >= 8 else { return nil }
            let little: Bool
            if b[0] == 0x49, b[1] == 0x49, b[2] == 42, b[3] == 0 { little = true }
            else if b[0] == 0x4D, b[1] == 0x4D, b[2] == 0, b[3] == 42 { little = false }
            else { return nil }
            func u16(_ at: Int) -> Int? {
                guard at >= 0, at + 2 <= b.count else { return nil }
                return little ? Int(b[at]) | Int(b[at + 1]) << 8 : Int(b[at]) << 8 | Int(b[at + 1])
            }
            func u32(_ at: Int) -> Int? {
                guard let lo = u16(little ? at : at + 2), let hi = u16(little ? at + 2 : at) else { return nil }
                return lo | hi << 16
            }
            // Bounded work whatever the file says: at most 64 IFDs, 1024 entries each, 32 SubIFD
            // pointers each, 2^18 values read in all (a file that asks for more is not walked
            // further: what was read stands).
            var queue: [Int] = [u32(4) ?? 0]
            var head = 0
            var seen = Set<Int>()
            var budget = 1 << 18
            func width(_ type: Int) -> Int {
                switch type {
                case 3, 8: return 2
                case 4, 9, 11, 13: return 4
                case 5, 10, 12: return 8
                default: return 1
                }
            }
            walk: while head < queue.count, seen.count < 64 {
                let ifd = queue[head]
                head += 1
                guard ifd >= 8, ifd < b.count, !seen.contains(ifd), let n = u16(ifd), n > 0, n < 1024 else { continue }
                seen.insert(ifd)
                var image = Image()
                var offsets: [Int] = [], counts: [Int] = []
                for e in 0..<n {
                    let at = ifd + 2 + e * 12
                    guard let tag = u16(at), let type = u16(at + 2), let count = u32(at + 4), count < 1 << 20 else { continue }
                    let size = width(type)
                    let valueAt = count * size <= 4 ? at + 8 : (u32(at + 8) ?? -1)
                    func values(_ most: Int = 65536) -> [Int] {
                        guard valueAt >= 0, valueAt < b.count else { return [] }
                        let n = min(count, most, budget, (b.count - valueAt) / size)  // what the file holds
                        budget -= max(n, 1)
                        return (0..<n).compactMap { k in size == 2 ? u16(valueAt + 2 * k) : u32(valueAt + 4 * k) }
                    }
                    switch tag {
                    case 254: image.subfile = values(1).first ?? 0
                    case 256: image.width = values(1).first ?? 0
                    case 257: image.height = values(1).first ?? 0
                    case 258: image.bits = values(1).first ?? 8
                    case 259: image.compression = values(1).first ?? 1
                    case 277: image.samples = values(1).first ?? 1
                    case 262: image.photometric = values(1).first ?? 0
                    case 273, 324: offsets = values()
                    case 279, 325: counts = values()
                    case 330: queue += values(32).filter { $0 >= 8 && $0 < b.count }  // SubIFDs
                    case 50706: dngVersion = true
                    default: break
                    }
                    if budget <= 0 { break walk }
                }
                image.chunks = Array(zip(offsets, counts))
                images.append(image)
                if let next = u32(ifd + 2 + n * 12), next > 0 { queue.append(next) }
            }
        }

        /// A CFA or LinearRaw image, or a DNG.
        var isRaw: Bool { dngVersion || images.contains { $0.photometric == 32803 || $0.photometric == 34892 } }

        /// The largest CFA or LinearRaw image (the sensor data).
        var rawImage: Image? {
            images.filter { $0.photometric == 32803 || $0.photometric == 34892 }.max { $0.width * $0.height < $1.width * $1.height }
        }
    }
}

/// What the installed LibRaw reads: its version and its own list of camera models
/// (`tessera inspect --raw-cameras`). Opens LibRaw if it is not open yet.
public enum RawSupport {
    /// LibRaw's version ("0.20.2"); throws `unsupported-feature` (saying why) when it cannot be opened.
    public static func version() throws -> String {
        guard ts_raw_available() != 0 else { throw ImagingError(.unsupportedFeature, String(cString: ts_raw_unavailable_reason())) }
        return String(cString: ts_raw_version())
    }

    /// "Make Model" for every camera LibRaw lists, in its order.
    public static func cameras() throws -> [String] {
        _ = try version()
        return (0..<Int(ts_raw_camera_count())).compactMap { ts_raw_camera(Int32($0)).map { String(cString: $0) } }
    }
}
