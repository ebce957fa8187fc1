import Foundation
import TesseraTasks
import Yams
import TesseraModel

/// Job files: YAML, read with Yams' node API so every error names the file, the
/// line and the field.
///
/// ```yaml
/// name: widget thumbnails
/// kind: thumbnail            # thumbnail | strip | recompress | transcode | tiles | noop
/// priority: 0
/// inputs:
///   - photos/                # a directory, searched recursively
///   - {path: scans/, glob: ["*.png"], recursive: false}
///   - {manifest: list.txt}   # one path per line
/// output: out/widget         # the output root
/// outputs:
///   - preset: widget
///     path: "{dir}/{stem}.{ext}"
/// ```
public enum JobFile {
    /// Reads and validates a job file; relative paths resolve against its directory.
    /// Largest job file read (inputs belong in directories or manifests, not in the file).
    public static let maxBytes = 1 << 20
    /// Most YAML nodes a job file may expand to, aliases followed: a few kB of anchors and
    /// aliases can otherwise stand for billions of nodes (the "billion laughs").
    public static let maxNodes = 100_000

    public static func load(path: String, catalog: PresetCatalog = .builtIn) throws -> JobSpec {
        let data: [UInt8]
        do { data = try FileIO.read(path, limit: maxBytes) } catch let e as JobError where e.code == .inputTooLarge {
            throw JobError(.invalidJob, "the job file is over \(maxBytes >> 20) MB; list inputs in a manifest instead", file: path)
        } catch {
            throw JobError(.invalidJob, "cannot read the job file (\((error as? JobError)?.reason ?? "\(error)"))", file: path)
        }
        let base = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try parse(yaml: String(decoding: data, as: UTF8.self), file: path, baseDirectory: base, catalog: catalog)
    }

    public static func parse(yaml: String, file: String, baseDirectory: String,
                             catalog: PresetCatalog = .builtIn) throws -> JobSpec {
        var p = Parser(file: file, base: baseDirectory, catalog: catalog)
        let root: Node
        do {
            guard yaml.utf8.count <= maxBytes else {
                throw JobError(.invalidJob, "the job file is over \(maxBytes >> 20) MB; list inputs in a manifest instead", file: file)
            }
            guard let node = try Yams.compose(yaml: yaml) else { throw p.error(nil, "", "the file is empty") }
            var budget = maxNodes
            guard Self.fits(node, budget: &budget) else {
                throw JobError(.invalidJob, "the YAML expands to more than \(maxNodes) nodes through its aliases (&anchor/*alias): refused",
                               file: file)
            }
            root = node
        } catch let e as JobError {
            throw e
        } catch {
            throw JobError(.invalidJob, "not valid YAML: \(error)", file: file)
        }
        return try p.job(root)
    }

    /// Counts nodes as a reader would see them (aliases expanded) and stops at the budget.
    static func fits(_ node: Node, budget: inout Int) -> Bool {
        budget -= 1
        if budget < 0 { return false }
        switch node {
        case .scalar: return true
        case .sequence(let s):
            for child in s where !fits(child, budget: &budget) { return false }
            return true
        case .mapping(let m):
            for (k, v) in m where !fits(k, budget: &budget) || !fits(v, budget: &budget) { return false }
            return true
        case .alias: return true
        }
    }

    /// Validation with positions.
    struct Parser {
        let file: String
        let base: String
        var catalog: PresetCatalog

        init(file: String, base: String, catalog: PresetCatalog) {
            self.file = file
            self.base = base
            self.catalog = catalog
        }

        /// The node at a dotted field path (`outputs[1].path`), if the file has it.
        static func node(at field: String, in root: Node) -> Node? {
            var node: Node? = root
            for part in field.split(separator: ".") {
                var name = Substring(part), index: Int?
                if let open = part.firstIndex(of: "["), let close = part.firstIndex(of: "]") {
                    name = part[..<open]
                    index = Int(part[part.index(after: open)..<close])
                }
                node = node?.mapping?[String(name)]
                if let index { node = node?.sequence.flatMap { index < $0.count ? $0[index] : nil } }
            }
            return node
        }

        func error(_ node: Node?, _ field: String, _ reason: String) -> JobError {
            let where_ = node?.mark.map { "\(file):\($0.line)" } ?? file
            return JobError(.invalidJob, field.isEmpty ? reason : "\(field): \(reason)", file: where_)
        }

        func mapping(_ node: Node, _ field: String, allowed: [String]) throws -> Node.Mapping {
            guard let m = node.mapping else { throw error(node, field, "expected a mapping") }
            // Of several unknown fields, the first by name (as JSON jobs name it).
            for (k, _) in m.sorted(by: { ($0.key.string ?? "") < ($1.key.string ?? "") }) {
                guard let key = k.string, allowed.contains(key) else {
                    let name = k.string ?? "?"
                    throw error(k, field.isEmpty ? name : "\(field).\(name)", JobFields.unknown(name, allowed: allowed))
                }
            }
            return m
        }

        func string(_ node: Node, _ field: String) throws -> String {
            guard let s = node.scalar?.string, !s.isEmpty else { throw error(node, field, "expected a string") }
            return s
        }

        func int(_ node: Node, _ field: String) throws -> Int {
            guard let v = node.int else { throw error(node, field, "expected an integer, got \"\(node.scalar?.string ?? "?")\"") }
            return v
        }

        func double(_ node: Node, _ field: String) throws -> Double {
            guard let v = node.float ?? node.int.map(Double.init) else {
                throw error(node, field, "expected a number, got \"\(node.scalar?.string ?? "?")\"")
            }
            return v
        }

        func bool(_ node: Node, _ field: String) throws -> Bool {
            guard let v = node.bool else { throw error(node, field, "expected true or false") }
            return v
        }

        func absolute(_ path: String) -> String { Location.resolve(path, from: base) }

        mutating func job(_ root: Node) throws -> JobSpec {
            let m = try mapping(root, "", allowed: JobFields.job)
            guard let nameNode = m["name"] else { throw error(root, "name", "missing (every job needs a name)") }
            let name = try string(nameNode, "name")
            var kind = JobKind.thumbnail
            if let k = m["kind"] {
                let s = try string(k, "kind")
                guard let v = JobKind(rawValue: s) else {
                    throw error(k, "kind", "expected one of \(JobKind.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(s)\"")
                }
                kind = v
            }
            guard let inputsNode = m["inputs"] else { throw error(root, "inputs", "missing") }
            guard let seq = inputsNode.sequence, !seq.isEmpty else {
                throw error(inputsNode, "inputs", "expected a non-empty list")
            }
            var inputs: [InputSource] = []
            for (i, n) in seq.enumerated() { inputs.append(try input(n, "inputs[\(i)]")) }
            guard let outNode = m["output"] else { throw error(root, "output", "missing (the output root directory)") }
            let output = absolute(try string(outNode, "output"))
            if let presets = m["presets"] {
                guard let list = presets.sequence else { throw error(presets, "presets", "expected a list of preset files") }
                for (i, n) in list.enumerated() {
                    let path = absolute(try string(n, "presets[\(i)]"))
                    guard let data = FileManager.default.contents(atPath: path) else {
                        throw error(n, "presets[\(i)]", "cannot read \(path)")
                    }
                    do { try catalog.load(json: data, source: path) } catch let e as ImagingError {
                        throw error(n, "presets[\(i)]", e.description)
                    }
                }
            }
            var outputs: [OutputSpec] = []
            if let outs = m["outputs"] {
                guard let list = outs.sequence else { throw error(outs, "outputs", "expected a list") }
                for (i, n) in list.enumerated() { outputs.append(try outputSpec(n, "outputs[\(i)]")) }
            }
            switch kind {
            case .thumbnail, .recompress:
                guard !outputs.isEmpty else {
                    throw error(m["outputs"] ?? root, "outputs", "a \(kind.rawValue) job needs at least one output (a preset or recipe)")
                }
            case .strip, .transcode, .noop, .tiles:
                break
            }
            guard m["tiles"] == nil || kind == .tiles else {
                throw error(m["tiles"], "tiles", "only a tiles job (kind: tiles) takes tile settings")
            }
            var names = Set<String>()
            for (i, o) in outputs.enumerated() where !names.insert(o.name).inserted {
                throw error(m["outputs"]?.sequence?[i], "outputs[\(i)].name", "\"\(o.name)\" is used twice")
            }
            var spec = JobSpec(name: name, kind: kind, inputs: inputs, output: output, outputs: outputs)
            if let p = m["priority"] { spec.priority = try int(p, "priority") }
            if let s = m["strip"] { spec.strip = try stripOptions(s) }
            if kind == .tiles { spec.tiles = try tileSettings(m["tiles"]) }
            if let o = m["options"] { spec.options = try options(o) }
            if let st = m["storage"] { spec.storage = try storage(st) }
            if kind == .tiles && m["options"]?.mapping?["maxMegapixels"] == nil { spec.options.applyTilesDefault() }
            // The one validation JSON jobs pass too; the line is that of the field, when found.
            do { try spec.validate() } catch let e as JobError {
                let field = e.reason.split(separator: ":").first.map(String.init) ?? ""
                throw error(Self.node(at: field, in: root) ?? root, "", e.reason)
            }
            return spec
        }

        func input(_ n: Node, _ field: String) throws -> InputSource {
            if n.scalar != nil { return .path(absolute(try string(n, field)), patterns: [], recursive: true) }
            let m = try mapping(n, field, allowed: JobFields.input)
            if let man = m["manifest"] {
                guard m["path"] == nil else { throw error(n, field, "give either path or manifest, not both") }
                let path = absolute(try string(man, "\(field).manifest"))
                guard Location.isRemote(path) || FileManager.default.fileExists(atPath: path) else {
                    throw error(man, "\(field).manifest", "no such file \(path)")
                }
                return .manifest(path)
            }
            guard let pathNode = m["path"] else { throw error(n, field, "needs a path or a manifest") }
            var patterns: [String] = []
            if let g = m["glob"] {
                if let list = g.sequence {
                    for (i, p) in list.enumerated() { patterns.append(try string(p, "\(field).glob[\(i)]")) }
                } else {
                    patterns = [try string(g, "\(field).glob")]
                }
            }
            let recursive = try m["recursive"].map { try bool($0, "\(field).recursive") } ?? true
            return .path(absolute(try string(pathNode, "\(field).path")), patterns: patterns, recursive: recursive)
        }

        func outputSpec(_ n: Node, _ field: String) throws -> OutputSpec {
            let m = try mapping(n, field, allowed: JobFields.output)
            var name = try m["name"].map { try string($0, "\(field).name") }
            var recipe: Recipe
            switch (m["preset"], m["recipe"]) {
            case (let p?, nil):
                let preset = try string(p, "\(field).preset")
                do { recipe = try catalog.recipe(named: preset) } catch let e as ImagingError {
                    throw error(p, "\(field).preset", e.reason)
                }
                name = name ?? recipe.name ?? preset
            case (nil, let r?):
                recipe = try inlineRecipe(r, "\(field).recipe")
                name = name ?? recipe.name
            case (nil, nil):
                throw error(n, field, "needs a preset or a recipe")
            default:
                throw error(n, field, "give either a preset or a recipe, not both")
            }
            guard let outputName = name else { throw error(n, "\(field).name", "an inline recipe needs a name") }
            if let f = m["formats"] {
                guard let list = f.sequence, !list.isEmpty else { throw error(f, "\(field).formats", "expected a list of formats") }
                recipe.output.formats = try list.enumerated().map { k, item in
                    let sub = "\(field).formats[\(k)]"
                    if item.scalar != nil {
                        let s = try string(item, sub)
                        guard let format = OutputFormat(rawValue: s == "jpg" ? "jpeg" : s) else {
                            throw error(item, sub, "expected jpeg, png, webp, avif or gif, got \"\(s)\"")
                        }
                        return FormatChoice(format)
                    }
                    let fm = try mapping(item, sub, allowed: ["format", "quality", "maxBytes"])
                    guard let fnode = fm["format"] else { throw error(item, "\(sub).format", "missing") }
                    let s = try string(fnode, "\(sub).format")
                    guard let format = OutputFormat(rawValue: s == "jpg" ? "jpeg" : s) else {
                        throw error(fnode, "\(sub).format", "expected jpeg, png, webp, avif or gif, got \"\(s)\"")
                    }
                    return FormatChoice(format, quality: try fm["quality"].map { try double($0, "\(sub).quality") },
                                        maxBytes: try fm["maxBytes"].map { try int($0, "\(sub).maxBytes") })
                }
                do { try recipe.validate() } catch let e as ImagingError { throw error(f, "\(field).formats", e.reason) }
            }
            // `animated: true`: an animated source (GIF, WebP, video) stays animated in WebP.
            if let a = m["animated"] { recipe.output.animated = try bool(a, "\(field).animated") }
            // `gainMap: keep | drop | apply`: what becomes of an Ultra HDR source's gain map.
            if let g = m["gainMap"] {
                let s = try string(g, "\(field).gainMap")
                guard let mode = GainMapMode(rawValue: s) else { throw error(g, "\(field).gainMap", "expected keep, drop or apply, got \"\(s)\"") }
                recipe.output.gainMap = mode
            }
            var template: String?
            if let t = m["path"] {
                let s = try string(t, "\(field).path")
                try checkTemplate(s, t, "\(field).path")
                template = s
            }
            var scales: [Double]?
            if let sc = m["scales"] {
                guard let list = sc.sequence, !list.isEmpty else { throw error(sc, "\(field).scales", "expected a list such as [1, 2, 3]") }
                scales = try list.enumerated().map { try double($0.element, "\(field).scales[\($0.offset)]") }
            }
            return OutputSpec(name: outputName, recipe: recipe, path: template,
                              cacheControl: try m["cacheControl"].map { try string($0, "\(field).cacheControl") }, scales: scales)
        }

        /// A recipe given inline (YAML mapping) or as a JSON file path.
        func inlineRecipe(_ n: Node, _ field: String) throws -> Recipe {
            let data: Data
            var origin = base  // relative watermark paths: against the job file's directory
            if n.scalar != nil {
                let path = absolute(try string(n, field))
                guard let d = FileManager.default.contents(atPath: path) else { throw error(n, field, "cannot read \(path)") }
                data = d
                origin = Paths.directory(of: path)
            } else {
                data = try JSONSerialization.data(withJSONObject: jsonObject(n))
            }
            do { return try Recipe.decode(json: data).resolvingPaths(in: origin) } catch let e as ImagingError {
                throw error(n, field, e.reason.hasPrefix("recipe: ") ? String(e.reason.dropFirst(8)) : e.reason)
            }
        }

        func checkTemplate(_ s: String, _ n: Node, _ field: String) throws {
            guard !s.hasPrefix("/") else { throw error(n, field, "must be relative to the output root, got \"\(s)\"") }
            if let problem = OutputNaming.templateProblem(s) { throw error(n, field, problem) }
            guard !s.split(separator: "/").contains("..") else { throw error(n, field, "must not contain \"..\"") }
            guard s.contains("{stem}") else { throw error(n, field, "must contain {stem}, or every input writes the same file") }
        }

        func stripOptions(_ n: Node) throws -> StripOptions {
            let m = try mapping(n, "strip", allowed: JobFields.strip)
            var s = StripOptions()
            if let v = m["keepICC"] { s.keepICC = try bool(v, "strip.keepICC") }
            if let v = m["keepCopyright"] { s.keepCopyright = try bool(v, "strip.keepCopyright") }
            if let v = m["keepGainMap"] { s.keepGainMap = try bool(v, "strip.keepGainMap") }
            if let v = m["orientation"] {
                let o = try string(v, "strip.orientation")
                guard let h = OrientationHandling(rawValue: o) else { throw error(v, "strip.orientation", "expected tag or transform") }
                s.orientation = h
            }
            return s
        }

        /// The `tiles:` section (every field optional: `vips dzsave`'s defaults).
        func tileSettings(_ n: Node?) throws -> TileSettings {
            guard let n else { return TileSettings() }
            let m = try mapping(n, "tiles", allowed: JobFields.tiles)
            var layout = TileLayout.deepzoom
            if let v = m["layout"] {
                let s = try string(v, "tiles.layout")
                guard let l = TileLayout(rawValue: s) else {
                    throw error(v, "tiles.layout", "expected one of \(TileLayout.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(s)\"")
                }
                layout = l
            }
            var t = TileSettings(layout: layout, tileSize: try m["tileSize"].map { try int($0, "tiles.tileSize") },
                                 overlap: try m["overlap"].map { try int($0, "tiles.overlap") })
            if let v = m["format"] {
                let s = try string(v, "tiles.format")
                guard let f = ImageFormat(rawValue: s == "jpg" ? "jpeg" : s) else {
                    throw error(v, "tiles.format", "expected jpeg or png, got \"\(s)\"")
                }
                t.format = f
            }
            if let v = m["quality"] {
                // 0...1 like every quality in Tessera (dzsave's Q 75 is 0.75).
                let q = try double(v, "tiles.quality")
                guard q.isFinite, q > 0, q <= 1 else {
                    throw error(v, "tiles.quality", "expected 0...1\(Recipe.qualityHint(q)), got \(q)")
                }
                t.quality = max(1, Int((q * 100).rounded()))
            }
            if let v = m["background"] {
                guard let list = v.sequence, list.count == 3 else { throw error(v, "tiles.background", "expected [r, g, b]") }
                t.background = try list.enumerated().map { i, c in
                    let x = try int(c, "tiles.background[\(i)]")
                    guard (0...255).contains(x) else { throw error(c, "tiles.background[\(i)]", "expected 0...255") }
                    return UInt8(x)
                }
            }
            if let v = m["baseURI"] { t.baseURI = try string(v, "tiles.baseURI") }
            if let v = m["viewer"] { t.viewer = try bool(v, "tiles.viewer") }
            if let v = m["memoryBudgetMB"] { t.memoryBudgetMB = try int(v, "tiles.memoryBudgetMB") }
            if let v = m["subifd"] { t.subifd = try bool(v, "tiles.subifd") }
            do { try t.validate() } catch let e as ImagingError {
                throw error(n, "", e.reason)
            }
            return t
        }

        func options(_ n: Node) throws -> JobOptions {
            let m = try mapping(n, "options", allowed: JobFields.options)
            var o = JobOptions()
            if let v = m["maxMegapixels"] { o.maxMegapixels = try double(v, "options.maxMegapixels") }
            if let v = m["maxInputMB"] { o.maxInputMB = try int(v, "options.maxInputMB") }
            if let v = m["strict"] { o.strict = try bool(v, "options.strict") }
            if let v = m["maxAttempts"] { o.maxAttempts = try int(v, "options.maxAttempts") }
            if let v = m["timeout"] { o.timeout = try double(v, "options.timeout") }
            if let v = m["inline"] { o.inline = try bool(v, "options.inline") }
            if let v = m["incremental"] { o.incremental = try bool(v, "options.incremental") }
            if let v = m["fast"] { o.fast = try bool(v, "options.fast") }
            if let v = m["heifThumbnails"] { o.heifThumbnails = try bool(v, "options.heifThumbnails") }
            if let v = m["page"] { o.page = try int(v, "options.page") }
            if let v = m["frame"] { o.frame = try int(v, "options.frame") }
            if let v = m["at"] {
                switch VideoTime.parse(v.string ?? "") {
                case .success(let t): o.at = t
                case .failure(let e): throw error(v, "options.at", e.description)
                }
            }
            if let v = m["frames"] { o.frames = try int(v, "options.frames") }
            if let v = m["fps"] { o.fps = try double(v, "options.fps") }
            if let v = m["maxFrames"] { o.maxFrames = try int(v, "options.maxFrames") }
            if let v = m["maxDuration"] { o.maxDuration = try double(v, "options.maxDuration") }
            if let v = m["hdr"] {
                let s = try string(v, "options.hdr")
                guard let mode = HDRMode(rawValue: s) else { throw error(v, "options.hdr", "expected tone-map or keep, got \"\(s)\"") }
                o.hdr = mode
            }
            if let v = m["raw"] {
                let s = try string(v, "options.raw")
                guard let mode = RawDecode(rawValue: s) else { throw error(v, "options.raw", "expected auto, preview, half or full, got \"\(s)\"") }
                o.raw = mode
            }
            if let v = m["placeholders"] { o.placeholders = try bool(v, "options.placeholders") }
            if let v = m["fingerprints"] { o.fingerprints = try bool(v, "options.fingerprints") }
            if let v = m["overwrite"] { o.overwrite = try bool(v, "options.overwrite") }
            if let v = m["verify"] { o.verify = try bool(v, "options.verify") }
            if let p = o.problem() {
                throw error(m[String(p.field.dropFirst("options.".count))], p.field, p.message)
            }
            return o
        }

        func storage(_ n: Node) throws -> StorageSettings {
            let m = try mapping(n, "storage", allowed: JobFields.storage)
            var s = StorageSettings()
            s.endpoint = try m["endpoint"].map { try string($0, "storage.endpoint") }
            s.region = try m["region"].map { try string($0, "storage.region") }
            if let a = m["addressing"] {
                let text = try string(a, "storage.addressing")
                guard let v = StorageSettings.Addressing(rawValue: text) else {
                    throw error(a, "storage.addressing", "expected path or virtual, got \"\(text)\"")
                }
                s.addressing = v
            }
            s.credentials = try m["credentials"].map { try string($0, "storage.credentials") }
            s.cacheControl = try m["cacheControl"].map { try string($0, "storage.cacheControl") }
            s.multipartMB = try m["multipartMB"].map { try int($0, "storage.multipartMB") }
            if let p = s.problem() { throw error(m[String(p.field.dropFirst("storage.".count))], p.field, p.message) }
            return s
        }

        /// A YAML node as a JSON-compatible object (scalars typed as YAML would type them).
        func jsonObject(_ n: Node) throws -> Any {
            switch n {
            case .scalar(let s):
                if s.style == .plain {
                    if let i = n.int { return i }
                    if let d = n.float { return d }
                    if let b = n.bool { return b }
                    if n.null != nil { return NSNull() }
                }
                return s.string
            case .mapping(let m):
                var d: [String: Any] = [:]
                for (k, v) in m { d[try string(k, "key")] = try jsonObject(v) }
                return d
            case .sequence(let seq):
                return try seq.map { try jsonObject($0) }
            case .alias:
                throw error(n, "", "YAML aliases are not supported in recipes")
            }
        }
    }
}
