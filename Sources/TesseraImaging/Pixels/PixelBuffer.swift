import Foundation
import TesseraModel

/// How the bytes of one pixel are laid out. Alpha is straight (not premultiplied).
public enum PixelLayout: Int, Sendable, Codable {
    case gray = 1
    case rgb = 3
    case rgba = 4

    public var channels: Int { rawValue }
    public var hasAlpha: Bool { self == .rgba }
}

/// An owned, 8-bit-per-channel image in memory. The only pixel container in Tessera:
/// rows are contiguous, `stride` bytes apart.
public final class PixelBuffer: @unchecked Sendable {
    public let width: Int
    public let height: Int
    public let layout: PixelLayout
    public let stride: Int
    let base: UnsafeMutablePointer<UInt8>

    /// Allocates an uninitialised buffer (tests and small images; the pipeline uses
    /// `make`, which reports an allocation failure instead of stopping the process).
    public convenience init(width: Int, height: Int, layout: PixelLayout) {
        precondition(width > 0 && height > 0, "empty pixel buffer")
        guard let p = malloc(width * layout.channels * height) else {
            fatalError("cannot allocate a \(width)x\(height) image")
        }
        self.init(width: width, height: height, layout: layout, memory: p.assumingMemoryBound(to: UInt8.self))
    }

    private init(width: Int, height: Int, layout: PixelLayout, memory: UnsafeMutablePointer<UInt8>) {
        self.width = width
        self.height = height
        self.layout = layout
        self.stride = width * layout.channels
        self.base = memory
    }

    /// Allocates an uninitialised buffer, or throws `out-of-memory` when the system has
    /// no memory for it (a task failure, not a worker death). Callers check the size
    /// against limits first.
    public static func make(width: Int, height: Int, layout: PixelLayout) throws -> PixelBuffer {
        precondition(width > 0 && height > 0, "empty pixel buffer")
        let bytes = width.multipliedReportingOverflow(by: height * layout.channels)
        guard !bytes.overflow, let p = malloc(bytes.partialValue) else {
            throw ImagingError(.outOfMemory, "cannot allocate \(bytes.partialValue >> 20) MB for a \(width)x\(height) image")
        }
        return PixelBuffer(width: width, height: height, layout: layout, memory: p.assumingMemoryBound(to: UInt8.self))
    }

    deinit { free(base) }

    public var channels: Int { layout.channels }
    public var byteCount: Int { stride * height }

    @inline(__always)
    func row(_ y: Int) -> UnsafeMutablePointer<UInt8> { base + y * stride }

    /// The channel values of one pixel (for tests and tools, not for loops).
    public func pixel(x: Int, y: Int) -> [UInt8] {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel out of bounds")
        let p = row(y) + x * channels
        return (0..<channels).map { p[$0] }
    }

    /// Sets one pixel (for tests and tools).
    public func setPixel(x: Int, y: Int, _ value: [UInt8]) {
        precondition(value.count == channels && x >= 0 && x < width && y >= 0 && y < height)
        let p = row(y) + x * channels
        for c in 0..<channels { p[c] = value[c] }
    }

    /// Fills every pixel with one value.
    public func fill(_ value: [UInt8]) {
        precondition(value.count == channels)
        for y in 0..<height {
            let r = row(y)
            for x in 0..<width { for c in 0..<channels { r[x * channels + c] = value[c] } }
        }
    }

    /// Mean of each channel over a rectangle (for tests and tools).
    public func mean(x: Int, y: Int, width w: Int, height h: Int) -> [Double] {
        var sums = [Double](repeating: 0, count: channels)
        for yy in y..<(y + h) {
            let r = row(yy)
            for xx in x..<(x + w) { for c in 0..<channels { sums[c] += Double(r[xx * channels + c]) } }
        }
        return sums.map { $0 / Double(w * h) }
    }

    /// Whether every alpha value is 255 (always true without alpha).
    public var isOpaque: Bool {
        guard layout == .rgba else { return true }
        for y in 0..<height {
            let r = row(y)
            var x = 3
            while x < stride {
                if r[x] != 255 { return false }
                x += 4
            }
        }
        return true
    }

    /// A copy of the bytes, row after row (for tests and tools).
    /// The pixels, rows `stride` bytes apart, for tools and tests that fill or read them in bulk.
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try body(UnsafeMutableBufferPointer(start: base, count: byteCount))
    }

    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: byteCount)) }
}
