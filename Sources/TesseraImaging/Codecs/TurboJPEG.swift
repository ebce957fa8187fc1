import CTurboJPEG
import TesseraModel

/// Lossless JPEG transforms through TurboJPEG (`tjTransform`): rotations and flips
/// done on DCT coefficients, without decoding.
enum TurboJPEGTransform {
    /// Applies `orientation` losslessly. With `perfect`, fails instead of trimming
    /// partial MCUs at the edges. All markers are copied; the caller strips them.
    /// A new handle per call: a TurboJPEG handle that failed once can fail the next file.
    static func apply(_ orientation: Orientation, to jpeg: [UInt8], perfect: Bool = true) throws -> [UInt8] {
        let op: TJXOP
        switch orientation.exifValue {
        case 1: return jpeg
        case 2: op = TJXOP_HFLIP
        case 3: op = TJXOP_ROT180
        case 4: op = TJXOP_VFLIP
        case 5: op = TJXOP_TRANSPOSE
        case 6: op = TJXOP_ROT90
        case 7: op = TJXOP_TRANSVERSE
        default: op = TJXOP_ROT270
        }
        guard let handle = tjInitTransform() else {
            throw ImagingError(.transformFailed, "cannot create a TurboJPEG transformer")
        }
        defer { tjDestroy(handle) }
        var transform = tjtransform()
        transform.op = Int32(op.rawValue)
        transform.options = perfect ? TJXOPT_PERFECT : TJXOPT_TRIM
        var dst: UnsafeMutablePointer<UInt8>?
        var dstSize: UInt = 0
        let rc = jpeg.withUnsafeBufferPointer { src in
            tjTransform(handle, src.baseAddress, UInt(src.count), 1, &dst, &dstSize, &transform, 0)
        }
        defer { if let dst { tjFree(dst) } }
        guard rc == 0, let dst else {
            let message = String(cString: tjGetErrorStr2(handle))
            throw ImagingError(.transformFailed, "lossless \(orientation) failed: \(message)")
        }
        return Array(UnsafeBufferPointer(start: dst, count: Int(dstSize)))
    }
}
