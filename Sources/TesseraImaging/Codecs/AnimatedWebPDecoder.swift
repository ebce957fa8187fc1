import CWebP
import TesseraModel

/// An animated WebP's frames as shown (libwebpdemux's WebPAnimDecoder: ANMF offsets, blending
/// and disposal done by libwebp), one at a time on its RGBA canvas, with their timestamps.
/// libwebp reads `bytes` while the decoder lives: they must outlive it.
final class AnimatedWebPDecoder {
    private let decoder: OpaquePointer
    let size: Size
    let frameCount: Int
    /// 0 plays forever.
    let loopCount: Int

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        var options = WebPAnimDecoderOptions()
        guard WebPAnimDecoderOptionsInit(&options) != 0 else {
            throw ImagingError(.unsupportedFeature, "libwebp's animation decoder does not match its headers")
        }
        options.color_mode = MODE_RGBA
        options.use_threads = 0
        var data = WebPData(bytes: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        guard let d = WebPAnimDecoderNew(&data, &options) else {
            throw ImagingError(.corrupt, "WebP: not a readable animation")
        }
        decoder = d
        var info = WebPAnimInfo()
        guard WebPAnimDecoderGetInfo(d, &info) != 0 else {
            WebPAnimDecoderDelete(d)
            throw ImagingError(.corrupt, "WebP: no animation header")
        }
        size = Size(width: Int(info.canvas_width), height: Int(info.canvas_height))
        frameCount = Int(info.frame_count)
        loopCount = Int(info.loop_count)
        do { try limits.checkDimensions(size) } catch {
            WebPAnimDecoderDelete(d)
            throw error
        }
    }

    deinit { WebPAnimDecoderDelete(decoder) }

    /// The next frame (a copy of the canvas, RGBA) and the time it ends, in milliseconds; nil after the last.
    func next() throws -> (image: PixelBuffer, end: Int)? {
        guard WebPAnimDecoderHasMoreFrames(decoder) != 0 else { return nil }
        var buffer: UnsafeMutablePointer<UInt8>?
        var timestamp: Int32 = 0
        guard WebPAnimDecoderGetNext(decoder, &buffer, &timestamp) != 0, let buffer else {
            throw ImagingError(.corrupt, "WebP: a frame of the animation cannot be decoded")
        }
        let image = try PixelBuffer.make(width: size.width, height: size.height, layout: .rgba)
        for y in 0..<size.height { image.row(y).update(from: buffer + y * size.width * 4, count: size.width * 4) }
        return (image, Int(timestamp))
    }
}
