import Foundation
import TesseraModel

/// A source's gain map through the same geometry as the image: each output's region,
/// orientation and size, at the map's own resolution (typically ¼ of the image's), decoded
/// with the DCT scale that covers the largest output's map, and filtered in linear boost
/// (`BoostTables`), where the HDR rendition — the image times the boost — averages as the
/// resized HDR image does.
enum GainMapStep {
    /// Whether a recipe's steps leave a gain map meaningful, and why not when they do not.
    static func dropReason(for recipe: Recipe) -> String? {
        for op in recipe.operations {
            switch op {
            case .adjust: return "adjust changes the image's tones: the map would no longer match (dropped, the output is SDR)"
            case .pad: return "pad adds borders the map does not cover (dropped, the output is SDR)"
            case .overlay: return "an overlay would be boosted by the map (dropped, the output is SDR)"
            default: continue
            }
        }
        return nil
    }

    /// A thumbnail's map keeps at least this many pixels on its long side (up to the
    /// output's own): a ¼-resolution map of a 256 px thumbnail (64 px) cannot hold the
    /// map's edges — its HDR rendition is 30 dB against the source's resized, a 160 px
    /// map's 35 dB, for 28 % more bytes than an SDR thumbnail instead of 18 %
    /// (docs/decisions/021-gain-maps.md has the trade-off measured).
    static let minimumLongSide = 160

    /// The map's quality for an output of quality `q`: the output's, lowered where the map's
    /// resolution was raised (`minimumLongSide`) — there its quantisation costs less than its
    /// resolution did (a 128 px map at q50 beats a 64 px one at q85, in fewer bytes).
    static func quality(for q: Int, raised: Bool) -> Int {
        raised ? max(1, min(100, Int((Double(q) * factor).rounded()))) : q
    }
    static let factor = 0.7

    /// The map's size for an output of `output` stored pixels: one factor for both sides (the
    /// output's aspect kept), the source's map-to-image ratio raised so the long side has
    /// `minimumLongSide` pixels, never past the output's size nor past the `region` of the map
    /// it comes from (in map pixels, when given); at least one pixel. Whether it was raised.
    static func mapSize(output: Size, ratio: Double, region: Rect? = nil) -> (size: Size, raised: Bool) {
        let long = Double(max(output.width, output.height))
        var k = min(1, max(ratio, Double(minimumLongSide) / long))
        if let region { k = min(k, region.width / Double(output.width), region.height / Double(output.height)) }
        let size = Size(width: max(1, min(output.width, Int((Double(output.width) * k).rounded()))),
                        height: max(1, min(output.height, Int((Double(output.height) * k).rounded()))))
        return (size, k > ratio + 1e-9)
    }

    /// The map for each plan where `wanted` says so (nil elsewhere), upright like the output.
    static func render(_ map: GainMapSource, in bytes: UnsafeRawBufferPointer, imageSize: Size, plans: [OutputPlan],
                       wanted: [Bool], options: RenderOptions) throws -> [(pixels: PixelBuffer, raised: Bool)?] {
        guard wanted.contains(true) else { return plans.map { _ in nil } }
        // The map's pixels come from its JPEG (rows, at a DCT scale) or a HEIF's auxiliary
        // image (decoded whole, its values recoded to the metadata's).
        var source: SourceDecoder?
        var whole: PixelBuffer?
        if let aux = map.heifAuxiliary {
            let image = try SourceDecoder(bytes: bytes, options: options).loader.decodeAuxiliary(id: aux.id, limits: options.limits)
            image.withUnsafeMutableBytes { p in
                aux.recode.withUnsafeBufferPointer { table in
                    for i in p.indices { p[i] = table[Int(p[i])] }
                }
            }
            whole = image
        } else {
            var o = options
            o.fastMode = false
            o.frame = 0
            o.page = 0
            // An Ultra HDR map is a JPEG (UltraHDR.locate takes only ranges that start as one).
            source = try SourceDecoder(bytes: UnsafeRawBufferPointer(rebasing: bytes[map.range]), options: o)
        }
        let mapStored = whole.map { Size(width: $0.width, height: $0.height) } ?? source!.storedSize
        let ratio = (x: Double(mapStored.width) / Double(imageSize.width), y: Double(mapStored.height) / Double(imageSize.height))
        var regions: [Rect?] = [], sizes: [Size?] = [], raised: [Bool] = []
        for (i, plan) in plans.enumerated() {
            guard wanted[i] else { regions.append(nil); sizes.append(nil); raised.append(false); continue }
            let region = plan.storedRegion.scaled(x: ratio.x, y: ratio.y)
            let (size, up) = mapSize(output: plan.storedOutputSize, ratio: ratio.x, region: region)
            regions.append(region)
            sizes.append(size)
            raised.append(up)
        }
        var k = 1.0, decoded = mapStored, channels = whole?.channels ?? 0
        if let source {
            var scale = 1
            for i in plans.indices {
                guard let r = regions[i], let s = sizes[i] else { continue }
                scale = max(scale, OutputPlan.scale(region: r, output: s, policy: options.scalePolicy))
            }
            try source.start(scaleEighths: scale, maxBatchRows: 16)
            decoded = source.decodedSize
            try options.limits.checkDimensions(decoded)
            k = Double(source.scaleEighths) / 8
            channels = source.channels
        }
        let curve = BoostTables.tables(for: map.metadata)  // held until the resamplers are done
        defer { withExtendedLifetime(curve) {} }
        var resamplers: [Resampler?] = []
        for i in plans.indices {
            guard let r = regions[i], let s = sizes[i] else { resamplers.append(nil); continue }
            resamplers.append(try Resampler(inputWidth: decoded.width, inputHeight: decoded.height, inputChannels: channels,
                                            region: r.scaled(x: k, y: k), outputSize: s, filter: .lanczos3,
                                            transfer: (curve.toLinear, curve.fromLinear)))
        }
        let active = resamplers.compactMap { $0 }
        if let whole {
            for r in active { r.consume(whole.base, stride: whole.stride, count: whole.height) }
        } else if let source {
            let stride = decoded.width * channels
            let batch = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * 16)
            defer { batch.deallocate() }
            while true {
                let n = try source.read(into: batch, stride: stride, maxRows: 16)
                if n == 0 { break }
                for r in active { r.consume(batch, stride: stride, count: n) }
            }
            try source.finish()
        }
        return try plans.indices.map { i in
            guard let r = resamplers[i] else { return nil }
            return (try plans[i].orientation.apply(to: r.output), raised[i])
        }
    }
}

/// The resampler's tables for a gain map: code → boost 2^mix(min, max, code^(1/gamma)),
/// scaled to 0...1 between the smallest and largest boost, and back. Filtering the boost
/// instead of the code (its log) keeps a thumbnail's HDR rendition closer to the source's
/// resized (+0.5 dB PSNR at 256 and 1280 px; docs/decisions/021-gain-maps.md). Channel 0's
/// values stand for all three (a three-channel map with different values per channel is
/// filtered by the first's curve). Built once per curve; the last 32 curves are kept
/// (phones write each photo's own boost, so the cache is bounded and a render keeps its
/// tables alive by holding them).
final class BoostTables: @unchecked Sendable {
    struct Key: Hashable { let min, max, gamma: Double }
    let toLinear: UnsafeMutablePointer<Float>
    let fromLinear: UnsafeMutablePointer<UInt8>

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cache: [Key: BoostTables] = [:]

    static func tables(for m: GainMapMetadata) -> BoostTables {
        let key = Key(min: m.minLog2[0], max: m.maxLog2[0], gamma: m.gamma[0])
        lock.lock()
        defer { lock.unlock() }
        if let t = cache[key] { return t }
        let t = BoostTables(key)
        if cache.count >= 32 { cache.removeAll() }
        cache[key] = t
        return t
    }

    private init(_ k: Key) {
        toLinear = .allocate(capacity: 256)
        fromLinear = .allocate(capacity: 65536)
        let span = k.max - k.min
        guard span > 1e-6 else {  // a flat map: the codes as they are
            for i in 0..<256 { toLinear[i] = Float(i) / 255 }
            for j in 0..<65536 { fromLinear[j] = UInt8((Double(j) / 65535 * 255).rounded()) }
            return
        }
        let bMin = exp2(k.min), bMax = exp2(k.max)
        for i in 0..<256 {
            let b = exp2(k.min + span * pow(Double(i) / 255, 1 / k.gamma))
            toLinear[i] = Float(min(1, max(0, (b - bMin) / (bMax - bMin))))
        }
        // Back: code c where the boost lies between the boosts of codes c − ½ and c + ½ — 255
        // boundaries computed, the 65,536 entries filled by walking them (no log per entry).
        var boundaries = [Double](repeating: 2, count: 256)
        for c in 0..<255 {
            let b = exp2(k.min + span * pow((Double(c) + 0.5) / 255, 1 / k.gamma))
            boundaries[c] = (b - bMin) / (bMax - bMin)
        }
        var code = 0
        for j in 0..<65536 {
            let t = Double(j) / 65535
            while code < 255 && t >= boundaries[code] { code += 1 }
            fromLinear[j] = UInt8(code)
        }
    }

    deinit {
        toLinear.deallocate()
        fromLinear.deallocate()
    }
}

/// The HDR rendition of an SDR image and its gain map (`apply`): ISO 21496-1's formula in
/// linear light at a display headroom, written in PQ (SMPTE ST 2084) with SDR white at
/// 203 cd/m² (ITU-R BT.2408), as samples of `bits` bits for an HDR AVIF.
enum HDRRendition {
    static let sdrWhiteNits = 203.0

    /// Interleaved RGB PQ codes (0...2^bits − 1), `sdr`'s size; the map (any size) sampled bilinearly.
    static func pq(sdr: PixelBuffer, map: PixelBuffer, metadata m: GainMapMetadata, headroomStops: Double, bits: Int) -> [UInt16] {
        let top = Float((1 << bits) - 1)
        let w = sdr.width, h = sdr.height
        let weight = m.weight(displayHeadroomStops: headroomStops)
        // sRGB codes to linear light; map codes (1024 steps) to each channel's boost.
        var linear = [Float](repeating: 0, count: 256)
        for i in 0..<256 { linear[i] = Float(SRGB.decode(Double(i) / 255)) }
        let steps = 1024
        var boost = [Float](repeating: 1, count: 3 * (steps + 1))
        for c in 0..<3 {
            for k in 0...steps {
                let recovery = pow(Double(k) / Double(steps), 1 / m.gamma[c])
                boost[c * (steps + 1) + k] = Float(exp2((m.minLog2[c] * (1 - recovery) + m.maxLog2[c] * recovery) * weight))
            }
        }
        // PQ: Y^m1 by pow, the rest from a table over 0...1.
        let m1 = 0.1593017578125, m2 = 78.84375, c1 = 0.8359375, c2 = 18.8515625, c3 = 18.6875
        let pqSteps = 4096
        var pq = [Float](repeating: 0, count: pqSteps + 2)
        for k in 0...pqSteps {
            let t = Double(k) / Double(pqSteps)
            pq[k] = Float(pow((c1 + c2 * t) / (1 + c3 * t), m2)) * top
        }
        pq[pqSteps + 1] = pq[pqSteps]
        var out = [UInt16](repeating: 0, count: w * h * 3)
        let scale = Float(sdrWhiteNits / 10000)
        let offS = m.offsetSDR.map(Float.init), offH = m.offsetHDR.map(Float.init)
        let sx = Double(map.width) / Double(w), sy = Double(map.height) / Double(h)
        let mc = map.channels
        linear.withUnsafeBufferPointer { lin in
        boost.withUnsafeBufferPointer { boost in
        pq.withUnsafeBufferPointer { pq in
        out.withUnsafeMutableBufferPointer { out in
            for y in 0..<h {
                let fy = max(0, (Double(y) + 0.5) * sy - 0.5)
                let y0 = min(Int(fy), map.height - 1), y1 = min(y0 + 1, map.height - 1)
                let ty = Float(fy - Double(y0))
                let row = sdr.row(y), r0 = map.row(y0), r1 = map.row(y1)
                for x in 0..<w {
                    let fx = max(0, (Double(x) + 0.5) * sx - 0.5)
                    let x0 = min(Int(fx), map.width - 1), x1 = min(x0 + 1, map.width - 1)
                    let tx = Float(fx - Double(x0))
                    for c in 0..<3 {
                        let mcI = mc == 3 ? c : 0
                        let a = Float(r0[x0 * mc + mcI]), b = Float(r0[x1 * mc + mcI])
                        let d = Float(r1[x0 * mc + mcI]), e = Float(r1[x1 * mc + mcI])
                        let v = ((a + (b - a) * tx) * (1 - ty) + (d + (e - d) * tx) * ty) / 255
                        let f = v * Float(steps)
                        let k = min(steps - 1, Int(f))
                        let g = boost[c * (steps + 1) + k] + (boost[c * (steps + 1) + k + 1] - boost[c * (steps + 1) + k]) * (f - Float(k))
                        let s = sdr.channels == 1 ? row[x] : row[x * sdr.channels + c]
                        let hdr = max(0, (lin[Int(s)] + offS[c]) * g - offH[c])
                        let t = Float(pow(Double(min(1, hdr * scale)), m1)) * Float(pqSteps)
                        let i = min(pqSteps, Int(t))
                        let code = pq[i] + (pq[i + 1] - pq[i]) * (t - Float(i))
                        out[(y * w + x) * 3 + c] = UInt16(min(top, max(0, code.rounded())))
                    }
                }
            }
        }}}}
        return out
    }
}
