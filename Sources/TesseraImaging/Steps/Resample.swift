import Foundation

/// The filter a resampler uses.
public enum ResampleFilter: String, Sendable, Codable {
    /// Lanczos-3: sharp, little ringing; the default.
    case lanczos3
    /// Catmull-Rom cubic.
    case cubic
    /// Triangle (bilinear when enlarging).
    case linear

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

    func deallocate() {
        starts.deallocate()
        lengths.deallocate()
        weights.deallocate()
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

    private let h: FilterTaps
    private let v: FilterTaps
    private let ringRows: Int
    private let ring: UnsafeMutablePointer<SIMD4<Float>>
    private let linearRow: UnsafeMutablePointer<SIMD4<Float>>
    private let rowPointers: UnsafeMutablePointer<UnsafePointer<SIMD4<Float>>>
    private var nextOutputRow = 0
    private var nextInputRow = 0
    private let firstNeededRow: Int
    private let lastNeededRow: Int

    /// - Parameters:
    ///   - region: the part of the input to map onto the output (fractional edges allowed).
    init(inputWidth: Int, inputHeight: Int, inputChannels: Int, region: Rect,
         outputSize: Size, filter: ResampleFilter) {
        precondition([1, 3, 4].contains(inputChannels))
        self.inputWidth = inputWidth
        self.inputHeight = inputHeight
        self.inputChannels = inputChannels
        let layout: PixelLayout = inputChannels == 1 ? .gray : inputChannels == 3 ? .rgb : .rgba
        output = PixelBuffer(width: outputSize.width, height: outputSize.height, layout: layout)
        h = FilterTaps(inputSize: inputWidth, origin: region.x, span: region.width,
                       outputSize: outputSize.width, filter: filter)
        v = FilterTaps(inputSize: inputHeight, origin: region.y, span: region.height,
                       outputSize: outputSize.height, filter: filter)
        passthrough = h.isIdentity && v.isIdentity
        passX = Int(h.starts[0])
        passY = Int(v.starts[0])
        var maxLen = 1
        for i in 0..<v.count { maxLen = max(maxLen, Int(v.lengths[i])) }
        ringRows = passthrough ? 1 : maxLen
        ring = .allocate(capacity: passthrough ? 1 : ringRows * outputSize.width)
        linearRow = .allocate(capacity: passthrough ? 1 : inputWidth)
        rowPointers = .allocate(capacity: ringRows)
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

    /// Feeds `count` input rows starting at the next expected row.
    func consume(_ rows: UnsafePointer<UInt8>, stride: Int, count: Int) {
        for i in 0..<count {
            let y = nextInputRow
            nextInputRow += 1
            if y < firstNeededRow || y > lastNeededRow { continue }
            let src = rows + i * stride
            if passthrough {
                let oy = y - passY
                (output.row(oy)).update(from: src + passX * inputChannels, count: output.stride)
                nextOutputRow = oy + 1
                continue
            }
            linearise(src)
            filterRow(into: ring + (y % ringRows) * output.width)
            while nextOutputRow < v.count {
                let start = Int(v.starts[nextOutputRow])
                let length = Int(v.lengths[nextOutputRow])
                guard start + length - 1 <= y else { break }
                emitRow(nextOutputRow, start: start, length: length)
                nextOutputRow += 1
            }
        }
    }

    /// 8-bit sRGB (straight alpha) -> linear light, premultiplied, one SIMD4 per pixel.
    @inline(__always)
    private func linearise(_ src: UnsafePointer<UInt8>) {
        let lut = SRGB.toLinear
        let dst = linearRow
        let n = inputWidth
        switch inputChannels {
        case 1:
            for x in 0..<n { dst[x] = SIMD4(lut[Int(src[x])], 0, 0, 1) }
        case 3:
            var s = src
            for x in 0..<n {
                dst[x] = SIMD4(lut[Int(s[0])], lut[Int(s[1])], lut[Int(s[2])], 1)
                s += 3
            }
        default:
            var s = src
            for x in 0..<n {
                let a = Float(s[3]) * (1 / 255)
                dst[x] = SIMD4(lut[Int(s[0])] * a, lut[Int(s[1])] * a, lut[Int(s[2])] * a, a)
                s += 4
            }
        }
    }

    @inline(__always)
    private func filterRow(into dst: UnsafeMutablePointer<SIMD4<Float>>) {
        let src = UnsafePointer(linearRow)
        let taps = h.maxTaps
        for x in 0..<h.count {
            let start = Int(h.starts[x])
            let length = Int(h.lengths[x])
            let w = h.weights + x * taps
            let p = src + start
            var acc = SIMD4<Float>(repeating: 0)
            for k in 0..<length { acc.addProduct(w[k], p[k]) }
            dst[x] = acc
        }
    }

    private func emitRow(_ oy: Int, start: Int, length: Int) {
        let width = output.width
        for k in 0..<length {
            rowPointers[k] = UnsafePointer(ring + ((start + k) % ringRows) * width)
        }
        let w = v.weights + oy * v.maxTaps
        let out = output.row(oy)
        let encode = SRGB.fromLinear
        for x in 0..<width {
            var acc = SIMD4<Float>(repeating: 0)
            for k in 0..<length { acc.addProduct(w[k], rowPointers[k][x]) }
            switch inputChannels {
            case 1:
                out[x] = encode[lutIndex(acc[0])]
            case 3:
                let o = out + x * 3
                o[0] = encode[lutIndex(acc[0])]
                o[1] = encode[lutIndex(acc[1])]
                o[2] = encode[lutIndex(acc[2])]
            default:
                let a = acc[3] >= 0 ? min(acc[3], 1) : 0
                let o = out + x * 4
                if a < 1 / 512 {
                    o[0] = 0; o[1] = 0; o[2] = 0; o[3] = 0
                    continue
                }
                let inv = 1 / a
                o[0] = encode[lutIndex(acc[0] * inv)]
                o[1] = encode[lutIndex(acc[1] * inv)]
                o[2] = encode[lutIndex(acc[2] * inv)]
                o[3] = UInt8(a * 255 + 0.5)
            }
        }
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
