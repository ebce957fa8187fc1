import Foundation
import TesseraModel

/// One encoded output of a render: the file made (named and placed by the caller) and
/// which of the render's recipes made it (a recipe with several formats makes several).
public struct RenderedOutput: Sendable {
    public let recipe: Recipe
    public let recipeIndex: Int
    /// The file, its record's name the recipe's and its path empty until the caller names it.
    public let file: OutputFile
    public let timings: StageTimings

    public var bytes: [UInt8] { file.bytes }
    public var format: ImageFormat { file.record.format ?? .jpeg }
    public var size: Size { Size(width: file.record.width, height: file.record.height) }
    /// The encoder quality (1...100) used, for lossy formats.
    public var quality: Int? { file.record.quality }
}

/// What was learnt about the source.
public struct SourceSummary: Sendable {
    public let format: ImageFormat
    /// Stored (pre-orientation) size.
    public let storedSize: Size
    public let orientation: Orientation
    /// Name of the embedded ICC profile, if any.
    public let iccName: String?
    /// Whether pixels were converted from the embedded profile to sRGB.
    public let convertedToSRGB: Bool
    public let hadGPS: Bool
}

extension SourceSummary {
    /// The summary of an image that stood in for a larger one (a thumbnail, a raw file's
    /// preview): the larger one's size and format.
    func replacingStoredSize(_ size: Size, format: ImageFormat? = nil) -> SourceSummary {
        SourceSummary(format: format ?? self.format, storedSize: size, orientation: orientation, iccName: iccName,
                      convertedToSRGB: convertedToSRGB, hadGPS: hadGPS)
    }
}

/// The result of rendering one source to one or more outputs.
public struct RenderResult: Sendable {
    public let source: SourceSummary
    public let outputs: [RenderedOutput]
    public let decodePath: DecodePath
    /// A pyramidal TIFF's reduced level read (1 is the largest), if one was.
    public let level: Int?
    /// What the record says of the path: `tiff-level-2`, `jpeg`, …
    public var recordedDecodePath: String {
        guard let frameTime else { return decodePath.recorded(level: level) }
        return decodePath.recorded(level: level) + "@" + String(format: "%.2f", frameTime) + "s"
    }
    /// The DCT scale used, in eighths (8 = full size).
    public let scaleEighths: Int
    public let decodedSize: Size
    public let timings: StageTimings
    /// A video's poster: the time of the frame used, in seconds.
    public var frameTime: Double? = nil
    /// What the record says beside the outputs: a time clamped, data that did not decode
    /// (lenient), an output that could not keep what was asked.
    public var warnings: [String] = []
    /// The source's gain map (Ultra HDR), if it had one; each output's record says what became of it.
    public var gainMap: GainMapInfo? = nil
    /// What the `describe` stage made (`RenderOptions.placeholders`, `fingerprints`).
    public var placeholders: Placeholders? = nil
    public var fingerprints: Fingerprints? = nil
}

/// The pipeline: bytes in, bytes out.
///
/// 1. read the header and metadata, check limits (no pixels allocated yet);
/// 2. plan every output (size, crop, orientation, DCT scale) with pure functions;
/// 3. decode once, at the largest scale any output needs, streaming rows into one
///    resampler per output;
/// 4. per output: orient, convert to sRGB, filter (sharpen, blur, colour), flatten, encode
///    (within a byte budget).
public enum Renderer {
    /// Bumped whenever the same recipe would render different pixels (incremental reruns redo work).
    public static let version = RenderOptions.rendererVersion

    public static func render(_ data: Data, recipes: [Recipe], options: RenderOptions = RenderOptions()) throws -> RenderResult {
        try data.withUnsafeBytes { try render(bytes: $0, recipes: recipes, options: options) }
    }

    public static func render(_ bytes: [UInt8], recipes: [Recipe], options: RenderOptions = RenderOptions()) throws -> RenderResult {
        try bytes.withUnsafeBytes { try render(bytes: $0, recipes: recipes, options: options) }
    }

    public static func render(bytes: UnsafeRawBufferPointer, recipes: [Recipe],
                              options: RenderOptions = RenderOptions()) throws -> RenderResult {
        let clock = Stopwatch()
        // A task that fails keeps the stages it went through (decode, resize, encode), as a
        // task that succeeds does: the error carries them to the record.
        let stage: Stage
        do {
            if let animated = try AnimatedRenderer.render(bytes: bytes, recipes: recipes, options: options) { return animated }
            stage = try pixels(bytes: bytes, recipes: recipes, options: options, clock: clock)
        } catch let e as ImagingError {
            var t = StageTimings()
            t.decode = clock.milliseconds
            throw e.timed(t)
        }
        var timings = stage.timings
        var outputs: [RenderedOutput] = []
        do {
        for (i, recipe) in recipes.enumerated() {
            // One image per recipe, one encode per format it lists (`formats`), or its one format.
            let variants = recipe.output.formats.isEmpty
                ? [recipe.output]
                : recipe.output.formats.map { recipe.output.settings(for: $0) }
            for (v, settings) in variants.enumerated() {
                var t = StageTimings()
                let start = clock.milliseconds
                var image = stage.images[i]
                var format = resolveFormat(settings.format, source: stage.summary.format)
                let applies = stage.gainMapApplied.indices.contains(i) && stage.gainMapApplied[i] && stage.gainMaps[i] != nil
                    && (stage.gainMapGenerated ? format == .avif : [.avif, .original, .auto].contains(settings.format))
                if applies { format = .avif }  // the HDR rendition: a PQ AVIF
                if !applies && !stage.summary.format.keptByOriginal && image.layout == .rgba && recipe.flattenBackground == nil
                    && (settings.format == .auto || settings.format == .original) {
                    format = .png  // transparency kept where the source's own format cannot be written
                }
                if image.layout == .rgba, let bg = recipe.flattenBackground ?? (format == .jpeg ? settings.background : nil) {
                    image = try flatten(image, onto: bg)
                }
                t.finish = (v == 0 ? stage.finishTimes[i] : 0) + clock.milliseconds - start
                // Metadata: only what the recipe keeps. Never an orientation tag: pixels are upright.
                var attachedICC: [UInt8]? = nil
                if settings.keep.contains(.icc), let p = stage.profile,
                   (p.colorSpace == .rgb && image.layout != .gray) || (p.colorSpace == .gray && image.layout == .gray) {
                    attachedICC = p.bytes
                }
                var exif: [UInt8]? = nil
                if settings.keep.contains(.copyright), let c = stage.copyright {
                    exif = Exif.build(copyright: c)
                }
                let encodeStart = clock.milliseconds
                let density = settings.keep.contains(.resolution) ? stage.density : nil
                // The gain map goes with JPEG outputs (an Ultra HDR JPEG); other formats say why not.
                var outcome = stage.gainMapOutcomes[i]
                var map: (pixels: PixelBuffer, metadata: GainMapMetadata, raised: Bool)?
                if let planes = stage.gainMaps[i], let metadata = stage.gainMapMetadata {
                    if format == .jpeg {
                        map = (planes.pixels, metadata, planes.raised)
                    } else {
                        outcome = .dropped(cannotCarryGainMap(format))
                    }
                }
                var mapBytes = 0
                let (bytes, quality): ([UInt8], Int?)
                if applies, let planes = stage.gainMaps[i], let metadata = stage.gainMapMetadata {
                    // The rendition is written in BT.709 primaries: pixels a recipe kept in their
                    // own profile are converted first.
                    var sdr = image
                    if attachedICC != nil, let p = stage.profile, p.colorSpace == .rgb, !p.isEffectivelySRGB, image.layout == .rgb,
                       let t = ColorTransform(from: p, .rgb8, to: .sRGB, .rgb8) {
                        sdr = try PixelBuffer.make(width: image.width, height: image.height, layout: .rgb)
                        t.apply(image.base, sdr.base, count: image.width * image.height)
                    }
                    (bytes, quality) = try encodeHDR(sdr, map: planes.pixels, metadata: metadata, settings)
                    map = nil
                    outcome = GainMapOutcome(action: "applied", width: planes.pixels.width, height: planes.pixels.height,
                                             reason: "the HDR rendition at \(String(format: "%.2f", metadata.capacityMaxLog2)) stops, \(AVIFEncoder.hdrBits)-bit PQ AVIF")
                } else {
                    (bytes, quality) = try encode(&image, &format, settings, icc: attachedICC, exif: exif, density: density,
                                                  gainMap: map, gainMapBytes: &mapBytes)
                }
                if let map, format == .jpeg {
                    outcome = GainMapOutcome(action: "kept", width: map.pixels.width, height: map.pixels.height, bytes: mapBytes)
                } else if map != nil {
                    outcome = .dropped("the output fell back to \(format.rawValue.uppercased()), which cannot carry a gain map")
                }
                t.encode = clock.milliseconds - encodeStart
                t.total = t.finish + t.encode
                var record = OutputRecord(name: recipe.name ?? "", path: "", format: format, width: image.width,
                                          height: image.height, bytes: bytes.count, quality: format == .png ? nil : quality)
                record.gainMap = outcome
                outputs.append(RenderedOutput(recipe: recipe, recipeIndex: i, file: OutputFile(record, bytes: bytes), timings: t))
                timings.finish += t.finish
                timings.encode += t.encode
            }
        }
        } catch let e as ImagingError {
            // What was not timed yet belongs to the output that failed: its encode.
            var t = timings
            t.encode += max(0, clock.milliseconds - t.staged)
            throw e.timed(t)
        }
        // Placeholders and fingerprints: from the smallest output's pixels (upright, resized), never a second decode.
        var described: (Placeholders?, Fingerprints?) = (nil, nil)
        if options.placeholders || options.fingerprints, let smallest = stage.images.min(by: { $0.width * $0.height < $1.width * $1.height }) {
            let start = clock.milliseconds
            let small = Describe.reduced(smallest)
            if options.placeholders { described.0 = Describe.placeholders(width: small.width, height: small.height, rgba: small.rgba) }
            if options.fingerprints { described.1 = Describe.fingerprints(width: small.width, height: small.height, rgba: small.rgba) }
            timings.describe += clock.milliseconds - start
        }
        // Metadata, flattening and the steps between the timed ones are the finishing's.
        timings.close(at: clock.milliseconds, remainderTo: .finish)
        var result = RenderResult(source: stage.summary, outputs: outputs, decodePath: stage.decodePath, level: stage.level,
                                  scaleEighths: stage.scaleEighths, decodedSize: stage.decodedSize, timings: timings,
                                  frameTime: stage.frameTime, warnings: stage.warnings, gainMap: stage.gainMapInfo)
        result.placeholders = described.0
        result.fingerprints = described.1
        return result
    }

    /// The pixels of one recipe's output, before encoding: oriented, resized,
    /// converted to sRGB (unless the recipe keeps ICC), flattened if it says so.
    /// The default recipe gives the whole image as displayed.
    public static func decode(_ bytes: [UInt8], recipe: Recipe = Recipe(name: "decode", output: OutputSettings(format: .original)),
                              options: RenderOptions = RenderOptions()) throws -> PixelBuffer {
        try bytes.withUnsafeBytes { raw in
            let stage = try pixels(bytes: raw, recipes: [recipe], options: options, clock: Stopwatch())
            let image = stage.images[0]
            if image.layout == .rgba, let bg = recipe.flattenBackground { return try flatten(image, onto: bg) }
            return image
        }
    }

    /// What the decode stage hands to encoding.
    struct Stage {
        var summary: SourceSummary
        var images: [PixelBuffer]
        var finishTimes: [Double]
        var profile: ICCProfile?
        var copyright: String?
        /// The source's declared density, upright.
        var density: PixelDensity?
        var scaleEighths: Int
        var decodedSize: Size
        var timings: StageTimings
        var decodePath: DecodePath
        /// A pyramidal TIFF's reduced level read (1 is the largest), if one was.
        var level: Int? = nil
        /// A video's poster frame time.
        var frameTime: Double? = nil
        var warnings: [String] = []
        /// The source's gain map: what it is, its metadata when usable, each output's map
        /// (upright, resized) where kept, and each output's outcome where already decided.
        var gainMapInfo: GainMapInfo? = nil
        var gainMapMetadata: GainMapMetadata? = nil
        var gainMaps: [(pixels: PixelBuffer, raised: Bool)?] = []
        /// Outputs that render the HDR rendition (`apply`) instead of keeping the map.
        var gainMapApplied: [Bool] = []
        /// The map was made from an HDR source (its AVIF outputs are the HDR rendition, its
        /// JPEG outputs Ultra HDR), not read from the file.
        var gainMapGenerated = false
        var gainMapOutcomes: [GainMapOutcome?] = []
    }

    /// Steps 1-3 and the pixel part of 4: header, plans, one streaming decode into a
    /// resampler per output, then orientation and colour conversion per output.
    static func pixels(bytes: UnsafeRawBufferPointer, recipes: [Recipe], options: RenderOptions,
                       clock: Stopwatch) throws -> Stage {
        precondition(!recipes.isEmpty, "render needs at least one recipe")
        for r in recipes { try r.validate() }
        let source = try SourceDecoder(bytes: bytes, options: options)
        let gainMap = source.loader.gainMap(bytes: bytes, limits: options.limits)
        let plans = try recipes.map {
            try OutputPlan(recipe: $0, storedSize: source.storedSize, exifOrientation: source.orientation,
                           policy: options.scalePolicy)
        }
        // HEIF: a thumbnail item that covers every output is decoded instead of the primary
        // image (the primary's size stays the one reported).
        // The plans stay the primary's (outputs are exactly the size a primary decode gives);
        // the thumbnail is read as a smaller decode of the whole image.
        if options.heifThumbnails, !(options.hdr == .keep && source.isHDR), let thumb = thumbnailItem(source, plans: plans) {
            source.use(.thumbnail(id: thumb.id, size: thumb.size))
        }
        // Reduced levels (a pyramidal TIFF): the smallest that still leaves the resampler its
        // headroom (else the smallest that covers every output), as a JPEG's DCT scale is chosen.
        let levels = source.header.alternatives.levels
        if !levels.isEmpty, !plans.contains(where: \.needsAnalysis) {
            let pick = smallestCovering(levels, main: source.storedSize, plans: plans, headroom: options.scalePolicy.minimumResidual)
                ?? smallestCovering(levels, main: source.storedSize, plans: plans, headroom: 1)
            if let pick, let n = levels.firstIndex(of: pick) { source.use(.level(n + 1)) }
        }
        // An embedded preview (a raw file's JPEG) that covers every output stands in for the
        // image, decoded at its own DCT scale; forced (`--raw preview`), it is used whatever
        // its size (a warning says when it is smaller than an output).
        let forcedPreview = options.raw == .preview
        if let previewSize = source.header.alternatives.preview, !plans.contains(where: \.needsAnalysis),
           forcedPreview || (options.raw == .auto && RawPlan.previewCovers(previewSize, main: source.storedSize, plans: plans)) {
            if let stage = try previewStage(source, bytes: bytes, recipes: recipes, plans: plans, options: options, clock: clock,
                                            gainMap: gainMap, forced: forcedPreview) {
                return stage
            }
        } else if forcedPreview, source.header.alternatives.carriesPreviews {
            throw ImagingError(.unsupportedFeature, "--raw preview: this raw file has no embedded JPEG preview to use")
        }
        // Fast mode: the embedded thumbnail, when it can stand in for the image. Anything
        // wrong with the thumbnail falls back to the image itself.
        if options.fastMode, source.header.alternatives.exifThumbnailBytes != nil, let thumb = source.exif?.thumbnail,
           ExifThumbnail.usable(thumb, for: source.storedSize, plans: plans) {
            let main = source
            if let stage = try? thumb.withUnsafeBytes({ raw -> Stage in
                var o = options
                o.fastMode = false
                let t = try SourceDecoder(bytes: raw, options: o)
                guard t.format == .jpeg, ExifThumbnail.matches(t.storedSize, main.storedSize) else {
                    throw ImagingError(.corrupt, "unusable EXIF thumbnail")
                }
                t.inherit(from: main)  // the image's orientation, profile and metadata
                let thumbPlans = try recipes.map {
                    try OutputPlan(recipe: $0, storedSize: t.storedSize, exifOrientation: t.orientation, policy: o.scalePolicy)
                }
                var stage = try decodeAndFinish(source: t, plans: thumbPlans, recipes: recipes, options: o, clock: clock,
                                                reopen: nil, gainMap: gainMap, mapBytes: nil)
                stage.decodePath = .exifThumbnail
                stage.summary = stage.summary.replacingStoredSize(main.storedSize)
                return stage
            }) {
                return stage
            }
        }
        return try decodeAndFinish(source: source, plans: plans, recipes: recipes, options: options, clock: clock,
                                   reopen: { try SourceDecoder(bytes: bytes, options: options) }, gainMap: gainMap, mapBytes: bytes)
    }

    /// The outputs rendered from the embedded preview of `main` (nil: it has none usable;
    /// forced, that fails typed). Its JPEG is decoded at its own DCT scale.
    static func previewStage(_ main: SourceDecoder, bytes: UnsafeRawBufferPointer, recipes: [Recipe], plans: [OutputPlan],
                             options: RenderOptions, clock: Stopwatch, gainMap: UltraHDR.Found?, forced: Bool) throws -> Stage? {
        let preview: [UInt8]?
        do {
            preview = try main.loader.embeddedPreview()
        } catch let e as ImagingError where !forced {
            _ = e
            return nil  // a damaged preview: the image itself is decoded
        }
        guard let preview else {
            if forced { throw ImagingError(.unsupportedFeature, "--raw preview: the embedded preview is not a JPEG Tessera can use") }
            return nil
        }
        do {
            return try preview.withUnsafeBytes { raw -> Stage in
                var o = options
                o.fastMode = false
                let t = try SourceDecoder(bytes: raw, options: o)
                t.inherit(from: main, orientation: SourceDecoder.previewOrientation(t, of: main), keepProfile: true)
                let previewPlans = try recipes.map {
                    try OutputPlan(recipe: $0, storedSize: t.storedSize, exifOrientation: t.orientation, policy: o.scalePolicy)
                }
                var stage = try decodeAndFinish(source: t, plans: previewPlans, recipes: recipes, options: o, clock: clock,
                                                reopen: nil, gainMap: nil, mapBytes: nil)
                stage.decodePath = .rawPreview
                stage.summary = stage.summary.replacingStoredSize(main.storedSize, format: main.format)
                // Forced, a preview smaller than a raw decode would make an output is said, never silent.
                for (p, full) in zip(previewPlans, plans) where p.outputSize.width < full.outputSize.width || p.outputSize.height < full.outputSize.height {
                    stage.warnings.append("the embedded preview gives \(p.outputSize) where the raw image gives \(full.outputSize) (--raw preview)")
                    break
                }
                return stage
            }
        } catch let e as ImagingError where !forced && e.code != .outOfMemory && e.code != .limitExceeded {
            return nil  // a preview that does not decode: the image itself is
        }
    }

    /// The smallest HEIF thumbnail with the image's aspect that has at least as many pixels
    /// as every output takes from its region of the image. "The image's aspect": each side
    /// within the rounding of the other (encoders round thumbnail sides to even numbers for
    /// 4:2:0 chroma: a 2592×3888 image gets 212×320, not 213.3×320).
    /// The smallest of `candidates` (smaller copies of a `main`-size image) from which every
    /// plan's output is at most 1/`headroom` of its region.
    static func smallestCovering(_ candidates: [Size], main: Size, plans: [OutputPlan], headroom: Double) -> Size? {
        candidates.filter { s in
            let k = Double(s.width) / Double(main.width)
            return plans.allSatisfy { plan in
                Double(plan.storedOutputSize.width) * headroom <= plan.storedRegion.width * k + 0.5
                    && Double(plan.storedOutputSize.height) * headroom <= plan.storedRegion.height * k + 0.5
            }
        }.min { $0.width < $1.width }
    }

    static func thumbnailItem(_ source: SourceDecoder, plans: [OutputPlan]) -> (id: UInt32, size: Size)? {
        let main = source.storedSize
        let covering = source.header.alternatives.thumbnails.filter { t in
            let s = t.size
            guard s.width > 0, s.height > 0, s.width < main.width else { return false }
            let expectedHeight = Double(s.width) * Double(main.height) / Double(main.width)
            let expectedWidth = Double(s.height) * Double(main.width) / Double(main.height)
            guard abs(Double(s.height) - expectedHeight) <= 2 || abs(Double(s.width) - expectedWidth) <= 2 else { return false }
            let k = Double(s.width) / Double(main.width)
            return plans.allSatisfy { plan in
                Double(plan.storedOutputSize.width) <= plan.storedRegion.width * k + 0.5
                    && Double(plan.storedOutputSize.height) <= plan.storedRegion.height * k + 0.5
            }
        }
        return covering.min { $0.size.width < $1.size.width }
    }

    /// What a render will hold at its peak, from the header and the plans: the decoder's
    /// rows, what the loader holds to decode at that scale (a whole image, coefficient
    /// arrays, a canvas, a band), each output's resampled pixels, an oriented copy where the
    /// output is rotated, and the encoded bytes. An estimate (±20 %), checked against the
    /// worker's budget.
    static func plannedPeakBytes(source: SourceDecoder, plans: [OutputPlan], scaleEighths: Int) -> Int {
        let stored = source.storedSize
        let decodedW = (stored.width * scaleEighths + 7) / 8, decodedH = (stored.height * scaleEighths + 7) / 8
        let channels = max(3, source.channels)
        var bytes = decodedW * channels * 64 + (8 << 20)  // row batches, tables, the decoder's state
        if plans.contains(where: \.needsAnalysis) { bytes += decodedW * decodedH * channels }  // analysed whole
        bytes += source.loader.decodeBytes(scaleEighths: scaleEighths)
        for plan in plans {
            let out = plan.storedOutputSize.width * plan.storedOutputSize.height * channels
            bytes += out + out / 2                           // pixels, encoded output
            if plan.orientation != .up { bytes += out }      // the upright copy
        }
        return bytes
    }

    /// Decodes once at the largest scale any output needs, streaming rows into one resampler
    /// per output. Plans that choose their region from the pixels (trim, attention) get the
    /// image decoded whole at that scale first, are planned again from its analysis, and are
    /// resampled from it — or, when the analysed region needs a larger scale, from a second
    /// decode (`reopen`) at that scale.
    private static func decodeAndFinish(source first: SourceDecoder, plans provisional: [OutputPlan], recipes: [Recipe],
                                        options: RenderOptions, clock: Stopwatch,
                                        reopen: (() throws -> SourceDecoder)?, gainMap: UltraHDR.Found?,
                                        mapBytes: UnsafeRawBufferPointer?) throws -> Stage {
        var timings = StageTimings()
        do {
            return try decodeAndFinish(source: first, plans: provisional, recipes: recipes, options: options, clock: clock,
                                       reopen: reopen, gainMap: gainMap, mapBytes: mapBytes, timings: &timings)
        } catch let e as ImagingError {
            // What was not timed yet is the decode (or resize) it failed in: counted as decode.
            var t = timings
            t.decode += max(0, clock.milliseconds - t.staged)
            throw e.timed(t)
        }
    }

    private static func decodeAndFinish(source first: SourceDecoder, plans provisional: [OutputPlan], recipes: [Recipe],
                                        options: RenderOptions, clock: Stopwatch,
                                        reopen: (() throws -> SourceDecoder)?, gainMap: UltraHDR.Found?,
                                        mapBytes: UnsafeRawBufferPointer?, timings: inout StageTimings) throws -> Stage {
        // JPEG (scaled IDCT) and WebP (libwebp's scaler) decode smaller; the others whole.
        var source = first
        var plans = provisional
        let scalable = source.header.alternatives.scalesOnDecode
        var scale = scalable ? plans.map(\.minimumScaleEighths).max()! : 8
        for plan in plans { try options.limits.checkDimensions(plan.outputSize) }
        if options.limits.maxMemoryBytes > 0 {
            let need = plannedPeakBytes(source: source, plans: plans, scaleEighths: scale)
            guard need <= options.limits.maxMemoryBytes else {
                throw ImagingError(.outOfMemory, "needs about \((need + (1 << 20) - 1) >> 20) MB (a \(source.storedSize) image decoded at \(scale)/8), "
                                   + "over this worker's memory budget of \(options.limits.maxMemoryBytes >> 20) MB per task")
            }
        }

        timings.decode = clock.milliseconds  // the header and the plans
        let batchRows = 16
        var whole: PixelBuffer?
        if plans.contains(where: \.needsAnalysis) {
            let lap = clock.milliseconds
            let image = try decodeWhole(source, scaleEighths: scale, limits: options.limits)
            timings.decode += clock.milliseconds - lap
            let planned = clock.milliseconds
            let analysis = SourceAnalysis(image: image, storedSize: source.storedSize)
            defer { timings.resize += clock.milliseconds - planned }  // analysis and placement count as cropping
            plans = try recipes.map {
                try OutputPlan(recipe: $0, storedSize: source.storedSize, exifOrientation: source.orientation,
                               policy: options.scalePolicy, analysis: analysis)
            }
            for plan in plans { try options.limits.checkDimensions(plan.outputSize) }
            let need = scalable ? plans.map(\.minimumScaleEighths).max()! : 8
            if need > scale, let reopen {
                source = try reopen()
                scale = need
            } else {
                whole = image
            }
        }

        // Decode once, streaming rows into every output's resampler. Every row is read,
        // even past the last one an output needs, so damage at the end is reported.
        // Starting may be the whole decode (libheif, libwebp): decode time like the rows'.
        if whole == nil {
            // An HDR source kept HDR: the decoder also gives the gain map that undoes its tone map.
            if options.hdr == .keep && source.isHDR { source.hdrGain = true }
            let t0 = clock.milliseconds
            try source.start(scaleEighths: scale, maxBatchRows: batchRows)
            timings.decode += clock.milliseconds - t0
        }
        let r0 = clock.milliseconds
        let decoded = whole.map { Size(width: $0.width, height: $0.height) } ?? source.decodedSize
        try options.limits.checkDimensions(decoded)
        // libjpeg maps each 8x8 block to m x m pixels: the geometry is exactly m/8
        // (the last, partial block rounds the decoded size up).
        // A HEIF thumbnail or a WebP decoded to a size: the decoded-to-stored ratio per axis.
        let exact = source.header.alternatives.exactEighths
        let sx = exact ? Double(source.scaleEighths) / 8 : Double(decoded.width) / Double(source.storedSize.width)
        let sy = exact ? sx : Double(decoded.height) / Double(source.storedSize.height)
        let resamplers = try plans.map { plan in
            try Resampler(inputWidth: decoded.width, inputHeight: decoded.height, inputChannels: source.channels,
                      region: plan.storedRegion.scaled(x: sx, y: sy),
                      outputSize: plan.storedOutputSize, filter: plan.filter)
        }
        // The generated gain map's resamplers: ¼ of each output (at least 160 px on the long
        // side), over the same region, filtered in linear boost.
        let generated = whole == nil ? source.hdrGainMetadata : nil
        let curve = generated.map(BoostTables.tables(for:))
        let mapResamplers: [Resampler] = try generated == nil ? [] : plans.map { plan in
            try Resampler(inputWidth: decoded.width, inputHeight: decoded.height, inputChannels: 1,
                          region: plan.storedRegion.scaled(x: sx, y: sy),
                          outputSize: GainMapStep.mapSize(output: plan.storedOutputSize, ratio: 0.25).size,
                          filter: .lanczos3, transfer: curve.map { ($0.toLinear, $0.fromLinear) })
        }
        timings.resize += clock.milliseconds - r0  // the resamplers' weights and buffers
        if let whole {
            let t0 = clock.milliseconds
            for r in resamplers { r.consume(whole.base, stride: whole.stride, count: whole.height) }
            timings.resize += clock.milliseconds - t0
        } else if source.linearRows && mapResamplers.isEmpty {
            // 16-bit linear rows (a raw file's) go into the resamplers as they are.
            let stride = decoded.width * source.channels
            let batch = UnsafeMutablePointer<UInt16>.allocate(capacity: stride * batchRows)
            defer { batch.deallocate() }
            var lap = clock.milliseconds
            while true {
                let n = try source.readLinear(into: batch, stride: stride, maxRows: batchRows)
                let t1 = clock.milliseconds
                timings.decode += t1 - lap
                if n == 0 { break }
                for r in resamplers { r.consumeLinear(batch, stride: stride, count: n) }
                lap = clock.milliseconds
                timings.resize += lap - t1
            }
            let t2 = clock.milliseconds
            try source.finish()
            timings.decode += clock.milliseconds - t2
        } else {
            let stride = decoded.width * source.channels
            let batch = UnsafeMutablePointer<UInt8>.allocate(capacity: stride * batchRows)
            defer { batch.deallocate() }
            // A JPEG whose outputs all use a band of rows (crops) skips the rows above and
            // below it: still entropy-decoded (damage is reported), never IDCT'd or converted.
            let first = resamplers.map(\.neededRows.lowerBound).min() ?? 0
            let last = resamplers.map(\.neededRows.upperBound).max() ?? decoded.height - 1
            // A tiled TIFF reads only the tiles under the columns the outputs use.
            if let lo = resamplers.map(\.neededColumns.lowerBound).min(), let hi = resamplers.map(\.neededColumns.upperBound).max(),
               lo > 0 || hi < decoded.width - 1 {
                source.limitColumns(lo...hi)
            }
            var row = 0
            var lap = clock.milliseconds
            if source.skipsRows && first >= batchRows {
                let n = try source.skip(rows: first)
                for r in resamplers { r.skip(n) }
                row = n
            }
            while true {
                if source.skipsRows && row > last && decoded.height - row > 1 {
                    // All but the last row: libjpeg-turbo skips "to the end" without reading
                    // the data, and the data to the end must be read for damage to be found.
                    let n = try source.skip(rows: decoded.height - row - 1)
                    for r in resamplers { r.skip(n) }
                    row += n
                }
                let n = try source.read(into: batch, stride: stride, maxRows: batchRows)
                row += n
                let t1 = clock.milliseconds
                timings.decode += t1 - lap
                if n == 0 { break }
                for r in resamplers { r.consume(batch, stride: stride, count: n) }
                if !mapResamplers.isEmpty, let gain = source.gainBatch {
                    for r in mapResamplers { r.consume(gain, stride: decoded.width, count: n) }
                }
                lap = clock.milliseconds
                timings.resize += lap - t1
            }
            let t2 = clock.milliseconds
            try source.finish()
            timings.decode += clock.milliseconds - t2
        }

        // Colour: convert from a non-sRGB RGB profile unless the output keeps it.
        var profile: ICCProfile?
        var convertible = false
        if let icc = source.iccProfile, let p = ICCProfile(icc) {
            profile = p
            convertible = p.colorSpace == .rgb && source.channels >= 3 && !p.isEffectivelySRGB
        }
        var converted = false
        var images: [PixelBuffer] = []
        var finishTimes: [Double] = []
        for (i, plan) in plans.enumerated() {
            let start = clock.milliseconds
            let image = try plan.orientation.apply(to: resamplers[i].output)
            if convertible && !recipes[i].output.keep.contains(.icc), let p = profile {
                let format: ColorTransform.Format = image.layout == .rgba ? .rgba8 : .rgb8
                if let transform = ColorTransform(from: p, format, to: .sRGB, format) {
                    transform.apply(image.base, image.base, count: image.width * image.height)
                    converted = true
                }
            }
            // Filters (sharpen, blur, colour) on the output-sized, upright, sRGB pixels.
            let filters = recipes[i].operations.filter(\.isFilter)
            images.append(filters.isEmpty ? image : try Filters.apply(filters, to: image))
            finishTimes.append(clock.milliseconds - start)
        }
        let summary = SourceSummary(format: source.format, storedSize: source.storedSize,
                                    orientation: source.orientation, iccName: profile?.name,
                                    convertedToSRGB: converted, hadGPS: source.exif?.hasGPS ?? false)
        var stage = Stage(summary: summary, images: images, finishTimes: finishTimes, profile: profile,
                          copyright: source.exif?.copyright, density: source.density?.oriented(source.orientation), scaleEighths: source.scaleEighths, decodedSize: decoded,
                          timings: timings,
                          decodePath: source.decodePath, level: source.decodeLevel,
                          frameTime: source.frameTime)
        stage.warnings += source.warnings
        stage.gainMaps = plans.map { _ in nil }
        stage.gainMapOutcomes = plans.map { _ in nil }
        stage.gainMapApplied = plans.map { _ in false }
        if let generated {
            withExtendedLifetime(curve) {}
            try finishGeneratedMaps(mapResamplers.map(\.output), generated, &stage, plans: plans, recipes: recipes, options: options)
        } else if let gainMap {
            let t0 = clock.milliseconds
            try finishGainMaps(gainMap, &stage, plans: plans, recipes: recipes, options: options, bytes: mapBytes)
            stage.timings.resize += clock.milliseconds - t0
        }
        return stage
    }

    /// Why an output of `format` goes without its source's gain map.
    static func cannotCarryGainMap(_ format: ImageFormat) -> String {
        format == .avif ? "this build's libheif (1.15) cannot write an AVIF gain map (dropped, the output is SDR)"
            : "\(format.rawValue.uppercased()) cannot carry a gain map (dropped, the output is SDR)"
    }

    /// An HDR source kept HDR: each output's generated map (the tone map undone) where its
    /// recipe and format can hold it — JPEG: an Ultra HDR JPEG; AVIF: the HDR rendition in PQ —
    /// else SDR with the reason.
    static func finishGeneratedMaps(_ maps: [PixelBuffer], _ metadata: GainMapMetadata, _ stage: inout Stage, plans: [OutputPlan],
                                    recipes: [Recipe], options: RenderOptions) throws {
        stage.gainMapMetadata = metadata
        stage.gainMapGenerated = true
        stage.gainMapInfo = GainMapInfo(kind: "hdr", width: stage.decodedSize.width, height: stage.decodedSize.height, bytes: 0,
                                        headroom: (metadata.headroomStops * 1000).rounded() / 1000, metadata: ["generated"])
        for (i, recipe) in recipes.enumerated() {
            let formats = recipe.output.formats.isEmpty ? [recipe.output.format] : recipe.output.formats.map(\.format)
            let resolved = formats.map { resolveFormat($0, source: stage.summary.format) }
            if (recipe.output.gainMap ?? options.gainMap) == .drop {
                stage.gainMapOutcomes[i] = .dropped("the recipe drops it (the output is SDR)")
            } else if let reason = GainMapStep.dropReason(for: recipe) {
                stage.gainMapOutcomes[i] = .dropped(reason)
            } else if !resolved.contains(.jpeg) && !(resolved.contains(.avif) && AVIFEncoder.isAvailable) {
                stage.gainMapOutcomes[i] = .dropped("\(resolved[0].rawValue.uppercased()) cannot carry HDR here: JPEG (Ultra HDR) or AVIF can (the output is SDR)")
            } else {
                let raised = GainMapStep.mapSize(output: plans[i].storedOutputSize, ratio: 0.25).raised
                stage.gainMaps[i] = (try plans[i].orientation.apply(to: maps[i]), raised)
                stage.gainMapApplied[i] = resolved.contains(.avif)
            }
        }
    }

    /// Each output's gain map: resized with it where its recipe keeps it and can, else the
    /// reason it is dropped. A map that fails to decode is dropped with the reason: the SDR
    /// image is still the photo.
    static func finishGainMaps(_ found: UltraHDR.Found, _ stage: inout Stage, plans: [OutputPlan], recipes: [Recipe],
                               options: RenderOptions, bytes: UnsafeRawBufferPointer?) throws {
        let map: GainMapSource
        switch found {
        case .unusable(let info):
            stage.gainMapInfo = info
            stage.gainMapOutcomes = plans.map { _ in .dropped("the gain map is unusable: \(info.problem ?? "unknown reason") (the output is SDR)") }
            return
        case .usable(let m):
            map = m
            stage.gainMapInfo = m.info
        }
        var wanted = [Bool](repeating: false, count: plans.count)
        for (i, recipe) in recipes.enumerated() {
            let mode = recipe.output.gainMap ?? options.gainMap
            let formats = recipe.output.formats.isEmpty ? [recipe.output.format] : recipe.output.formats.map(\.format)
            if mode == .drop {
                stage.gainMapOutcomes[i] = .dropped(recipe.name == "widget" ? "widgets are SDR (the widget preset drops it)" : "the recipe drops it")
            } else if mode == .apply, !formats.contains(where: { [.avif, .original, .auto].contains($0) }) {
                stage.gainMapOutcomes[i] = .dropped("apply writes an HDR AVIF: the output's format must be avif, original or auto (the output is SDR)")
            } else if mode == .apply, !AVIFEncoder.isAvailable {
                stage.gainMapOutcomes[i] = .dropped("apply writes an HDR AVIF and this build's libheif has no AV1 encoder (the output is SDR)")
            } else if bytes == nil {
                stage.gainMapOutcomes[i] = .dropped("fast mode rendered the EXIF thumbnail (the output is SDR)")
            } else if let reason = GainMapStep.dropReason(for: recipe) {
                stage.gainMapOutcomes[i] = .dropped(reason)
            } else if mode == .apply {
                wanted[i] = true
                stage.gainMapApplied[i] = true
            } else if !formats.contains(where: { resolveFormat($0, source: .jpeg) == .jpeg }) {
                let f = resolveFormat(formats[0], source: .jpeg)
                stage.gainMapOutcomes[i] = .dropped(cannotCarryGainMap(f))
            } else {
                wanted[i] = true
            }
        }
        guard let bytes, wanted.contains(true) else { return }
        do {
            stage.gainMaps = try GainMapStep.render(map, in: bytes, imageSize: stage.summary.storedSize, plans: plans,
                                                    wanted: wanted, options: options)
            stage.gainMapMetadata = map.metadata
        } catch let e as ImagingError {
            if e.code == .outOfMemory { throw e }
            stage.gainMapInfo?.problem = e.reason
            for i in wanted.indices where wanted[i] {
                stage.gainMapOutcomes[i] = .dropped("the gain map does not decode: \(e.reason) (the output is SDR)")
            }
        }
    }

    /// The whole image at `scaleEighths`, stored orientation (for analysis).
    static func decodeWhole(_ source: SourceDecoder, scaleEighths: Int, limits: Limits) throws -> PixelBuffer {
        try source.start(scaleEighths: scaleEighths, maxBatchRows: 16)
        let size = source.decodedSize
        try limits.checkDimensions(size)
        let layout: PixelLayout = source.channels == 1 ? .gray : source.channels == 3 ? .rgb : .rgba
        let image = try PixelBuffer.make(width: size.width, height: size.height, layout: layout)
        var y = 0
        while y < size.height {
            let n = try source.read(into: image.row(y), stride: image.stride, maxRows: min(16, size.height - y))
            if n == 0 { break }
            y += n
        }
        try source.finish()
        return image
    }

    static func resolveFormat(_ f: OutputFormat, source: ImageFormat) -> ImageFormat {
        switch f {
        case .jpeg: return .jpeg
        case .png: return .png
        case .webp: return .webp
        case .avif: return .avif
        case .gif: return .gif
        case .jxl: return .jxl
        case .original, .auto: return source.keptByOriginal ? source : .jpeg  // a HEIC source: JPEG (PNG with alpha, below)
        case .jpegOrPNG: return source == .png ? .png : .jpeg
        }
    }

    /// Encodes, meeting `maxBytes` when set: the highest quality not above the recipe's
    /// that fits (binary search); `.auto` PNG falls back to JPEG when too large.
    static func encode(_ image: inout PixelBuffer, _ format: inout ImageFormat, _ s: OutputSettings,
                       icc: [UInt8]?, exif: [UInt8]?, density: PixelDensity? = nil,
                       gainMap: (pixels: PixelBuffer, metadata: GainMapMetadata, raised: Bool)? = nil) throws -> ([UInt8], Int?) {
        var ignored = 0
        return try encode(&image, &format, s, icc: icc, exif: exif, density: density, gainMap: gainMap, gainMapBytes: &ignored)
    }

    /// The same; a JPEG with `gainMap` is an Ultra HDR JPEG (the map at the same quality,
    /// its bytes in `gainMapBytes`), and a byte budget counts both images.
    static func encode(_ image: inout PixelBuffer, _ format: inout ImageFormat, _ s: OutputSettings,
                       icc: [UInt8]?, exif: [UInt8]?, density: PixelDensity? = nil,
                       gainMap: (pixels: PixelBuffer, metadata: GainMapMetadata, raised: Bool)?, gainMapBytes: inout Int) throws -> ([UInt8], Int?) {
        if format == .webp {
            let img = image
            if s.lossless {
                let bytes = try WebPEncoder.encode(img, .init(quality: s.jpegQuality, lossless: true, method: s.webpMethod), icc: icc)
                if let max = s.maxBytes, bytes.count > max {
                    throw ImagingError(.budgetExceeded, "lossless WebP output is \(bytes.count) bytes, over the budget of \(max) bytes")
                }
                return (bytes, nil)
            }
            return try budgeted(s, name: "WebP", size: img) { q in
                try WebPEncoder.encode(img, .init(quality: q, lossless: false, method: s.webpMethod), icc: icc)
            }
        }
        if format == .gif {
            let bytes = try GIFEncoder.encode(image)
            if let max = s.maxBytes, bytes.count > max {
                throw ImagingError(.budgetExceeded, "GIF output is \(bytes.count) bytes, over the budget of \(max) bytes")
            }
            return (bytes, nil)
        }
        if format == .jxl {
            let img = image
            if s.lossless {
                let bytes = try JXLEncoder.encode(img, .init(quality: 100, lossless: true, effort: s.jxlEffort ?? OutputSettings.defaultJXLEffort), icc: icc)
                if let max = s.maxBytes, bytes.count > max {
                    throw ImagingError(.budgetExceeded, "lossless JPEG XL output is \(bytes.count) bytes, over the budget of \(max) bytes")
                }
                return (bytes, nil)
            }
            return try budgeted(s, name: "JPEG XL", size: img) { q in
                try JXLEncoder.encode(img, .init(quality: min(q, 99), effort: s.jxlEffort ?? OutputSettings.defaultJXLEffort), icc: icc)
            }
        }
        if format == .avif {
            let img = image
            return try budgeted(s, name: "AVIF", size: img) { q in
                try AVIFEncoder.encode(img, .init(quality: q, speed: s.avifSpeed, subsampling: s.subsampling), icc: icc)
            }
        }
        if format == .png {
            let png = try PNGEncoder.encode(image, compressionLevel: s.pngCompression, icc: icc, density: density)
            guard let max = s.maxBytes, png.count > max else { return (png, nil) }
            guard s.format == .auto || s.format == .jpegOrPNG else {
                throw ImagingError(.budgetExceeded, "PNG output is \(png.count) bytes, over the budget of \(max) bytes")
            }
            format = .jpeg
            if image.layout == .rgba { image = try flatten(image, onto: s.background) }
        }
        let jpegImage = image
        let settings = JPEGEncoder.Settings(quality: s.jpegQuality, progressive: s.progressive,
                                            optimize: s.optimize, subsampling: s.subsampling, density: density,
                                            effort: s.jpegEffort ?? OutputSettings.defaultJPEGEffort)
        var mapBytes: [Int: Int] = [:]  // by quality: the budget search keeps one of its tries
        let result = try budgeted(s, name: gainMap == nil ? "JPEG" : "Ultra HDR JPEG", size: jpegImage) { q in
            var qs = settings
            qs.quality = q
            let primary = try JPEGEncoder.encode(jpegImage, qs, icc: icc, exif: exif)
            guard let gainMap else { return primary }
            var ms = qs
            ms.quality = GainMapStep.quality(for: q, raised: gainMap.raised)
            ms.progressive = false
            ms.effort = 0  // a map is data, not a picture: the perceptual tables and quantisers are not for it
            ms.subsampling = .s420
            ms.density = nil
            let map = try JPEGEncoder.encode(gainMap.pixels, ms)
            let file = UltraHDR.assemble(primary: primary, map: map, metadata: gainMap.metadata)
            mapBytes[q] = file.count - primary.count
            return file
        }
        gainMapBytes = result.1.flatMap { mapBytes[$0] } ?? 0
        return result
    }

    /// The HDR rendition of `image` and its map at the map's full headroom, as an HDR AVIF
    /// (BT.709 primaries, PQ, full range, `AVIFEncoder.hdrBits` bits), within the byte budget.
    static func encodeHDR(_ image: PixelBuffer, map: PixelBuffer, metadata: GainMapMetadata, _ s: OutputSettings) throws -> ([UInt8], Int?) {
        let samples = HDRRendition.pq(sdr: image, map: map, metadata: metadata, headroomStops: metadata.capacityMaxLog2,
                                      bits: AVIFEncoder.hdrBits)
        return try samples.withUnsafeBufferPointer { buffer in
            try budgeted(s, name: "HDR AVIF", size: image) { q in
                try AVIFEncoder.encodeHDR(buffer, width: image.width, height: image.height,
                                          .init(quality: q, speed: s.avifSpeed, subsampling: s.subsampling),
                                          nclx: (primaries: 1, transfer: 16, matrix: 1))
            }
        }
    }

    /// The highest quality (≤ the recipe's) whose output fits `maxBytes`, by binary search.
    static func budgeted(_ s: OutputSettings, name: String, size image: PixelBuffer,
                         _ encode: (Int) throws -> [UInt8]) throws -> ([UInt8], Int?) {
        let first = try encode(s.jpegQuality)
        guard let max = s.maxBytes, first.count > max else { return (first, s.jpegQuality) }
        var lo = 1, hi = s.jpegQuality - 1
        var best: ([UInt8], Int)? = nil
        var smallest = first.count
        while lo <= hi {
            let q = (lo + hi) / 2
            let bytes = try encode(q)
            smallest = min(smallest, bytes.count)
            if bytes.count <= max {
                best = (bytes, q)
                lo = q + 1
            } else {
                hi = q - 1
            }
        }
        guard let best else {
            throw ImagingError(.budgetExceeded,
                               "even \(name) quality 1 needs \(smallest) bytes at \(image.width)x\(image.height), over the budget of \(max) bytes")
        }
        return best
    }
}
