import Foundation

/// sRGB <-> linear light lookup tables, built once.
///
/// Decoding uses a 256-entry table; encoding quantises linear light to 16 bits
/// (each of the darkest sRGB levels still spans about 20 table entries).
enum SRGB {
    static let toLinear: UnsafeMutablePointer<Float> = {
        let t = UnsafeMutablePointer<Float>.allocate(capacity: 256)
        for i in 0..<256 { t[i] = Float(decode(Double(i) / 255)) }
        return t
    }()

    /// Index with `Int(linear * 65535 + 0.5)` after clamping to 0...1.
    static let fromLinear: UnsafeMutablePointer<UInt8> = {
        let n = 65536
        let t = UnsafeMutablePointer<UInt8>.allocate(capacity: n)
        for i in 0..<n {
            let v = encode(Double(i) / Double(n - 1)) * 255
            t[i] = UInt8(max(0, min(255, v.rounded())))
        }
        return t
    }()

    /// The sRGB electro-optical transfer function, 0...1 -> 0...1.
    static func decode(_ v: Double) -> Double {
        v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    /// Its inverse.
    static func encode(_ v: Double) -> Double {
        v <= 0.0031308 ? v * 12.92 : 1.055 * pow(v, 1 / 2.4) - 0.055
    }
}
