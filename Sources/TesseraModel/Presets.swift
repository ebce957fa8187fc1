import Foundation

/// Named recipes. The built-in ones follow the seed configurations of iOS photo
/// pipelines; preset files (JSON) add more.
public struct PresetCatalog: Sendable {
    public private(set) var recipes: [String: Recipe]

    /// The built-in presets.
    public static let builtIn = PresetCatalog(recipes: [
        "default": Recipe(name: "default", output: OutputSettings(format: .original, quality: 1.0)),
        "highDefinition": fit("highDefinition", 1920, 1080, quality: 1.0),
        "thumbnail": fit("thumbnail", 1280, 720, quality: 1.0),
        "compressedThumbnail": fit("compressedThumbnail", 1280, 720, quality: 0.8),
        "favicon": square("favicon", 64, quality: 1.0),
        "compressedFavicon": square("compressedFavicon", 64, quality: 0.8),
        // Widget rules: at most 1024 px wide, under 1 MB, JPEG or PNG, no metadata,
        // 1× scale, no transparency, SDR (no gain map).
        "widget": Recipe(
            name: "widget",
            operations: [.resize(Resize(width: 1024, height: nil, mode: .fit, scale: 1)),
                         .flatten(background: .white)],
            output: { var o = OutputSettings(format: .jpegOrPNG, quality: 0.9, maxBytes: 999_999)
                      o.gainMap = .drop  // iOS widgets are SDR
                      return o }()),
        // For the web: one decode and resize, three files (AVIF, WebP, JPEG) for <picture>.
        "web": web("web", 1280, 720),
        "webThumbnail": web("webThumbnail", 320, 320),
    ])

    /// Presets in the order `tessera presets` lists them.
    public static let builtInOrder = ["default", "highDefinition", "thumbnail", "compressedThumbnail",
                                      "favicon", "compressedFavicon", "widget", "web", "webThumbnail"]

    public init(recipes: [String: Recipe]) {
        self.recipes = recipes
    }

    public subscript(name: String) -> Recipe? { recipes[name] }

    public var names: [String] {
        let builtIns = PresetCatalog.builtInOrder.filter { recipes[$0] != nil }
        return builtIns + recipes.keys.filter { !builtIns.contains($0) }.sorted()
    }

    /// Adds the presets of a preset file:
    /// `{"format": "tessera.presets", "version": 1, "presets": {"name": recipe, ...}}`,
    /// or a single recipe with a `name`.
    public mutating func load(json: Data, source: String) throws {
        struct File: Decodable {
            var format: String
            var version: Int
            var presets: [String: Recipe]
        }
        // Watermark paths are relative to the preset file.
        let directory = source.lastIndex(of: "/").map { String(source[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? ""
        do {
            if let file = try? JSONDecoder().decode(File.self, from: json), file.format == "tessera.presets" {
                guard file.version == 1 else {
                    throw ImagingError(.invalidRecipe, "version: expected 1, got \(file.version)", file: source)
                }
                for (name, recipe) in file.presets { try add(name, recipe.resolvingPaths(in: directory)) }
                return
            }
            let recipe = try Recipe.decode(json: json).resolvingPaths(in: directory)
            guard let name = recipe.name else {
                throw ImagingError(.invalidRecipe, "a recipe file used as a preset needs a \"name\"", file: source)
            }
            recipes[name] = recipe
        } catch let error as ImagingError {
            throw error.file == nil ? error.naming(source) : error
        } catch let error as DecodingError {
            throw ImagingError(.invalidRecipe, describeDecoding(error, data: json), file: source)
        }
    }

    /// Adds (or replaces) preset `name`, once its recipe validates.
    public mutating func add(_ name: String, _ recipe: Recipe) throws {
        var recipe = recipe
        recipe.name = recipe.name ?? name
        try recipe.validate()
        recipes[name] = recipe
    }

    /// A preset or a "did you mean" error.
    public func recipe(named name: String) throws -> Recipe {
        if let r = recipes[name] { return r }
        let lower = name.lowercased()
        if let match = recipes.keys.first(where: { $0.lowercased() == lower }) { return recipes[match]! }
        throw ImagingError(.invalidRecipe, "unknown preset \"\(name)\" (known: \(names.joined(separator: ", ")))")
    }

    private static func fit(_ name: String, _ w: Int, _ h: Int, quality: Double) -> Recipe {
        Recipe(name: name, operations: [.resize(Resize(width: w, height: h, mode: .fit))],
               output: OutputSettings(format: .jpeg, quality: quality))
    }

    private static func web(_ name: String, _ w: Int, _ h: Int) -> Recipe {
        var output = OutputSettings(format: .jpeg, quality: 0.8)
        output.formats = [FormatChoice(.avif, quality: 0.6), FormatChoice(.webp, quality: 0.75), FormatChoice(.jpeg, quality: 0.8)]
        return Recipe(name: name, operations: [.resize(Resize(width: w, height: h, mode: .fit))], output: output)
    }

    private static func square(_ name: String, _ side: Int, quality: Double) -> Recipe {
        Recipe(name: name, operations: [.resize(Resize(width: side, height: side, mode: .fill))],
               output: OutputSettings(format: .jpeg, quality: quality))
    }
}
