import Foundation
import TesseraModel

/// What the decoded pixels say about where the picture is, for the operations that choose
/// their region from them: `trim` (the box inside uniform borders) and `attention` (a
/// saliency map). Made once per render from the image decoded at the scale the outputs
/// need — never from a full-size decode made for this purpose alone.
final class SourceAnalysis {
    /// The decoded image, stored orientation.
    let image: PixelBuffer
    /// Decoded pixels per full-resolution stored pixel, per axis.
    let scaleX: Double, scaleY: Double
    let storedSize: Size

    init(image: PixelBuffer, storedSize: Size) {
        self.image = image
        self.storedSize = storedSize
        scaleX = Double(image.width) / Double(storedSize.width)
        scaleY = Double(image.height) / Double(storedSize.height)
    }

    /// The box (full-resolution stored coordinates) left when every edge row and column
    /// within `threshold` of the background is removed; the whole image when it is uniform.
    func trimBox(_ t: Trim) -> Rect {
        let w = image.width, h = image.height, ch = image.channels
        var bg = [Int](repeating: 255, count: ch)
        if let c = t.background {
            switch image.layout {
            case .gray:
                let luma: Double = 0.2126 * Double(c.r) + 0.7152 * Double(c.g) + 0.0722 * Double(c.b)
                bg[0] = Int(luma.rounded())
            case .rgb, .rgba: (bg[0], bg[1], bg[2]) = (Int(c.r), Int(c.g), Int(c.b))
            }
        } else {
            for c in 0..<ch { bg[c] = Int(image.row(0)[c]) }
        }
        let limit = Int(t.threshold.rounded(.down))
        func uniform(_ p: UnsafeMutablePointer<UInt8>, count: Int, step: Int) -> Bool {
            var q = p
            for _ in 0..<count {
                for c in 0..<ch where abs(Int(q[c]) - bg[c]) > limit { return false }
                q += step
            }
            return true
        }
        var top = 0, bottom = h, left = 0, right = w
        while top < h && uniform(image.row(top), count: w, step: ch) { top += 1 }
        guard top < h else { return Rect(x: 0, y: 0, width: Double(storedSize.width), height: Double(storedSize.height)) }
        while bottom > top + 1 && uniform(image.row(bottom - 1), count: w, step: ch) { bottom -= 1 }
        let rows = bottom - top
        while left < w - 1 && uniform(image.row(top) + left * ch, count: rows, step: image.stride) { left += 1 }
        while right > left + 1 && uniform(image.row(top) + (right - 1) * ch, count: rows, step: image.stride) { right -= 1 }
        let x0 = (Double(left) / scaleX).rounded(.down), y0 = (Double(top) / scaleY).rounded(.down)
        let x1 = min(Double(storedSize.width), (Double(right) / scaleX).rounded(.up))
        let y1 = min(Double(storedSize.height), (Double(bottom) / scaleY).rounded(.up))
        return Rect(x: x0, y: y0, width: max(1, x1 - x0), height: max(1, y1 - y0))
    }

    /// A small map (long side ≤ 128) of where attention goes, in the stored orientation:
    /// gradient magnitude of luma, saturation of mid-tones and skin tones, summed with equal
    /// weights and blurred (the features libvips' `smartcrop attention` uses).
    lazy var saliency: PixelBuffer? = try? makeSaliency()

    private func makeSaliency() throws -> PixelBuffer {
        let w = image.width, h = image.height, ch = image.channels
        let block = max(1, Int((Double(max(w, h)) / 128).rounded(.up)))
        let mw = (w + block - 1) / block, mh = (h + block - 1) / block
        // Block means of R, G, B, from a sample of each block's pixels (every `step`-th row
        // and column: the map is coarse, the decoded image may be millions of pixels).
        let step = max(1, block / 4)
        var rgb = [Float](repeating: 0, count: mw * mh * 3)
        var counts = [Float](repeating: 0, count: mw * mh)
        rgb.withUnsafeMutableBufferPointer { rgb in
            counts.withUnsafeMutableBufferPointer { counts in
                var y = 0
                while y < h {
                    let row = image.row(y), base = (y / block) * mw
                    var x = 0
                    while x < w {
                        let i = base + x / block, p = row + x * ch
                        let r = Float(p[0]), g = ch >= 3 ? Float(p[1]) : r, b = ch >= 3 ? Float(p[2]) : r
                        rgb[i * 3] += r
                        rgb[i * 3 + 1] += g
                        rgb[i * 3 + 2] += b
                        counts[i] += 1
                        x += step
                    }
                    y += step
                }
            }
        }
        var luma = [Float](repeating: 0, count: mw * mh)
        var score = [Float](repeating: 0, count: mw * mh)
        for i in 0..<(mw * mh) {
            let n = max(1, counts[i])
            let r = rgb[i * 3] / n, g = rgb[i * 3 + 1] / n, b = rgb[i * 3 + 2] / n
            rgb[i * 3] = r; rgb[i * 3 + 1] = g; rgb[i * 3 + 2] = b
            luma[i] = 0.2126 * r + 0.7152 * g + 0.0722 * b
        }
        var maxEdge: Float = 1
        var edges = [Float](repeating: 0, count: mw * mh)
        for y in 0..<mh {
            for x in 0..<mw {
                let l = luma[y * mw + max(0, x - 1)], r = luma[y * mw + min(mw - 1, x + 1)]
                let u = luma[max(0, y - 1) * mw + x], d = luma[min(mh - 1, y + 1) * mw + x]
                let e = ((r - l) * (r - l) + (d - u) * (d - u)).squareRoot()
                edges[y * mw + x] = e
                maxEdge = max(maxEdge, e)
            }
        }
        var maxScore: Float = 1e-6
        for i in 0..<(mw * mh) {
            let r = rgb[i * 3], g = rgb[i * 3 + 1], b = rgb[i * 3 + 2]
            let hi = max(r, g, b), lo = min(r, g, b)
            let midTone: Float = luma[i] > 25 && luma[i] < 240 ? 1 : 0
            let saturation = (hi - lo) / 255 * midTone
            // Skin: the RGB rule of Kovač et al. (daylight), a common skin-tone proxy.
            let skin: Float = r > 95 && g > 40 && b > 20 && hi - lo > 15 && abs(r - g) > 15 && r > g && r > b ? 1 : 0
            score[i] = edges[i] / maxEdge + saturation + skin
        }
        // Blur (separable box, run twice: close to a Gaussian of σ ≈ 2 cells).
        for _ in 0..<2 { boxBlur(&score, width: mw, height: mh, radius: 2) }
        for v in score { maxScore = max(maxScore, v) }
        let map = try PixelBuffer.make(width: mw, height: mh, layout: .gray)
        for y in 0..<mh {
            let row = map.row(y)
            for x in 0..<mw { row[x] = UInt8(min(255, (score[y * mw + x] / maxScore * 255).rounded())) }
        }
        return map
    }

    private func boxBlur(_ v: inout [Float], width w: Int, height h: Int, radius r: Int) {
        var tmp = v
        for y in 0..<h {
            for x in 0..<w {
                var s: Float = 0, n: Float = 0
                for dx in -r...r where x + dx >= 0 && x + dx < w { s += v[y * w + x + dx]; n += 1 }
                tmp[y * w + x] = s / n
            }
        }
        for y in 0..<h {
            for x in 0..<w {
                var s: Float = 0, n: Float = 0
                for dy in -r...r where y + dy >= 0 && y + dy < h { s += tmp[(y + dy) * w + x]; n += 1 }
                v[y * w + x] = s / n
            }
        }
    }
}

/// The saliency map as one output sees it (its orientation), with an integral image to sum
/// any window at once.
struct SaliencyView {
    let mapWidth: Int, mapHeight: Int
    /// Map cells per displayed pixel.
    let kx: Double, ky: Double
    /// (mapWidth + 1) × (mapHeight + 1) prefix sums.
    let integral: [Double]

    init?(analysis: SourceAnalysis, orientation: Orientation, displaySize: Size) {
        guard let stored = analysis.saliency, let map = try? orientation.apply(to: stored) else { return nil }
        mapWidth = map.width
        mapHeight = map.height
        kx = Double(map.width) / Double(displaySize.width)
        ky = Double(map.height) / Double(displaySize.height)
        var sums = [Double](repeating: 0, count: (map.width + 1) * (map.height + 1))
        let stride = map.width + 1
        for y in 0..<map.height {
            var rowSum = 0.0
            let row = map.row(y)
            for x in 0..<map.width {
                rowSum += Double(row[x])
                sums[(y + 1) * stride + x + 1] = sums[y * stride + x + 1] + rowSum
            }
        }
        integral = sums
    }

    /// The offset (from the region's origin, displayed pixels) of the `width`×`height`
    /// window in `region` that holds the most saliency; of equals, the one nearest the centre.
    func bestWindow(width: Double, height: Double, in region: Rect) -> (Double, Double) {
        let stride = mapWidth + 1
        let ww = max(1, min(mapWidth, Int((width * kx).rounded()))), wh = max(1, min(mapHeight, Int((height * ky).rounded())))
        let rx0 = max(0, Int((region.x * kx).rounded())), ry0 = max(0, Int((region.y * ky).rounded()))
        let rx1 = min(mapWidth, max(rx0 + ww, Int(((region.x + region.width) * kx).rounded())))
        let ry1 = min(mapHeight, max(ry0 + wh, Int(((region.y + region.height) * ky).rounded())))
        var best = -1.0, bestDistance = Double.infinity, bx = rx0, by = ry0
        let cx = Double(rx0 + rx1 - ww) / 2, cy = Double(ry0 + ry1 - wh) / 2
        for y in ry0...max(ry0, ry1 - wh) {
            for x in rx0...max(rx0, rx1 - ww) {
                let s = integral[(y + wh) * stride + x + ww] - integral[y * stride + x + ww]
                    - integral[(y + wh) * stride + x] + integral[y * stride + x]
                let d = (Double(x) - cx) * (Double(x) - cx) + (Double(y) - cy) * (Double(y) - cy)
                if s > best + 1e-6 || (abs(s - best) <= 1e-6 && d < bestDistance) {
                    (best, bestDistance, bx, by) = (s, d, x, y)
                }
            }
        }
        // Back to displayed pixels, centred on the chosen cells, inside the region.
        let x = (Double(bx) + Double(ww) / 2) / kx - width / 2 - region.x
        let y = (Double(by) + Double(wh) / 2) / ky - height / 2 - region.y
        return (min(max(0, x.rounded()), region.width - width), min(max(0, y.rounded()), region.height - height))
    }
}
