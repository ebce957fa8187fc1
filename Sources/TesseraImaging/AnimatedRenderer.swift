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
        settings.animated && settings.formats.isEmpty && [.webp, .gif, .auto, .original].contains(settings.format)
    }

    /// An animated source: its canvas, frames and loop count (0: forever), and its frames in
    /// turn as shown (RGBA) with how long each is shown, in milliseconds.
    struct Animation {
        let format: ImageFormat
        let size: Size
        let frameCount: Int
        let loop: Int
        let path: DecodePath
        /// How the frames are turned for display (a video's display matrix).
        var orientation: Orientation = .up
        /// Whether frames come reduced to the scale asked for (a video's, by libswscale); the
        /// others come at `size`.
        var scalable = false
        let frames: (_ scaleEighths: Int, _ body: (PixelBuffer, Int) throws -> Void) throws -> Void
    }

    /// `maxFrames` and `maxDuration`, before any frame is decoded.
    static func checkLength(frames: Int, milliseconds: Int?, format: String, options: RenderOptions) throws {
        if options.maxFrames > 0, frames > options.maxFrames {
            throw ImagingError(.limitExceeded, "\(format) of \(frames) frames, over the limit of \(options.maxFrames) (maxFrames)")
        }
        if options.maxDuration > 0, let ms = milliseconds, Double(ms) / 1000 > options.maxDuration {
            throw ImagingError(.limitExceeded, "\(format) of \(Double(ms) / 1000) s, over the limit of \(options.maxDuration) s (maxDuration)")
        }
    }

    /// The animation in `bytes` (which must outlive it), or nil for a still.
    static func animation(_ bytes: UnsafeRawBufferPointer, options: RenderOptions) throws -> Animation? {
        switch ImageFormat.sniff(bytes) {
        case .gif:
            let gif = try GIFDecoder(bytes: bytes, limits: options.limits)
            guard gif.frameCount > 1 else { return nil }
            try checkLength(frames: gif.frameCount, milliseconds: Int(gif.scan.duration_cs) * 10, format: "animated GIF", options: options)
            // A GIF without a loop count plays once.
            return Animation(format: .gif, size: gif.size, frameCount: gif.frameCount, loop: gif.loopCount ?? 1, path: .gifFrames) { _, body in
                try gif.frames(limits: options.limits) { _, canvas, delay in try body(canvas, delay) }
            }
        case .webp:
            guard let webp = try? WebPDecoder(bytes: bytes, limits: options.limits), webp.isAnimated else { return nil }
            let d = try AnimatedWebPDecoder(bytes: bytes, limits: options.limits)
            guard d.frameCount > 1 else { return nil }
            try checkLength(frames: d.frameCount, milliseconds: nil, format: "animated WebP", options: options)
            return Animation(format: .webp, size: d.size, frameCount: d.frameCount, loop: d.loopCount, path: .webpFrames) { _, body in
                var shown = 0
                while let (image, end) = try d.next() {
                    try body(image, max(0, end - shown))
                    shown = end
                }
            }
        case .video:
            // A preview: frames sampled evenly across the video, each shown 1/fps s, looping.
            let video = try VideoDecoder(bytes: bytes, limits: options.limits, seconds: options.decodeSeconds, strict: options.strict)
            try checkLength(frames: 1, milliseconds: video.duration.map { Int($0 * 1000) }, format: "video", options: options)
            let count = options.previewFrames
            let delay = max(20, Int((1000 / options.previewFPS).rounded()))
            var animation = Animation(format: .video, size: video.size, frameCount: count, loop: 0, path: .videoFrames) { eighths, body in
                let target = Size(width: max(1, (video.size.width * eighths + 7) / 8), height: max(1, (video.size.height * eighths + 7) / 8))
                try video.samples(count: count, target: target) { frame, _ in try body(frame, delay) }
            }
            animation.orientation = video.orientation
            animation.scalable = true
            return animation
        default:
            return nil
        }
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
            throw ImagingError(.limitExceeded, "\(source.format == .gif ? "animated GIF" : source.format == .video ? "video preview" : "animated WebP") of \(source.frameCount) frames of \(decoded): "
                               + "\(o1 || o2 ? "too many" : "\(total)") pixels to decode, over the limit of \(options.limits.maxPixels)")
        }
        // Memory: the source's canvas (RGBA, and a GIF's indices) or a video's frames, and per
        // output its frame, the copy its encoder keeps and the encoder's own (about one more).
        if options.limits.maxMemoryBytes > 0 {
            var need = perFrame * (source.format == .video ? 6 : 5) + (8 << 20)
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
                                          loop: source.loop, mixed: source.format == .gif)
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
