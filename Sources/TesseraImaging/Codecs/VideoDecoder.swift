import TesseraModel
import TesseraShim

/// A video through FFmpeg's libraries (`video_shim.c`: the container read from memory by the
/// one demuxer detection names, nothing else ever opened): what it declares, a poster frame,
/// and frames sampled across it for a preview. Frames come out as RGB already reduced by
/// libswscale (area averaging) to the size the render plan asks for, as a JPEG's DCT scaling
/// does; where the codec can decode smaller itself (`lowres`), it does.
final class VideoDecoder {
    let size: Size
    let orientation: Orientation
    /// Seconds, when the container says.
    let duration: Double?
    let fps: Double
    let frameCount: Int
    let codec: String
    let container: String
    let pixelFormat: String
    let bits: Int
    let nclx: HEIFDecoder.NCLX
    let rotation: Int
    private let maxLowres: Int
    private let maxPixels: Int
    private let handle: OpaquePointer
    private var started = false

    /// What the poster was: its time, and whether only keyframes were decoded to find it.
    struct Poster {
        let image: PixelBuffer
        let time: Double
        let keyframesOnly: Bool
        /// The time asked for lay past the video (a warning for the record).
        var note: String? = nil
    }

    /// - Parameter strict: a file whose container says it goes on past its end fails `truncated`
    ///   even when the frames wanted are in the part that is there.
    /// The container declares more data than the file holds (lenient reads what is there).
    let endsEarly: Bool

    init(bytes: UnsafeRawBufferPointer, limits: Limits, seconds: Double?, strict: Bool = true) throws {
        let container: Int32
        if bytes.count >= 4, bytes[0] == 0x1A, bytes[1] == 0x45, bytes[2] == 0xDF, bytes[3] == 0xA3 {
            container = Int32(TS_VIDEO_MATROSKA)
        } else if bytes.count >= 12, bytes[0] == 0x52, bytes[1] == 0x49, bytes[2] == 0x46, bytes[3] == 0x46 {
            container = Int32(TS_VIDEO_AVI)
        } else {
            container = Int32(TS_VIDEO_ISOBMFF)
        }
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let cut = ts_video_declared_overrun(base, bytes.count, container) != 0
        endsEarly = cut
        if cut && strict {
            throw ImagingError(.truncated, "the video ends early: its container declares more data than the file holds")
        }
        var code: Int32 = 0
        // One allocation at most: a frame plane of the largest frame allowed (16-bit, with room).
        let maxAlloc = min(limits.maxDecoderMemory, max(64 << 20, limits.maxPixels.multipliedReportingOverflow(by: 4).partialValue))
        guard let h = ts_video_open(base, bytes.count, container, seconds ?? 0, maxAlloc, &code) else {
            throw ImagingError(.outOfMemory, "out of memory opening the video")
        }
        if code != 0 {
            var error = Self.error(code, h)
            if cut && error.code == .corrupt { error.code = .truncated }
            ts_video_close(h)
            throw error
        }
        var info = ts_video_info()
        ts_video_info_get(h, &info)
        handle = h
        size = Size(width: Int(info.width), height: Int(info.height))
        rotation = Int(info.rotation)
        let mirrored = info.mirrored != 0
        switch (rotation, mirrored) {
        case (90, false): orientation = Orientation(exif: 6)
        case (180, false): orientation = Orientation(exif: 3)
        case (270, false): orientation = Orientation(exif: 8)
        case (0, true): orientation = Orientation(exif: 2)
        case (90, true): orientation = Orientation(exif: 7)
        case (180, true): orientation = Orientation(exif: 4)
        case (270, true): orientation = Orientation(exif: 5)
        default: orientation = Orientation(exif: 1)
        }
        duration = info.duration > 0 ? info.duration : nil
        fps = info.fps
        frameCount = Int(info.frames)
        codec = Self.string(info.codec)
        self.container = Self.string(info.container)
        pixelFormat = Self.string(info.pixel_format)
        bits = Int(info.bits)
        maxLowres = Int(info.max_lowres)
        maxPixels = limits.maxPixels
        nclx = HEIFDecoder.NCLX(primaries: Int(info.primaries), transfer: Int(info.transfer), matrix: Int(info.matrix),
                                fullRange: info.full_range != 0, red: (info.red.0, info.red.1),
                                green: (info.green.0, info.green.1), blue: (info.blue.0, info.blue.1),
                                white: (info.white.0, info.white.1))
        try limits.checkDimensions(size)
    }

    deinit { ts_video_close(handle) }

    private static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    private static func error(_ code: Int32, _ h: OpaquePointer) -> ImagingError {
        let message = String(cString: ts_video_message(h))
        switch Int(code) {
        case Int(TS_VIDEO_TRUNCATED): return ImagingError(.truncated, "the video ends early (\(message))")
        case Int(TS_VIDEO_UNSUPPORTED_CODEC): return ImagingError(.unsupportedCodec, message)
        case Int(TS_VIDEO_UNSUPPORTED): return ImagingError(.unsupportedFormat, message)
        case Int(TS_VIDEO_UNAVAILABLE): return ImagingError(.unsupportedFeature, message)
        case Int(TS_VIDEO_TIMEOUT): return ImagingError(.timedOut, "the video took longer to decode than the task may (\(message))")
        case Int(TS_VIDEO_NOMEM): return ImagingError(.outOfMemory, message)
        default: return ImagingError(.corrupt, message.isEmpty ? "damaged video" : message)
        }
    }

    private func check(_ code: Int32) throws {
        if code != 0 && code != Int32(TS_VIDEO_END) { throw Self.error(code, handle) }
    }

    /// HDR (PQ or HLG): frames are converted at 16 bits and tone-mapped like HEIF's.
    var isHDR: Bool { nclx.isHDR }
    /// The tone map's tables (65,536 entries), built once for every frame of the video.
    private lazy var toEight = DeepToEight(bits: 16, nclx: nclx)

    /// Opens the decoder at the smallest `lowres` that still covers `target` (stored orientation).
    private func begin(covering target: Size) throws {
        guard !started else { return }
        var lowres = 0
        while lowres < min(maxLowres, 3), (size.width >> (lowres + 1)) >= target.width, (size.height >> (lowres + 1)) >= target.height {
            lowres += 1
        }
        try check(ts_video_begin(handle, Int32(lowres), 1, Int64(min(maxPixels, Int(Int32.max)))))
        started = true
    }

    /// The current frame as RGB at `target` (stored orientation).
    private func convert(to target: Size) throws -> PixelBuffer {
        let image = try PixelBuffer.make(width: target.width, height: target.height, layout: .rgb)
        if isHDR {
            let stride = target.width * 6
            let deep = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * target.height)
            defer { deep.deallocate() }
            try check(ts_video_convert(handle, Int32(target.width), Int32(target.height), 1, deep, Int32(stride)))
            for y in 0..<target.height {
                toEight.convert(deep + y * stride, image.row(y), count: target.width, channels: 3)
            }
        } else {
            try check(ts_video_convert(handle, Int32(target.width), Int32(target.height), 0, image.base, Int32(image.stride)))
        }
        return image
    }

    private func frameLooks() -> (mean: Double, spread: Double) {
        var mean = 0.0, spread = 0.0
        var w: Int32 = 0, h: Int32 = 0
        ts_video_frame_stats(handle, &mean, &spread, &w, &h)
        return (mean, spread)
    }

    /// Near-black (a fade, a black intro) or flat (a title card's plain colour).
    static func isBlank(mean: Double, spread: Double) -> Bool { mean < 0.07 || spread < 0.03 }

    /// Decodes the next frame; nil at the end (or after `budget` packets).
    private func next(budget: Int) throws -> Double? {
        var pts = 0.0
        let code = ts_video_next(handle, Int64(budget), &pts)
        if code == Int32(TS_VIDEO_END) { return nil }
        try check(code)
        return pts
    }

    /// The poster frame at `target` (stored orientation). `at` nil: the first keyframe from the
    /// first second on (the start of a video shorter than 2 s) that is neither near-black nor
    /// flat; when keyframes alone find none, frames every quarter second decoded in turn; when
    /// none of those will do, the liveliest seen. `at` given: the first frame at or after it.
    func poster(at: VideoTime?, target: Size) throws -> Poster {
        try begin(covering: target)
        let frameTime = fps > 0 ? 1 / fps : 0.04
        if let at {
            var t = at.seconds(of: duration)
            var note: String?
            if let d = duration, t > max(0, d - frameTime) {
                t = max(0, d - frameTime)
                note = String(format: "the poster time %@ is past the end of the %.2f s video: its last frame was taken", at.description, d)
            } else if case .fromEnd(let s) = at, let d = duration, s > d {
                note = String(format: "the poster time %@ is before the start of the %.2f s video: its first frame was taken", at.description, d)
            }
            try check(ts_video_seek(handle, t, 0))
            ts_video_set_skip(handle, 0, 1, 0)
            var last: Double?
            while let pts = try next(budget: 0) {
                last = pts
                if pts >= t - frameTime / 2 { break }
            }
            guard let time = last else { throw noFrame() }
            return Poster(image: try convert(to: target), time: time, keyframesOnly: false, note: note)
        }
        let start = (duration ?? 2) >= 2 ? 1.0 : 0
        var best: (image: PixelBuffer, time: Double, score: Double)?
        /// The poster, when the current frame will do and may be taken; else kept if the liveliest yet.
        func consider(_ time: Double, keyframes: Bool, take: Bool) throws -> Poster? {
            let look = frameLooks()
            let blank = Self.isBlank(mean: look.mean, spread: look.spread)
            if !blank && take { return Poster(image: try convert(to: target), time: time, keyframesOnly: keyframes) }
            let score = look.spread + (blank ? 0 : 1)
            if best == nil || score > best!.score { best = (try convert(to: target), time, score) }
            return nil
        }
        // 1. Keyframes only, from the first at or after the start: each a whole picture, no
        //    other frame decoded (not even the keyframe before the start).
        try check(ts_video_seek(handle, start, 1))
        ts_video_set_skip(handle, 1, 0, 0)
        var keyframes = 0
        while keyframes < 8, let pts = try next(budget: 4000) {
            keyframes += 1
            if let poster = try consider(pts, keyframes: true, take: pts >= start - frameTime / 2) { return poster }
        }
        // 2. Every frame from the start time, one looked at each quarter second.
        try check(ts_video_seek(handle, start, 0))
        ts_video_set_skip(handle, 0, 1, 0)
        var nextLook = start, looked = 0
        while looked < 40, let pts = try next(budget: 20_000) {
            guard pts >= nextLook - frameTime / 2 else { continue }
            looked += 1
            nextLook = pts + 0.25
            if let poster = try consider(pts, keyframes: false, take: true) { return poster }
        }
        guard let best else { throw noFrame() }
        return Poster(image: best.image, time: best.time, keyframesOnly: false)
    }

    private func noFrame() -> ImagingError {
        ts_video_hit_end(handle) != 0
            ? ImagingError(.truncated, "the video ends before any frame could be decoded")
            : ImagingError(.corrupt, "no frame of the video decodes")
    }

    /// `count` frames sampled evenly across the video (frame i at (i + ½)/count of its length),
    /// each at `target` (stored orientation), in order. A sample whose keyframe is behind the
    /// frame last decoded is reached by decoding on, not by seeking back.
    func samples(count: Int, target: Size, _ body: (PixelBuffer, Double) throws -> Void) throws {
        try begin(covering: target)
        let length = duration ?? (fps > 0 && frameCount > 0 ? Double(frameCount) / fps : 0)
        let frameTime = fps > 0 ? 1 / fps : 0.04
        ts_video_set_skip(handle, 0, 1, 0)
        var position: Double? = nil
        var emitted = 0
        for i in 0..<count {
            let t = length > 0 ? length * (Double(i) + 0.5) / Double(count) : 0
            let keyframe = ts_video_keyframe_before(handle, t)
            if position == nil || keyframe < 0 || keyframe > position! + frameTime / 2 || t < position! {
                try check(ts_video_seek(handle, t, 0))
            }
            var reached: Double?
            while let pts = try next(budget: 0) {
                position = pts
                if pts >= t - frameTime / 2 {
                    reached = pts
                    break
                }
            }
            if reached == nil && ts_video_has_frame(handle) == 0 { break }
            try body(try convert(to: target), reached ?? position ?? t)
            emitted += 1
            if reached == nil { break }  // the end: the last frame stands for the rest
        }
        guard emitted > 0 else { throw noFrame() }
    }
}
