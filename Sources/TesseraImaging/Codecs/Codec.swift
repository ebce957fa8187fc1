import TesseraModel
/// Direct access to the encoders, for tools and tests that make images.
public enum Codec {
    /// Encodes gray or RGB pixels as JPEG (libjpeg), with optional ICC profile and
    /// EXIF payload ("Exif\0\0" + TIFF, as `Exif.build` makes). `effort` as
    /// `OutputSettings.jpegEffort`; 0 here (libjpeg-turbo as it comes), so that test images stay put.
    public static func encodeJPEG(_ image: PixelBuffer, quality: Int = 90, subsampling: ChromaSubsampling = .auto,
                                  progressive: Bool = false, optimize: Bool = true, restartInterval: Int = 0,
                                  effort: Int = 0, icc: [UInt8]? = nil, exif: [UInt8]? = nil) throws -> [UInt8] {
        try JPEGEncoder.encode(image, .init(quality: quality, progressive: progressive, optimize: optimize,
                                            subsampling: subsampling, restartInterval: restartInterval, effort: effort),
                               icc: icc, exif: exif)
    }

    /// Decodes a whole JPEG at `scaleEighths`/8 (libjpeg's scaled IDCT), top to bottom in
    /// one pass: gray or RGB pixels as stored, no orientation or colour conversion. The
    /// plain reference that band decodes (restart-marker starts, skipped scanlines) must match.
    public static func decodeJPEG(_ bytes: [UInt8], scaleEighths: Int = 8) throws -> PixelBuffer {
        try bytes.withUnsafeBytes { raw in
            var limits = Limits()
            limits.maxPixels = Int.max
            let d = try JPEGDecoder(bytes: raw, limits: limits)
            let layout: JPEGDecoder.OutputLayout = d.header.components == 1 ? .gray : .rgb
            let size = try d.start(scaleEighths: scaleEighths, layout: layout)
            let image = try PixelBuffer.make(width: size.width, height: size.height, layout: layout == .gray ? .gray : .rgb)
            var y = 0
            while y < size.height {
                let n = try d.read(into: image.row(y), stride: image.stride, maxRows: size.height - y)
                guard n > 0 else { throw ImagingError(.truncated, "JPEG ended at row \(y)") }
                y += n
            }
            try d.finish()
            return image
        }
    }

    /// Encodes pixels as WebP (libwebp): lossy at `quality` 1...100, or lossless.
    public static func encodeWebP(_ image: PixelBuffer, quality: Int = 80, lossless: Bool = false, icc: [UInt8]? = nil) throws -> [UInt8] {
        try WebPEncoder.encode(image, .init(quality: quality, lossless: lossless, method: 4), icc: icc)
    }

    /// Encodes pixels as AVIF (libheif + aom), or HEIC (x265) with `hevc`; for fixtures:
    /// `orientation` (EXIF-style 1...8) written as `irot`/`imir` (the stored pixels are
    /// `image`, displayed transformed), an nclx box, a thumbnail item, an Exif item.
    public static func encodeHEIF(_ image: PixelBuffer, quality: Int = 80, hevc: Bool = false, orientation: Int = 1,
                                  nclx: (primaries: UInt16, transfer: UInt16, matrix: UInt16)? = nil,
                                  thumbnailBox: Int = 0, exif: [UInt8]? = nil, icc: [UInt8]? = nil,
                                  subsampling: ChromaSubsampling = .auto) throws -> [UInt8] {
        var extras = AVIFEncoder.Extras()
        extras.hevc = hevc
        extras.orientation = orientation
        extras.nclx = nclx
        extras.thumbnailBox = thumbnailBox
        extras.exif = exif
        return try AVIFEncoder.encode(image, .init(quality: quality, speed: 8, subsampling: subsampling), icc: icc, extras: extras)
    }

    /// Whether this libheif can write HEIC (x265) and AVIF (aom), and read them.
    public static var canEncodeHEIC: Bool { HEIFDecoder.canEncodeHEIC }
    public static var canEncodeAVIF: Bool { HEIFDecoder.canEncodeAVIF }

    /// Encodes gray, RGB or RGBA pixels as PNG (libpng).
    public static func encodePNG(_ image: PixelBuffer, compressionLevel: Int = 6, icc: [UInt8]? = nil) throws -> [UInt8] {
        try PNGEncoder.encode(image, compressionLevel: compressionLevel, icc: icc)
    }

    /// The entropy-coded data of every scan of a JPEG, in order: what lossless
    /// operations must leave byte-identical.
    public static func jpegScanData(_ jpeg: [UInt8]) throws -> [[UInt8]] {
        try jpeg.withUnsafeBytes { raw in
            try JPEGSegments(raw).segments.compactMap { s in s.scanData.map { Array(raw[$0]) } }
        }
    }

    /// The marker segments of a JPEG as (marker, payload) pairs (SOI..EOI, scans without their data).
    public static func jpegSegments(_ jpeg: [UInt8]) throws -> [(marker: UInt8, payload: [UInt8])] {
        try jpeg.withUnsafeBytes { raw in
            try JPEGSegments(raw).segments.map { ($0.marker, Array(raw[$0.payload])) }
        }
    }

    /// Inserts a marker segment (e.g. APP1 XMP, COM) right after SOI, for making fixtures.
    public static func insertSegment(marker: UInt8, payload: [UInt8], into jpeg: [UInt8]) -> [UInt8] {
        precondition(payload.count <= 65533)
        let len = payload.count + 2
        return Array(jpeg[0..<2]) + [0xFF, marker, UInt8(len >> 8), UInt8(len & 0xFF)] + payload + Array(jpeg[2...])
    }
}
