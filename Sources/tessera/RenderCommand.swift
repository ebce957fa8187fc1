import ArgumentParser
import Foundation
import TesseraImaging
import TesseraJobs

struct Render: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Render images to presets or a recipe, in this process.",
        discussion: """
            Inputs are files or directories (searched recursively for .jpg, .jpeg, .png).
            Each input is decoded once for all of its outputs. Outputs are written atomically
            under OUTDIR, named by --template: {dir} (relative to the input directory),
            {stem}, {ext}, {preset}.
            """)

    @Argument(help: "Image files or directories.")
    var inputs: [String]

    @Option(name: .shortAndLong, help: "Preset to render (repeatable). See `tessera presets`.")
    var preset: [String] = []

    @Option(name: .shortAndLong, help: "Recipe file (JSON) to render (repeatable).")
    var recipe: [String] = []

    @Option(help: "Preset file (JSON) adding presets (repeatable).")
    var presets: [String] = []

    @Option(name: .shortAndLong, help: "Output directory.")
    var output: String

    @Option(help: "Output path template under OUTDIR.")
    var template: String?

    @Option(name: .shortAndLong, help: "Threads (default: all cores).")
    var threads: Int = ProcessInfo.processInfo.activeProcessorCount

    @Flag(help: "Print one JSON record per file and a JSON summary.")
    var json = false

    @Flag(help: "Print only failures and the summary.")
    var quiet = false

    @Flag(help: "Render damaged files as far as they decode instead of failing them.")
    var lenient = false

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

    func validate() throws {
        guard !preset.isEmpty || !recipe.isEmpty else {
            throw ValidationError("give at least one --preset or --recipe")
        }
        guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
    }

    func run() throws {
        let catalog: PresetCatalog
        var outputs: [RenderTask.Output] = []
        do {
            catalog = try loadCatalog(presets)
            for name in preset { outputs.append(.init(name: name, recipe: try catalog.recipe(named: name))) }
            for file in recipe {
                var r = try Recipe.decode(json: try readFile(file))
                let name = r.name ?? ((file as NSString).lastPathComponent as NSString).deletingPathExtension
                r.name = name
                outputs.append(.init(name: name, recipe: r))
            }
        } catch let e as ImagingError {
            warn("error: \(e)")
            throw Exit.usage
        }
        let files: [InputFile]
        do { files = try InputDiscovery.expand(inputs) } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        let naming = OutputNaming(root: output,
                                  template: template ?? (outputs.count == 1 ? OutputNaming.single : OutputNaming.perPreset))
        var options = RenderOptions()
        options.limits = limits.limits
        options.strict = !lenient
        options.fastDecode = fastDecode
        options.fastMode = fast
        options.progressiveDC = !noProgressiveDc
        if let r = dctResidual { options.scalePolicy.minimumResidual = r }
        if let s = dctScales {
            options.scalePolicy.preferredEighths = s.split(separator: ",").compactMap { Int($0) }.sorted()
            options.scalePolicy.fallbackEighths = []
        }
        let tasks = files.map { RenderTask(input: $0, outputs: outputs, naming: naming) }
        let clock = ContinuousClock()
        let start = clock.now
        let lock = NSLock()
        nonisolated(unsafe) var records = [TaskRecord?](repeating: nil, count: tasks.count)
        let json = self.json, quiet = self.quiet
        let opts = options
        parallelForEach(tasks.count, threads: threads) { i in
            let record = TaskExecutor.run(tasks[i], options: opts)
            lock.lock()
            records[i] = record
            if json { printJSONLine(record) } else if !quiet || record.status == .failed { Render.printHuman(record) }
            lock.unlock()
        }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let done = records.compactMap { $0 }
        let summary = RenderSummary(done, seconds: seconds)
        if json { printJSONLine(summary) } else { summary.printHuman() }
        if summary.failed > 0 { throw Exit.someFailed }
    }

    static func printHuman(_ r: TaskRecord) {
        guard r.status == .succeeded else {
            print("FAIL \(r.error?.message ?? r.input)")
            return
        }
        let outs = r.outputs.map { o in
            "\(o.name) \(o.width)x\(o.height) \(formatBytes(o.bytes))" + (o.jpegQuality.map { " q\($0)" } ?? "")
        }.joined(separator: ", ")
        let scale = r.scaleEighths.map { $0 == 8 ? "1/1" : "\($0)/8" } ?? "-"
        let t = r.timings
        print("ok   \(r.input) \(r.sourceWidth ?? 0)x\(r.sourceHeight ?? 0) \(formatBytes(r.bytesIn)) -> \(outs)"
              + " | scale \(scale) decode \(ms(t.decode)) resize \(ms(t.resize)) encode \(ms(t.encode)) total \(ms(t.total)) ms")
    }
}

/// Totals over a run.
struct RenderSummary: Encodable {
    var images: Int
    var succeeded: Int
    var failed: Int
    var seconds: Double
    var imagesPerSecond: Double
    var bytesIn: Int
    var bytesOut: Int
    var decodeMs: Double
    var resizeMs: Double
    var encodeMs: Double
    var failures: [String: Int]

    init(_ records: [TaskRecord], seconds: Double) {
        images = records.count
        succeeded = records.filter { $0.status == .succeeded }.count
        failed = records.filter { $0.status == .failed }.count
        self.seconds = seconds
        imagesPerSecond = seconds > 0 ? Double(images) / seconds : 0
        bytesIn = records.reduce(0) { $0 + $1.bytesIn }
        bytesOut = records.reduce(0) { $0 + $1.bytesOut }
        decodeMs = records.reduce(0) { $0 + $1.timings.decode }
        resizeMs = records.reduce(0) { $0 + $1.timings.resize }
        encodeMs = records.reduce(0) { $0 + $1.timings.encode }
        failures = Dictionary(records.compactMap { $0.error?.code }.map { ($0, 1) }, uniquingKeysWith: +)
    }

    func printHuman() {
        print(String(format: "%d images, %d ok, %d failed in %.2f s (%.1f images/s); %@ in, %@ out; decode %.0f ms, resize %.0f ms, encode %.0f ms",
                     images, succeeded, failed, seconds, imagesPerSecond, formatBytes(bytesIn), formatBytes(bytesOut),
                     decodeMs, resizeMs, encodeMs))
        if !failures.isEmpty {
            print("failures: " + failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
    }
}
