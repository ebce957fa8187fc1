import TesseraModel

/// An animated source: its canvas, frames and loop count (0: forever), and its frames in
/// turn as shown (RGBA) with how long each is shown, in milliseconds.
struct AnimationSource {
    let format: ImageFormat
    /// What it is, for messages: "animated GIF", "video preview".
    let kind: String
    let size: Size
    let frameCount: Int
    let loop: Int
    let path: DecodePath
    /// How the frames are turned for display (a video's display matrix).
    var orientation: Orientation = .up
    /// Whether frames come reduced to the scale asked for (a video's, by libswscale); the
    /// others come at `size`.
    var scalable = false
    /// What decoding holds, in frames of the decoded size (canvas, indices, the decoder's own).
    var framesHeld = 5
    /// Frames made of palettes (GIF): an animated WebP of them mixes lossy and lossless frames.
    var paletted = false
    let frames: (_ scaleEighths: Int, _ body: (PixelBuffer, Int) throws -> Void) throws -> Void
}

/// Animated outputs of animated sources (GIF, animated WebP): the frames stream through — each
/// composited on the one canvas (giflib's frames by us, WebP's by libwebp), resized by each animated recipe with the same resampler as a still
/// (linear light, premultiplied alpha), oriented and filtered, handed to an animated WebP
/// encoder — so memory is the canvas, one frame per output and the encoders, whatever the
/// frame count. Delays and the loop count are kept. Recipes that do not animate (or ask for
/// a still format) go through the usual path: the first frame.
enum AnimatedRenderer {
    /// Formats an animation is written in (the others are stills: the first frame).
    static func animates(_ settings: OutputSettings) -> Bool {
        settings.animated && settings.formats.isEmpty && [.webp, .gif, .auto, .original].contains(settings.format)
    }

    /// The animation in `bytes` (which must outlive it), or nil for a still. Its length was
    /// checked against `maxFrames` and `maxDuration` from the header, as every source's is.
    static func animation(_ bytes: UnsafeRawBufferPointer, options: RenderOptions) throws -> AnimationSource? {
        try SourceDecoder(bytes: bytes, options: options).loader.animation(options: options)
    }

    /// The render, when some recipe animates an animated source; nil otherwise (the usual path).
    static func render(bytes: UnsafeRawBufferPointer, recipes: [Recipe], options: RenderOptions) throws -> RenderResult? {
        guard recipes.contains(where: { animates($0.output) }), options.frame == 0 else { return nil }
        let clock = Stopwatch()
        for r in recipes { try r.validate() }
        guard let source = try animation(bytes, options: options) else { return nil }
        let moving = recipes.indices.filter { animates(recipes[$0].output) }
        let plans = try moving.map {
            try OutputPlan(recipe: recipes[$0], storedSize: source.size, exifOrientation: source.orientation, policy: options.scalePolicy)
        }
        // A video's frames come reduced to the largest scale any output needs.
        let eighths = source.scalable ? plans.map(\.minimumScaleEighths).max() ?? 8 : 8
        let decoded = Size(width: max(1, (source.size.width * eighths + 7) / 8), height: max(1, (source.size.height * eighths + 7) / 8))
        // Every frame is decoded: their pixels together count against the limit, before any allocation.
        let (perFrame, o1) = decoded.width.multipliedReportingOverflow(by: decoded.height)
        let (total, o2) = perFrame.multipliedReportingOverflow(by: source.frameCount)
        guard !o1, !o2, total <= options.limits.maxPixels else {
            throw ImagingError(.limitExceeded, "\(source.kind) of \(source.frameCount) frames of \(decoded): "
                               + "\(o1 || o2 ? "too many" : "\(total)") pixels to decode, over the limit of \(options.limits.maxPixels)")
        }
        // Memory: the source's canvas (RGBA, and a GIF's indices) or a video's frames, and per
        // output its frame, the copy its encoder keeps and the encoder's own (about one more).
        if options.limits.maxMemoryBytes > 0 {
            var need = perFrame * source.framesHeld + (8 << 20)
            for plan in plans { need += plan.storedOutputSize.width * plan.storedOutputSize.height * 4 * 3 }
            guard need <= options.limits.maxMemoryBytes else {
                throw ImagingError(.outOfMemory, "needs about \((need + (1 << 20) - 1) >> 20) MB (\(source.frameCount) frames of \(decoded)), "
                                   + "over this worker's memory budget of \(options.limits.maxMemoryBytes >> 20) MB per task")
            }
        }
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
            let encoder: AnimationEncoder
            let format: ImageFormat
            let filters: [RecipeOperation]
            var timings = StageTimings()
        }
        var tracks: [Track] = try moving.indices.map { k in
            let i = moving[k]
            let recipe = recipes[i]
            let plan = plans[k]
            guard !plan.needsAnalysis else {
                throw ImagingError(.invalidRecipe, "animated outputs crop by a fixed gravity (not attention or trim)")
            }
            let s = recipe.output
            let encoder: AnimationEncoder = s.format == .gif
                ? try GIFEncoder(width: plan.outputSize.width, height: plan.outputSize.height, loop: source.loop)
                : try AnimatedWebPEncoder(width: plan.outputSize.width, height: plan.outputSize.height,
                                          quality: s.jpegQuality, lossless: s.lossless, method: s.webpMethod,
                                          loop: source.loop, mixed: source.paletted)
            return Track(index: i, plan: plan, encoder: encoder, format: s.format == .gif ? .gif : .webp,
                         filters: recipe.operations.filter(\.isFilter))
        }
        var time = 0
        var decode = 0.0, last = clock.milliseconds
        let sx = Double(decoded.width) / Double(source.size.width), sy = Double(decoded.height) / Double(source.size.height)
        try source.frames(eighths) { canvas, delay in
            decode += clock.milliseconds - last
            for k in tracks.indices {
                let t0 = clock.milliseconds
                let p = tracks[k].plan
                var frame = try Filters.resized(canvas, region: p.storedRegion.scaled(x: sx, y: sy), to: p.storedOutputSize, filter: p.filter)
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
            let record = OutputRecord(name: recipes[t.index].name ?? "", path: "", format: t.format, width: t.plan.outputSize.width,
                                      height: t.plan.outputSize.height, bytes: bytes.count,
                                      quality: recipes[t.index].output.lossless || t.format == .gif ? nil : recipes[t.index].output.jpegQuality)
            outputs.append(RenderedOutput(recipe: recipes[t.index], recipeIndex: t.index, file: OutputFile(record, bytes: bytes), timings: st))
            timings.resize += st.resize
            timings.encode += st.encode
        }
        timings.close(at: clock.milliseconds, remainderTo: .finish)
        outputs.sort { $0.recipeIndex < $1.recipeIndex }
        return RenderResult(source: SourceSummary(format: source.format, storedSize: source.size, orientation: source.orientation, iccName: nil,
                                                  convertedToSRGB: false, hadGPS: false),
                            outputs: outputs, decodePath: source.path, level: source.frameCount, scaleEighths: eighths,
                            decodedSize: decoded, timings: timings)
    }
}
