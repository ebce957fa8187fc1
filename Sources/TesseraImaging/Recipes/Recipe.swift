import Foundation

/// How an output is made from a source: an ordered list of operations and the
/// output settings. Serialised as JSON with a format identifier and version, so
/// an output can be re-rendered later from its original and its recipe.
///
/// ```json
/// {"format": "tessera.recipe", "version": 1, "name": "thumbnail",
///  "operations": [{"op": "resize", "width": 1280, "height": 720, "mode": "fit"}],
///  "output": {"format": "jpeg", "quality": 1.0}}
/// ```
public struct Recipe: Codable, Sendable, Equatable {
    public static let formatIdentifier = "tessera.recipe"
    /// 2: the filter operations (`sharpen`, `blur`, `adjust`); version 1 recipes still load.
    public static let currentVersion = 2

    public var format: String = Recipe.formatIdentifier
    public var version: Int = Recipe.currentVersion
    /// The preset name or a user label; used in output names.
    public var name: String?
    public var operations: [RecipeOperation]
    public var output: OutputSettings

    public init(name: String? = nil, operations: [RecipeOperation] = [], output: OutputSettings = OutputSettings()) {
        self.name = name
        self.operations = operations
        self.output = output
    }

    enum CodingKeys: String, CodingKey { case format, version, name, operations, output }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        format = try c.decodeIfPresent(String.self, forKey: .format) ?? Recipe.formatIdentifier
        version = try c.decodeIfPresent(Int.self, forKey: .version) ?? Recipe.currentVersion
        name = try c.decodeIfPresent(String.self, forKey: .name)
        operations = try c.decodeIfPresent([RecipeOperation].self, forKey: .operations) ?? []
        output = try c.decodeIfPresent(OutputSettings.self, forKey: .output) ?? OutputSettings()
    }

    /// The first resize, if any.
    public var resize: Resize? {
        for op in operations { if case .resize(let r) = op { return r } }
        return nil
    }

    /// The background of the first flatten operation, if any.
    public var flattenBackground: RGBColor? {
        for op in operations { if case .flatten(let bg) = op { return bg } }
        return nil
    }

    /// Checks every field once, at the boundary; the pipeline trusts a validated recipe.
    public func validate() throws {
        func bad(_ field: String, _ expected: String, _ actual: Any) -> ImagingError {
            ImagingError(.invalidRecipe, "recipe\(name.map { " '\($0)'" } ?? ""): \(field): expected \(expected), got \(actual)")
        }
        guard format == Recipe.formatIdentifier else { throw bad("format", "\"\(Recipe.formatIdentifier)\"", "\"\(format)\"") }
        guard (1...Recipe.currentVersion).contains(version) else {
            throw bad("version", "1...\(Recipe.currentVersion)", version)
        }
        var resizes = 0
        for (i, op) in operations.enumerated() {
            switch op {
            case .resize(let r):
                resizes += 1
                guard resizes == 1 else { throw bad("operations[\(i)]", "at most one resize", "a second resize") }
                for (field, v) in [("width", r.width), ("height", r.height)] {
                    if let v, !(1...65_500).contains(v) { throw bad("operations[\(i)].\(field)", "1...65500", v) }
                }
                guard r.width != nil || r.height != nil else {
                    throw bad("operations[\(i)]", "width and/or height", "neither")
                }
                if r.mode == .fill, r.width == nil || r.height == nil {
                    throw bad("operations[\(i)].mode", "width and height for fill", "only one")
                }
                guard r.scale.isFinite, r.scale <= 8 else { throw bad("operations[\(i)].scale", "1...8", r.scale) }
                if r.mode != .fill && (r.gravity != .centre || r.focus != nil) {
                    throw bad("operations[\(i)].mode", "fill with gravity or focus (fit keeps the whole image)", r.mode.rawValue)
                }
                if let f = r.focus, !(f.x.isFinite && f.y.isFinite && (0...1).contains(f.x) && (0...1).contains(f.y)) {
                    throw bad("operations[\(i)].focus", "x and y as fractions 0...1", "(\(f.x), \(f.y))")
                }
                let box = r.pixelBox
                for (field, v) in [("width", box.width), ("height", box.height)] {
                    if let v, v > 65_500 { throw bad("operations[\(i)].\(field) × scale", "at most 65500 pixels", v) }
                }
            case .rotate(let degrees):
                guard degrees % 90 == 0 else { throw bad("operations[\(i)].degrees", "a multiple of 90", degrees) }
            case .flip, .flatten:
                break
            case .sharpen(let u):
                guard u.sigma.isFinite, (0.3...10).contains(u.sigma) else { throw bad("operations[\(i)].sigma", "0.3...10", u.sigma) }
                guard u.amount.isFinite, (0...10).contains(u.amount) else { throw bad("operations[\(i)].amount", "0...10", u.amount) }
                guard u.threshold.isFinite, (0...255).contains(u.threshold) else {
                    throw bad("operations[\(i)].threshold", "0...255", u.threshold)
                }
            case .blur(let sigma):
                guard sigma.isFinite, (0.3...100).contains(sigma) else { throw bad("operations[\(i)].sigma", "0.3...100", sigma) }
            case .pad(let p):
                for (field, v) in [("width", p.width ?? 1), ("height", p.height ?? 1)] where !(1...65_500).contains(v) {
                    throw bad("operations[\(i)].\(field)", "1...65500", v)
                }
                for (field, v) in [("top", p.top), ("right", p.right), ("bottom", p.bottom), ("left", p.left)] where !(0...10_000).contains(v) {
                    throw bad("operations[\(i)].\(field)", "0...10000", v)
                }
            case .adjust(let a):
                for (field, v, range) in [("brightness", a.brightness, -1.0...1.0), ("contrast", a.contrast, 0.0...4.0),
                                          ("saturation", a.saturation, 0.0...4.0), ("gamma", a.gamma, 0.1...10.0),
                                          ("exposure", a.exposure, -8.0...8.0), ("sepia", a.sepia, 0.0...1.0)] {
                    guard v.isFinite, range.contains(v) else {
                        throw bad("operations[\(i)].\(field)", "\(range.lowerBound)...\(range.upperBound)", v)
                    }
                }
            }
        }
        let o = output
        guard o.quality.isFinite, (0...1).contains(o.quality) else {
            throw bad("output.quality", "0...1" + Recipe.qualityHint(o.quality), o.quality)
        }
        if let m = o.maxBytes, m <= 0 { throw bad("output.maxBytes", "a positive byte count", m) }
        guard (0...9).contains(o.pngCompression) else { throw bad("output.pngCompression", "0...9", o.pngCompression) }
        guard (0...6).contains(o.webpMethod) else { throw bad("output.webpMethod", "0...6", o.webpMethod) }
        guard (0...9).contains(o.avifSpeed) else { throw bad("output.avifSpeed", "0...9", o.avifSpeed) }
        var seen = Set<String>()
        for (i, f) in o.formats.enumerated() {
            guard [.jpeg, .png, .webp, .avif].contains(f.format) else {
                throw bad("output.formats[\(i)]", "jpeg, png, webp or avif", f.format.rawValue)
            }
            guard seen.insert(f.format.rawValue).inserted else { throw bad("output.formats[\(i)]", "each format once", f.format.rawValue) }
            if let q = f.quality, !(q.isFinite && (0...1).contains(q)) {
                throw bad("output.formats[\(i)].quality", "0...1" + Recipe.qualityHint(q), q)
            }
            if let m = f.maxBytes, m <= 0 { throw bad("output.formats[\(i)].maxBytes", "a positive byte count", m) }
        }
    }

    /// Quality is a fraction: a vips, sharp or ImageMagick user writing 85 is told so.
    public static func qualityHint(_ q: Double) -> String {
        q > 1 && q <= 100 ? " (a fraction, not a percentage: \(q) means \(formatFraction(q / 100)))" : ""
    }

    private static func formatFraction(_ v: Double) -> String {
        var s = String(format: "%.3f", v)
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }

    /// The recipe as canonical JSON (sorted keys), the form stored next to outputs.
    public func jsonData() throws -> Data {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return try e.encode(self)
    }

    /// Parses and validates a recipe.
    public static func decode(json: Data) throws -> Recipe {
        let recipe: Recipe
        do {
            recipe = try JSONDecoder().decode(Recipe.self, from: json)
        } catch let error as DecodingError {
            throw ImagingError(.invalidRecipe, "recipe: \(describeDecoding(error))")
        }
        try recipe.validate()
        return recipe
    }
}

/// One step of a recipe.
public enum RecipeOperation: Codable, Sendable, Equatable {
    case resize(Resize)
    /// Clockwise, a multiple of 90 degrees.
    case rotate(degrees: Int)
    case flip(FlipAxis)
    /// Composite onto a background colour, removing transparency.
    case flatten(background: RGBColor)
    /// Unsharp mask on the output-sized image.
    case sharpen(UnsharpMask)
    /// Gaussian blur (sigma in output pixels).
    case blur(sigma: Double)
    /// Colour adjustments on the output-sized image (the Core Image chain's knobs).
    case adjust(ColourAdjustment)
    /// Extend the output: to a size (the image placed by gravity) or by margins, in a colour.
    case pad(Padding)

    enum CodingKeys: String, CodingKey { case op, degrees, axis, background, sigma }

    /// Whether the step works on the output-sized pixels (after resize, orientation and colour).
    public var isFilter: Bool {
        switch self {
        case .sharpen, .blur, .adjust, .pad: return true
        default: return false
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let op = try c.decode(String.self, forKey: .op)
        switch op {
        case "resize": self = .resize(try Resize(from: decoder))
        case "rotate": self = .rotate(degrees: try c.decode(Int.self, forKey: .degrees))
        case "flip": self = .flip(try c.decode(FlipAxis.self, forKey: .axis))
        case "flatten": self = .flatten(background: try c.decodeIfPresent(RGBColor.self, forKey: .background) ?? .white)
        case "sharpen": self = .sharpen(try UnsharpMask(from: decoder))
        case "blur": self = .blur(sigma: try c.decode(Double.self, forKey: .sigma))
        case "adjust": self = .adjust(try ColourAdjustment(from: decoder))
        case "pad": self = .pad(try Padding(from: decoder))
        default:
            throw DecodingError.dataCorruptedError(forKey: .op, in: c,
                debugDescription: "unknown operation \"\(op)\" (expected resize, rotate, flip, flatten, sharpen, blur, adjust or pad)")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .resize(let r):
            try c.encode("resize", forKey: .op)
            try r.encode(to: encoder)
        case .rotate(let d):
            try c.encode("rotate", forKey: .op)
            try c.encode(d, forKey: .degrees)
        case .flip(let axis):
            try c.encode("flip", forKey: .op)
            try c.encode(axis, forKey: .axis)
        case .flatten(let bg):
            try c.encode("flatten", forKey: .op)
            try c.encode(bg, forKey: .background)
        case .sharpen(let u):
            try c.encode("sharpen", forKey: .op)
            try u.encode(to: encoder)
        case .blur(let sigma):
            try c.encode("blur", forKey: .op)
            try c.encode(sigma, forKey: .sigma)
        case .adjust(let a):
            try c.encode("adjust", forKey: .op)
            try a.encode(to: encoder)
        case .pad(let p):
            try c.encode("pad", forKey: .op)
            try p.encode(to: encoder)
        }
    }
}

/// An unsharp mask: `out = in + amount × (in − blur(in, sigma))` where the difference
/// exceeds `threshold` (0…255), clamped (never wraps).
public struct UnsharpMask: Codable, Sendable, Equatable {
    public var sigma: Double = 0.8
    public var amount: Double = 0.6
    public var threshold: Double = 2
    public init(sigma: Double = 0.8, amount: Double = 0.6, threshold: Double = 2) {
        self.sigma = sigma
        self.amount = amount
        self.threshold = threshold
    }
    enum CodingKeys: String, CodingKey { case sigma, amount, threshold }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = UnsharpMask()
        sigma = try c.decodeIfPresent(Double.self, forKey: .sigma) ?? d.sigma
        amount = try c.decodeIfPresent(Double.self, forKey: .amount) ?? d.amount
        threshold = try c.decodeIfPresent(Double.self, forKey: .threshold) ?? d.threshold
    }
}

/// Padding: to `width`×`height` (the image placed by `gravity`; a size smaller than the
/// image leaves that side as it is) and/or by margins, filled with `background`.
public struct Padding: Codable, Sendable, Equatable {
    public var width: Int?
    public var height: Int?
    public var top = 0
    public var right = 0
    public var bottom = 0
    public var left = 0
    public var gravity: Gravity = .centre
    public var background: RGBColor = .white
    public init(width: Int? = nil, height: Int? = nil, top: Int = 0, right: Int = 0, bottom: Int = 0, left: Int = 0,
                gravity: Gravity = .centre, background: RGBColor = .white) {
        self.width = width
        self.height = height
        self.top = top
        self.right = right
        self.bottom = bottom
        self.left = left
        self.gravity = gravity
        self.background = background
    }
    enum CodingKeys: String, CodingKey { case width, height, top, right, bottom, left, gravity, background }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        width = try c.decodeIfPresent(Int.self, forKey: .width)
        height = try c.decodeIfPresent(Int.self, forKey: .height)
        top = try c.decodeIfPresent(Int.self, forKey: .top) ?? 0
        right = try c.decodeIfPresent(Int.self, forKey: .right) ?? 0
        bottom = try c.decodeIfPresent(Int.self, forKey: .bottom) ?? 0
        left = try c.decodeIfPresent(Int.self, forKey: .left) ?? 0
        gravity = try c.decodeIfPresent(Gravity.self, forKey: .gravity) ?? .centre
        background = try c.decodeIfPresent(RGBColor.self, forKey: .background) ?? .white
    }
}

/// Colour adjustments, applied in this order: exposure (stops, in linear light),
/// brightness (added, −1…1), contrast (around mid-grey), saturation (0 = grey), gamma,
/// sepia (0…1 mix). Identity values leave pixels unchanged.
public struct ColourAdjustment: Codable, Sendable, Equatable {
    public var exposure: Double = 0
    public var brightness: Double = 0
    public var contrast: Double = 1
    public var saturation: Double = 1
    public var gamma: Double = 1
    public var sepia: Double = 0
    public init(exposure: Double = 0, brightness: Double = 0, contrast: Double = 1, saturation: Double = 1,
                gamma: Double = 1, sepia: Double = 0) {
        self.exposure = exposure
        self.brightness = brightness
        self.contrast = contrast
        self.saturation = saturation
        self.gamma = gamma
        self.sepia = sepia
    }
    enum CodingKeys: String, CodingKey { case exposure, brightness, contrast, saturation, gamma, sepia }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        exposure = try c.decodeIfPresent(Double.self, forKey: .exposure) ?? 0
        brightness = try c.decodeIfPresent(Double.self, forKey: .brightness) ?? 0
        contrast = try c.decodeIfPresent(Double.self, forKey: .contrast) ?? 1
        saturation = try c.decodeIfPresent(Double.self, forKey: .saturation) ?? 1
        gamma = try c.decodeIfPresent(Double.self, forKey: .gamma) ?? 1
        sepia = try c.decodeIfPresent(Double.self, forKey: .sepia) ?? 0
    }
}

public enum FlipAxis: String, Codable, Sendable { case horizontal, vertical }

/// How a resize fits the source to the box.
public enum ContentMode: String, Codable, Sendable {
    /// Inside the box, aspect ratio kept.
    case fit
    /// Cover the box, then crop the overflow around the centre.
    case fill
}

/// Resize to a box in points; pixels = points × `scale` (clamped to ≥ 1).
public struct Resize: Codable, Sendable, Equatable {
    public var width: Int?
    public var height: Int?
    public var mode: ContentMode = .fit
    /// Allow output larger than the source.
    public var upscale: Bool = false
    /// Display scale factor (2 for "@2x"); values below 1 count as 1.
    public var scale: Double = 1
    public var filter: ResampleFilter = .lanczos3
    /// `fill`: which part of the image the crop keeps (default centre).
    public var gravity: Gravity = .centre
    /// `fill`: the point the crop is centred on, as fractions of the upright image's width
    /// and height (overrides gravity; the crop stays inside the image).
    public var focus: FocusPoint?

    public init(width: Int?, height: Int?, mode: ContentMode = .fit, upscale: Bool = false, scale: Double = 1,
                filter: ResampleFilter = .lanczos3, gravity: Gravity = .centre, focus: FocusPoint? = nil) {
        self.width = width
        self.height = height
        self.mode = mode
        self.upscale = upscale
        self.scale = scale
        self.filter = filter
        self.gravity = gravity
        self.focus = focus
    }

    enum CodingKeys: String, CodingKey { case width, height, mode, upscale, scale, filter, gravity, focus }

    /// Written as before when gravity and focus are their defaults (a recipe's hash, and so
    /// incremental reruns, do not change for recipes that do not use them).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(width, forKey: .width)
        try c.encodeIfPresent(height, forKey: .height)
        try c.encode(mode, forKey: .mode)
        try c.encode(upscale, forKey: .upscale)
        try c.encode(scale, forKey: .scale)
        try c.encode(filter, forKey: .filter)
        if gravity != .centre { try c.encode(gravity, forKey: .gravity) }
        try c.encodeIfPresent(focus, forKey: .focus)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        width = try c.decodeIfPresent(Int.self, forKey: .width)
        height = try c.decodeIfPresent(Int.self, forKey: .height)
        mode = try c.decodeIfPresent(ContentMode.self, forKey: .mode) ?? .fit
        upscale = try c.decodeIfPresent(Bool.self, forKey: .upscale) ?? false
        scale = try c.decodeIfPresent(Double.self, forKey: .scale) ?? 1
        filter = try c.decodeIfPresent(ResampleFilter.self, forKey: .filter) ?? .lanczos3
        gravity = try c.decodeIfPresent(Gravity.self, forKey: .gravity) ?? .centre
        focus = try c.decodeIfPresent(FocusPoint.self, forKey: .focus)
    }

    /// The box in pixels.
    var pixelBox: (width: Int?, height: Int?) {
        let s = max(1, scale)
        return (width.map { Int((Double($0) * s).rounded()) }, height.map { Int((Double($0) * s).rounded()) })
    }
}

/// Where a `fill` crop sits in the image.
public enum Gravity: String, Codable, Sendable, CaseIterable {
    case centre, north, south, east, west, northeast, northwest, southeast, southwest

    /// The crop's position as fractions of the free space (0: left/top, 1: right/bottom).
    var position: (x: Double, y: Double) {
        switch self {
        case .centre: return (0.5, 0.5)
        case .north: return (0.5, 0)
        case .south: return (0.5, 1)
        case .east: return (1, 0.5)
        case .west: return (0, 0.5)
        case .northeast: return (1, 0)
        case .northwest: return (0, 0)
        case .southeast: return (1, 1)
        case .southwest: return (0, 1)
        }
    }
}

/// A point of the upright image, as fractions of its width and height.
public struct FocusPoint: Codable, Sendable, Equatable {
    public var x: Double
    public var y: Double
    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }
}

/// The container format of an output.
public enum OutputFormat: String, Codable, Sendable, CaseIterable {
    /// The source's own format (JPEG, or PNG with transparency, for a HEIC source).
    case original
    case jpeg
    case png
    case webp
    case avif
    /// The source's format where Tessera writes it (JPEG, PNG, WebP, AVIF), else JPEG, or
    /// PNG with transparency; a PNG over the byte budget falls back to JPEG.
    case auto
    /// The widget rule: PNG for PNG sources when it fits the byte budget, JPEG otherwise.
    case jpegOrPNG = "jpeg-or-png"
}

/// One format of an output that lists several: `"avif"` or `{"format": "avif", "quality": 0.6, "maxBytes": 50000}`.
public struct FormatChoice: Codable, Sendable, Equatable {
    public var format: OutputFormat
    public var quality: Double?
    public var maxBytes: Int?

    public init(_ format: OutputFormat, quality: Double? = nil, maxBytes: Int? = nil) {
        self.format = format
        self.quality = quality
        self.maxBytes = maxBytes
    }

    enum CodingKeys: String, CodingKey { case format, quality, maxBytes }

    public init(from decoder: Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let f = try? single.decode(OutputFormat.self) {
            self.init(f)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(try c.decode(OutputFormat.self, forKey: .format), quality: try c.decodeIfPresent(Double.self, forKey: .quality),
                  maxBytes: try c.decodeIfPresent(Int.self, forKey: .maxBytes))
    }
}

/// Metadata an output may keep. Everything else (EXIF incl. GPS, XMP, IPTC, comments) is dropped.
public enum KeptMetadata: String, Codable, Sendable, CaseIterable {
    /// Attach the source's ICC profile instead of converting to sRGB.
    case icc
    /// Keep the EXIF Copyright tag.
    case copyright
}

/// How an output is encoded.
public struct OutputSettings: Codable, Sendable, Equatable {
    public var format: OutputFormat = .jpeg
    /// 0...1 (validated; a value above 1 is refused); JPEG quality = round(quality × 100), at least 1.
    public var quality: Double = 0.9
    public var progressive: Bool = false
    /// Optimised Huffman tables.
    public var optimize: Bool = true
    public var subsampling: ChromaSubsampling = .auto
    /// zlib level 0...9.
    public var pngCompression: Int = 6
    /// Byte budget: the highest JPEG quality (≤ `quality`) whose output fits.
    public var maxBytes: Int?
    public var keep: [KeptMetadata] = []
    /// Background for removing transparency (JPEG output, flatten).
    public var background: RGBColor = .white
    /// Apply EXIF orientation (almost always wanted).
    public var autoOrient: Bool = true
    /// WebP: lossless instead of lossy.
    public var lossless: Bool = false
    /// WebP: libwebp's method, 0 (fastest) ... 6 (smallest).
    public var webpMethod: Int = 4
    /// AVIF: aom's speed, 0 (slowest, smallest) ... 9 (fastest).
    public var avifSpeed: Int = 7
    /// Several encodings of the same pixels (one decode, one resize): each a format with
    /// its own quality and byte budget (the output's when not given). Empty: `format` only.
    public var formats: [FormatChoice] = []

    /// These settings for one of `formats`.
    public func settings(for choice: FormatChoice) -> OutputSettings {
        var s = self
        s.format = choice.format
        s.quality = choice.quality ?? quality
        s.maxBytes = choice.maxBytes ?? maxBytes
        s.formats = []
        return s
    }

    public init(format: OutputFormat = .jpeg, quality: Double = 0.9, progressive: Bool = false,
                optimize: Bool = true, subsampling: ChromaSubsampling = .auto, pngCompression: Int = 6,
                maxBytes: Int? = nil, keep: [KeptMetadata] = [], background: RGBColor = .white,
                autoOrient: Bool = true) {
        self.format = format
        self.quality = quality
        self.progressive = progressive
        self.optimize = optimize
        self.subsampling = subsampling
        self.pngCompression = pngCompression
        self.maxBytes = maxBytes
        self.keep = keep
        self.background = background
        self.autoOrient = autoOrient
    }

    enum CodingKeys: String, CodingKey {
        case format, quality, progressive, optimize, subsampling, pngCompression, maxBytes, keep, background, autoOrient
        case lossless, webpMethod, avifSpeed, formats
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = OutputSettings()
        format = try c.decodeIfPresent(OutputFormat.self, forKey: .format) ?? d.format
        quality = try c.decodeIfPresent(Double.self, forKey: .quality) ?? d.quality
        progressive = try c.decodeIfPresent(Bool.self, forKey: .progressive) ?? d.progressive
        optimize = try c.decodeIfPresent(Bool.self, forKey: .optimize) ?? d.optimize
        subsampling = try c.decodeIfPresent(ChromaSubsampling.self, forKey: .subsampling) ?? d.subsampling
        pngCompression = try c.decodeIfPresent(Int.self, forKey: .pngCompression) ?? d.pngCompression
        maxBytes = try c.decodeIfPresent(Int.self, forKey: .maxBytes)
        keep = try c.decodeIfPresent([KeptMetadata].self, forKey: .keep) ?? d.keep
        background = try c.decodeIfPresent(RGBColor.self, forKey: .background) ?? d.background
        autoOrient = try c.decodeIfPresent(Bool.self, forKey: .autoOrient) ?? d.autoOrient
        lossless = try c.decodeIfPresent(Bool.self, forKey: .lossless) ?? d.lossless
        webpMethod = try c.decodeIfPresent(Int.self, forKey: .webpMethod) ?? d.webpMethod
        avifSpeed = try c.decodeIfPresent(Int.self, forKey: .avifSpeed) ?? d.avifSpeed
        formats = try c.decodeIfPresent([FormatChoice].self, forKey: .formats) ?? []
    }

    /// libjpeg quality 1...100 from the 0...1 quality (clamped, like the seed).
    public var jpegQuality: Int { max(1, min(100, Int((min(max(quality, 0), 1) * 100).rounded()))) }
}

/// An sRGB colour, written "#rrggbb" in JSON.
public struct RGBColor: Codable, Sendable, Equatable, CustomStringConvertible {
    public var r, g, b: UInt8
    public init(r: UInt8, g: UInt8, b: UInt8) {
        self.r = r
        self.g = g
        self.b = b
    }
    public static let white = RGBColor(r: 255, g: 255, b: 255)
    public static let black = RGBColor(r: 0, g: 0, b: 0)

    public init?(hex: String) {
        var s = Substring(hex)
        if s.hasPrefix("#") { s = s.dropFirst() }
        guard s.count == 6, let v = UInt32(s, radix: 16) else { return nil }
        self.init(r: UInt8(v >> 16), g: UInt8((v >> 8) & 0xFF), b: UInt8(v & 0xFF))
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        let s = try c.decode(String.self)
        guard let v = RGBColor(hex: s) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "expected a colour \"#rrggbb\", got \"\(s)\"")
        }
        self = v
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    public var description: String { String(format: "#%02x%02x%02x", r, g, b) }
}

/// A one-line account of a `DecodingError`: the field path and what was wrong.
public func describeDecoding(_ error: DecodingError) -> String {
    func path(_ keys: [CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
    }
    switch error {
    case .typeMismatch(let type, let ctx):
        return "\(path(ctx.codingPath)): expected \(type)"
    case .valueNotFound(let type, let ctx):
        return "\(path(ctx.codingPath)): missing \(type)"
    case .keyNotFound(let key, let ctx):
        return "\(path(ctx.codingPath + [key])): missing"
    case .dataCorrupted(let ctx):
        let p = path(ctx.codingPath)
        return (p.isEmpty ? "" : "\(p): ") + ctx.debugDescription
    @unknown default:
        return "\(error)"
    }
}
