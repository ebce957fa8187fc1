import Foundation
import TesseraModel

/// 10- and 12-bit samples (16-bit little-endian, as libheif gives them) to 8 bits.
///
/// - SDR: rounded, not truncated (`(v·255 + max/2) / max`): a 10-bit 1023 is 255, 2 is 1.
/// - HDR (nclx transfer PQ or HLG): a documented, simple tone map to SDR sRGB, in linear
///   light: the signal is turned into display luminance (PQ: SMPTE ST 2084; HLG: its
///   inverse OETF and a 1000-nit system gamma of 1.2), scaled so that 203 nits (BT.2408's
///   reference white) is SDR white, compressed with an extended Reinhard curve on
///   luminance (hue kept; the peak of 1000 nits, 4.9× reference white, maps to white),
///   converted from the file's primaries to BT.709/sRGB with a 3×3 matrix, clipped, and
///   encoded with the sRGB curve.
struct DeepToEight {
    private let maxValue: Int
    private let hdr: Bool
    /// Signal → linear relative to SDR white (HDR), one entry per code value.
    private var linear: [Float] = []
    /// Linear 0...1 (4096 steps) → sRGB 8-bit.
    private var encode: [UInt8] = []
    /// Source primaries → BT.709 primaries, in linear light (row-major).
    private var matrix: [Float] = [1, 0, 0, 0, 1, 0, 0, 0, 1]
    /// Luminance weights of the source primaries.
    private var weights: (Float, Float, Float) = (0.2627, 0.6780, 0.0593)
    private let peak: Float = 1000 / 203

    /// Whether the samples are HDR (PQ or HLG) and tone-mapped.
    var isHDR: Bool { hdr }

    /// The gain map that undoes the tone map: the curve scales each pixel's channels by one
    /// factor k(Y), so the HDR pixel is the SDR one × 1/k(Y) = (1 + Y) / (1 + Y/peak²), between
    /// 1 and `peak` (1000 cd/m² over 203: 2.30 stops) — coded log2 over 0...log2(peak), gamma 1,
    /// no offsets (ISO 21496-1). Clipped pixels (out of BT.709's gamut, over the peak) keep
    /// their SDR colour times the gain.
    var gainMetadata: GainMapMetadata {
        let stops = Double(log2(peak))
        return GainMapMetadata(minLog2: [0], maxLog2: [stops], gamma: [1], offsetSDR: [0], offsetHDR: [0],
                               capacityMinLog2: 0, capacityMaxLog2: stops)
    }

    init(bits: Int, nclx: HEIFDecoder.NCLX?) {
        maxValue = (1 << bits) - 1
        hdr = nclx?.isHDR ?? false
        guard let nclx, hdr else { return }
        linear = (0...maxValue).map { code in
            let e = Double(code) / Double(maxValue)
            if nclx.isPQ {
                // ST 2084 EOTF: signal → nits (0...10000).
                let m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32,
                    c3 = 2392.0 / 4096 * 32
                let p = pow(e, 1 / m2)
                let nits = 10000 * pow(max(p - c1, 0) / (c2 - c3 * p), 1 / m1)
                return Float(nits / 203)
            }
            // HLG inverse OETF (BT.2100), then a 1000-nit display's OOTF (gamma 1.2, per channel).
            let a = 0.17883277, b = 1 - 4 * a, c = 0.5 - a * log(4 * a)
            let scene = e <= 0.5 ? e * e / 3 : (exp((e - c) / a) + b) / 12
            return Float(1000 * pow(scene, 1.2) / 203)
        }
        encode = (0..<4096).map { i in UInt8((SRGB.encode(Double(i) / 4095) * 255).rounded()) }
        let toXYZ = Self.rgbToXYZ(red: nclx.red, green: nclx.green, blue: nclx.blue, white: nclx.white)
        let srgbToXYZ = Self.rgbToXYZ(red: (0.64, 0.33), green: (0.30, 0.60), blue: (0.15, 0.06), white: (0.3127, 0.3290))
        let m = Self.multiply(Self.invert(srgbToXYZ), toXYZ)
        matrix = m.map(Float.init)
        weights = (Float(toXYZ[3]), Float(toXYZ[4]), Float(toXYZ[5]))
    }

    /// Converts `count` pixels of `channels` 16-bit samples to 8 bits (alpha rounded); for HDR
    /// samples, with `gain`, each pixel's gain-map code too (`gainMetadata`).
    func convert(_ src: UnsafePointer<UInt8>, _ dst: UnsafeMutablePointer<UInt8>, count: Int, channels: Int,
                 gain: UnsafeMutablePointer<UInt8>? = nil) {
        let s = UnsafeRawPointer(src)
        let maxV = maxValue, half = maxValue / 2
        func sample(_ i: Int) -> Int { min(maxV, Int(UInt16(littleEndian: s.loadUnaligned(fromByteOffset: i * 2, as: UInt16.self)))) }
        if !hdr {
            for i in 0..<(count * channels) { dst[i] = UInt8((sample(i) * 255 + half) / maxV) }
            return
        }
        linear.withUnsafeBufferPointer { lin in
            encode.withUnsafeBufferPointer { enc in
                let m = matrix, (wr, wg, wb) = weights, peak2 = peak * peak
                let codePerStop = 255 / log2(peak)
                for p in 0..<count {
                    let base = p * channels
                    var r = lin[sample(base)], g = lin[sample(base + 1)], b = lin[sample(base + 2)]
                    // Extended Reinhard on luminance: hue and saturation kept, peak → white.
                    let y = wr * r + wg * g + wb * b
                    if y > 0 {
                        let mapped = y * (1 + y / peak2) / (1 + y)
                        let k = mapped / y
                        r *= k; g *= k; b *= k
                        if let gain { gain[p] = UInt8(min(255, max(0, (log2(1 / k) * codePerStop).rounded()))) }
                    } else if let gain {
                        gain[p] = 0
                    }
                    let ro = m[0] * r + m[1] * g + m[2] * b
                    let go = m[3] * r + m[4] * g + m[5] * b
                    let bo = m[6] * r + m[7] * g + m[8] * b
                    dst[base] = enc[Int((min(max(ro, 0), 1) * 4095).rounded())]
                    dst[base + 1] = enc[Int((min(max(go, 0), 1) * 4095).rounded())]
                    dst[base + 2] = enc[Int((min(max(bo, 0), 1) * 4095).rounded())]
                    if channels == 4 { dst[base + 3] = UInt8((sample(base + 3) * 255 + half) / maxV) }
                }
            }
        }
    }

    /// The RGB → XYZ matrix (row-major) of primaries and a white point (chromaticities).
    static func rgbToXYZ(red: (x: Double, y: Double), green: (x: Double, y: Double), blue: (x: Double, y: Double),
                         white: (x: Double, y: Double)) -> [Double] {
        func xyz(_ c: (x: Double, y: Double)) -> [Double] { [c.x / c.y, 1, (1 - c.x - c.y) / c.y] }
        let r = xyz(red), g = xyz(green), b = xyz(blue), w = xyz(white)
        let p = [r[0], g[0], b[0], r[1], g[1], b[1], r[2], g[2], b[2]]
        let s = multiply(invert(p), [w[0], 0, 0, w[1], 0, 0, w[2], 0, 0])
        var out = [Double](repeating: 0, count: 9)
        for row in 0..<3 {
            for col in 0..<3 { out[row * 3 + col] = p[row * 3 + col] * s[col * 3] }
        }
        return out
    }

    static func multiply(_ a: [Double], _ b: [Double]) -> [Double] {
        var out = [Double](repeating: 0, count: 9)
        for i in 0..<9 {
            var sum = 0.0
            for k in 0..<3 { sum += a[i / 3 * 3 + k] * b[k * 3 + i % 3] }
            out[i] = sum
        }
        return out
    }

    static func invert(_ m: [Double]) -> [Double] {
        let c00: Double = m[4] * m[8] - m[5] * m[7]
        let c01: Double = m[5] * m[6] - m[3] * m[8]
        let c02: Double = m[3] * m[7] - m[4] * m[6]
        let det: Double = m[0] * c00 + m[1] * c01 + m[2] * c02
        let d: Double = det == 0 ? 1 : 1 / det
        var out = [Double](repeating: 0, count: 9)
        out[0] = c00 * d
        out[1] = (m[2] * m[7] - m[1] * m[8]) * d
        out[2] = (m[1] * m[5] - m[2] * m[4]) * d
        out[3] = c01 * d
        out[4] = (m[0] * m[8] - m[2] * m[6]) * d
        out[5] = (m[2] * m[3] - m[0] * m[5]) * d
        out[6] = c02 * d
        out[7] = (m[1] * m[6] - m[0] * m[7]) * d
        out[8] = (m[0] * m[4] - m[1] * m[3]) * d
        return out
    }
}
