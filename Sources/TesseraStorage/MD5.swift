import Foundation

/// MD5 (RFC 1321), for `Content-MD5` on uploads and checking downloads against an S3
/// ETag (which is the MD5 of a single-part object). Integrity, not security.
enum MD5 {
    private static let s: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                      5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                                      4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                      6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
    private static let k: [UInt32] = (0..<64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4294967296.0)) }

    static func digest(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        var a0: UInt32 = 0x67452301, b0: UInt32 = 0xefcdab89, c0: UInt32 = 0x98badcfe, d0: UInt32 = 0x10325476
        var m = [UInt32](repeating: 0, count: 16)
        func block(_ p: UnsafeRawPointer) {
            for i in 0..<16 { m[i] = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
            var a = a0, b = b0, c = c0, d = d0
            s.withUnsafeBufferPointer { s in
                k.withUnsafeBufferPointer { k in
                    for i in 0..<64 {
                        var f: UInt32
                        let g: Int
                        switch i >> 4 {
                        case 0: f = (b & c) | (~b & d); g = i
                        case 1: f = (d & b) | (~d & c); g = (5 * i + 1) & 15
                        case 2: f = b ^ c ^ d; g = (3 * i + 5) & 15
                        default: f = c ^ (b | ~d); g = (7 * i) & 15
                        }
                        f = f &+ a &+ k[i] &+ m[g]
                        a = d; d = c; c = b
                        b = b &+ ((f << s[i]) | (f >> (32 - s[i])))
                    }
                }
            }
            a0 = a0 &+ a; b0 = b0 &+ b; c0 = c0 &+ c; d0 = d0 &+ d
        }
        let whole = data.count / 64
        if let base = data.baseAddress {
            for i in 0..<whole { block(base + i * 64) }
        }
        // The tail, padding and the length in bits.
        var tail = [UInt8](data[(whole * 64)...])
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        let bits = UInt64(data.count) &* 8
        for i in 0..<8 { tail.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
        tail.withUnsafeBytes { t in
            for i in 0..<(t.count / 64) { block(t.baseAddress! + i * 64) }
        }
        var out: [UInt8] = []
        for v in [a0, b0, c0, d0] { for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) } }
        return out
    }

    static func hex(_ data: UnsafeRawBufferPointer) -> String {
        digest(data).map { String(format: "%02x", $0) }.joined()
    }

    static func base64(_ data: UnsafeRawBufferPointer) -> String { Data(digest(data)).base64EncodedString() }
}
