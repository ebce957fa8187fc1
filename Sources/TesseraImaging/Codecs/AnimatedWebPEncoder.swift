import CWebP
import TesseraModel

/// Animated WebP through libwebpmux's WebPAnimEncoder: frames added one at a time with their
/// timestamps (the encoder keeps only what it needs to choose each frame's sub-rectangle and
/// blending, never every frame), assembled at the end.
final class AnimatedWebPEncoder {
    private let encoder: OpaquePointer
    private var config = WebPConfig()
    let width: Int, height: Int
    private(set) var frames = 0

    /// `loop`: 0 plays forever, N plays N times. `mixed`: each lossy frame may be stored
    /// losslessly where that is smaller (palette art: a GIF's frames).
    init(width: Int, height: Int, quality: Int, lossless: Bool, method: Int, loop: Int, mixed: Bool = false) throws {
        self.width = width
        self.height = height
        var options = WebPAnimEncoderOptions()
        guard WebPAnimEncoderOptionsInit(&options) != 0, WebPConfigInit(&config) != 0 else {
            throw ImagingError(.encodeFailed, "libwebp's animation encoder does not match its headers")
        }
        options.anim_params.loop_count = Int32(max(0, min(65535, loop)))
        options.anim_params.bgcolor = 0
        options.allow_mixed = mixed && !lossless ? 1 : 0
        guard let e = WebPAnimEncoderNew(Int32(width), Int32(height), &options) else {
            throw ImagingError(.outOfMemory, "no memory for a \(width)x\(height) animated WebP encoder")
        }
        encoder = e
        config.quality = Float(max(1, min(100, quality)))
        config.lossless = lossless ? 1 : 0
        config.method = Int32(max(0, min(6, method)))
    }

    deinit { WebPAnimEncoderDelete(encoder) }

    /// Adds a frame (RGBA or RGB, `width`×`height`) shown from `milliseconds`.
    func add(_ image: PixelBuffer, at milliseconds: Int) throws {
        precondition(image.width == width && image.height == height, "every frame is the animation's size")
        var picture = WebPPicture()
        guard WebPPictureInit(&picture) != 0 else { throw ImagingError(.encodeFailed, "WebPPictureInit failed") }
        defer { WebPPictureFree(&picture) }
        picture.width = Int32(width)
        picture.height = Int32(height)
        picture.use_argb = 1
        let imported = image.layout == .rgba ? WebPPictureImportRGBA(&picture, image.base, Int32(image.stride))
            : image.layout == .rgb ? WebPPictureImportRGB(&picture, image.base, Int32(image.stride)) : 0
        guard imported != 0 else { throw ImagingError(.outOfMemory, "no memory to import an animation frame") }
        guard WebPAnimEncoderAdd(encoder, &picture, Int32(milliseconds), &config) != 0 else {
            throw ImagingError(.encodeFailed, "animated WebP: \(String(cString: WebPAnimEncoderGetError(encoder)))")
        }
        frames += 1
    }

    /// The file, the last frame shown until `end` milliseconds.
    func finish(at end: Int) throws -> [UInt8] {
        guard WebPAnimEncoderAdd(encoder, nil, Int32(end), nil) != 0 else {
            throw ImagingError(.encodeFailed, "animated WebP: \(String(cString: WebPAnimEncoderGetError(encoder)))")
        }
        var data = WebPData()
        WebPDataInit(&data)
        defer { WebPDataClear(&data) }
        guard WebPAnimEncoderAssemble(encoder, &data) != 0, let bytes = data.bytes else {
            throw ImagingError(.encodeFailed, "animated WebP: \(String(cString: WebPAnimEncoderGetError(encoder)))")
        }
        return Array(UnsafeBufferPointer(start: bytes, count: data.size))
    }
}
