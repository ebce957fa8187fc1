import Foundation
import TesseraModel

/// What kind of work a job does to each input.
public enum JobKind: String, Codable, Sendable, CaseIterable {
    /// Downsample/resize to presets or recipes.
    case thumbnail
    /// Lossless metadata removal (no re-encoding).
    case strip
    /// Re-encode to a preset or byte budget.
    case recompress
    /// Lossless recompression of JPEGs to JPEG XL: the DCT coefficients coded again, the
    /// JPEG's bytes reconstructible exactly (`djxl`), checked before anything is written.
    case transcode
    /// Tile pyramids (Deep Zoom, IIIF) of large images, split into bands over the pool.
    case tiles
    /// Do nothing (measures the coordinator and wire, not imaging).
    case noop
}

/// Where a job's inputs come from.
public enum InputSource: Codable, Sendable, Equatable {
    /// A file, or a directory searched for images (optionally by glob patterns).
    case path(String, patterns: [String], recursive: Bool)
    /// A text file listing one path per line (relative to the manifest's directory).
    case manifest(String)

    enum CodingKeys: String, CodingKey { case path, glob, recursive, manifest }

    public init(from decoder: Decoder) throws {
        if let s = try? decoder.singleValueContainer().decode(String.self) {
            self = .path(s, patterns: [], recursive: true)
            return
        }
        try JobFields.check(decoder, allowed: JobFields.input)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let m = try c.decodeIfPresent(String.self, forKey: .manifest) {
            self = .manifest(m)
            return
        }
        let patterns: [String]
        if let one = try? c.decode(String.self, forKey: .glob) { patterns = [one] } else {
            patterns = try c.decodeIfPresent([String].self, forKey: .glob) ?? []
        }
        self = .path(try c.decode(String.self, forKey: .path), patterns: patterns,
                     recursive: try c.decodeIfPresent(Bool.self, forKey: .recursive) ?? true)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .path(let p, let patterns, let recursive):
            try c.encode(p, forKey: .path)
            if !patterns.isEmpty { try c.encode(patterns, forKey: .glob) }
            try c.encode(recursive, forKey: .recursive)
        case .manifest(let m):
            try c.encode(m, forKey: .manifest)
        }
    }
}

/// One output of each input: a preset or an inline recipe, and where it goes.
public struct OutputSpec: Codable, Sendable, Equatable {
    /// The name used for `{preset}` and in reports.
    public var name: String
    public var recipe: Recipe
    /// Path template under the output root (`{dir}`, `{stem}`, `{ext}`, `{preset}`).
    public var path: String?
    /// `Cache-Control` of this output's objects in object storage (default: `storage.cacheControl`).
    public var cacheControl: String?
    /// Device-pixel-ratio variants (`[1, 2, 3]`): one output per scale, `NAME@2x`…, written
    /// as `{stem}@2x.{ext}` (or by `{preset}`), all from one decode (`ExecutableJob` holds them expanded).
    public var scales: [Double]?

    public init(name: String, recipe: Recipe, path: String? = nil, cacheControl: String? = nil, scales: [Double]? = nil) {
        self.name = name
        self.recipe = recipe
        self.path = path
        self.cacheControl = cacheControl
        self.scales = scales
    }

    enum CodingKeys: String, CodingKey { case name, recipe, path, preset, formats, cacheControl, scales }

    /// The output once per scale: the recipe's resize box multiplied, `@Nx` after the name
    /// and after `{stem}` in the path (scale 1 keeps both as they are).
    public func expanded(defaultTemplate: String) -> [OutputSpec] {
        let template = path ?? defaultTemplate
        guard let scales, !scales.isEmpty else { return [OutputSpec(name: name, recipe: recipe, path: template, cacheControl: cacheControl)] }
        return scales.map { factor in
            guard factor != 1 else { return OutputSpec(name: name, recipe: recipe, path: template, cacheControl: cacheControl) }
            let suffix = "@" + (factor == factor.rounded() ? String(Int(factor)) : String(factor)) + "x"
            var r = recipe
            r.operations = r.operations.map {
                guard case .resize(var resize) = $0 else { return $0 }
                resize.scale = max(1, resize.scale) * factor
                return .resize(resize)
            }
            // `{preset}` in the template already tells the variants apart (its name has the suffix).
            let variantPath = template.contains("{preset}") ? template : template.replacingOccurrences(of: "{stem}", with: "{stem}" + suffix)
            return OutputSpec(name: name + suffix, recipe: r, path: variantPath, cacheControl: cacheControl)
        }
    }

    /// An output as a job names it: `{"preset": "widget"}` or `{"name": "x", "recipe": {...}}`,
    /// with an optional `path` and `formats`, before its preset is looked up.
    struct Reference: Decodable {
        var name: String?
        var preset: String?
        var recipe: Recipe?
        var path: String?
        var formats: [FormatChoice]?
        var cacheControl: String?
        var scales: [Double]?
        var animated: Bool?
        var gainMap: GainMapMode?

        enum CodingKeys: String, CodingKey { case name, preset, recipe, path, formats, cacheControl, scales, animated, gainMap }

        init(from decoder: Decoder) throws {
            try JobFields.check(decoder, allowed: JobFields.output)
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            preset = try c.decodeIfPresent(String.self, forKey: .preset)
            recipe = try c.decodeIfPresent(Recipe.self, forKey: .recipe)
            path = try c.decodeIfPresent(String.self, forKey: .path)
            formats = try c.decodeIfPresent([FormatChoice].self, forKey: .formats)
            cacheControl = try c.decodeIfPresent(String.self, forKey: .cacheControl)
            scales = try c.decodeIfPresent([Double].self, forKey: .scales)
            animated = try c.decodeIfPresent(Bool.self, forKey: .animated)
            gainMap = try c.decodeIfPresent(GainMapMode.self, forKey: .gainMap)
        }

        /// The output, its preset taken from `catalog`; `field` names it in errors.
        func resolve(_ catalog: PresetCatalog, field: String) throws -> OutputSpec {
            func bad(_ message: String) -> JobError { JobError(.invalidJob, "\(field): \(message)") }
            var recipe: Recipe
            let outputName: String
            switch (preset, self.recipe) {
            case (let p?, nil):
                do { recipe = try catalog.recipe(named: p) } catch let e as ImagingError { throw bad("preset: " + e.reason) }
                outputName = name ?? recipe.name ?? p
            case (nil, let r?):
                recipe = r
                guard let n = name ?? r.name else { throw bad("name: an inline recipe needs a name") }
                outputName = n
            case (nil, nil):
                throw bad("needs a preset or a recipe")
            default:
                throw bad("give either a preset or a recipe, not both")
            }
            // `formats: [avif, webp, jpeg]` on the output: one file per format, one decode.
            if let formats { recipe.output.formats = formats }
            if let animated { recipe.output.animated = animated }
            if let gainMap { recipe.output.gainMap = gainMap }
            return OutputSpec(name: outputName, recipe: recipe, path: path, cacheControl: cacheControl, scales: scales)
        }
    }

    /// An output as sent to workers (`name`, `recipe`, `path`), or as a job names it (built-in presets only).
    public init(from decoder: Decoder) throws {
        self = try Reference(from: decoder).resolve(.builtIn, field: "output")
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(recipe, forKey: .recipe)
        try c.encodeIfPresent(path, forKey: .path)
        try c.encodeIfPresent(cacheControl, forKey: .cacheControl)
        try c.encodeIfPresent(scales, forKey: .scales)
    }
}

/// Per-job limits and policies.
public struct JobOptions: Codable, Sendable, Equatable {
    public var maxMegapixels: Double = 100
    /// The default for tiles jobs: 65,535² pixels, the largest JPEG.
    public static let tilesMaxMegapixels = 4295.0
    public var maxInputMB: Int = 512
    /// Fail damaged files instead of rendering what decodes.
    public var strict = true
    /// Attempts for failures that may pass on retry (I/O, lost or hung workers).
    public var maxAttempts = 3
    /// Seconds a task may run before its lease expires and it is re-dispatched.
    public var timeout: Double = 120
    /// Send input and output bytes inside messages (workers without shared storage).
    public var inline = false
    /// Skip inputs whose content and recipe are unchanged since their outputs were made.
    public var incremental = true
    /// Fast delivery mode (EXIF thumbnails, DC-only progressive decodes).
    public var fast = false
    /// HEIF/AVIF: decode a thumbnail item when it covers every output (as vips does).
    public var heifThumbnails = true
    /// The page of multi-page TIFFs to render (from 0); single-page sources have only page 0.
    public var page = 0
    /// The frame of animated GIFs to render (from 0), as a browser shows it; stills have only frame 0.
    public var frame = 0
    /// Videos: when the poster frame is taken (nil: past the first second, not near-black or flat).
    public var at: VideoTime?
    /// Videos: an animated preview's frames (sampled evenly) and its playback rate.
    public var frames = 12
    public var fps = 4.0
    /// Animated sources: at most this many frames and seconds (0: no limit).
    public var maxFrames = 0
    public var maxDuration = 0.0
    /// HDR sources (PQ or HLG AVIF and HEIF): tone-mapped to SDR, or kept HDR.
    public var hdr = HDRMode.toneMap
    /// Camera raw files: the cheapest decode that serves (auto), or preview, half or full.
    public var raw = RawDecode.auto
    /// Each record carries ThumbHash and BlurHash / pHash, dHash and colours, from the pixels
    /// the task decoded anyway (the `describe` stage).
    public var placeholders = false
    public var fingerprints = false
    /// A job confined to roots (submitted through the API or by a client key) may replace an
    /// existing file it did not write only when this says so (docs/API.md, "Security").
    public var overwrite = false
    /// Incremental reruns read every earlier output and compare its hash (else only files
    /// whose size or time changed are read).
    public var verify = false

    public init() {}

    enum CodingKeys: String, CodingKey {
        case maxMegapixels, maxInputMB, strict, maxAttempts, timeout, inline, incremental, fast, heifThumbnails, page, frame
        case at, frames, fps, maxFrames, maxDuration, hdr, overwrite, verify, raw, placeholders, fingerprints
    }

    public init(from decoder: Decoder) throws {
        try JobFields.check(decoder, allowed: JobFields.options)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = JobOptions()
        maxMegapixels = try c.decodeIfPresent(Double.self, forKey: .maxMegapixels) ?? d.maxMegapixels
        maxInputMB = try c.decodeIfPresent(Int.self, forKey: .maxInputMB) ?? d.maxInputMB
        strict = try c.decodeIfPresent(Bool.self, forKey: .strict) ?? d.strict
        maxAttempts = try c.decodeIfPresent(Int.self, forKey: .maxAttempts) ?? d.maxAttempts
        timeout = try c.decodeIfPresent(Double.self, forKey: .timeout) ?? d.timeout
        inline = try c.decodeIfPresent(Bool.self, forKey: .inline) ?? d.inline
        incremental = try c.decodeIfPresent(Bool.self, forKey: .incremental) ?? d.incremental
        fast = try c.decodeIfPresent(Bool.self, forKey: .fast) ?? d.fast
        heifThumbnails = try c.decodeIfPresent(Bool.self, forKey: .heifThumbnails) ?? d.heifThumbnails
        page = try c.decodeIfPresent(Int.self, forKey: .page) ?? d.page
        frame = try c.decodeIfPresent(Int.self, forKey: .frame) ?? d.frame
        at = try c.decodeIfPresent(VideoTime.self, forKey: .at)
        frames = try c.decodeIfPresent(Int.self, forKey: .frames) ?? d.frames
        fps = try c.decodeIfPresent(Double.self, forKey: .fps) ?? d.fps
        maxFrames = try c.decodeIfPresent(Int.self, forKey: .maxFrames) ?? d.maxFrames
        maxDuration = try c.decodeIfPresent(Double.self, forKey: .maxDuration) ?? d.maxDuration
        hdr = try c.decodeIfPresent(HDRMode.self, forKey: .hdr) ?? d.hdr
        raw = try c.decodeIfPresent(RawDecode.self, forKey: .raw) ?? d.raw
        placeholders = try c.decodeIfPresent(Bool.self, forKey: .placeholders) ?? d.placeholders
        fingerprints = try c.decodeIfPresent(Bool.self, forKey: .fingerprints) ?? d.fingerprints
        overwrite = try c.decodeIfPresent(Bool.self, forKey: .overwrite) ?? d.overwrite
        verify = try c.decodeIfPresent(Bool.self, forKey: .verify) ?? d.verify
    }

    /// A pyramid never holds the whole image: a tiles job whose options do not say
    /// `maxMegapixels` takes any size a JPEG can have (job files and JSON jobs alike).
    public mutating func applyTilesDefault() { maxMegapixels = Self.tilesMaxMegapixels }

    /// The limits of a tiles task: any size a pyramid can stream (pixels capped only so
    /// that the arithmetic stays in `Int`).
    public var tileLimits: Limits {
        var l = renderOptions.limits
        l.maxPixels = Int(min(maxMegapixels * 1_000_000, Double(Int.max / 2)))
        return l
    }

    /// The render options these limits mean.
    public var renderOptions: RenderOptions {
        var o = RenderOptions()
        o.limits.maxPixels = Int(maxMegapixels * 1_000_000)
        o.limits.maxInputBytes = maxInputMB << 20
        o.strict = strict
        o.fastMode = fast
        o.heifThumbnails = heifThumbnails
        o.page = page
        o.frame = frame
        o.posterTime = at
        o.previewFrames = frames
        o.previewFPS = fps
        o.maxFrames = maxFrames
        o.maxDuration = maxDuration
        o.hdr = hdr
        o.raw = raw
        o.placeholders = placeholders
        o.fingerprints = fingerprints
        o.decodeSeconds = timeout
        return o
    }
}

/// A validated job: what `tessera submit` sends and the coordinator plans.
/// Paths are absolute (resolved against the job file's directory).
public struct JobSpec: Codable, Sendable, Equatable {
    public var name: String
    public var kind: JobKind = .thumbnail
    /// Higher runs first.
    public var priority: Int = 0
    public var inputs: [InputSource]
    /// The output root: nothing is written outside it.
    public var output: String
    public var outputs: [OutputSpec] = []
    public var strip = StripOptions()
    /// The pyramid settings of a `tiles` job.
    public var tiles: TileSettings?
    public var options = JobOptions()
    /// How to reach object storage, when inputs or the output root are `s3://` URLs.
    public var storage: StorageSettings?

    public init(name: String, kind: JobKind = .thumbnail, priority: Int = 0, inputs: [InputSource], output: String,
                outputs: [OutputSpec] = [], strip: StripOptions = StripOptions(), tiles: TileSettings? = nil,
                options: JobOptions = JobOptions(), storage: StorageSettings? = nil) {
        self.name = name
        self.kind = kind
        self.priority = priority
        self.inputs = inputs
        self.output = output
        self.outputs = outputs
        self.strip = strip
        self.tiles = tiles
        self.options = options
        self.storage = storage
    }

    enum CodingKeys: String, CodingKey { case name, kind, priority, inputs, output, outputs, presets, strip, tiles, options, storage }

    /// JSON jobs (from scripts) take the same shorthand and defaults as job files, and
    /// their own presets: `"presets": {"card": recipe, ...}` (a preset file's `presets`),
    /// usable by name in `outputs` like the built-in ones. `validate()` checks the rest.
    public init(from decoder: Decoder) throws {
        try JobFields.check(decoder, allowed: JobFields.job)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        kind = try c.decodeIfPresent(JobKind.self, forKey: .kind) ?? .thumbnail
        priority = try c.decodeIfPresent(Int.self, forKey: .priority) ?? 0
        inputs = try c.decode([InputSource].self, forKey: .inputs)
        output = try c.decode(String.self, forKey: .output)
        var catalog = PresetCatalog.builtIn
        for (name, recipe) in try c.decodeIfPresent([String: Recipe].self, forKey: .presets) ?? [:] {
            do { try catalog.add(name, recipe) } catch let e as ImagingError {
                throw JobError(.invalidJob, "presets.\(name): \(e.reason)")
            }
        }
        let references = try c.decodeIfPresent([OutputSpec.Reference].self, forKey: .outputs) ?? []
        outputs = try references.enumerated().map { try $0.element.resolve(catalog, field: "outputs[\($0.offset)]") }
        if c.contains(.strip) { try JobFields.check(try c.superDecoder(forKey: .strip), allowed: JobFields.strip) }
        strip = try c.decodeIfPresent(StripOptions.self, forKey: .strip) ?? StripOptions()
        if c.contains(.tiles) { try JobFields.check(try c.superDecoder(forKey: .tiles), allowed: JobFields.tiles) }
        do { tiles = try c.decodeIfPresent(TileSettings.self, forKey: .tiles) } catch let e as ImagingError {
            throw JobError(.invalidJob, e.reason)
        }
        if kind == .tiles {
            let t = tiles ?? TileSettings()
            do { try t.validate() } catch let e as ImagingError {
                throw JobError(.invalidJob, e.reason)  // names its field, as the job file's error does
            }
            tiles = t
        }
        options = try c.decodeIfPresent(JobOptions.self, forKey: .options) ?? JobOptions()
        if kind == .tiles, !((try? c.nestedContainer(keyedBy: JobOptions.CodingKeys.self, forKey: .options))?.contains(.maxMegapixels) ?? false) {
            options.applyTilesDefault()
        }
        if c.contains(.storage) { try JobFields.check(try c.superDecoder(forKey: .storage), allowed: JobFields.storage) }
        storage = try c.decodeIfPresent(StorageSettings.self, forKey: .storage)
    }

    /// Presets are resolved: outputs carry their recipes.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(kind, forKey: .kind)
        try c.encode(priority, forKey: .priority)
        try c.encode(inputs, forKey: .inputs)
        try c.encode(output, forKey: .output)
        try c.encode(outputs, forKey: .outputs)
        try c.encode(strip, forKey: .strip)
        try c.encodeIfPresent(tiles, forKey: .tiles)
        try c.encode(options, forKey: .options)
        try c.encodeIfPresent(storage, forKey: .storage)
    }

    /// What each worker needs to run this job's tasks (everything but the inputs), each
    /// output with its path template resolved.
    public var executable: ExecutableJob {
        ExecutableJob(kind: kind, outputs: outputs.flatMap { o in
                          o.expanded(defaultTemplate: defaultTemplate).map {
                              var e = $0
                              e.cacheControl = e.cacheControl ?? storage?.cacheControl
                              return e
                          }
                      },
                      outputRoot: output, strip: strip, tiles: kind == .tiles ? (tiles ?? TileSettings()) : nil,
                      options: options, storage: storage)
    }

    /// `{dir}/{stem}.{ext}` for one output, `{dir}/{stem}-{preset}.{ext}` for several;
    /// strip and recompress keep names.
    public var defaultTemplate: String {
        kind == .thumbnail && outputs.count > 1 ? OutputNaming.perPreset : OutputNaming.single
    }
}

/// A job as a worker runs it.
public struct ExecutableJob: Codable, Sendable, Equatable {
    public var kind: JobKind
    /// Every output, its `path` template resolved (strip takes the first one's, or
    /// `{dir}/{stem}.{ext}`).
    public var outputs: [OutputSpec]
    public var outputRoot: String
    public var strip: StripOptions
    public var tiles: TileSettings?
    public var options: JobOptions
    /// How this job reaches object storage (nil: the environment's defaults).
    public var storage: StorageSettings?
    /// When the job was submitted (seconds since 1970): a retried tile task keeps the
    /// tiles written since then. Not part of the recipe hash.
    public var createdAt: Double?
    /// What the coordinator let this job reach (nil: not confined): workers fetch only from
    /// the addresses its source policy allows and check its roots where they read and write.
    public var access: JobAccess?

    public init(kind: JobKind, outputs: [OutputSpec], outputRoot: String,
                strip: StripOptions = StripOptions(), tiles: TileSettings? = nil, options: JobOptions,
                storage: StorageSettings? = nil) {
        self.storage = storage
        self.kind = kind
        self.outputs = outputs
        self.outputRoot = outputRoot
        self.strip = strip
        self.tiles = tiles
        self.options = options
    }

    /// Where `output`'s files go.
    public func naming(_ output: OutputSpec?) -> OutputNaming {
        OutputNaming(root: outputRoot, template: output?.path ?? OutputNaming.single)
    }

    /// Whether a file at `relative` (under the output root) can be one of `input`'s outputs:
    /// an output's name in any format Tessera writes, the strip output, or a file of the
    /// input's pyramid. What a worker sends back inline is held to this — a task writes its
    /// own files, never another task's.
    public func owns(_ relative: String, input: InputFile) -> Bool {
        guard let path = try? OutputNaming.normalise(relative) else { return false }
        let formats = ImageFormat.allCases.filter(\.isWritable)
        switch kind {
        case .thumbnail, .recompress:
            return outputs.contains { spec in
                formats.contains { (try? naming(spec).relativePath(for: input, preset: spec.name, format: $0)) == path }
            }
        case .transcode:
            return (try? naming(outputs.first).relativePath(for: input, preset: "transcode", ext: "jxl")) == path
        case .strip:
            let exts = [input.fileExtension] + formats.map(\.fileExtension) + ["jpeg"]
            return exts.contains { (try? naming(outputs.first).relativePath(for: input, preset: "strip", ext: $0)) == path }
        case .tiles:
            let name = input.pyramidName
            guard path.count > name.count, path.hasPrefix(name) else { return false }
            return ["_", ".", "/"].contains(path[path.index(path.startIndex, offsetBy: name.count)])
        case .noop:
            return false
        }
    }

    /// The files `input`'s outputs are planned to be, relative to the root, before it is
    /// read: `expected` with formats as the input's extension predicts them (what two inputs
    /// must not share), and with `alternatives`, every other format an `original`/`auto`
    /// output may still turn into once the content is known (what no input may be either).
    /// A tiles job plans its pyramid's name once, on the part that writes its descriptor.
    public func plannedOutputs(for input: InputFile, alternatives: Bool = false) -> (expected: [String], possible: [String]) {
        let predicted = ImageFormat.byExtension[input.fileExtension]
        switch kind {
        case .thumbnail, .recompress:
            let parts = OutputNaming.Parts(input)
            var expected: [String] = [], possible: [String] = []
            for spec in outputs {
                let naming = self.naming(spec)
                let choices = spec.recipe.output.formats.isEmpty ? [spec.recipe.output.format] : spec.recipe.output.formats.map(\.format)
                for choice in choices {
                    let first: ImageFormat
                    var open = false
                    switch choice {
                    case .jpeg: first = .jpeg
                    case .png: first = .png
                    case .webp: first = .webp
                    case .avif: first = .avif
                    case .gif: first = .gif
                    case .jxl: first = .jxl
                    // The source's format where it is writable, else JPEG (PNG with transparency,
                    // or a PNG over its budget): the first is what the extension says.
                    case .original, .auto, .jpegOrPNG:
                        first = choice == .jpegOrPNG ? (predicted == .png ? .png : .jpeg) : predicted.map { $0.keptByOriginal ? $0 : .jpeg } ?? .jpeg
                        open = true
                    }
                    if let rel = try? naming.relativePath(for: parts, preset: spec.name, ext: first.fileExtension) { expected.append(rel) }
                    guard alternatives && open else { continue }
                    for f in [ImageFormat.jpeg, .png, .webp, .avif] where f != first {
                        if let rel = try? naming.relativePath(for: parts, preset: spec.name, ext: f.fileExtension) { possible.append(rel) }
                    }
                }
            }
            return (expected, possible)
        case .transcode:
            guard let rel = try? naming(outputs.first).relativePath(for: input, preset: "transcode", ext: "jxl") else { return ([], []) }
            return ([rel], [])
        case .strip:
            let ext = input.fileExtension.isEmpty ? (predicted ?? .jpeg).fileExtension : input.fileExtension
            guard let rel = try? naming(outputs.first).relativePath(for: input, preset: "strip", ext: ext) else { return ([], []) }
            return ([rel], [])
        case .tiles:
            guard input.part == nil || input.part == .descriptor else { return ([], []) }
            let layout = tiles?.layout ?? .deepzoom
            return ([input.pyramidName + (layout == .deepzoom ? ".dzi" : layout == .tiff ? ".tif" : "/info.json")], [])
        case .noop:
            return ([], [])
        }
    }

    /// A stable hash of everything that shapes the outputs (recipes, templates, kind,
    /// strip options, limits) and the renderer version: the "recipe version" of
    /// incremental reruns.
    public var recipeHash: UInt64 {
        struct Key: Encodable {
            var renderer = RenderOptions.rendererVersion
            var kind: JobKind
            /// The same recipes written under another root are other work (a rerun with a
            /// new `--output` must not be skipped because the old root has the files).
            var root: String
            var outputs: [OutputSpec]
            var strip: StripOptions
            var tiles: TileSettings?
            var strict: Bool
            var fast: Bool
            var hdr: HDRMode
            /// Absent when `auto` (the hashes of jobs before it stay as they were).
            var raw: RawDecode?
            /// Absent when not asked for: a rerun that asks for them redoes the records.
            var placeholders: Bool?
            var fingerprints: Bool?
        }
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        let data = (try? e.encode(Key(kind: kind, root: outputRoot, outputs: outputs, strip: strip, tiles: tiles,
                                      strict: options.strict, fast: options.fast, hdr: options.hdr,
                                      raw: options.raw == .auto ? nil : options.raw,
                                      placeholders: options.placeholders ? true : nil,
                                      fingerprints: options.fingerprints ? true : nil))) ?? Data()
        return XXH64.hash(Array(data))
    }
}

// MARK: - Validation

extension JobOptions {
    /// Each numeric option's range: finite, positive, and small enough for the arithmetic
    /// it feeds (pixels and bytes as `Int`, leases in seconds).
    public static let ranges: [(field: String, range: ClosedRange<Double>, unit: String)] = [
        ("maxMegapixels", 0.01...JobOptions.tilesMaxMegapixels, "megapixels"),
        ("maxInputMB", 1...65_536, "MB"),
        ("maxAttempts", 1...100, "attempts"),
        ("timeout", 0.1...604_800, "seconds"),
        ("page", 0...9_999, "(pages count from 0)"),
        ("frame", 0...99_999, "(frames count from 0)"),
        ("frames", 1...1000, "frames"),
        ("fps", 0.1...60, "frames per second"),
        ("maxFrames", 0...1_000_000, "frames (0: no limit)"),
        ("maxDuration", 0...86_400, "seconds (0: no limit)"),
    ]

    /// The first option out of its range, as (field, message), or nil.
    public func problem() -> (field: String, message: String)? {
        let values: [String: Double] = ["maxMegapixels": maxMegapixels, "maxInputMB": Double(maxInputMB),
                                        "maxAttempts": Double(maxAttempts), "timeout": timeout,
                                        "page": Double(page), "frame": Double(frame), "frames": Double(frames), "fps": fps,
                                        "maxFrames": Double(maxFrames), "maxDuration": maxDuration]
        for (field, _, _) in Self.ranges {
            if let message = Self.rangeProblem(field, values[field]!) { return ("options.\(field)", message) }
        }
        return nil
    }

    /// "expected 1...65536 MB, got 99999999999999" when `value` is outside `field`'s range
    /// (the command line's limits use it too), else nil.
    public static func rangeProblem(_ field: String, _ value: Double) -> String? {
        guard let (_, range, unit) = ranges.first(where: { $0.field == field }) else { return nil }
        if value.isFinite && range.contains(value) { return nil }
        func show(_ x: Double) -> String { x == x.rounded() && abs(x) < 1e15 ? String(Int(x)) : "\(x)" }
        return "expected \(show(range.lowerBound))...\(show(range.upperBound)) \(unit), got \(show(value))"
    }
}

extension JobSpec {
    /// The one validation every job passes, however it arrived (a YAML file, JSON from a
    /// script, the command line): numeric ranges, output names and templates, tile
    /// settings, recipes. Throws `invalid-job` naming the field, what was expected and
    /// what was given.
    public func validate() throws {
        func bad(_ field: String, _ message: String) -> JobError { JobError(.invalidJob, "\(field): \(message)") }
        guard !name.isEmpty else { throw bad("name", "must not be empty") }
        guard (-1_000_000...1_000_000).contains(priority) else { throw bad("priority", "expected -1000000...1000000, got \(priority)") }
        guard !output.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw bad("output", "must not contain NUL or control characters")
        }
        switch Location(output) {
        case .local(let path):
            guard path.hasPrefix("/") else { throw bad("output", "must be an absolute path or s3://bucket/prefix, got \"\(output)\"") }
        case .s3(let bucket, _):
            guard !bucket.isEmpty else { throw bad("output", "names no bucket (s3://bucket/prefix), got \"\(output)\"") }
            guard kind != .tiles else { throw bad("output", "tile pyramids are written to a directory (an s3:// output root is not supported for tiles)") }
        case .http:
            throw bad("output", "an output root is a directory or s3://bucket/prefix; HTTP URLs are inputs only")
        }
        guard !inputs.isEmpty else { throw bad("inputs", "expected at least one input") }
        for (i, input) in inputs.enumerated() {
            let path: String
            switch input {
            case .path(let p, _, _): path = p
            case .manifest(let m): path = m
            }
            if case .s3(let bucket, _) = Location(path), bucket.isEmpty {
                throw bad("inputs[\(i)]", "names no bucket (s3://bucket/key or s3://bucket/prefix/), got \"\(path)\"")
            }
        }
        if let p = storage?.problem() { throw bad(p.field, p.message) }
        if let p = options.problem() { throw bad(p.field, p.message) }
        if (kind == .thumbnail || kind == .recompress) && outputs.isEmpty {
            throw bad("outputs", "a \(kind.rawValue) job needs at least one output (a preset or recipe)")
        }
        var names = Set<String>()
        for (i, o) in outputs.enumerated() {
            guard names.insert(o.name).inserted else { throw bad("outputs[\(i)].name", "\"\(o.name)\" is used twice") }
            if let t = o.path {
                if let problem = OutputNaming.templateProblem(t) { throw bad("outputs[\(i)].path", problem) }
                guard !t.hasPrefix("/"), !t.split(separator: "/").contains("..") else {
                    throw bad("outputs[\(i)].path", "must stay under the output root, got \"\(t)\"")
                }
                guard t.contains("{stem}") else { throw bad("outputs[\(i)].path", "must contain {stem}, or every input writes the same file") }
            }
            if let scales = o.scales {
                guard !scales.isEmpty, scales.allSatisfy({ $0.isFinite && (1...4).contains($0) }), Set(scales).count == scales.count else {
                    throw bad("outputs[\(i)].scales", "distinct factors in 1...4, e.g. [1, 2, 3], got \(scales)")
                }
                guard o.recipe.resize != nil else { throw bad("outputs[\(i)].scales", "a recipe that resizes (scales multiply its box)") }
            }
            if let cc = o.cacheControl, cc.isEmpty || cc.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw bad("outputs[\(i)].cacheControl", "must be non-empty text without control characters")
            }
            do { try o.recipe.validate() } catch let e as ImagingError { throw bad("outputs[\(i)].recipe", e.reason) }
        }
        if let tiles {
            guard kind == .tiles else { throw bad("tiles", "only a tiles job (kind: tiles) takes tile settings") }
            do { try tiles.validate() } catch let e as ImagingError { throw bad("tiles", e.reason) }
        }
    }
}
