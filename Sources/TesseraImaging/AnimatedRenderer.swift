import TesseraModel

/// Animated outputs of animated sources (GIF, animated WebP): the frames stream through — each
/// composited on the one canvas (giflib's frames by us, WebP's by libwebp), resized by each animated recipe with the same resampler as a still
/// (linear light, premultiplied alpha), oriented and filtered, handed to an animated WebP
/// encoder — so memory is the canvas, one frame per output and the encoders, whatever the
/// frame count. Delays and the loop count are kept. Recipes that do not animate (or ask for
/// a still format) go through the usual path: the first frame.
enum AnimatedRenderer {
    /// Formats an animation is written in (the others are stills: the first frame).
    static func animates(_ settings: OutputSettings) -> Bool {
        settings.animated && settings.formats.isEmpty && [.webp, .auto, .original].contains(settings.format)
    }

    /// An animated source: its canvas, frames and loop count (0: forever), and its frames in
    /// turn as shown (RGBA) with how long each is shown, in milliseconds.
    struct Animation {
        let format: ImageFormat
        let size: Size
        let frameCount: Int
        let loop: Int
        let path: DecodePath
        let frames: (_ body: (PixelBuffer, Int) throws -> Void) throws -> Void
    }

    /// The animation in `bytes` (which must outlive it), or nil for a still.
    static func animation(_ bytes: UnsafeRawBufferPointer, options: RenderOptions) throws -> Animation? {
        switch ImageFormat.sniff(bytes) {
        case .gif:
            let gif = try GIFDecoder(bytes: bytes, limits: options.limits)
            guard gif.frameCount > 1 else { return nil }
            // A GIF without a loop count plays once.
            return Animation(format: .gif, size: gif.size, frameCount: gif.frameCount, loop: gif.loopCount ?? 1, path: .gifFrames) { body in
                try gif.frames(limits: options.limits) { _, canvas, delay in try body(canvas, delay) }
            }
        case .webp:
            guard let webp = try? WebPDecoder(bytes: bytes, limits: options.limits), webp.isAnimated else { return nil }
            let d = try AnimatedWebPDecoder(bytes: bytes, limits: options.limits)
            guard d.frameCount > 1 else { return nil }
            return Animation(format: .webp, size: d.size, frameCount: d.frameCount, loop: d.loopCount, path: .webpFrames) { body in
                var shown = 0
                while let (image, end) = try d.next() {
                    try body(image, max(0, end - shown))
                    shown = end
                }
            }
        default:
            return nil
        }
    }

    /// The render, when some recipe animates an animated source; nil otherwise (the usual path).
    static func render(bytes: UnsafeRawBufferPointer, recipes: [Recipe], options: RenderOptions) throws -> RenderResult? {
        guard recipes.contains(where: { animates($0.output) }), options.frame == 0 else { return nil }
        let clock = Stopwatch()
        for r in recipes { try r.validate() }
        guard let gif = try animation(bytes, options: options) else { return nil }
        // Every frame is decoded: their pixels together count against the limit, before any allocation.
        let (perFrame, o1) = gif.size.width.multipliedReportingOverflow(by: gif.size.height)
        let (total, o2) = perFrame.multipliedReportingOverflow(by: gif.frameCount)
        guard !o1, !o2, total <= options.limits.maxPixels else {
            throw ImagingError(.limitExceeded, "animated \(gif.format == .gif ? "GIF" : "WebP") of \(gif.frameCount) frames of \(gif.size): "
                               + "\(o1 || o2 ? "too many" : "\(total)") pixels to decode, over the limit of \(options.limits.maxPixels)")
        }
        let moving = recipes.indices.filter { animates(recipes[$0].output) }
        let still = recipes.indices.filter { !moving.contains($0) }
        var outputs: [RenderedOutput] = []
        var timings = StageTimings()
        if !still.isEmpty {
            let r = try Renderer.render(bytes: bytes, recipes: still.map { recipes[$0] }, options: options)
            outputs += r.outputs.map { RenderedOutput(recipe: $0.recipe, recipeIndex: still[$0.recipeIndex], file: $0.file, timings: $0.timings) }
            timings = r.timings
        }
        struct Track {
            let index: Int
            let plan: OutputPlan
            let encoder: AnimatedWebPEncoder
            let filters: [RecipeOperation]
            var timings = StageTimings()
        }
        var tracks: [Track] = try moving.map { i in
            let recipe = recipes[i]
            let plan = try OutputPlan(recipe: recipe, storedSize: gif.size, exifOrientation: .up, policy: options.scalePolicy)
            guard !plan.needsAnalysis else {
                throw ImagingError(.invalidRecipe, "animated outputs crop by a fixed gravity (not attention or trim)")
            }
            let s = recipe.output
            let encoder = try AnimatedWebPEncoder(width: plan.outputSize.width, height: plan.outputSize.height,
                                                  quality: s.jpegQuality, lossless: s.lossless, method: s.webpMethod,
                                                  loop: gif.loop)
            return Track(index: i, plan: plan, encoder: encoder, filters: recipe.operations.filter(\.isFilter))
        }
        var time = 0
        var decode = 0.0, last = clock.milliseconds
        try gif.frames { canvas, delay in
            decode += clock.milliseconds - last
            for k in tracks.indices {
                let t0 = clock.milliseconds
                let p = tracks[k].plan
                var frame = try Filters.resized(canvas, region: p.storedRegion, to: p.storedOutputSize, filter: p.filter)
                if p.orientation != .up { frame = try p.orientation.apply(to: frame) }
                if !tracks[k].filters.isEmpty { frame = try Filters.apply(tracks[k].filters, to: frame) }
                let t1 = clock.milliseconds
                try tracks[k].encoder.add(frame, at: time)
                tracks[k].timings.resize += t1 - t0
                tracks[k].timings.encode += clock.milliseconds - t1
            }
            time += delay
            last = clock.milliseconds
        }
        timings.decode += decode
        for t in tracks {
            let t0 = clock.milliseconds
            let bytes = try t.encoder.finish(at: time)
            var st = t.timings
            st.encode += clock.milliseconds - t0
            let record = OutputRecord(name: recipes[t.index].name ?? "", path: "", format: .webp, width: t.plan.outputSize.width,
                                      height: t.plan.outputSize.height, bytes: bytes.count,
                                      quality: recipes[t.index].output.lossless ? nil : recipes[t.index].output.jpegQuality)
            outputs.append(RenderedOutput(recipe: recipes[t.index], recipeIndex: t.index, file: OutputFile(record, bytes: bytes), timings: st))
            timings.resize += st.resize
            timings.encode += st.encode
        }
        timings.close(at: clock.milliseconds, remainderTo: .finish)
        outputs.sort { $0.recipeIndex < $1.recipeIndex }
        return RenderResult(source: SourceSummary(format: gif.format, storedSize: gif.size, orientation: .up, iccName: nil,
                                                  convertedToSRGB: false, hadGPS: false),
                            outputs: outputs, decodePath: gif.path, level: gif.frameCount, scaleEighths: 8,
                            decodedSize: gif.size, timings: timings)
    }
}
