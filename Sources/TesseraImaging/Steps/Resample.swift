import TesseraShim
import Foundation
import TesseraModel

extension ResampleFilter {
    var support: Double {
        switch self {
        case .lanczos3: return 3
        case .cubic: return 2
        case .linear: return 1
        }
    }

    func weight(_ x: Double) -> Double {
        let ax = abs(x)
        switch self {
        case .lanczos3:
            if ax < 1e-9 { return 1 }
            if ax >= 3 { return 0 }
            let px = Double.pi * x
            return 3 * sin(px) * sin(px / 3) / (px * px)
        case .cubic:
            if ax < 1 { return 1.5 * ax * ax * ax - 2.5 * ax * ax + 1 }
            if ax < 2 { return -0.5 * ax * ax * ax + 2.5 * ax * ax - 4 * ax + 2 }
            return 0
        case .linear:
            return ax < 1 ? 1 - ax : 0
        }
    }
}

/// The taps of a 1-D resampling: for each output sample, the first input sample
/// and its normalised weights (trimmed of zero taps).
struct FilterTaps {
    let count: Int
    let maxTaps: Int
    let starts: UnsafeMutablePointer<Int32>
    let lengths: UnsafeMutablePointer<Int32>
    let weights: UnsafeMutablePointer<Float>  // count * maxTaps
    /// Each weight four times over (for the horizontal kernel), when asked for.
    private(set) var expanded: UnsafeMutablePointer<Float>?

    /// Taps mapping the span `origin ..< origin+span` of an input of `inputSize`
    /// samples onto `outputSize` samples (the geometry Pillow and libvips use:
    /// sample centres at i + 0.5).
    init(inputSize: Int, origin: Double, span: Double, outputSize: Int, filter: ResampleFilter) {
        precondition(inputSize > 0 && outputSize > 0 && span > 0)
        let scale = span / Double(outputSize)
        let filterScale = max(scale, 1)
        let support = filter.support * filterScale
        let maxTaps = Int((2 * support).rounded(.up)) + 2
        count = outputSize
        self.maxTaps = maxTaps
        starts = .allocate(capacity: outputSize)
        lengths = .allocate(capacity: outputSize)
        weights = .allocate(capacity: outputSize * maxTaps)
        weights.initialize(repeating: 0, count: outputSize * maxTaps)
        var raw = [Double](repeating: 0, count: maxTaps)
        for i in 0..<outputSize {
            let center = origin + (Double(i) + 0.5) * scale
            var lo = Int((center - support + 0.5).rounded(.down))
            var hi = Int((center + support + 0.5).rounded(.down))
            lo = max(0, min(lo, inputSize - 1))
            hi = max(lo + 1, min(hi, inputSize))
            var n = min(hi - lo, maxTaps)
            var total = 0.0
            for k in 0..<n {
                let w = filter.weight((Double(lo + k) - center + 0.5) / filterScale)
                raw[k] = w
                total += w
            }
            // Trim zero taps at both ends (Lanczos is zero at integer offsets).
            var first = 0
            while first < n - 1 && abs(raw[first]) < 1e-9 { first += 1 }
            while n - 1 > first && abs(raw[n - 1]) < 1e-9 { n -= 1 }
            if abs(total) < 1e-12 {  // degenerate: nearest sample
                let nearest = max(0, min(inputSize - 1, Int(center.rounded(.down))))
                starts[i] = Int32(nearest)
                lengths[i] = 1
                weights[i * maxTaps] = 1
                continue
            }
            starts[i] = Int32(lo + first)
            lengths[i] = Int32(n - first)
            for k in first..<n { weights[i * maxTaps + k - first] = Float(raw[k] / total) }
        }
    }

    /// Fills `expanded`: the horizontal kernel multiplies a pixel's 4 lanes by one weight.
    mutating func expand() {
        let e = UnsafeMutablePointer<Float>.allocate(capacity: count * maxTaps * 4)
        for i in 0..<(count * maxTaps) {
            let w = weights[i]
            e[4 * i] = w; e[4 * i + 1] = w; e[4 * i + 2] = w; e[4 * i + 3] = w
        }
        expanded = e
    }

    func deallocate() {
        starts.deallocate()
        lengths.deallocate()
        weights.deallocate()
        expanded?.deallocate()
    }

    /// Whether this is a pure copy of `outputSize` samples starting at an integer offset.
    var isIdentity: Bool {
        for i in 0..<count where lengths[i] != 1 || weights[i * maxTaps] != 1 || starts[i] != starts[0] + Int32(i) {
            return false
        }
        return true
    }
}

/// Streaming, separable resampler in linear light with premultiplied alpha.
///
/// Rows arrive in order from a decoder (`consume`); each needed row is converted
/// to linear light and filtered horizontally into a small ring of rows; as soon as
/// the rows an output row needs are present, that output row is filtered
/// vertically and stored as 8-bit sRGB. Memory is the output plus a few rows,
/// never the whole source.
final class Resampler {
    let inputWidth: Int
    let inputHeight: Int
    let inputChannels: Int   // 1 gray, 3 RGB, 4 RGBA (straight alpha)
    let output: PixelBuffer
    let passthrough: Bool
    private let passX: Int, passY: Int

    private var h: FilterTaps
    private let v: FilterTaps
    private let ringRows: Int
    /// Horizontally filtered rows, 4 floats per output pixel, `ringRows` of them.
    private let ring: UnsafeMutablePointer<Float>
    /// The current input row in linear light, 4 floats per pixel.
    private let linearRow: UnsafeMutablePointer<Float>
    /// The transfer tables (sRGB's, or the identity for coded values).
    private let toLinear: UnsafeMutablePointer<Float>
    private let fromLinear: UnsafeMutablePointer<UInt8>
    private let rowPointers: UnsafeMutablePointer<UnsafePointer<Float>?>
    private var nextOutputRow = 0
    private var nextInputRow = 0
    private let firstNeededRow: Int
    private let lastNeededRow: Int

    /// - Parameters:
    ///   - region: the part of the input to map onto the output (fractional edges allowed).
    ///   - transfer: the tables to the domain filtered in and back (256 floats in 0...1,
    ///     65,536 codes); nil: sRGB's, linear light.
    init(inputWidth: Int, inputHeight: Int, inputChannels: Int, region: Rect,
         outputSize: Size, filter: ResampleFilter,
         transfer: (toLinear: UnsafeMutablePointer<Float>, fromLinear: UnsafeMutablePointer<UInt8>)? = nil) throws {
        precondition([1, 3, 4].contains(inputChannels))
        toLinear = transfer?.toLinear ?? SRGB.toLinear
        fromLinear = transfer?.fromLinear ?? SRGB.fromLinear
        self.inputWidth = inputWidth
        self.inputHeight = inputHeight
        self.inputChannels = inputChannels
        let layout: PixelLayout = inputChannels == 1 ? .gray : inputChannels == 3 ? .rgb : .rgba
        output = try PixelBuffer.make(width: outputSize.width, height: outputSize.height, layout: layout)
        h = FilterTaps(inputSize: inputWidth, origin: region.x, span: region.width,
                       outputSize: outputSize.width, filter: filter)
        v = FilterTaps(inputSize: inputHeight, origin: region.y, span: region.height,
                       outputSize: outputSize.height, filter: filter)
        passthrough = h.isIdentity && v.isIdentity
        passX = Int(h.starts[0])
        passY = Int(v.starts[0])
        var maxLen = 1
        for i in 0..<v.count { maxLen = max(maxLen, Int(v.lengths[i])) }
        // One spare ring row: two rows are filtered before the first of them is emitted.
        ringRows = passthrough ? 1 : maxLen + 1
        ring = .allocate(capacity: passthrough ? 1 : ringRows * outputSize.width * 4)
        linearRow = .allocate(capacity: passthrough ? 1 : inputWidth * 8)
        rowPointers = .allocate(capacity: ringRows)
        if !passthrough { h.expand() }
        firstNeededRow = Int(v.starts[0])
        lastNeededRow = Int(v.starts[v.count - 1] + v.lengths[v.count - 1]) - 1
    }

    deinit {
        h.deallocate()
        v.deallocate()
        ring.deallocate()
        linearRow.deallocate()
        rowPointers.deallocate()
    }

    var isComplete: Bool { nextOutputRow == output.height }

    /// The input rows this resampler uses.
    var neededRows: ClosedRange<Int> { firstNeededRow...max(firstNeededRow, lastNeededRow) }

    /// The input columns this resampler uses.
    var neededColumns: ClosedRange<Int> {
        let first = Int(h.starts[0]), last = Int(h.starts[h.count - 1] + h.lengths[h.count - 1]) - 1
        return first...max(first, last)
    }

    /// Rows the decoder skipped (none of them needed here).
    func skip(_ count: Int) {
        precondition(nextInputRow + count <= firstNeededRow || nextInputRow > lastNeededRow, "skipped rows this output needs")
        nextInputRow += count
    }

    /// Feeds `count` input rows starting at the next expected row.
    func consume(_ rows: UnsafePointer<UInt8>, stride: Int, count: Int) {
        var i = 0
        while i < count {
            let y = nextInputRow
            if y < firstNeededRow || y > lastNeededRow {
                nextInputRow += 1
                i += 1
                continue
            }
            let src = rows + i * stride
            if passthrough {
                let oy = y - passY
                (output.row(oy)).update(from: src + passX * inputChannels, count: output.stride)
                nextOutputRow = oy + 1
                nextInputRow += 1
                i += 1
                continue
            }
            // Two needed rows at once when they are there (the kernel shares weight loads).
            let rowFloats = output.width * 4
            if i + 1 < count && y + 1 <= lastNeededRow {
                let second = linearRow + inputWidth * 4
                ts_linearise_row(src, Int32(inputWidth), Int32(inputChannels), toLinear, linearRow)
                ts_linearise_row(src + stride, Int32(inputWidth), Int32(inputChannels), toLinear, second)
                ts_filter_h2(linearRow, second, ring + (y % ringRows) * rowFloats, ring + ((y + 1) % ringRows) * rowFloats,
                             Int32(h.count), Int32(h.maxTaps), h.starts, h.lengths, h.expanded)
                nextInputRow += 2
                i += 2
                emitReady(upTo: y)      // rows for y complete before y+1 overwrote nothing they need
                emitReady(upTo: y + 1)
                continue
            }
            ts_linearise_row(src, Int32(inputWidth), Int32(inputChannels), toLinear, linearRow)
            ts_filter_h(linearRow, ring + (y % ringRows) * rowFloats, Int32(h.count), Int32(h.maxTaps),
                        h.starts, h.lengths, h.expanded)
            nextInputRow += 1
            i += 1
            emitReady(upTo: y)
        }
    }

    /// Feeds `count` rows of 16-bit linear samples (a raw file's): filtered in linear light
    /// straight from them, never through 8 bits.
    func consumeLinear(_ rows: UnsafePointer<UInt16>, stride: Int, count: Int) {
        for i in 0..<count {
            let y = nextInputRow
            nextInputRow += 1
            if y < firstNeededRow || y > lastNeededRow { continue }
            let src = rows + i * stride
            if passthrough {
                // The samples are the linear codes `fromLinear` is indexed by.
                let oy = y - passY
                let dst = output.row(oy), from = src + passX * inputChannels
                for k in 0..<output.width * inputChannels { dst[k] = fromLinear[Int(from[k])] }
                nextOutputRow = oy + 1
                continue
            }
            let rowFloats = output.width * 4
            ts_linearise_row16(src, Int32(inputWidth), Int32(inputChannels), linearRow)
            ts_filter_h(linearRow, ring + (y % ringRows) * rowFloats, Int32(h.count), Int32(h.maxTaps),
                        h.starts, h.lengths, h.expanded)
            emitReady(upTo: y)
        }
    }

    /// Emits every output row whose input rows have all arrived by row `y`.
    @inline(__always)
    private func emitReady(upTo y: Int) {
        while nextOutputRow < v.count {
            let start = Int(v.starts[nextOutputRow])
            let length = Int(v.lengths[nextOutputRow])
            guard start + length - 1 <= y else { break }
            emitRow(nextOutputRow, start: start, length: length)
            nextOutputRow += 1
        }
    }

    /// Vertical pass and conversion to 8-bit sRGB (straight alpha), in the C kernel.
    private func emitRow(_ oy: Int, start: Int, length: Int) {
        let width = output.width
        for k in 0..<length {
            rowPointers[k] = UnsafePointer(ring + ((start + k) % ringRows) * width * 4)
        }
        ts_filter_v_out(rowPointers, v.weights + oy * v.maxTaps, Int32(length), Int32(width), Int32(inputChannels),
                        fromLinear, output.row(oy))
    }
}

/// Index into `SRGB.fromLinear` for a linear value, clamped to 0...1 (NaN -> 0).
/// Scalar on purpose: the generic SIMD conversions are not specialised into fast code.
@inline(__always)
func lutIndex(_ v: Float) -> Int {
    let c = v >= 0 ? min(v, 1) : 0
    return Int(c * 65535 + 0.5)
}

extension SIMD4 where Scalar == Float {
    /// `self += w * v` as a separate multiply and add: `addingProduct` becomes a
    /// scalar `fmaf` call per lane on x86-64 without FMA (the baseline target).
    @inline(__always)
    mutating func addProduct(_ w: Float, _ v: SIMD4<Float>) {
        self = self + SIMD4(repeating: w) * v
    }
}
