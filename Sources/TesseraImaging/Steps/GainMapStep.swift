import TesseraModel

/// A source's gain map through the same geometry as the image: each output's region,
/// orientation and size, at the map's own resolution (typically ¼ of the image's), decoded
/// with the DCT scale that covers the largest output's map and filtered in its coded values.
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

    /// The map's size for an output of `output` stored pixels: the source's map-to-image
    /// ratio, at least one pixel.
    static func mapSize(output: Size, ratio: (x: Double, y: Double)) -> Size {
        Size(width: max(1, min(output.width, Int((Double(output.width) * ratio.x).rounded()))),
             height: max(1, min(output.height, Int((Double(output.height) * ratio.y).rounded()))))
    }

    /// The map for each plan where `wanted` says so (nil elsewhere), upright like the output.
    static func render(_ map: GainMapSource, in bytes: UnsafeRawBufferPointer, imageSize: Size, plans: [OutputPlan],
                       wanted: [Bool], options: RenderOptions) throws -> [PixelBuffer?] {
        guard wanted.contains(true) else { return plans.map { _ in nil } }
        var o = options
        o.fastMode = false
        o.frame = 0
        o.page = 0
        let source = try SourceDecoder(bytes: UnsafeRawBufferPointer(rebasing: bytes[map.range]), options: o)
        guard source.format == .jpeg else {
            throw ImagingError(.corrupt, "the gain map is not a JPEG")
        }
        let ratio = (x: Double(source.storedSize.width) / Double(imageSize.width),
                     y: Double(source.storedSize.height) / Double(imageSize.height))
        var regions: [Rect?] = [], sizes: [Size?] = []
        for (i, plan) in plans.enumerated() {
            guard wanted[i] else { regions.append(nil); sizes.append(nil); continue }
            regions.append(plan.storedRegion.scaled(x: ratio.x, y: ratio.y))
            sizes.append(mapSize(output: plan.storedOutputSize, ratio: ratio))
        }
        var scale = 1
        for i in plans.indices {
            guard let r = regions[i], let s = sizes[i] else { continue }
            scale = max(scale, OutputPlan.scale(region: r, output: s, policy: options.scalePolicy))
        }
        try source.start(scaleEighths: scale, maxBatchRows: 16)
        let decoded = source.decodedSize
        try options.limits.checkDimensions(decoded)
        let k = Double(source.scaleEighths) / 8
        var resamplers: [Resampler?] = []
        for i in plans.indices {
            guard let r = regions[i], let s = sizes[i] else { resamplers.append(nil); continue }
            resamplers.append(try Resampler(inputWidth: decoded.width, inputHeight: decoded.height, inputChannels: source.channels,
                                            region: r.scaled(x: k, y: k), outputSize: s, filter: .lanczos3, coded: true))
        }
        let active = resamplers.compactMap { $0 }
        let stride = decoded.width * source.channels
        let batch = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * 16)
        defer { batch.deallocate() }
        while true {
            let n = try source.read(into: batch, stride: stride, maxRows: 16)
            if n == 0 { break }
            for r in active { r.consume(batch, stride: stride, count: n) }
        }
        try source.finish()
        return try plans.indices.map { i in
            guard let r = resamplers[i] else { return nil }
            return try plans[i].orientation.apply(to: r.output)
        }
    }
}
