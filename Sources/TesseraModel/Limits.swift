import Foundation

/// Bounds on what one source may cost, checked from the header before any pixel
/// buffer is allocated.
public struct Limits: Sendable, Equatable, Codable {
    /// Largest input accepted, in bytes.
    public var maxInputBytes: Int = 512 << 20
    /// Largest declared width × height (default 100 megapixels).
    public var maxPixels: Int = 100_000_000
    /// Largest declared width or height.
    public var maxDimension: Int = 65_500
    /// Largest number of progressive scans (guards against scan bombs; libjpeg-turbo 3 uses 500 in tjbench).
    public var maxProgressiveScans: Int = 500
    /// Memory libjpeg may use for whole-image buffers (progressive coefficients), in bytes.
    public var maxDecoderMemory: Int = 1 << 30
    /// Memory one task may plan to use (pixel buffers, decoder state, encoded outputs), in
    /// bytes; 0: no budget. A worker sets it from its memory limit: a task planned over it
    /// fails with `out-of-memory` before decoding instead of the kernel killing the worker.
    public var maxMemoryBytes: Int = 0

    public init() {}

    public static let `default` = Limits()

    public func checkInput(bytes: Int) throws {
        guard bytes <= maxInputBytes else {
            throw ImagingError(.limitExceeded, "input is \(bytes) bytes, over the limit of \(maxInputBytes)")
        }
    }

    public func checkDimensions(_ size: Size) throws {
        guard size.width > 0, size.height > 0 else {
            throw ImagingError(.corrupt, "image declares an empty size \(size)")
        }
        guard size.width <= maxDimension, size.height <= maxDimension else {
            throw ImagingError(.limitExceeded, "image is \(size), over the limit of \(maxDimension) pixels per side")
        }
        guard size.width.multipliedReportingOverflow(by: size.height).partialValue <= maxPixels else {
            let mp = Double(size.pixels) / 1_000_000
            throw ImagingError(.limitExceeded,
                               "image is \(size) (\(String(format: "%.1f", mp)) MP), over the limit of \(maxPixels) pixels")
        }
    }
}
