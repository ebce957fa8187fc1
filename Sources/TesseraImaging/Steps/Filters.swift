import Foundation
import TesseraModel

/// The recipe's filter operations (`sharpen`, `blur`, `adjust`, `pad`, `overlay`), in recipe order, on the
/// output-sized image — after resize, orientation and colour conversion, never on the
/// full-size bitmap. Alpha is left as it is.
enum Filters {
    static func apply(_ operations: [RecipeOperation], to image: PixelBuffer) throws -> PixelBuffer {
        var image = image
        for op in operations {
            switch op {
            case .adjust(let a): adjust(image, a)
            case .blur(let sigma): image = try gaussian(image, sigma: sigma)
            case .sharpen(let u): image = try sharpen(image, u)
            case .pad(let p): image = try pad(image, p)
            case .overlay(let o): try composite(OverlayStore.shared.image(o, outputWidth: image.width), onto: image, o)
            default: continue
            }
        }
        return image
    }

    /// Colour channels of a layout (alpha excluded).
    static func colourChannels(_ layout: PixelLayout) -> Int { layout == .rgba ? 3 : layout.channels }

    // MARK: Padding

    static func pad(_ image: PixelBuffer, _ p: Padding) throws -> PixelBuffer {
        let innerW = max(image.width, p.width ?? 0), innerH = max(image.height, p.height ?? 0)
        let g = p.gravity.position
        let x0 = p.left + Int((Double(innerW - image.width) * g.x).rounded(.down))
        let y0 = p.top + Int((Double(innerH - image.height) * g.y).rounded(.down))
        let w = innerW + p.left + p.right, h = innerH + p.top + p.bottom
        let out: PixelBuffer
        if p.fill == .blur {
            out = try blurFill(image, width: w, height: h)
        } else {
            out = try PixelBuffer.make(width: w, height: h, layout: image.layout)
            fill(out, p.background)
        }
        let rowBytes = image.width * image.channels
        for y in 0..<image.height {
            (out.row(y + y0) + x0 * image.channels).update(from: image.row(y), count: rowBytes)
        }
        return out
    }

    static func fill(_ out: PixelBuffer, _ bg: RGBColor) {
        switch out.layout {
        case .gray:
            let luma: Double = 0.2126 * Double(bg.r) + 0.7152 * Double(bg.g) + 0.0722 * Double(bg.b)
            out.fill([UInt8(luma.rounded())])
        case .rgb: out.fill([bg.r, bg.g, bg.b])
        case .rgba: out.fill([bg.r, bg.g, bg.b, 255])
        }
    }

    /// A `width`×`height` background made of the image itself: shrunk to about an eighth of
    /// the canvas covering its shape, blurred there (cheap), and enlarged to the canvas.
    static func blurFill(_ image: PixelBuffer, width: Int, height: Int) throws -> PixelBuffer {
        let small = Size(width: max(1, (width + 7) / 8), height: max(1, (height + 7) / 8))
        let k = max(Double(small.width) / Double(image.width), Double(small.height) / Double(image.height))
        let cw = Double(small.width) / k, ch = Double(small.height) / k
        let cover = Rect(x: (Double(image.width) - cw) / 2, y: (Double(image.height) - ch) / 2, width: cw, height: ch)
        let blurred = try gaussian(resized(image, region: cover, to: small), sigma: 2)
        let full = Rect(x: 0, y: 0, width: Double(small.width), height: Double(small.height))
        return try resized(blurred, region: full, to: Size(width: width, height: height), filter: .linear)
    }

    /// `region` of `image` resampled to `size` (linear light, premultiplied alpha).
    static func resized(_ image: PixelBuffer, region: Rect, to size: Size, filter: ResampleFilter = .lanczos3) throws -> PixelBuffer {
        let r = try Resampler(inputWidth: image.width, inputHeight: image.height, inputChannels: image.channels,
                              region: region, outputSize: size, filter: filter)
        r.consume(image.base, stride: image.stride, count: image.height)
        return r.output
    }

    // MARK: Overlay

    /// `mark` composited onto `image` in place at the overlay's gravity and margin (clipped
    /// to the image), source-over in sRGB with the mark's alpha times `opacity`.
    static func composite(_ mark: PixelBuffer, onto image: PixelBuffer, _ o: Overlay) {
        let g = o.gravity.position
        let x0 = o.margin + Int((Double(image.width - 2 * o.margin - mark.width) * g.x).rounded(.down))
        let y0 = o.margin + Int((Double(image.height - 2 * o.margin - mark.height) * g.y).rounded(.down))
        let opacity = Float(o.opacity)
        let mc = mark.channels, ic = image.channels
        for my in 0..<mark.height {
            let y = y0 + my
            guard y >= 0 && y < image.height else { continue }
            let src = mark.row(my), dst = image.row(y)
            for mx in 0..<mark.width {
                let x = x0 + mx
                guard x >= 0 && x < image.width else { continue }
                let s = src + mx * mc, d = dst + x * ic
                let a = (mc == 4 ? Float(s[3]) / 255 : 1) * opacity
                if a <= 0 { continue }
                let sr = Float(s[0]), sg = Float(mc >= 3 ? s[1] : s[0]), sb = Float(mc >= 3 ? s[2] : s[0])
                if ic == 1 {
                    d[0] = clamp8(Float(d[0]) * (1 - a) + (0.2126 * sr + 0.7152 * sg + 0.0722 * sb) * a)
                    continue
                }
                let da: Float = ic == 4 ? Float(d[3]) / 255 : 1
                let outA = a + da * (1 - a)
                let keep = da * (1 - a) / outA, add = a / outA
                d[0] = clamp8(Float(d[0]) * keep + sr * add)
                d[1] = clamp8(Float(d[1]) * keep + sg * add)
                d[2] = clamp8(Float(d[2]) * keep + sb * add)
                if ic == 4 { d[3] = clamp8(outA * 255) }
            }
        }
    }

    // MARK: Colour

    /// Exposure, brightness and contrast per channel (one table), then saturation and sepia
    /// (a 3×3 matrix on RGB), then gamma (a second table).
    static func adjust(_ image: PixelBuffer, _ a: ColourAdjustment) {
        var first = [UInt8](repeating: 0, count: 256), second = [UInt8](repeating: 0, count: 256)
        let gain = pow(2, a.exposure)
        for i in 0..<256 {
            var v = Double(i) / 255
            if a.exposure != 0 { v = SRGB.encode(min(1, SRGB.decode(v) * gain)) }
            v += a.brightness
            v = (v - 0.5) * a.contrast + 0.5
            first[i] = UInt8(max(0, min(255, (v * 255).rounded())))
            second[i] = UInt8(max(0, min(255, (pow(Double(i) / 255, 1 / a.gamma) * 255).rounded())))
        }
        // Saturation around Rec. 709 luma, then a sepia tone mixed in (the classic matrix).
        let lr = 0.2126, lg = 0.7152, lb = 0.0722, s = a.saturation
        var m: [Double] = [lr + (1 - lr) * s, lg - lg * s, lb - lb * s,
                           lr - lr * s, lg + (1 - lg) * s, lb - lb * s,
                           lr - lr * s, lg - lg * s, lb + (1 - lb) * s]
        if a.sepia > 0 {
            let sepia: [Double] = [0.393, 0.769, 0.189, 0.349, 0.686, 0.168, 0.272, 0.534, 0.131]
            var mixed = [Double](repeating: 0, count: 9)
            for r in 0..<3 {
                for c in 0..<3 {
                    let tone = (0..<3).reduce(0) { $0 + sepia[r * 3 + $1] * m[$1 * 3 + c] }
                    mixed[r * 3 + c] = (1 - a.sepia) * m[r * 3 + c] + a.sepia * tone
                }
            }
            m = mixed
        }
        if let tint = a.tint, a.tintAmount > 0 {
            // The luminance of the result, in the tint's colour, mixed in.
            let t = [Double(tint.r) / 255, Double(tint.g) / 255, Double(tint.b) / 255], l = [lr, lg, lb]
            var mixed = [Double](repeating: 0, count: 9)
            for r in 0..<3 {
                for c in 0..<3 {
                    let toned = t[r] * (0..<3).reduce(0) { $0 + l[$1] * m[$1 * 3 + c] }
                    mixed[r * 3 + c] = (1 - a.tintAmount) * m[r * 3 + c] + a.tintAmount * toned
                }
            }
            m = mixed
        }
        let matrix = image.layout != .gray && (s != 1 || a.sepia > 0 || (a.tint != nil && a.tintAmount > 0))
        let useGamma = a.gamma != 1
        let ch = image.channels, cc = colourChannels(image.layout)
        let fm = m.map { Float($0) }
        first.withUnsafeBufferPointer { t1 in
            second.withUnsafeBufferPointer { t2 in
                fm.withUnsafeBufferPointer { k in
                    for y in 0..<image.height {
                        var p = image.row(y)
                        for _ in 0..<image.width {
                            for c in 0..<cc { p[c] = t1[Int(p[c])] }
                            if matrix {
                                let r = Float(p[0]), g = Float(p[1]), b = Float(p[2])
                                p[0] = clamp8(k[0] * r + k[1] * g + k[2] * b)
                                p[1] = clamp8(k[3] * r + k[4] * g + k[5] * b)
                                p[2] = clamp8(k[6] * r + k[7] * g + k[8] * b)
                            }
                            if useGamma { for c in 0..<cc { p[c] = t2[Int(p[c])] } }
                            p += ch
                        }
                    }
                }
            }
        }
        if a.vignette > 0 { vignette(image, a.vignette) }
    }

    /// Darkens towards the corners: each colour value times 1 − amount × t², where t rises
    /// from 0 at half the centre-to-corner distance to 1 at the corners.
    static func vignette(_ image: PixelBuffer, _ amount: Double) {
        let w = image.width, h = image.height, ch = image.channels, cc = colourChannels(image.layout)
        let cx = Double(w) / 2, cy = Double(h) / 2
        let dx = UnsafeMutableBufferPointer<Double>.allocate(capacity: w)
        defer { dx.deallocate() }
        for x in 0..<w { let u = (Double(x) + 0.5 - cx) / cx; dx[x] = u * u / 2 }
        for y in 0..<h {
            let v = (Double(y) + 0.5 - cy) / cy, dy = v * v / 2
            var p = image.row(y)
            for x in 0..<w {
                let t = min(1, max(0, ((dx[x] + dy).squareRoot() - 0.5) / 0.5))
                let f = Float(1 - amount * t * t)
                for c in 0..<cc { p[c] = clamp8(Float(p[c]) * f - 0.5) }
                p += ch
            }
        }
    }

    @inline(__always)
    static func clamp8(_ v: Float) -> UInt8 { UInt8(max(0, min(255, v + 0.5))) }

    // MARK: Blur and sharpen

    /// A normalised Gaussian kernel of radius ⌈3σ⌉.
    static func kernel(_ sigma: Double) -> [Float] {
        let radius = max(1, Int((3 * sigma).rounded(.up)))
        var k = (-radius...radius).map { Float(exp(-Double($0 * $0) / (2 * sigma * sigma))) }
        let sum = k.reduce(0, +)
        for i in k.indices { k[i] /= sum }
        return k
    }

    /// The image blurred (separable Gaussian, edges clamped), as floats per channel. Both
    /// passes run along contiguous rows (`dst[j] += k[i] × src[j + offset]`), which the
    /// compiler vectorises: one padded float row for the horizontal pass, whole rows for
    /// the vertical one.
    static func blurred(_ image: PixelBuffer, sigma: Double) -> UnsafeMutableBufferPointer<Float> {
        let w = image.width, h = image.height, ch = image.channels, n = w * ch
        let k = kernel(sigma), r = k.count / 2
        let horizontal = UnsafeMutableBufferPointer<Float>.allocate(capacity: n * h)
        let out = UnsafeMutableBufferPointer<Float>.allocate(capacity: n * h)
        // One source row as floats, with r pixels of its edge repeated on each side.
        let padded = UnsafeMutableBufferPointer<Float>.allocate(capacity: (w + 2 * r) * ch)
        defer {
            horizontal.deallocate()
            padded.deallocate()
        }
        k.withUnsafeBufferPointer { k in
            for y in 0..<h {
                let src = image.row(y)
                let p = padded.baseAddress!
                for x in 0..<(w + 2 * r) {
                    let sx = min(w - 1, max(0, x - r)) * ch
                    for c in 0..<ch { p[x * ch + c] = Float(src[sx + c]) }
                }
                let dst = horizontal.baseAddress! + y * n
                dst.update(repeating: 0, count: n)
                for i in 0..<k.count {
                    let weight = k[i], from = p + i * ch
                    for j in 0..<n { dst[j] += weight * from[j] }
                }
            }
            for y in 0..<h {
                let dst = out.baseAddress! + y * n
                dst.update(repeating: 0, count: n)
                for i in -r...r {
                    let weight = k[i + r], from = horizontal.baseAddress! + min(h - 1, max(0, y + i)) * n
                    for j in 0..<n { dst[j] += weight * from[j] }
                }
            }
        }
        return out
    }

    static func gaussian(_ image: PixelBuffer, sigma: Double) throws -> PixelBuffer {
        let b = blurred(image, sigma: sigma)
        defer { b.deallocate() }
        let out = try PixelBuffer.make(width: image.width, height: image.height, layout: image.layout)
        let ch = image.channels, cc = colourChannels(image.layout)
        for y in 0..<image.height {
            let src = image.row(y), dst = out.row(y), f = b.baseAddress! + y * image.width * ch
            for i in 0..<(image.width * ch) {
                // Alpha stays as it was (a blurred edge would need premultiplied colour).
                dst[i] = i % ch < cc ? clamp8(f[i]) : src[i]
            }
        }
        return out
    }

    static func sharpen(_ image: PixelBuffer, _ u: UnsharpMask) throws -> PixelBuffer {
        let b = blurred(image, sigma: u.sigma)
        defer { b.deallocate() }
        let out = try PixelBuffer.make(width: image.width, height: image.height, layout: image.layout)
        let ch = image.channels, cc = colourChannels(image.layout)
        let amount = Float(u.amount), threshold = Float(u.threshold)
        for y in 0..<image.height {
            let src = image.row(y), dst = out.row(y), f = b.baseAddress! + y * image.width * ch
            for i in 0..<(image.width * ch) {
                let v = Float(src[i])
                let d = v - f[i]
                dst[i] = i % ch < cc && abs(d) > threshold ? clamp8(v + amount * d) : src[i]
            }
        }
        return out
    }
}
