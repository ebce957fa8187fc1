import TesseraModel
import TesseraShim

/// GIF through giflib: a frame as a browser shows it — frames 0...N composited on the logical
/// screen with their transparency and disposal — decoded whole onto an RGBA canvas (a GIF's
/// LZW rows cannot be skipped or scaled), then served row by row like an interlaced PNG. The
/// frames are counted first by a pass that skips their data undecoded; no frame's raster is
/// ever kept by giflib, so memory is the canvas, at most one saved rectangle and one line.
final class GIFDecoder {
    /// The logical screen (or, when the file says 0, the frames' extent).
    let size: Size
    let scan: ts_gif_scan_result
    /// Owns giflib's handle: closed once, whether `init` finishes or throws part way.
    private final class Handle {
        let pointer: OpaquePointer
        init(_ p: OpaquePointer) { pointer = p }
        deinit { ts_gif_close(pointer) }
    }
    private let owner: Handle
    private var handle: OpaquePointer { owner.pointer }

    var frameCount: Int { Int(scan.frames) }
    /// The NETSCAPE2.0 loop count (0: forever); nil when the file has none (play once).
    var loopCount: Int? { scan.loop >= 0 ? Int(scan.loop) : nil }
    /// Some frame has a transparent index, or the frames leave part of the screen uncovered.
    var mayHaveAlpha: Bool {
        scan.transparency != 0 || Int(scan.extent_width) < size.width || Int(scan.extent_height) < size.height
    }

    /// Lenient: frames cut short or damaged keep what decoded (`cut` says what was lost).
    init(bytes: UnsafeRawBufferPointer, limits: Limits, lenient: Bool = false) throws {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
              let h = ts_gif_open(base, bytes.count) else {
            throw ImagingError(.outOfMemory, "no memory to open the GIF")
        }
        let owner = Handle(h)
        guard ts_gif_ok(h) != 0 else { throw GIFDecoder.failure(String(cString: ts_gif_message(h)), code: .corrupt) }
        self.owner = owner
        ts_gif_set_lenient(h, lenient ? 1 : 0)
        var screenWidth: UInt32 = 0, screenHeight: UInt32 = 0
        ts_gif_screen(h, &screenWidth, &screenHeight)
        var s = ts_gif_scan_result()
        _ = ts_gif_scan(h, &s)
        scan = s
        guard s.frames > 0 || (lenient && s.ends_early != 0 && s.extent_width > 0) else {
            throw ImagingError(s.unreadable_after != 0 ? .truncated : .corrupt,
                               "GIF has no readable frame (\(screenWidth)x\(screenHeight) screen)")
        }
        // A screen of 0 (or smaller than every frame is not: frames are clipped to it, as
        // browsers do) takes the frames' extent.
        let width = screenWidth > 0 ? Int(screenWidth) : Int(s.extent_width)
        let height = screenHeight > 0 ? Int(screenHeight) : Int(s.extent_height)
        size = Size(width: width, height: height)
        guard width > 0, height > 0 else { throw ImagingError(.corrupt, "GIF with an empty screen") }
        try limits.checkDimensions(size)
    }

    /// Frames up to this many pixels are decoded whole by Tessera's LZW decoder, larger ones
    /// line by line through giflib (tests set 0 to compare the two).
    var wholeFrameLimit: Int = 64 << 20 {
        didSet { ts_gif_set_whole_frame_limit(handle, max(0, wholeFrameLimit)) }
    }

    /// Whether the file is whole and sound past its frames (a strict read requires it): the
    /// error to fail with, or nil.
    var damage: ImagingError? {
        guard scan.unreadable_after != 0 else { return nil }
        let after = frameCount == 0 ? "in its first frame" : "after \(frameCount) frame\(frameCount == 1 ? "" : "s")"
        return scan.ends_early != 0
            ? ImagingError(.truncated, "GIF data ends \(after), before its trailer")
            : ImagingError(.corrupt, "GIF data unreadable \(after)")
    }

    /// The last frame decoded was cut short (lenient): the first canvas row not wholly its, and why.
    var cut: (row: Int, reason: String)? {
        var row: UInt32 = 0
        var message: UnsafePointer<CChar>?
        guard ts_gif_cut(handle, &row, &message) != 0 else { return nil }
        return (Int(row), message.map { String(cString: $0) } ?? "")
    }

    /// Frame `frame` as shown: RGBA when any pixel is not opaque, else RGB.
    func decode(frame: Int, limits: Limits) throws -> PixelBuffer {
        guard frame >= 0, frame < max(1, frameCount) || scan.unreadable_after != 0 else {
            throw ImagingError(.invalidRecipe, "frame \(frame) of a GIF with \(frameCount) frame\(frameCount == 1 ? "" : "s") (frames count from 0)")
        }
        let canvas = try PixelBuffer.make(width: size.width, height: size.height, layout: .rgba)
        canvas.base.initialize(repeating: 0, count: canvas.stride * size.height)
        let rc = ts_gif_render(handle, Int32(frame), canvas.base, UInt32(size.width), UInt32(size.height),
                               UInt64(max(1, limits.maxPixels)))
        if rc < 0 {
            let message = String(cString: ts_gif_message(handle))
            switch rc {
            case -2: throw ImagingError(.invalidRecipe, "GIF: \(message)")
            case -3: throw ImagingError(.limitExceeded, "GIF: \(message)")
            case -4: throw ImagingError(.truncated, "GIF data ends inside frame \(frame > 0 ? "\(frame) or before" : "0"): \(message)")
            default: throw GIFDecoder.failure(message, code: .corrupt)
            }
        }
        // Opaque everywhere (the common case): three channels, no alpha path downstream.
        let rgb = try PixelBuffer.make(width: size.width, height: size.height, layout: .rgb)
        guard canvas.stride == size.width * 4, rgb.stride == size.width * 3,
              ts_rgba_to_rgb_if_opaque(canvas.base, size.width * size.height, rgb.base) == 1 else { return canvas }
        return rgb
    }

    /// Every frame in turn, as shown (RGBA, the canvas itself: copy what must outlive the
    /// call), with its delay in milliseconds (browsers' rule: 0 or 10 ms shows as 100 ms).
    func frames(limits: Limits, _ body: (Int, PixelBuffer, Int) throws -> Void) throws {
        let canvas = try PixelBuffer.make(width: size.width, height: size.height, layout: .rgba)
        canvas.base.initialize(repeating: 0, count: canvas.stride * size.height)
        guard ts_gif_begin(handle, canvas.base, UInt32(size.width), UInt32(size.height), UInt64(max(1, limits.maxPixels))) == 0 else {
            throw GIFDecoder.failure(String(cString: ts_gif_message(handle)), code: .corrupt)
        }
        while true {
            var delay: Int32 = 0
            let rc = ts_gif_next(handle, &delay)
            if rc == -2 { return }
            if rc < 0 {
                let message = String(cString: ts_gif_message(handle))
                switch rc {
                case -3: throw ImagingError(.limitExceeded, "GIF: \(message)")
                case -4: throw ImagingError(.truncated, "GIF data ends inside a frame: \(message)")
                default: throw GIFDecoder.failure(message, code: .corrupt)
                }
            }
            try body(Int(rc), canvas, delay <= 1 ? 100 : Int(delay) * 10)
        }
    }

    /// giflib's message, typed: a file that ends early is truncated, anything else corrupt.
    static func failure(_ message: String, code: ImagingError.Code) -> ImagingError {
        let lower = message.lowercased()
        let truncated = lower.contains("read") || lower.contains("eof") || lower.contains("too soon")
        return ImagingError(truncated ? .truncated : code, "GIF: \(message)")
    }
}
