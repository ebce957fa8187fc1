import TesseraModel
/// Composites straight-alpha RGBA onto an opaque background, giving RGB.
/// Blends in sRGB space, as browsers composite.
func flatten(_ image: PixelBuffer, onto background: RGBColor) throws -> PixelBuffer {
    precondition(image.layout == .rgba)
    let out = try PixelBuffer.make(width: image.width, height: image.height, layout: .rgb)
    let bg = (Int(background.r), Int(background.g), Int(background.b))
    for y in 0..<image.height {
        var s = UnsafePointer(image.row(y))
        var d = out.row(y)
        for _ in 0..<image.width {
            let a = Int(s[3]), ia = 255 - a
            d[0] = UInt8((Int(s[0]) * a + bg.0 * ia + 127) / 255)
            d[1] = UInt8((Int(s[1]) * a + bg.1 * ia + 127) / 255)
            d[2] = UInt8((Int(s[2]) * a + bg.2 * ia + 127) / 255)
            s += 4
            d += 3
        }
    }
    return out
}
