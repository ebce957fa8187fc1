import ArgumentParser
import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraModel
import TesseraReports

struct Strip: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strip",
        abstract: "Remove metadata (EXIF incl. GPS, XMP, IPTC, comments) without re-encoding.",
        discussion: """
            The compressed image data is copied byte for byte. The output still displays \
            upright: a minimal EXIF with only the Orientation tag is kept, or with \
            --orientation transform the pixels are rotated losslessly when the image is a \
            whole number of MCUs. The ICC profile is kept unless --drop-icc.

            \(Exit.help)
            """)

    @Argument(help: "Image files or directories.", completion: .file())
    var inputs: [String]

    @Option(name: .shortAndLong, help: "Output directory.", completion: .directory)
    var output: String

    @Option(help: "tag (keep only the Orientation tag) or transform (rotate losslessly).", completion: .list(["tag", "transform"]))
    var orientation: String = "tag"

    @Flag(help: "Drop the ICC profile too.")
    var dropIcc = false

    @Flag(help: "Keep the EXIF Copyright tag.")
    var keepCopyright = false

    @Flag(help: "Drop an Ultra HDR JPEG's gain map (kept by default: it is image data, the HDR rendition, not metadata).")
    var dropGainMap = false

    @Flag(help: "One JSON record per file (docs/JSON.md: a record with `strip`).")
    var json = false

    @Flag(help: "Count files in input folders that are not images Tessera reads as failures (default: listed as skipped).")
    var strict = false

    func validate() throws {
        guard OrientationHandling(rawValue: orientation) != nil else {
            throw ValidationError("--orientation must be tag or transform")
        }
    }

    func run() throws {
        // The same task a pool worker runs for a strip job.
        var options = JobOptions()
        options.incremental = false
        let job = ExecutableJob(kind: .strip, outputs: [], outputRoot: output,
                                strip: StripOptions(keepICC: !dropIcc, keepCopyright: keepCopyright,
                                                    orientation: OrientationHandling(rawValue: orientation)!,
                                                    keepGainMap: !dropGainMap),
                                options: options)
        // Every file gets a record: one whose metadata cannot be removed (HEIF/AVIF: only a
        // re-encode could) fails with the reason, and the command exits 1.
        let (_, summary, finish) = try runFileByFile(job, inputs: inputs, strict: strict, json: json) { file, record in
            guard let work = record.strip, let out = record.outputs.first else { return nil }
            let removed = work.removed.isEmpty ? "nothing" : work.removed.joined(separator: ", ")
            let how = work.transformed ? ", rotated losslessly" : work.orientation != 1 ? ", orientation tag \(work.orientation) kept" : ""
            return "ok   \(Paths.display(file.name)) -> \(out.path) \(formatBytes(record.bytesIn)) -> \(formatBytes(out.bytes)); removed \(removed)\(how)"
        }
        if json { printJSONLine(summary) } else { summary.printFileSummary(done: "stripped") }
        try finish()
        if summary.failed > 0 { throw Exit.someFailed }
    }
}

extension RunSummary {
    /// `tessera strip`'s and `transcode`'s last lines: counts (`done`: what a succeeded file
    /// was), bytes before and after (then `extra`), skipped files, failures by reason.
    func printFileSummary(done: String, extra: String = "") {
        print(String(format: "%@, %d %@, %d failed in %.2f s; %@ in, %@ out",
                     counted(tasks, "file"), succeeded, done, failed, elapsedSeconds, formatBytes(bytesIn), formatBytes(bytesOut)) + extra)
        if let line = SkippedFiles.line(skippedFiles ?? [:]) { print(line + " (--strict fails them)") }
        if !failures.isEmpty {
            print("failures: " + failures.map { "\($0.code) \($0.count)" }.joined(separator: ", "))
        }
    }
}
