import Foundation

/// Writes small uncompressed TIFFs for the tests, byte by byte (little-endian, classic TIFF):
/// any photometric, bit depth, sample count, planar or contiguous, strips or tiles, several
/// pages, and whatever hostile tags a test wants. Compressed variants come from `tiffcp`.
struct TestTIFF {
    struct Page {
        var width: Int
        var height: Int
        var samples: Int = 3
        var bits: Int = 8
        var photometric: Int = 2
        var planar = false
        /// Tiles of this size instead of strips.
        var tile: Int?
        var rowsPerStrip: Int?
        var orientation: Int?
        var extraSample: Int?
        var sampleFormat: Int?
        var subfileType: Int?
        /// Sample `s` of pixel (x, y), as a `bits`-bit value.
        var sample: (Int, Int, Int) -> UInt32 = { x, y, s in UInt32((x * 7 + y * 3 + s * 50) & 0xFF) }
        /// Tags to add, replace or (with no values) leave out: (tag, type, values).
        var extraTags: [(Int, Int, [UInt32])] = []
    }

    var pages: [Page]

    func bytes() -> [UInt8] {
        var out: [UInt8] = [0x49, 0x49, 42, 0, 0, 0, 0, 0]
        var nextPointer = 4
        func put32(_ v: UInt32, at i: Int) { for k in 0..<4 { out[i + k] = UInt8((v >> (8 * UInt32(k))) & 0xFF) } }
        for page in pages {
            let bytesPerSample = page.bits / 8
            let planes = page.planar ? page.samples : 1
            let perPixel = page.planar ? 1 : page.samples
            // Chunks: strips or tiles, plane by plane.
            var chunks: [[UInt8]] = []
            /// Appends pixel (x, y)'s samples of plane `p` (all of them when contiguous); zeros outside.
            func append(_ x: Int, _ y: Int, plane p: Int, to c: inout [UInt8]) {
                let inside = x < page.width && y < page.height
                for s in page.planar ? p..<p + 1 : 0..<page.samples {
                    let v = inside ? page.sample(x, y, s) : 0
                    for k in 0..<bytesPerSample { c.append(UInt8((v >> (8 * UInt32(k))) & 0xFF)) }
                }
            }
            let rps = page.rowsPerStrip ?? page.height
            for p in 0..<planes {
                if let t = page.tile {
                    for ty in stride(from: 0, to: page.height, by: t) {
                        for tx in stride(from: 0, to: page.width, by: t) {
                            var c: [UInt8] = []
                            c.reserveCapacity(t * t * perPixel * bytesPerSample)
                            for y in ty..<ty + t { for x in tx..<tx + t { append(x, y, plane: p, to: &c) } }
                            chunks.append(c)
                        }
                    }
                } else {
                    for sy in stride(from: 0, to: page.height, by: rps) {
                        var c: [UInt8] = []
                        c.reserveCapacity(rps * page.width * perPixel * bytesPerSample)
                        for y in sy..<min(page.height, sy + rps) { for x in 0..<page.width { append(x, y, plane: p, to: &c) } }
                        chunks.append(c)
                    }
                }
            }
            var offsets: [UInt32] = []
            for c in chunks {
                offsets.append(UInt32(out.count))
                out += c
                if out.count % 2 == 1 { out.append(0) }
            }
            var tags: [(Int, Int, [UInt32])] = [
                (256, 4, [UInt32(page.width)]), (257, 4, [UInt32(page.height)]),
                (258, 3, Array(repeating: UInt32(page.bits), count: page.samples)), (259, 3, [1]),
                (262, 3, [UInt32(page.photometric)]), (277, 3, [UInt32(page.samples)]),
                (284, 3, [page.planar ? 2 : 1]),
            ]
            if let o = page.orientation { tags.append((274, 3, [UInt32(o)])) }
            if let e = page.extraSample { tags.append((338, 3, [UInt32(e)])) }
            if let f = page.sampleFormat { tags.append((339, 3, Array(repeating: UInt32(f), count: page.samples))) }
            if let s = page.subfileType { tags.append((254, 4, [UInt32(s)])) }
            if let t = page.tile {
                tags += [(322, 4, [UInt32(t)]), (323, 4, [UInt32(t)]), (324, 4, offsets), (325, 4, chunks.map { UInt32($0.count) })]
            } else {
                tags += [(273, 4, offsets), (278, 4, [UInt32(rps)]), (279, 4, chunks.map { UInt32($0.count) })]
            }
            for e in page.extraTags {  // no values: the tag is left out
                tags.removeAll { $0.0 == e.0 }
                if !e.2.isEmpty { tags.append(e) }
            }
            tags.sort { $0.0 < $1.0 }
            // Values over 4 bytes go before the IFD.
            var entries: [(Int, Int, Int, UInt32)] = []
            for (tag, type, values) in tags {
                let size = type == 3 ? 2 : 4
                // A RATIONAL (5) is two LONGs, numerator and denominator: its count is the pairs.
                let count = type == 5 ? values.count / 2 : values.count
                if values.count * size <= 4 {
                    var v: UInt32 = 0
                    for (i, x) in values.enumerated() { v |= size == 2 ? (x & 0xFFFF) << (16 * UInt32(i)) : x }
                    entries.append((tag, type, count, v))
                } else {
                    let at = UInt32(out.count)
                    for x in values { out += size == 2 ? [UInt8(x & 0xFF), UInt8(x >> 8)] : sampleBytes32(x) }
                    entries.append((tag, type, count, at))
                }
            }
            if out.count % 2 == 1 { out.append(0) }
            put32(UInt32(out.count), at: nextPointer)
            out += [UInt8(entries.count & 0xFF), UInt8(entries.count >> 8)]
            for (tag, type, count, value) in entries {
                out += [UInt8(tag & 0xFF), UInt8(tag >> 8), UInt8(type), 0]
                out += sampleBytes32(UInt32(count))
                out += sampleBytes32(value)
            }
            nextPointer = out.count
            out += [0, 0, 0, 0]
        }
        return out
    }

    private func sampleBytes32(_ v: UInt32) -> [UInt8] {
        [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)]
    }
}
