import ArgumentParser
import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraModel
import TesseraReports

struct Render: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Render images to a size, presets or recipes, in this process.",
        discussion: """
            Inputs are files or directories (searched recursively for JPEG, PNG, WebP, \
            HEIC/HEIF, AVIF, TIFF, GIF, JPEG XL and videos by extension, any case), or - for standard input. Each input \
            is decoded once for all of its outputs. Outputs are written \
            atomically under OUTDIR (or to standard output with -o -), named by --template: \
            {dir} (relative to the input directory), {stem}, {ext}, {srcext} (the input's own \
            extension), {preset}. An output that would replace an input is refused before \
            anything is decoded; inputs whose outputs would be one file fail, naming each other.

            Examples:
              tessera render photos/ -s 256 -o thumbs/              # fit in 256x256, source format, q 0.8
              tessera render a.jpg -s 1280x720 --fit fill -q 0.7 -o out/
              tessera render photos/ -p thumbnail -p favicon -o out/
              tessera render - -s 64 --format png -o - < a.jpg > a.png
              tessera render phone/ -s 1280x720 --format avif,webp,jpeg -o web/   # HEIC in, three formats out

            \(Exit.help)
            """)

    @Argument(help: "Image files or directories, or - for standard input.", completion: .file())
    var inputs: [String]

    @Option(name: .shortAndLong, help: "Box to fit in: WxH, or N for NxN (like vipsthumbnail -s).")
    var size: String?

    @Option(help: "fit (inside the box) or fill (cover the box, centre-crop). Default: fit.", completion: .list(["fit", "fill"]))
    var fit: String?

    @Option(name: .shortAndLong, parsing: .unconditional, help: "Quality 0...1 (0.8 unless a preset says otherwise).")
    var quality: Double?

    @Option(help: "Output format: jpeg, png, webp, avif, jxl, gif, original or auto (default: original; a GIF, HEIC, TIFF or video source: JPEG, or PNG with transparency); a list (avif,webp,jpeg) writes one file per format from one decode.",
            completion: .list(OutputFormat.allCases.map(\.rawValue)))
    var format: String?

    @Flag(help: "HEIF/AVIF: always decode the primary image, never a thumbnail item (by default a thumbnail that covers the output is used, as vips does).")
    var primary = false

    @Option(help: "Multi-page TIFF: the page to render, from 0.")
    var page: Int = 0

    @Option(help: "Animated GIF: the frame to render, from 0, as a browser shows it.")
    var frame: Int = 0

    @Flag(help: "Animated GIF or WebP: keep it animated — every frame resized, delays and loops kept — as an animated WebP (--format webp, auto or original) or GIF (--format gif; still formats get the first frame). A video: an animated preview of --frames frames sampled across it.")
    var animated = false

    @Option(help: "An Ultra HDR or iPhone HEIC source's gain map: keep (resized with the image, written as an Ultra HDR JPEG), drop (SDR only) or apply (the HDR rendition as a 10-bit PQ AVIF).")
    var gainMap: GainMapMode = .keep

    @Option(help: "An HDR source (PQ or HLG AVIF or HEIF): tone-map (to SDR) or keep (JPEG outputs become Ultra HDR JPEGs, AVIF outputs the HDR image in PQ).")
    var hdr: HDRMode = .toneMap

    @Option(help: "Camera raw files: auto (the embedded preview when it covers the output, else half size when that leaves the resampler its margin, else a full AHD demosaic), preview, half or full.")
    var raw: RawDecode = .auto

    @Flag(help: "Each record carries placeholders made from the pixels already decoded: ThumbHash (base64) and BlurHash.")
    var placeholders = false

    @Flag(help: "Each record carries fingerprints for finding near-duplicates: pHash and dHash (64 bits, hex) and the average and dominant colour.")
    var fingerprints = false

    @Option(parsing: .unconditional, help: "Video: when the poster frame is taken, in seconds (1.5, 1.5s), seconds before the end (-2), or a percentage of its length (0% to 100%); a time past the end takes the last frame, with a warning. Default: the first frame past the first second that is neither near-black nor flat.")
    var at: String?

    @Option(help: "Video with --animated: the preview's frames, sampled evenly across the video.")
    var frames: Int = 12

    @Option(help: "Video with --animated: the preview's frames per second.")
    var fps: Double = 4

    @Option(help: "Animated sources and videos: refuse more frames than this (0: no limit).")
    var maxFrames: Int = 0

    @Option(help: "Animated sources and videos: refuse a longer running time, in seconds (0: no limit).")
    var maxDuration: Double = 0

    @Option(parsing: .unconditional, help: "Largest output file in bytes: the highest quality that fits (binary search), or the task fails.")
    var maxBytes: Int?

    @Flag(help: "Progressive JPEG output.")
    var progressive = false

    @Flag(help: "Lossless WebP output.")
    var lossless = false

    @Option(parsing: .unconditional, help: "Encoder effort 0...9: more is smaller and slower (JPEG 0...3, WebP method 0...6, AVIF speed 9 - effort, JPEG XL effort 1...9). Default: JPEG 2, WebP 4, AVIF 2, JPEG XL 5.")
    var effort: Int?

    @Option(help: "Metadata to keep, comma-separated: icc, copyright, resolution (the source's dots per inch, in JPEG and PNG outputs) (default: none; everything else is always removed).",
            completion: .list(KeptMetadata.allCases.map(\.rawValue)))
    var keep: String?

    @Flag(help: "Remove all metadata (the default; overrides a preset's keep).")
    var strip = false

    @Option(help: "With --fit fill or --crop W:H: the part kept — centre, north, south, east, west, northeast, northwest, southeast, southwest, or attention (where detail, colour and skin tones are).",
            completion: .list(Gravity.allCases.map(\.rawValue)))
    var gravity: String?

    @Option(help: "Crop before resizing: an aspect ratio W:H (placed by --gravity), or X,Y,W,H in pixels (fractions of the image when all are at most 1 and one has a decimal point).")
    var crop: String?

    @Flag(help: "Remove uniform borders (the top-left pixel's colour, within 10 of 255) before resizing.")
    var trim = false

    @Option(parsing: .unconditional, help: "Sharpen after resizing: unsharp mask of this sigma (e.g. 0.8), amount 0.6, threshold 2.")
    var sharpen: Double?

    @Option(parsing: .unconditional, help: "Blur after resizing: Gaussian of this sigma, in output pixels.")
    var blur: Double?

    @Option(name: .shortAndLong, help: "Preset to render (repeatable). See `tessera presets`.", completion: .list(PresetCatalog.builtIn.names))
    var preset: [String] = []

    @Option(name: .shortAndLong, help: "Recipe file (JSON) to render (repeatable).", completion: .file(extensions: ["json"]))
    var recipe: [String] = []

    @Option(help: "Preset file (JSON) adding presets (repeatable).", completion: .file(extensions: ["json"]))
    var presets: [String] = []

    @Option(name: .shortAndLong, help: "Output directory, or - for standard output (one input, one output).", completion: .directory)
    var output: String

    @Option(help: "Output path template under OUTDIR.")
    var template: String?

    @Option(name: .shortAndLong, parsing: .unconditional, help: "Threads (default: the core count).")
    var threads: Int?

    @Flag(help: "Print one JSON record per file and a JSON summary (docs/JSON.md).")
    var json = false

    @Flag(help: "Print only failures and the summary.")
    var quiet = false

    @Flag(help: "Render damaged files (cut short, corrupt) as far as they decode instead of failing them, whatever their format: the rows that decoded, the rest gray, and the record's warnings say so (truncated: 212 of 480 rows).")
    var lenient = false

    @Flag(help: "Count files in input folders that are not images Tessera reads (.tif, .gif, .txt…) as failures (default: listed in the summary as skipped).")
    var strict = false

    @Flag(help: "Fast delivery: EXIF thumbnails for small outputs, DC-only progressive decodes (records say which).")
    var fast = false

    @Option(help: ArgumentHelp("Decode a JPEG at a DCT scale leaving at least this resize factor for the resampler.",
                               visibility: .hidden))
    var dctResidual: Double?

    @Option(help: ArgumentHelp("DCT scales tried, in eighths (comma-separated), before full size.", visibility: .hidden))
    var dctScales: String?

    @Flag(help: ArgumentHelp("Use libjpeg's fast IDCT and plain upsampling.", visibility: .hidden))
    var fastDecode = false

    @Flag(help: ArgumentHelp("Decode progressive JPEGs fully even at 1/8 scale.", visibility: .hidden))
    var noProgressiveDc = false

    @OptionGroup var limits: LimitOptions

    /// The outputs to render, from presets, recipe files and the size/quality/format options.
    func outputs() throws -> [OutputSpec] {
        var outputs: [OutputSpec] = []
        let catalog: PresetCatalog
        do { catalog = try loadCatalog(presets) } catch let e as ImagingError { throw ValidationError(e.description) }
        for name in preset {
            guard let r = try? catalog.recipe(named: name) else {
                throw ValidationError("-p \(name): unknown preset\(suggestion(name, catalog.names)); known: "
                                      + catalog.names.joined(separator: ", "))
            }
            outputs.append(.init(name: name, recipe: r))
        }
        for file in recipe {
            var r: Recipe
            do { r = try Recipe.decode(json: try readFile(file)).resolvingPaths(in: Paths.directory(of: file)) } catch let e as ImagingError {
                throw ValidationError(e.naming(file).description)
            }
            let name = r.name ?? ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            r.name = name
            outputs.append(.init(name: name, recipe: r))
        }
        let encoding = maxBytes != nil || progressive || lossless || effort != nil || animated
        let adHoc = size != nil || fit != nil || quality != nil || format != nil || keep != nil || strip || sharpen != nil || blur != nil || gravity != nil
            || crop != nil || trim || encoding
        if outputs.isEmpty {
            // Without a size, the image keeps its size: a re-encode (--format webp, -q 0.6, --max-bytes).
            guard adHoc else {
                throw ValidationError("give a size (-s 256), a preset (-p thumbnail), a recipe (-r FILE), or an output setting"
                                      + " to re-encode at the same size (--format webp, -q 0.7, --max-bytes 200000)")
            }
            var r = Recipe(name: "render", operations: [], output: OutputSettings(format: .original, quality: 0.8))
            r.name = nil
            outputs.append(.init(name: "render", recipe: r))
        }
        guard adHoc else { return outputs }
        // The options apply to every output: a preset with -q 0.7 is that preset at 0.7.
        let box = try size.map(Render.parseSize)
        let mode: ContentMode? = try fit.map {
            guard let m = ContentMode(rawValue: $0) else {
                throw ValidationError("--fit must be fit or fill, got \"\($0)\"" + suggestion($0, ["fit", "fill"]))
            }
            return m
        }
        let formatList: [OutputFormat]? = try format.map { text in
            let names = OutputFormat.allCases.map(\.rawValue)
            return try text.split(separator: ",").map { item in
                let name = item.trimmingCharacters(in: .whitespaces).lowercased()
                guard let f = OutputFormat(rawValue: name == "jpg" ? "jpeg" : name) else {
                    throw ValidationError("--format must be one of \(names.joined(separator: ", ")), got \"\(name)\""
                                          + suggestion(name, names))
                }
                return f
            }
        }
        let outputFormat = formatList?.count == 1 ? formatList?.first : nil
        var kept: [KeptMetadata]?
        if strip { kept = [] }
        if let keep {
            kept = try keep.split(separator: ",").map { item in
                let name = item.trimmingCharacters(in: .whitespaces)
                guard let k = KeptMetadata(rawValue: name) else {
                    let names = KeptMetadata.allCases.map(\.rawValue)
                    throw ValidationError("--keep takes \(names.joined(separator: ", ")), got \"\(name)\"" + suggestion(name, names))
                }
                return k
            }
        }
        let gravityValue: Gravity? = try gravity.map { text in
            let names = Gravity.allCases.map(\.rawValue)
            guard let g = Gravity(rawValue: text == "center" ? "centre" : text) else {
                throw ValidationError("--gravity must be one of \(names.joined(separator: ", ")), got \"\(text)\"" + suggestion(text, names))
            }
            return g
        }
        let cropValue = try crop.map(Render.parseCrop)
        if let q = quality, !(q.isFinite && (0...1).contains(q)) {
            throw ValidationError("--quality must be 0...1\(Recipe.qualityHint(q)), got \(q)")
        }
        // The recipe's own ranges, named by the flag that set them.
        if let s = sharpen, !(s.isFinite && (0.3...10).contains(s)) { throw ValidationError("--sharpen must be 0.3...10, got \(s)") }
        if let s = blur, !(s.isFinite && (0.3...100).contains(s)) { throw ValidationError("--blur must be 0.3...100, got \(s)") }
        if let m = maxBytes, m <= 0 { throw ValidationError("--max-bytes must be a positive byte count, got \(m)") }
        if let e = effort, !(0...9).contains(e) { throw ValidationError("--effort must be 0...9, got \(e)") }
        return try outputs.map { o in
            var r = o.recipe
            if let box {
                var resize = r.resize ?? Resize(width: nil, height: nil)
                resize.width = box.width
                resize.height = box.height
                if let mode { resize.mode = mode }
                r.operations.removeAll { if case .resize = $0 { return true } else { return false } }
                r.operations.insert(.resize(resize), at: 0)
            } else if let mode {
                guard var resize = r.resize else { throw ValidationError("--fit needs a size (-s) or a preset that resizes") }
                resize.mode = mode
                r.operations = r.operations.map { if case .resize = $0 { return .resize(resize) } else { return $0 } }
            }
            if var c = cropValue {
                if c.aspect != nil, let gravityValue { c.gravity = gravityValue }
                r.operations.insert(.crop(c), at: 0)
            }
            if trim { r.operations.insert(.trim(Trim()), at: 0) }
            if let gravityValue, cropValue?.aspect == nil {
                guard var resize = r.resize, resize.mode == .fill else {
                    throw ValidationError("--gravity places a fill crop or an aspect crop: add --fit fill or --crop W:H")
                }
                resize.gravity = gravityValue
                r.operations = r.operations.map { if case .resize = $0 { return .resize(resize) } else { return $0 } }
            }
            if let quality { r.output.quality = quality }
            if let outputFormat {
                r.output.format = outputFormat
                r.output.formats = []
            } else if let formatList {
                r.output.formats = formatList.map { FormatChoice($0) }
            }
            if let kept { r.output.keep = kept }
            if let maxBytes { r.output.maxBytes = maxBytes }
            if progressive { r.output.progressive = true }
            if lossless { r.output.lossless = true }
            if animated { r.output.animated = true }
            if let effort {
                r.output.webpMethod = min(6, effort)
                r.output.avifSpeed = 9 - effort
                r.output.jxlEffort = max(1, effort)
                r.output.jpegEffort = min(3, effort)
            }
            if let blur { r.operations.append(.blur(sigma: blur)) }
            if let sharpen { r.operations.append(.sharpen(UnsharpMask(sigma: sharpen))) }
            do { try r.validate() } catch let e as ImagingError { throw ValidationError(e.reason) }
            return .init(name: o.name, recipe: r)
        }
    }

    /// `16:9` (an aspect ratio), or `X,Y,W,H` (pixels; fractions when all are ≤ 1 and one
    /// has a decimal point).
    static func parseCrop(_ text: String) throws -> Crop {
        if text.contains(":") {
            guard let ratio = Crop.parseAspect(text) else {
                throw ValidationError("--crop W:H needs two positive numbers, got \"\(text)\"")
            }
            return Crop(aspect: ratio)
        }
        let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 4, let x = parts[0], let y = parts[1], let w = parts[2], let h = parts[3] else {
            throw ValidationError("--crop takes W:H or X,Y,W,H, got \"\(text)\"")
        }
        let fractions = [x, y, w, h].allSatisfy { $0 <= 1 } && text.contains(".")
        return Crop(x: x, y: y, width: w, height: h, units: fractions ? .fractions : .pixels)
    }

    /// `256` (a 256×256 box), `640x480`, `640x` (width only) or `x480` (height only).
    static func parseSize(_ text: String) throws -> (width: Int?, height: Int?) {
        func number(_ s: Substring) throws -> Int? {
            if s.isEmpty { return nil }
            guard let n = Int(s), (1...65_500).contains(n) else {
                throw ValidationError("--size: \"\(s)\" is not a pixel count 1...65500 (write WxH, N, Wx or xH)")
            }
            return n
        }
        let parts = text.lowercased().split(separator: "x", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 1 {
            let n = try number(parts[0])
            return (n, n)
        }
        let box = (try number(parts[0]), try number(parts[1]))
        guard box.0 != nil || box.1 != nil else { throw ValidationError("--size: write WxH, N, Wx or xH, got \"\(text)\"") }
        return box
    }

    /// Only what needs no other option: argument-parser reports an unknown option after
    /// `validate()`, so the checks that combine options (`outputs()`) run in `run()`, after it.
    func validate() throws {
        guard (threads ?? 1) >= 1 else { throw ValidationError("--threads must be at least 1") }
        if output == "-" && (inputs.count != 1 || inputs[0] != "-" && FileManager.default.fileExists(atPath: inputs[0] + "/")) {
            throw ValidationError("-o - writes one image to standard output: give one input file (or -)")
        }
    }

    func run() throws {
        let outputs = try self.outputs()
        let toStdout = output == "-"
        if toStdout && outputs.count != 1 {
            throw ValidationError("-o - writes one image to standard output: give one output, not \(outputs.count)")
        }
        // The same job a pool worker runs, with this command's options; its template checked
        // before anything is read or made.
        if let template, let problem = OutputNaming.templateProblem(template) {
            throw ValidationError("--template \(problem)")
        }
        let files: [InputFile]
        var stdinBytes: [UInt8]?
        let skipped = SkippedFiles(keepPaths: strict)
        if inputs == ["-"] {
            stdinBytes = try Render.readStandardInput(limit: limits.limits.maxInputBytes)
            files = [InputFile(path: "stdin", root: "")]  // named stdin.EXT under OUTDIR
        } else {
            do { files = try discoverInputs(inputs, outputRoot: toStdout ? nil : output, skipped: skipped) } catch {
                warn("error: \(error)")
                throw Exit.usage
            }
        }
        if !toStdout { try OutputRoot.prepare(output) }  // a bucket: credentials proved by listing one key
        let pathTemplate = template ?? (outputs.count == 1 ? OutputNaming.single : OutputNaming.perPreset)
        var jobOptions = JobOptions()
        jobOptions.strict = !lenient
        jobOptions.incremental = false
        jobOptions.raw = raw
        jobOptions.placeholders = placeholders
        jobOptions.fingerprints = fingerprints
        let job = ExecutableJob(kind: .thumbnail,
                                outputs: outputs.map { OutputSpec(name: $0.name, recipe: $0.recipe, path: pathTemplate) },
                                outputRoot: toStdout ? "." : output, options: jobOptions)
        // Planned before anything is decoded: no output may replace an input, nor two share a file.
        let collisions: [Int: JobError]
        do { collisions = toStdout ? [:] : try OutputClaims.check(job, inputs: files) } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        var options = RenderOptions()
        options.limits = limits.limits
        options.strict = !lenient
        options.fastDecode = fastDecode
        options.fastMode = fast
        options.progressiveDC = !noProgressiveDc
        options.heifThumbnails = !primary
        guard page >= 0 else { throw ValidationError("--page counts from 0, got \(page)") }
        options.page = page
        guard frame >= 0 else { throw ValidationError("--frame counts from 0, got \(frame)") }
        options.frame = frame
        options.gainMap = gainMap
        options.hdr = hdr
        options.raw = raw
        options.placeholders = placeholders
        options.fingerprints = fingerprints
        if let at {
            switch VideoTime.parse(at) {
            case .success(let t): options.posterTime = t
            case .failure(let e): throw ValidationError("--at: \(e)")
            }
        }
        for (field, value) in [("frames", Double(frames)), ("fps", fps), ("maxFrames", Double(maxFrames)), ("maxDuration", maxDuration)] {
            if let problem = JobOptions.rangeProblem(field, value) { throw ValidationError("--\(field): \(problem)") }
        }
        options.previewFrames = frames
        options.previewFPS = fps
        options.maxFrames = maxFrames
        options.maxDuration = maxDuration
        if let r = dctResidual { options.scalePolicy.minimumResidual = r }
        if let s = dctScales {
            options.scalePolicy.preferredEighths = s.split(separator: ",").compactMap { Int($0) }.sorted()
            options.scalePolicy.fallbackEighths = []
        }
        let clock = Stopwatch()
        let lock = NSLock()
        nonisolated(unsafe) var records = [TaskRecord?](repeating: nil, count: files.count)
        let json = self.json, quiet = self.quiet || toStdout
        let opts = options
        let bytes = stdinBytes
        let stop = FileByFileStop()
        parallelForEach(files.count, threads: threads ?? ProcessInfo.processInfo.activeProcessorCount,
                        stop: { stop.signal != nil }) { i in
            if let collision = collisions[i] {
                lock.lock()
                records[i] = TaskRecord(failing: files[i], with: collision)
                warn("error: \(collision)")
                if json { printJSONLine(records[i]!) }
                lock.unlock()
                return
            }
            let outcome = TaskExecutor.run(job, input: files[i], inlineInput: bytes, returnInline: toStdout, renderOptions: opts)
            let record = outcome.record
            if toStdout, let out = outcome.inlineOutputs.first { FileHandle.standardOutput.write(Data(out.bytes)) }
            lock.lock()
            records[i] = record
            if record.status == .failed { warn("error: \(record.error?.message ?? record.input)") }
            for w in record.warnings ?? [] where !json { warn("warning: \(Paths.display(record.input)): \(w)") }
            if json && !toStdout { printJSONLine(record) } else if !quiet && record.status != .failed { Render.printHuman(record) }
            lock.unlock()
        }
        let seconds = clock.seconds
        let summary = summarise(records.compactMap { $0 }, skipped: skipped, strict: strict, json: json && !toStdout,
                                seconds: seconds, outputRoot: toStdout ? nil : output)
        if toStdout {
            try stop.exitIfStopped(done: summary.tasks, of: files.count, json: false)
            if summary.failed > 0 { throw Exit.someFailed }
            return
        }
        if json { printJSONLine(summary) } else { summary.printRenderSummary() }
        try stop.exitIfStopped(done: summary.tasks, of: files.count, json: json)
        if summary.failed > 0 { throw Exit.someFailed }
    }

    /// All of standard input, up to `limit` bytes (a larger input is a usage error).
    static func readStandardInput(limit: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[..<n]
            if bytes.count > limit {
                warn("error: -: standard input is larger than --max-input-mb (\(limit >> 20) MB) [input-too-large]")
                throw Exit.usage
            }
        }
        return bytes
    }

    static func printHuman(_ r: TaskRecord) {
        guard r.status == .succeeded else { return }
        // Each output with its format (several formats of one output share its name) and what
        // became of the source's gain map when it was not what was asked.
        let outs = r.outputs.map { o in
            var text = "\(o.name) \(o.width)x\(o.height) \(o.format?.rawValue ?? "") \(formatBytes(o.bytes))" + (o.quality.map { " q\($0)" } ?? "")
            if let g = o.gainMap, g.action == "dropped" { text += " (gain map dropped: \(g.reason ?? "not kept"))" }
            return text
        }.joined(separator: ", ")
        let scale = r.scaleEighths.map { $0 == 8 ? "1/1" : "\($0)/8" } ?? "-"
        let t = r.timings
        var line = "ok   \(Paths.display(r.input)) \(r.sourceWidth ?? 0)x\(r.sourceHeight ?? 0) \(formatBytes(r.bytesIn)) -> \(outs)"
        line += " | scale \(scale)" + (t.fetch > 0 ? " fetch \(ms(t.fetch))" : "")
        line += " decode \(ms(t.decode)) resize \(ms(t.resize)) encode \(ms(t.encode))"
        line += (t.store > 0 ? " store \(ms(t.store))" : "") + " total \(ms(t.total)) ms"
        print(line)
    }
}

extension RunSummary {
    /// `tessera render`'s last line: counts, rate, bytes, time per stage.
    func printRenderSummary() {
        let ms = stageMilliseconds
        print(String(format: "%@, %d ok, %d failed in %.2f s (%.1f images/s); %@ in, %@ out; decode %.0f ms, resize %.0f ms, encode %.0f ms",
                     counted(tasks, "image"), succeeded, failed, elapsedSeconds, tasksPerSecond, formatBytes(bytesIn), formatBytes(bytesOut),
                     ms[Stage.decode.rawValue] ?? 0, ms[Stage.resize.rawValue] ?? 0, ms[Stage.encode.rawValue] ?? 0))
        if let line = SkippedFiles.line(skippedFiles ?? [:]) { print(line + " (--strict fails them)") }
        if !failures.isEmpty {
            print("failures: " + failures.map { "\($0.code) \($0.count)" }.joined(separator: ", "))
        }
    }
}

extension GainMapMode: ExpressibleByArgument {}
extension HDRMode: ExpressibleByArgument {}
extension RawDecode: ExpressibleByArgument {}
