import ArgumentParser
import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraModel

/// `tessera tiles SOURCE... -o DIR`: a tiles job without a job file, on a local pool.
struct Tiles: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tiles",
        abstract: "Make tile pyramids (Deep Zoom, IIIF or pyramidal TIFF) of large images with local worker processes.",
        discussion: """
            The same as `tessera run` with a job of kind tiles: each source's pyramid is split into \
            bands over the workers. Deep Zoom writes OUTPUT/NAME.dzi, OUTPUT/NAME_files/ and \
            OUTPUT/NAME.html (a viewer); IIIF writes OUTPUT/NAME/info.json and its tiles; tiff writes \
            OUTPUT/NAME.tif, one tiled JPEG pyramidal TIFF for image servers (its tiles made in \
            OUTPUT/NAME.tif.tiles/ by the workers, a pack a part, then written into the file as they are).

            \(Exit.help)
            """)

    @Argument(help: "JPEG, PNG, TIFF, HEIC, AVIF or WebP sources, or directories of them.", completion: .file())
    var sources: [String]

    @Option(name: .shortAndLong, help: "Output directory.", completion: .directory)
    var output: String

    @Option(help: "deepzoom, iiif (Image API 2), iiif3 or tiff (one pyramidal TIFF).", completion: .list(TileLayout.allCases.map(\.rawValue)))
    var layout: String = "deepzoom"

    @Option(parsing: .unconditional, help: "Tile size (default: 254 for Deep Zoom, 256 for IIIF and TIFF).")
    var tileSize: Int?

    @Option(parsing: .unconditional, help: "Overlap in pixels (default: 1 for Deep Zoom, 0 for IIIF and TIFF).")
    var overlap: Int?

    @Option(help: "Tile format: jpeg or png (for --layout tiff: lossless Deflate tiles).", completion: .list(["jpeg", "png"]))
    var format: String = "jpeg"

    @Option(parsing: .unconditional, help: "JPEG quality, 0...1 (dzsave's Q 75 is 0.75).")
    var quality: Double = 0.75

    @Option(help: "IIIF: the URL prefix of the image ids in info.json (the pyramid's name is appended).")
    var baseUri: String = TileSettings(layout: .iiif).baseURI

    @Option(parsing: .unconditional, help: "Memory one task may use, in MB.")
    var memoryBudget: Int = 256

    @Flag(help: "Do not write the NAME.html viewer (Deep Zoom).")
    var noViewer = false

    @Flag(help: "TIFF: the reduced levels as SubIFDs of the full-size page (vips tiffsave --subifd), not as pages.")
    var subifd = false

    @Option(name: .shortAndLong, parsing: .unconditional, help: "Worker processes (default: the core count).")
    var workers: Int?

    @Option(help: "Write per-task records to FILE.jsonl and FILE.csv.")
    var report: String?

    @Flag(help: "Progress and summary as JSON lines.")
    var json = false

    func settings() throws -> TileSettings {
        guard let l = TileLayout(rawValue: layout) else {
            throw ValidationError("--layout must be one of \(TileLayout.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard let f = ImageFormat(rawValue: format == "jpg" ? "jpeg" : format) else {
            throw ValidationError("--format must be jpeg or png")
        }
        var settings = TileSettings(layout: l, tileSize: tileSize, overlap: overlap)
        settings.format = f
        guard quality.isFinite, quality > 0, quality <= 1 else {
            throw ValidationError("--quality must be 0...1\(Recipe.qualityHint(quality)), got \(quality)")
        }
        settings.quality = max(1, Int((quality * 100).rounded()))
        settings.baseURI = baseUri
        settings.memoryBudgetMB = memoryBudget
        settings.viewer = !noViewer
        settings.subifd = subifd
        do { try settings.validate() } catch let e as ImagingError { throw ValidationError(e.reason) }
        return settings
    }

    func validate() throws {
        _ = try settings()
        guard (workers ?? 1) >= 1 else { throw ValidationError("--workers must be at least 1") }
    }

    func run() throws {
        let settings = try settings()
        let cwd = FileManager.default.currentDirectoryPath
        func absolute(_ p: String) -> String { Location.resolve(p, from: cwd) }
        var spec = JobSpec(name: "tiles", kind: .tiles, inputs: sources.map { .path(absolute($0), patterns: [], recursive: true) },
                           output: absolute(output), tiles: settings)
        spec.options.maxMegapixels = JobOptions.tilesMaxMegapixels
        var args = ["-", "--workers", String(workers ?? ProcessInfo.processInfo.activeProcessorCount)]
        if let report { args += ["--report", report] }
        if json { args.append("--json") }
        try Run.parse(args).execute(spec)
    }
}
