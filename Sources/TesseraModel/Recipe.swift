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
    /// 2: the filter operations (`crop`, `trim`, `sharpen`, `blur`, `adjust`, `pad`, `overlay`);
    /// version 1 recipes still load.
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

    /// The recipe with relative file paths (overlay watermarks) made absolute against
    /// `directory` (that of the recipe, preset or job file that names them; relative to the
    /// working directory itself when relative).
    public func resolvingPaths(in directory: String) -> Recipe {
        var r = self
        let cwd = FileManager.default.currentDirectoryPath
        let base = directory.isEmpty ? cwd : directory.hasPrefix("/") ? directory : cwd + "/" + directory
        r.operations = operations.map { op in
            guard case .overlay(var o) = op, !o.path.hasPrefix("/") else { return op }
            o.path = ((base as NSString).appendingPathComponent(o.path) as NSString).standardizingPath
            return .overlay(o)
        }
        return r
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
            case .crop(let c):
                guard resizes == 0 else { throw bad("operations[\(i)]", "crop before the resize (it chooses what is resized)", "crop after it") }
                try c.validate { bad("operations[\(i)].\($0)", $1, $2) }
            case .trim(let t):
                guard resizes == 0 else { throw bad("operations[\(i)]", "trim before the resize", "trim after it") }
                guard t.threshold.isFinite, (0...255).contains(t.threshold) else {
                    throw bad("operations[\(i)].threshold", "0...255", t.threshold)
                }
            case .overlay(let o):
                guard !o.path.isEmpty, !o.path.contains("\0") else { throw bad("operations[\(i)].path", "a file path", "\"\(o.path)\"") }
                guard o.opacity.isFinite, (0...1).contains(o.opacity) else { throw bad("operations[\(i)].opacity", "0...1", o.opacity) }
                if let w = o.width { guard w.isFinite, w > 0, w <= 1 else { throw bad("operations[\(i)].width", "0...1 (of the output's width)", w) } }
                guard (0...10_000).contains(o.margin) else { throw bad("operations[\(i)].margin", "0...10000", o.margin) }
                guard o.gravity != .attention else { throw bad("operations[\(i)].gravity", "a fixed position", "attention") }
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
                guard p.gravity != .attention else { throw bad("operations[\(i)].gravity", "a fixed position", "attention") }
            case .adjust(let a):
                for (field, v, range) in [("brightness", a.brightness, -1.0...1.0), ("contrast", a.contrast, 0.0...4.0),
                                          ("saturation", a.saturation, 0.0...4.0), ("gamma", a.gamma, 0.1...10.0),
                                          ("exposure", a.exposure, -8.0...8.0), ("sepia", a.sepia, 0.0...1.0),
                                          ("tintAmount", a.tintAmount, 0.0...1.0), ("vignette", a.vignette, 0.0...1.0)] {
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
        if let e = o.jxlEffort, !(1...9).contains(e) { throw bad("output.jxlEffort", "1...9", e) }
        if let e = o.jpegEffort, !(0...3).contains(e) { throw bad("output.jpegEffort", "0...3", e) }
        var seen = Set<String>()
        for (i, f) in o.formats.enumerated() {
            guard [.jpeg, .png, .webp, .avif, .gif].contains(f.format) else {
                throw bad("output.formats[\(i)]", "jpeg, png, webp, avif or gif", f.format.rawValue)
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
        q >= 2 && q <= 100 ? " (a fraction, not a percentage: \(q) means \(formatFraction(q / 100)))" : ""
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
            throw ImagingError(.invalidRecipe, "recipe: \(describeDecoding(error, data: json))")
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
    /// Extend the output: to a size (the image placed by gravity) or by margins, in a colour
    /// or a blurred copy of the image.
    case pad(Padding)
    /// Cut a rectangle, or the largest window of an aspect ratio placed by gravity, a focus
    /// point or attention, out of the upright image before the resize.
    case crop(Crop)
    /// Remove borders of one colour (the top-left pixel's, within a threshold) before the resize.
    case trim(Trim)
    /// Composite a PNG or JPEG watermark on the output.
    case overlay(Overlay)

    enum CodingKeys: String, CodingKey { case op, degrees, axis, background, sigma }

    /// Whether the step works on the output-sized pixels (after resize, orientation and colour).
    public var isFilter: Bool {
        switch self {
        case .sharpen, .blur, .adjust, .pad, .overlay: return true
        default: return false
        }
    }

    /// Whether the step chooses the region from the pixels themselves (the image is analysed
    /// at the decode scale before it is resized).
    public var needsAnalysis: Bool {
        switch self {
        case .trim: return true
        case .crop(let c): return c.aspect != nil && c.gravity == .attention && c.focus == nil
        case .resize(let r): return r.mode == .fill && r.gravity == .attention && r.focus == nil
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
        case "crop": self = .crop(try Crop(from: decoder))
        case "trim": self = .trim(try Trim(from: decoder))
        case "overlay": self = .overlay(try Overlay(from: decoder))
        default:
            throw DecodingError.dataCorruptedError(forKey: .op, in: c,
                debugDescription: "unknown operation \"\(op)\" (expected \(RecipeOperation.names.joined(separator: ", ")))")
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
        case .crop(let v):
            try c.encode("crop", forKey: .op)
            try v.encode(to: encoder)
        case .trim(let v):
            try c.encode("trim", forKey: .op)
            try v.encode(to: encoder)
        case .overlay(let v):
            try c.encode("overlay", forKey: .op)
            try v.encode(to: encoder)
        }
    }

    /// A few words for listings (`tessera presets`).
    public var summary: String {
        func n(_ v: Double) -> String { v == v.rounded() ? String(Int(v)) : String(format: "%g", v) }
        switch self {
        case .resize(let z):
            let box: String
            switch (z.width, z.height) {
            case let (w?, h?): box = "\(w)x\(h)"
            case let (w?, nil): box = "width \(w)"
            case let (nil, h?): box = "height \(h)"
            default: box = "?"
            }
            var text = "\(z.mode.rawValue) \(box)" + (z.scale > 1 ? " @\(n(z.scale))x" : "")
            if let f = z.focus { text += " focus \(n(f.x)),\(n(f.y))" } else if z.mode == .fill && z.gravity != .centre { text += " " + z.gravity.rawValue }
            return text
        case .crop(let c):
            if let a = c.aspect {
                return "crop aspect \(n(a))" + (c.focus.map { " focus \(n($0.x)),\(n($0.y))" } ?? (c.gravity == .centre ? "" : " " + c.gravity.rawValue))
            }
            let unit = c.units == .fractions ? " (fractions)" : ""
            return "crop \(n(c.x ?? 0)),\(n(c.y ?? 0)) \(n(c.width ?? 0))x\(n(c.height ?? 0))\(unit)"
        case .trim(let t): return "trim \(n(t.threshold))"
        case .rotate(let d): return "rotate \(d)"
        case .flip(let a): return "flip \(a.rawValue)"
        case .flatten(let bg): return "no transparency (\(bg))"
        case .sharpen(let u): return "sharpen σ\(n(u.sigma)) ×\(n(u.amount))"
        case .blur(let sigma): return "blur σ\(n(sigma))"
        case .adjust(let a):
            var knobs: [String] = []
            if a.exposure != 0 { knobs.append("exposure \(n(a.exposure))") }
            if a.brightness != 0 { knobs.append("brightness \(n(a.brightness))") }
            if a.contrast != 1 { knobs.append("contrast \(n(a.contrast))") }
            if a.saturation != 1 { knobs.append(a.saturation == 0 ? "grayscale" : "saturation \(n(a.saturation))") }
            if a.gamma != 1 { knobs.append("gamma \(n(a.gamma))") }
            if a.sepia != 0 { knobs.append("sepia \(n(a.sepia))") }
            if let t = a.tint { knobs.append("tint \(t) \(n(a.tintAmount))") }
            if a.vignette != 0 { knobs.append("vignette \(n(a.vignette))") }
            return "adjust " + (knobs.isEmpty ? "none" : knobs.joined(separator: " "))
        case .pad(let p):
            var text = "pad"
            if p.width != nil || p.height != nil { text += " to \(p.width.map(String.init) ?? "-")x\(p.height.map(String.init) ?? "-")" }
            if p.top + p.right + p.bottom + p.left > 0 { text += " margins \(p.top),\(p.right),\(p.bottom),\(p.left)" }
            return text + (p.fill == .blur ? " blur" : " \(p.background)")
        case .overlay(let o):
            return "overlay \((o.path as NSString).lastPathComponent) \(o.gravity.rawValue)" + (o.opacity < 1 ? " \(n(o.opacity))" : "")
        }
    }

    public static let names = ["resize", "crop", "trim", "rotate", "flip", "flatten", "sharpen", "blur", "adjust", "pad", "overlay"]
}

/// A crop before the resize, in the upright image (after EXIF orientation and the rotations
/// and flips before the resize; after a `trim`, of the trimmed image): either a rectangle
/// (`x`, `y`, `width`, `height` in `units`), or `aspect` (width ÷ height, e.g. 1.7778, or
/// "16:9") — the largest window of that shape, placed by `focus` (fractions of the image)
/// or `gravity` (including `attention`: where edges, saturated colour and skin tones are).
public struct Crop: Codable, Sendable, Equatable {
    public enum Units: String, Codable, Sendable { case pixels, fractions }
    public var x: Double?
    public var y: Double?
    public var width: Double?
    public var height: Double?
    public var units: Units = .pixels
    public var aspect: Double?
    public var gravity: Gravity = .centre
    public var focus: FocusPoint?

    public init(x: Double? = nil, y: Double? = nil, width: Double? = nil, height: Double? = nil, units: Units = .pixels,
                aspect: Double? = nil, gravity: Gravity = .centre, focus: FocusPoint? = nil) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.units = units
        self.aspect = aspect
        self.gravity = gravity
        self.focus = focus
    }

    enum CodingKeys: String, CodingKey { case x, y, width, height, units, aspect, gravity, focus }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        x = try c.decodeIfPresent(Double.self, forKey: .x)
        y = try c.decodeIfPresent(Double.self, forKey: .y)
        width = try c.decodeIfPresent(Double.self, forKey: .width)
        height = try c.decodeIfPresent(Double.self, forKey: .height)
        units = try c.decodeIfPresent(Units.self, forKey: .units) ?? .pixels
        if let text = try? c.decodeIfPresent(String.self, forKey: .aspect) {
            guard let ratio = Crop.parseAspect(text) else {
                throw DecodingError.dataCorruptedError(forKey: .aspect, in: c,
                                                       debugDescription: "expected a ratio like \"16:9\" or 1.5, got \"\(text)\"")
            }
            aspect = ratio
        } else {
            aspect = try c.decodeIfPresent(Double.self, forKey: .aspect)
        }
        gravity = try c.decodeIfPresent(Gravity.self, forKey: .gravity) ?? .centre
        focus = try c.decodeIfPresent(FocusPoint.self, forKey: .focus)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(x, forKey: .x)
        try c.encodeIfPresent(y, forKey: .y)
        try c.encodeIfPresent(width, forKey: .width)
        try c.encodeIfPresent(height, forKey: .height)
        if aspect == nil { try c.encode(units, forKey: .units) }
        try c.encodeIfPresent(aspect, forKey: .aspect)
        if aspect != nil && gravity != .centre { try c.encode(gravity, forKey: .gravity) }
        try c.encodeIfPresent(focus, forKey: .focus)
    }

    /// "16:9", "4/3", "1.5".
    public static func parseAspect(_ text: String) -> Double? {
        let parts = text.split(whereSeparator: { $0 == ":" || $0 == "/" || $0 == "x" }).map { Double($0.trimmingCharacters(in: .whitespaces)) }
        let value: Double?
        switch parts.count {
        case 1: value = parts[0]
        case 2: value = parts[0].flatMap { a in parts[1].map { a / $0 } }
        default: value = nil
        }
        guard let v = value, v.isFinite, v > 0 else { return nil }
        return v
    }

    public func validate(_ bad: (String, String, Any) -> ImagingError) throws {
        if let aspect {
            guard x == nil, y == nil, width == nil, height == nil else {
                throw bad("aspect", "either aspect or a rectangle (x, y, width, height)", "both")
            }
            guard aspect.isFinite, (0.01...100).contains(aspect) else { throw bad("aspect", "0.01...100 (width ÷ height)", aspect) }
            if let f = focus, !(f.x.isFinite && f.y.isFinite && (0...1).contains(f.x) && (0...1).contains(f.y)) {
                throw bad("focus", "x and y as fractions 0...1", "(\(f.x), \(f.y))")
            }
            return
        }
        guard gravity == .centre, focus == nil else { throw bad("gravity", "gravity or focus only with aspect", gravity.rawValue) }
        guard let width, let height else { throw bad("width", "width and height (or aspect)", "missing") }
        let limit = units == .fractions ? 1.0 : 65_500
        for (field, v) in [("x", x ?? 0), ("y", y ?? 0)] where !(v.isFinite && (0..<limit).contains(v)) {
            throw bad(field, units == .fractions ? "0...1 (a fraction)" : "0...65500 pixels", v)
        }
        for (field, v) in [("width", width), ("height", height)] where !(v.isFinite && v > 0 && v <= limit) {
            throw bad(field, units == .fractions ? "a fraction above 0, at most 1" : "1...65500 pixels", v)
        }
        if units == .fractions {
            if (x ?? 0) + width > 1 + 1e-9 { throw bad("width", "x + width ≤ 1", (x ?? 0) + width) }
            if (y ?? 0) + height > 1 + 1e-9 { throw bad("height", "y + height ≤ 1", (y ?? 0) + height) }
        }
    }
}

/// Borders of one colour removed: rows and columns from each edge whose every pixel is
/// within `threshold` (0…255, per channel) of `background` (default: the top-left pixel).
public struct Trim: Codable, Sendable, Equatable {
    public var threshold: Double = 10
    public var background: RGBColor?
    public init(threshold: Double = 10, background: RGBColor? = nil) {
        self.threshold = threshold
        self.background = background
    }
    enum CodingKeys: String, CodingKey { case threshold, background }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        threshold = try c.decodeIfPresent(Double.self, forKey: .threshold) ?? 10
        background = try c.decodeIfPresent(RGBColor.self, forKey: .background)
    }
}

/// A watermark (PNG with transparency, or JPEG) composited on the output at `gravity`,
/// `margin` pixels in from the edges, at `opacity`, `width` as a fraction of the output's
/// width (its own size when absent). Read once per process and kept (by path).
public struct Overlay: Codable, Sendable, Equatable {
    public var path: String
    public var gravity: Gravity = .southeast
    public var margin = 0
    public var opacity = 1.0
    public var width: Double?
    public init(path: String, gravity: Gravity = .southeast, margin: Int = 0, opacity: Double = 1, width: Double? = nil) {
        self.path = path
        self.gravity = gravity
        self.margin = margin
        self.opacity = opacity
        self.width = width
    }
    enum CodingKeys: String, CodingKey { case path, gravity, margin, opacity, width }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        path = try c.decode(String.self, forKey: .path)
        gravity = try c.decodeIfPresent(Gravity.self, forKey: .gravity) ?? .southeast
        margin = try c.decodeIfPresent(Int.self, forKey: .margin) ?? 0
        opacity = try c.decodeIfPresent(Double.self, forKey: .opacity) ?? 1
        width = try c.decodeIfPresent(Double.self, forKey: .width)
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
    /// `blur`: the added area shows the image itself, enlarged to cover it and blurred.
    public var fill: Fill = .colour
    public enum Fill: String, Codable, Sendable { case colour, blur }
    public init(width: Int? = nil, height: Int? = nil, top: Int = 0, right: Int = 0, bottom: Int = 0, left: Int = 0,
                gravity: Gravity = .centre, background: RGBColor = .white, fill: Fill = .colour) {
        self.fill = fill
        self.width = width
        self.height = height
        self.top = top
        self.right = right
        self.bottom = bottom
        self.left = left
        self.gravity = gravity
        self.background = background
    }
    enum CodingKeys: String, CodingKey { case width, height, top, right, bottom, left, gravity, background, fill }
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
        fill = try c.decodeIfPresent(Fill.self, forKey: .fill) ?? .colour
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(width, forKey: .width)
        try c.encodeIfPresent(height, forKey: .height)
        for (key, v) in [(CodingKeys.top, top), (.right, right), (.bottom, bottom), (.left, left)] where v != 0 {
            try c.encode(v, forKey: key)
        }
        try c.encode(gravity, forKey: .gravity)
        if fill == .colour { try c.encode(background, forKey: .background) } else { try c.encode(fill, forKey: .fill) }
    }
}

/// Colour adjustments, applied in this order: exposure (stops, in linear light),
/// brightness (added, −1…1), contrast (around mid-grey), saturation (0 = grey; `grayscale`
/// is saturation 0), gamma, sepia (0…1 mix), tint (the luminance in `tint`'s colour, mixed
/// by `tintAmount`), vignette (0…1: how dark the corners get). Identity values leave pixels
/// unchanged.
public struct ColourAdjustment: Codable, Sendable, Equatable {
    public var exposure: Double = 0
    public var brightness: Double = 0
    public var contrast: Double = 1
    public var saturation: Double = 1
    public var gamma: Double = 1
    public var sepia: Double = 0
    public var tint: RGBColor?
    public var tintAmount: Double = 0
    public var vignette: Double = 0
    public init(exposure: Double = 0, brightness: Double = 0, contrast: Double = 1, saturation: Double = 1,
                gamma: Double = 1, sepia: Double = 0, tint: RGBColor? = nil, tintAmount: Double = 0, vignette: Double = 0) {
        self.exposure = exposure
        self.brightness = brightness
        self.contrast = contrast
        self.saturation = saturation
        self.gamma = gamma
        self.sepia = sepia
        self.tint = tint
        self.tintAmount = tint == nil ? 0 : tintAmount
        self.vignette = vignette
    }
    enum CodingKeys: String, CodingKey { case exposure, brightness, contrast, saturation, gamma, sepia, grayscale, tint, tintAmount, vignette }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        exposure = try c.decodeIfPresent(Double.self, forKey: .exposure) ?? 0
        brightness = try c.decodeIfPresent(Double.self, forKey: .brightness) ?? 0
        contrast = try c.decodeIfPresent(Double.self, forKey: .contrast) ?? 1
        saturation = try c.decodeIfPresent(Double.self, forKey: .saturation) ?? 1
        if try c.decodeIfPresent(Bool.self, forKey: .grayscale) == true { saturation = 0 }
        gamma = try c.decodeIfPresent(Double.self, forKey: .gamma) ?? 1
        sepia = try c.decodeIfPresent(Double.self, forKey: .sepia) ?? 0
        tint = try c.decodeIfPresent(RGBColor.self, forKey: .tint)
        tintAmount = try c.decodeIfPresent(Double.self, forKey: .tintAmount) ?? (tint == nil ? 0 : 1)
        vignette = try c.decodeIfPresent(Double.self, forKey: .vignette) ?? 0
    }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(exposure, forKey: .exposure)
        try c.encode(brightness, forKey: .brightness)
        try c.encode(contrast, forKey: .contrast)
        try c.encode(saturation, forKey: .saturation)
        try c.encode(gamma, forKey: .gamma)
        try c.encode(sepia, forKey: .sepia)
        if let tint {
            try c.encode(tint, forKey: .tint)
            try c.encode(tintAmount, forKey: .tintAmount)
        }
        if vignette != 0 { try c.encode(vignette, forKey: .vignette) }
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
    public var pixelBox: (width: Int?, height: Int?) {
        let s = max(1, scale)
        return (width.map { Int((Double($0) * s).rounded()) }, height.map { Int((Double($0) * s).rounded()) })
    }
}

/// Where a `fill` crop sits in the image.
public enum Gravity: String, Codable, Sendable, CaseIterable {
    case centre, north, south, east, west, northeast, northwest, southeast, southwest
    /// Where the image holds most detail, saturated colour and skin tones (crops only; like
    /// libvips' `attention`), found on the image at its decode scale.
    case attention

    /// The crop's position as fractions of the free space (0: left/top, 1: right/bottom).
    public var position: (x: Double, y: Double) {
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
        case .attention: return (0.5, 0.5)  // placed from the pixels; centre until they are known
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
    /// GIF: a palette per frame (for animations: `animated: true`; a still is one frame).
    case gif
    /// JPEG XL: lossy from the quality (cjxl's quality → distance), or `lossless`.
    case jxl
    /// The source's format where Tessera writes it (JPEG, PNG, WebP, AVIF, JPEG XL), else JPEG, or
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
    /// Keep the source's pixel density (dots per inch: TIFF XResolution/YResolution, JPEG JFIF,
    /// PNG pHYs) as it is, as vips does: JFIF for JPEG outputs, pHYs for PNG.
    case resolution
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
    /// JPEG XL: libjxl's effort, 1 (fastest) ... 9 (smallest); nil: `defaultJXLEffort` (not
    /// written, so recipes without it keep their hash).
    public var jxlEffort: Int?
    /// JPEG: 0 libjpeg-turbo as it comes (the JPEG standard's example tables), 1 Tessera's
    /// quantisation tables, 2 those with its dead-zone quantiser and Huffman tables, 3 its
    /// trellis quantiser instead; nil: `defaultJPEGEffort` (not written, so recipes without it
    /// keep their hash).
    public var jpegEffort: Int?
    /// Effort 2: about 0.85× libjpeg-turbo's bytes at equal SSIMULACRA2 70 and 80, a higher
    /// SSIM and SSIMULACRA2 at the same quality, in libjpeg-turbo's encode time (decision 024).
    public static let defaultJPEGEffort = 2
    /// Effort 5: the same bytes as libjxl's default 7 at equal SSIMULACRA2 (0.655× against
    /// 0.663× Tessera's JPEG at 80, 1280×720) in 0.66× the time (decision 022).
    public static let defaultJXLEffort = 5
    /// An animated source (GIF, animated WebP) stays animated: every frame resized, delays and loop count
    /// kept, written as an animated WebP (WebP, auto or original formats); still formats get
    /// the first frame.
    public var animated: Bool = false
    /// A source's gain map (Ultra HDR): kept, dropped or applied. nil: the render's default
    /// (`RenderOptions.gainMap`, keep unless told).
    public var gainMap: GainMapMode?
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
        case lossless, webpMethod, avifSpeed, jxlEffort, jpegEffort, formats, animated, gainMap
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
        jxlEffort = try c.decodeIfPresent(Int.self, forKey: .jxlEffort)
        jpegEffort = try c.decodeIfPresent(Int.self, forKey: .jpegEffort)
        formats = try c.decodeIfPresent([FormatChoice].self, forKey: .formats) ?? []
        animated = try c.decodeIfPresent(Bool.self, forKey: .animated) ?? d.animated
        gainMap = try c.decodeIfPresent(GainMapMode.self, forKey: .gainMap)
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

/// A one-line account of a `DecodingError`: the field path and what was wrong. Foundation
/// says only "The given data was not valid JSON." both for text that is not JSON and for a
/// number that does not fit its field (1.5 or 1e300 where a whole number goes): given the
/// `data`, the account says which.
public func describeDecoding(_ error: DecodingError, data: Data) -> String {
    if case .typeMismatch(let type, let ctx) = error,
       let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) {
        // The value that is not of its field's type, quoted as job-file errors quote it.
        var value: Any? = object
        for key in ctx.codingPath {
            if let i = key.intValue, let a = value as? [Any] { value = i < a.count ? a[i] : nil } else {
                value = (value as? [String: Any])?[key.stringValue]
            }
        }
        return "\(decodingPath(ctx.codingPath)): " + expected(type, got: value)
    }
    guard case .dataCorrupted(let ctx) = error, ctx.codingPath.isEmpty else { return describeDecoding(error) }
    let object: Any
    do {
        object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    } catch {
        let text = String(decoding: data.prefix(4096), as: UTF8.self)
        let yaml = text.split(separator: "\n").contains { $0.contains(": ") && !$0.contains("\"") }
        return "not JSON" + (yaml ? " (it looks like YAML: a job file goes to tessera run or submit)" : "")
    }
    // Whole-number fields holding a fraction or a number beyond 64 bits.
    var found: String?
    func walk(_ v: Any, _ path: String, key: String) {
        if found != nil { return }
        if let d = v as? [String: Any] {
            for k in d.keys.sorted() { walk(d[k]!, path.isEmpty ? k : path + "." + k, key: k) }
        } else if let a = v as? [Any] {
            for (i, e) in a.enumerated() { walk(e, path + "[\(i)]", key: key) }
        } else if !(v is Bool), let n = v as? NSNumber {
            let x = n.doubleValue
            let whole = x.isFinite && x == x.rounded() && abs(x) < 9.2e18
            if !whole && wholeNumberFields.contains(key) { found = "\(path): expected a whole number, got \(n)" }
        }
    }
    walk(object, "", key: "")
    return found ?? "a value does not fit its field (a fraction, or a number too large, where a whole number goes)"
}

/// Fields of recipes, presets and jobs that take whole numbers.
let wholeNumberFields: Set<String> = [
    "width", "height", "maxBytes", "pngCompression", "webpMethod", "avifSpeed", "jxlEffort", "jpegEffort", "degrees", "top", "right", "bottom", "left",
    "margin", "tileSize", "overlap", "memoryBudgetMB", "maxInputMB", "maxAttempts", "priority", "version", "multipartMB",
]

/// `expected an integer, got "high"`: the words job files use for a value of the wrong type.
public func expected(_ type: Any.Type, got value: Any?) -> String {
    let shown: String
    switch value {
    // JSON's true and false are NSNumbers of type char ("c").
    case let n as NSNumber: shown = String(cString: n.objCType) == "c" ? (n.boolValue ? "true" : "false") : "\(n)"
    case let s as String: shown = s
    case is [Any]: shown = "a list"
    case is [String: Any]: shown = "a mapping"
    default: shown = "?"
    }
    switch type {
    case is Int.Type, is Int64.Type, is UInt64.Type, is UInt8.Type, is UInt32.Type, is Int32.Type:
        return "expected an integer, got \"\(shown)\""
    case is Double.Type, is Float.Type: return "expected a number, got \"\(shown)\""
    case is Bool.Type: return "expected true or false"
    case is String.Type: return "expected a string"
    default: return "expected \(type)"
    }
}

func decodingPath(_ keys: [CodingKey]) -> String {
    keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
}

/// A one-line account of a `DecodingError`: the field path and what was wrong.
public func describeDecoding(_ error: DecodingError) -> String {
    let path = decodingPath
    switch error {
    case .typeMismatch(let type, let ctx):
        return "\(path(ctx.codingPath)): " + expected(type, got: nil)
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
