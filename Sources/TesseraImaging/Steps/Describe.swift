import Foundation
import TesseraModel

/// Placeholders and fingerprints from pixels already decoded (an output's resampled image,
/// upright, before it is encoded): the `describe` stage. Everything works on one small copy,
/// the image area-averaged to fit 100×100 (ThumbHash's own bound), so the cost does not grow
/// with the image: well under a millisecond for the hashes, the reduction a pass over the input.
public enum Describe {
    /// The image area-averaged (in sRGB values, as a browser canvas or Pillow's `thumbnail`
    /// reduce) to fit `side`×`side`, as 8-bit RGBA; an image already that small is copied.
    public static func reduced(_ image: PixelBuffer, within side: Int = 100) -> (width: Int, height: Int, rgba: [UInt8]) {
        let k = min(1, Double(side) / Double(max(image.width, image.height)))
        let w = max(1, min(side, Int((Double(image.width) * k).rounded())))
        let h = max(1, min(side, Int((Double(image.height) * k).rounded())))
        let xs = spans(image.width, w), ys = spans(image.height, h)
        let channels = image.channels
        var rows = [Float](repeating: 0, count: w * 4)
        var out = [UInt8](repeating: 0, count: w * h * 4)
        rows.withUnsafeMutableBufferPointer { acc in
            out.withUnsafeMutableBufferPointer { dst in
                for oy in 0..<h {
                    for i in 0..<acc.count { acc[i] = 0 }
                    for (y, wy) in ys[oy] {
                        let src = image.row(y)
                        for ox in 0..<w {
                            var r: Float = 0, g: Float = 0, b: Float = 0, a: Float = 0
                            for (x, wx) in xs[ox] {
                                let p = src + x * channels
                                switch channels {
                                case 1: r += wx * Float(p[0]); g += wx * Float(p[0]); b += wx * Float(p[0]); a += wx * 255
                                case 3: r += wx * Float(p[0]); g += wx * Float(p[1]); b += wx * Float(p[2]); a += wx * 255
                                default: r += wx * Float(p[0]); g += wx * Float(p[1]); b += wx * Float(p[2]); a += wx * Float(p[3])
                                }
                            }
                            acc[ox * 4] += wy * r; acc[ox * 4 + 1] += wy * g; acc[ox * 4 + 2] += wy * b; acc[ox * 4 + 3] += wy * a
                        }
                    }
                    for i in 0..<(w * 4) { dst[oy * w * 4 + i] = UInt8(max(0, min(255, acc[i].rounded()))) }
                }
            }
        }
        return (w, h, out)
    }

    /// For each of `n` output cells over `size` inputs: the inputs it covers and their weights (summing to 1).
    static func spans(_ size: Int, _ n: Int) -> [[(Int, Float)]] {
        let step = Double(size) / Double(n)
        return (0..<n).map { i in
            let a = Double(i) * step, b = Double(i + 1) * step
            var cells: [(Int, Float)] = []
            var x = Int(a)
            while Double(x) < b && x < size {
                let overlap = min(b, Double(x + 1)) - max(a, Double(x))
                if overlap > 0 { cells.append((x, Float(overlap / step))) }
                x += 1
            }
            return cells
        }
    }

    /// Both placeholders of a reduced image.
    public static func placeholders(width w: Int, height h: Int, rgba: [UInt8]) -> Placeholders {
        let (cx, cy) = blurHashComponents(width: w, height: h)
        return Placeholders(thumbhash: Data(thumbHash(width: w, height: h, rgba: rgba)).base64EncodedString(),
                            blurhash: blurHash(width: w, height: h, rgba: rgba, componentsX: cx, componentsY: cy))
    }

    /// The fingerprints of a reduced image.
    public static func fingerprints(width w: Int, height h: Int, rgba: [UInt8]) -> Fingerprints {
        // Pillow's "L": ITU-R 601 luma in 16-bit fixed point, rounded.
        var gray = [Float](repeating: 0, count: w * h)
        for i in 0..<(w * h) {
            let l = (Int(rgba[i * 4]) * 19595 + Int(rgba[i * 4 + 1]) * 38470 + Int(rgba[i * 4 + 2]) * 7471 + 0x8000) >> 16
            gray[i] = Float(l)
        }
        return Fingerprints(phash: hex(pHash(gray, width: w, height: h)), dhash: hex(dHash(gray, width: w, height: h)),
                            averageColor: averageColor(rgba), dominantColor: dominantColor(rgba))
    }

    // MARK: ThumbHash

    /// ThumbHash of RGBA pixels (at most 100×100), as the reference encoder (Evan Wallace's
    /// `rgbaToThumbHash`) computes it: average colour, then L, P, Q (and alpha) DCT-like
    /// coefficients, quantised with JavaScript's `Math.round`.
    public static func thumbHash(width w: Int, height h: Int, rgba: [UInt8]) -> [UInt8] {
        precondition(w > 0 && h > 0 && w <= 100 && h <= 100 && rgba.count >= w * h * 4)
        func jsRound(_ x: Double) -> Int { Int((x + 0.5).rounded(.down)) }
        var avgR = 0.0, avgG = 0.0, avgB = 0.0, avgA = 0.0
        for i in 0..<(w * h) {
            let alpha = Double(rgba[i * 4 + 3]) / 255
            avgR += alpha / 255 * Double(rgba[i * 4])
            avgG += alpha / 255 * Double(rgba[i * 4 + 1])
            avgB += alpha / 255 * Double(rgba[i * 4 + 2])
            avgA += alpha
        }
        if avgA > 0 { avgR /= avgA; avgG /= avgA; avgB /= avgA }
        let hasAlpha = avgA < Double(w * h)
        let lLimit = hasAlpha ? 5.0 : 7.0
        let lx = max(1, jsRound(lLimit * Double(w) / Double(max(w, h))))
        let ly = max(1, jsRound(lLimit * Double(h) / Double(max(w, h))))
        var l = [Double](repeating: 0, count: w * h), p = l, q = l, a = l
        for i in 0..<(w * h) {
            let alpha = Double(rgba[i * 4 + 3]) / 255
            let r = avgR * (1 - alpha) + alpha / 255 * Double(rgba[i * 4])
            let g = avgG * (1 - alpha) + alpha / 255 * Double(rgba[i * 4 + 1])
            let b = avgB * (1 - alpha) + alpha / 255 * Double(rgba[i * 4 + 2])
            l[i] = (r + g + b) / 3
            p[i] = (r + g) / 2 - b
            q[i] = r - g
            a[i] = alpha
        }
        func encode(_ channel: [Double], _ nx: Int, _ ny: Int) -> (dc: Double, ac: [Double], scale: Double) {
            var dc = 0.0, scale = 0.0
            var ac: [Double] = []
            var fx = [Double](repeating: 0, count: w)
            for cy in 0..<ny {
                var cx = 0
                while cx * ny < nx * (ny - cy) {
                    var f = 0.0
                    for x in 0..<w { fx[x] = cos(Double.pi / Double(w) * Double(cx) * (Double(x) + 0.5)) }
                    for y in 0..<h {
                        let fy = cos(Double.pi / Double(h) * Double(cy) * (Double(y) + 0.5))
                        for x in 0..<w { f += channel[x + y * w] * fx[x] * fy }
                    }
                    f /= Double(w * h)
                    if cx > 0 || cy > 0 {
                        ac.append(f)
                        scale = max(scale, abs(f))
                    } else {
                        dc = f
                    }
                    cx += 1
                }
            }
            if scale > 0 { for i in ac.indices { ac[i] = 0.5 + 0.5 / scale * ac[i] } }
            return (dc, ac, scale)
        }
        let L = encode(l, max(3, lx), max(3, ly))
        let P = encode(p, 3, 3)
        let Q = encode(q, 3, 3)
        let A: (dc: Double, ac: [Double], scale: Double) = hasAlpha ? encode(a, 5, 5) : (1.0, [], 1.0)
        let landscape = w > h
        let header24 = jsRound(63 * L.dc) | jsRound(31.5 + 31.5 * P.dc) << 6 | jsRound(31.5 + 31.5 * Q.dc) << 12
            | jsRound(31 * L.scale) << 18 | (hasAlpha ? 1 : 0) << 23
        let header16 = (landscape ? ly : lx) | jsRound(63 * P.scale) << 3 | jsRound(63 * Q.scale) << 9 | (landscape ? 1 : 0) << 15
        var hash: [UInt8] = [UInt8(header24 & 255), UInt8(header24 >> 8 & 255), UInt8(header24 >> 16 & 255),
                             UInt8(header16 & 255), UInt8(header16 >> 8 & 255)]
        if hasAlpha { hash.append(UInt8(jsRound(15 * A.dc) | jsRound(15 * A.scale) << 4)) }
        var odd = false
        for ac in [L.ac, P.ac, Q.ac] + (hasAlpha ? [A.ac] : []) {
            for f in ac {
                let u = UInt8(jsRound(15 * f) & 15)
                if odd { hash[hash.count - 1] |= u << 4 } else { hash.append(u) }
                odd.toggle()
            }
        }
        return hash
    }

    // MARK: BlurHash

    /// Components by aspect: 4 along the longer side, the shorter in proportion (3 or 4).
    public static func blurHashComponents(width w: Int, height h: Int) -> (Int, Int) {
        let short = max(3, min(4, Int((4 * Double(min(w, h)) / Double(max(w, h))).rounded())))
        return w >= h ? (4, short) : (short, 4)
    }

    /// BlurHash of RGBA pixels (alpha ignored, as Wolt's encoder does).
    public static func blurHash(width w: Int, height h: Int, rgba: [UInt8], componentsX nx: Int, componentsY ny: Int) -> String {
        precondition((1...9).contains(nx) && (1...9).contains(ny))
        let linear = (0..<256).map { SRGB.decode(Double($0) / 255) }
        var factors: [(Double, Double, Double)] = []
        var cosX = [Double](repeating: 0, count: w)
        for j in 0..<ny {
            for i in 0..<nx {
                let norm = i == 0 && j == 0 ? 1.0 : 2.0
                for x in 0..<w { cosX[x] = cos(Double.pi * Double(i) * Double(x) / Double(w)) }
                var r = 0.0, g = 0.0, b = 0.0
                for y in 0..<h {
                    let cy = norm * cos(Double.pi * Double(j) * Double(y) / Double(h))
                    for x in 0..<w {
                        let basis = cy * cosX[x], k = (y * w + x) * 4
                        r += basis * linear[Int(rgba[k])]
                        g += basis * linear[Int(rgba[k + 1])]
                        b += basis * linear[Int(rgba[k + 2])]
                    }
                }
                let scale = 1 / Double(w * h)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        func toSRGB(_ v: Double) -> Int {
            let v = max(0, min(1, v))
            return v <= 0.0031308 ? Int(v * 12.92 * 255 + 0.5) : Int((1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5)
        }
        func base83(_ value: Int, _ length: Int) -> String {
            let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")
            var s = ""
            for i in 1...length {
                var d = value
                for _ in 0..<(length - i) { d /= 83 }
                s.append(alphabet[d % 83])
            }
            return s
        }
        let ac = factors.dropFirst()
        let maximum = ac.reduce(0.0) { max($0, abs($1.0), abs($1.1), abs($1.2)) }
        let quantisedMaximum = ac.isEmpty ? 0 : Int(max(0, min(82, (maximum * 166 - 0.5).rounded(.down))))
        let normalised = Double(quantisedMaximum + 1) / 166
        func quantise(_ v: Double) -> Int {
            let s = v / normalised
            let signed = s < 0 ? -pow(-s, 0.5) : pow(s, 0.5)
            return Int(max(0, min(18, (signed * 9 + 9.5).rounded(.down))))
        }
        let dc = factors[0]
        var hash = base83((nx - 1) + (ny - 1) * 9, 1) + base83(quantisedMaximum, 1)
            + base83(toSRGB(dc.0) << 16 | toSRGB(dc.1) << 8 | toSRGB(dc.2), 4)
        for f in ac { hash += base83(quantise(f.0) * 19 * 19 + quantise(f.1) * 19 + quantise(f.2), 2) }
        return hash
    }

    // MARK: Perceptual hashes

    /// `gray` (w×h, 8-bit values) resized to `ow`×`oh` as `imagehash` has Pillow do it (aspect
    /// not kept): Lanczos-3 widened by the scale, rows first then columns, Pillow's 22-bit
    /// fixed-point weights and 8-bit rounding after each pass — so the same pixels give the
    /// same bits.
    static func squash(_ gray: [Float], width w: Int, height h: Int, to ow: Int, _ oh: Int) -> [Double] {
        func lanczos(_ x: Double) -> Double {
            func sinc(_ x: Double) -> Double { x == 0 ? 1 : sin(Double.pi * x) / (Double.pi * x) }
            return -3 <= x && x < 3 ? sinc(x) * sinc(x / 3) : 0
        }
        let precision = 22
        /// Per output: the first input and the fixed-point weights.
        func coefficients(_ inSize: Int, _ outSize: Int) -> [(Int, [Int])] {
            let scale = Double(inSize) / Double(outSize)
            let filterScale = max(scale, 1)
            let support = 3 * filterScale
            return (0..<outSize).map { i in
                let center = (Double(i) + 0.5) * scale
                let lo = max(Int(center - support + 0.5), 0)
                let hi = min(Int(center + support + 0.5), inSize)
                var k = (lo..<hi).map { x in lanczos((Double(x) - center + 0.5) / filterScale) }
                let total = k.reduce(0, +)
                if total != 0 { k = k.map { $0 / total } }
                return (lo, k.map { v in Int((v * Double(1 << precision) + (v < 0 ? -0.5 : 0.5)).rounded(.towardZero)) })
            }
        }
        func clip8(_ v: Int) -> Double { Double(max(0, min(255, v >> precision))) }
        let half = 1 << (precision - 1)
        var rows = [Double](repeating: 0, count: ow * h)
        if ow != w {
            let cx = coefficients(w, ow)
            for y in 0..<h {
                for (x, (lo, k)) in cx.enumerated() {
                    var sum = half
                    for (j, c) in k.enumerated() { sum += Int(gray[y * w + lo + j]) * c }
                    rows[y * ow + x] = clip8(sum)
                }
            }
        } else {
            for i in 0..<(w * h) { rows[i] = Double(gray[i]) }
        }
        guard oh != h else { return rows }
        var out = [Double](repeating: 0, count: ow * oh)
        for (y, (lo, k)) in coefficients(h, oh).enumerated() {
            for x in 0..<ow {
                var sum = half
                for (j, c) in k.enumerated() { sum += Int(rows[(lo + j) * ow + x]) * c }
                out[y * ow + x] = clip8(sum)
            }
        }
        return out
    }

    /// pHash as `imagehash.phash`: 32×32 gray, a DCT-II along columns then rows, the top-left
    /// 8×8 against their median, row by row, the first bit the most significant.
    static func pHash(_ gray: [Float], width w: Int, height h: Int) -> UInt64 {
        let n = 32
        let p = squash(gray, width: w, height: h, to: n, n)
        var basis = [Double](repeating: 0, count: 8 * n)
        for u in 0..<8 { for x in 0..<n { basis[u * n + x] = cos(Double.pi * Double(u) * Double(2 * x + 1) / Double(2 * n)) } }
        // Columns first (axis 0): t[u][x] = sum_y basis[u][y] p[y][x]; then rows: d[u][v] = sum_x basis[v][x] t[u][x].
        var t = [Double](repeating: 0, count: 8 * n)
        for u in 0..<8 { for y in 0..<n { let b = basis[u * n + y]; for x in 0..<n { t[u * n + x] += b * p[y * n + x] } } }
        var d = [Double](repeating: 0, count: 64)
        for u in 0..<8 { for v in 0..<8 { var s = 0.0; for x in 0..<n { s += basis[v * n + x] * t[u * n + x] }; d[u * 8 + v] = s } }
        let sorted = d.sorted()
        let median = (sorted[31] + sorted[32]) / 2
        return d.reduce(UInt64(0)) { $0 << 1 | ($1 > median ? 1 : 0) }
    }

    /// dHash as `imagehash.dhash`: 9×8 gray, each pixel against its left neighbour, row by row.
    static func dHash(_ gray: [Float], width w: Int, height h: Int) -> UInt64 {
        let p = squash(gray, width: w, height: h, to: 9, 8)
        var bits: UInt64 = 0
        for y in 0..<8 { for x in 0..<8 { bits = bits << 1 | (p[y * 9 + x + 1] > p[y * 9 + x] ? 1 : 0) } }
        return bits
    }

    static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }

    static func colour(_ r: Double, _ g: Double, _ b: Double) -> String {
        func byte(_ v: Double) -> String {
            let s = String(Int(max(0, min(255, v.rounded()))), radix: 16)
            return s.count == 1 ? "0" + s : s
        }
        return "#" + byte(r) + byte(g) + byte(b)
    }

    /// The mean colour in linear light (transparent pixels weigh nothing), as sRGB.
    static func averageColor(_ rgba: [UInt8]) -> String {
        let linear = (0..<256).map { SRGB.decode(Double($0) / 255) }
        var r = 0.0, g = 0.0, b = 0.0, a = 0.0
        for i in stride(from: 0, to: rgba.count, by: 4) {
            let w = Double(rgba[i + 3]) / 255
            r += w * linear[Int(rgba[i])]; g += w * linear[Int(rgba[i + 1])]; b += w * linear[Int(rgba[i + 2])]; a += w
        }
        guard a > 0 else { return "#000000" }
        return colour(SRGB.encode(r / a) * 255, SRGB.encode(g / a) * 255, SRGB.encode(b / a) * 255)
    }

    /// The fullest cell of an 8×8×8 histogram (pixels at least half opaque), its mean colour.
    static func dominantColor(_ rgba: [UInt8]) -> String {
        var count = [Int](repeating: 0, count: 512)
        var sums = [Double](repeating: 0, count: 512 * 3)
        for i in stride(from: 0, to: rgba.count, by: 4) where rgba[i + 3] >= 128 {
            let cell = Int(rgba[i] >> 5) << 6 | Int(rgba[i + 1] >> 5) << 3 | Int(rgba[i + 2] >> 5)
            count[cell] += 1
            sums[cell * 3] += Double(rgba[i]); sums[cell * 3 + 1] += Double(rgba[i + 1]); sums[cell * 3 + 2] += Double(rgba[i + 2])
        }
        guard let best = count.indices.max(by: { count[$0] < count[$1] }), count[best] > 0 else { return "#000000" }
        let n = Double(count[best])
        return colour(sums[best * 3] / n, sums[best * 3 + 1] / n, sums[best * 3 + 2] / n)
    }
}
