import TesseraModel
import TesseraShim

/// What animated outputs are written with: frames in turn, each from a time in milliseconds.
protocol AnimationEncoder: AnyObject {
    func add(_ image: PixelBuffer, at milliseconds: Int) throws
    /// The file, the last frame shown until `end` milliseconds.
    func finish(at end: Int) throws -> [UInt8]
}

extension AnimatedWebPEncoder: AnimationEncoder {}

/// GIF out (`gif_encode.c`): a palette per frame (median cut refined by k-means, 255 colours
/// and a transparent index, or 256), Floyd–Steinberg dithering, giflib's LZW. A frame is
/// written when the next one arrives (its delay is the time between them).
final class GIFEncoder: AnimationEncoder {
    private let encoder: OpaquePointer
    private var pending: (image: PixelBuffer, start: Int)?
    private let dither: Bool

    /// `loop`: 0 plays forever, 1 once, N times.
    init(width: Int, height: Int, loop: Int, dither: Bool = true) throws {
        guard let e = ts_gif_enc_new(Int32(width), Int32(height), Int32(loop)) else {
            throw ImagingError(.encodeFailed, "a \(width)x\(height) GIF cannot be written (GIF sides are at most 65,535)")
        }
        encoder = e
        self.dither = dither
    }

    deinit { ts_gif_enc_free(encoder) }

    func add(_ image: PixelBuffer, at milliseconds: Int) throws {
        if let pending { try write(pending.image, milliseconds - pending.start) }
        pending = (image, milliseconds)
    }

    private func write(_ image: PixelBuffer, _ milliseconds: Int) throws {
        precondition(image.layout == .rgb || image.layout == .rgba, "GIF frames are RGB or RGBA")
        let cs = Int32(max(0, min(65535, (milliseconds + 5) / 10)))
        guard ts_gif_enc_add(encoder, image.base, Int32(image.channels), Int32(image.stride), cs, dither ? 1 : 0) == 0 else {
            throw ImagingError(.encodeFailed, "GIF: a frame could not be written (out of memory)")
        }
    }

    func finish(at end: Int) throws -> [UInt8] {
        if let pending { try write(pending.image, end - pending.start) }
        pending = nil
        var size = 0
        guard let bytes = ts_gif_enc_finish(encoder, &size) else { throw ImagingError(.encodeFailed, "GIF: the file could not be finished") }
        return Array(UnsafeBufferPointer(start: bytes, count: size))
    }

    /// One still image as a GIF.
    static func encode(_ image: PixelBuffer) throws -> [UInt8] {
        var rgb = image
        if image.layout == .gray {
            rgb = try PixelBuffer.make(width: image.width, height: image.height, layout: .rgb)
            for y in 0..<image.height {
                let s = image.row(y), d = rgb.row(y)
                for x in 0..<image.width { d[3 * x] = s[x]; d[3 * x + 1] = s[x]; d[3 * x + 2] = s[x] }
            }
        }
        let e = try GIFEncoder(width: image.width, height: image.height, loop: 1)
        try e.add(rgb, at: 0)
        return try e.finish(at: 0)
    }
}
