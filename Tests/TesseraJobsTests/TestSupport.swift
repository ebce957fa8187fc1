import TesseraImaging

/// A small flat JPEG.
func jpeg(_ w: Int, _ h: Int) throws -> [UInt8] {
    let image = PixelBuffer(width: w, height: h, layout: .rgb)
    image.fill([120, 80, 40])
    return try Codec.encodeJPEG(image, quality: 85)
}
