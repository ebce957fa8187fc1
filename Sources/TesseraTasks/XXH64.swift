/// xxHash64 (Yann Collet's algorithm, seed 0): the content hash of incremental reruns.
/// Fast (several GB/s) and stable across machines; not a cryptographic hash.
public enum XXH64 {
    static let p1: UInt64 = 11_400_714_785_074_694_791
    static let p2: UInt64 = 14_029_467_366_897_019_727
    static let p3: UInt64 = 1_609_587_929_392_839_161
    static let p4: UInt64 = 9_650_029_242_287_828_579
    static let p5: UInt64 = 2_870_177_450_012_600_261

    @inline(__always) static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        var a = acc &+ input &* p2
        a = (a << 31) | (a >> 33)
        return a &* p1
    }

    @inline(__always) static func merge(_ acc: UInt64, _ v: UInt64) -> UInt64 {
        var a = acc ^ round(0, v)
        a = a &* p1 &+ p4
        return a
    }

    public static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }

    /// - Parameter hashed: called with the bytes hashed so far every 8 MB (a file map drops
    ///   the pages behind it: hashing a huge input does not keep it resident).
    public static func hash(_ buffer: UnsafeRawBufferPointer, seed: UInt64 = 0, hashed: ((Int) -> Void)? = nil) -> UInt64 {
        let n = buffer.count
        guard let base = buffer.baseAddress else { return finish(seed &+ p5, base: nil, rest: 0) }
        var p = 0
        var h: UInt64
        func read64(_ o: Int) -> UInt64 { UInt64(littleEndian: base.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
        if n >= 32 {
            var v1 = seed &+ p1 &+ p2, v2 = seed &+ p2, v3 = seed, v4 = seed &- p1
            while p <= n - 32 {
                let end = min(n - 32, p + (8 << 20))
                while p <= end {
                    v1 = round(v1, read64(p)); v2 = round(v2, read64(p + 8))
                    v3 = round(v3, read64(p + 16)); v4 = round(v4, read64(p + 24))
                    p += 32
                }
                hashed?(p)
            }
            h = ((v1 << 1) | (v1 >> 63)) &+ ((v2 << 7) | (v2 >> 57)) &+ ((v3 << 12) | (v3 >> 52)) &+ ((v4 << 18) | (v4 >> 46))
            h = merge(h, v1); h = merge(h, v2); h = merge(h, v3); h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        h = h &+ UInt64(n)
        while p + 8 <= n {
            h ^= round(0, read64(p))
            h = ((h << 27) | (h >> 37)) &* p1 &+ p4
            p += 8
        }
        if p + 4 <= n {
            h ^= UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: p, as: UInt32.self))) &* p1
            h = ((h << 23) | (h >> 41)) &* p2 &+ p3
            p += 4
        }
        while p < n {
            h ^= UInt64(base.load(fromByteOffset: p, as: UInt8.self)) &* p5
            h = ((h << 11) | (h >> 53)) &* p1
            p += 1
        }
        return avalanche(h)
    }

    private static func finish(_ h: UInt64, base: UnsafeRawPointer?, rest: Int) -> UInt64 { avalanche(h) }

    @inline(__always) static func avalanche(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }
}
