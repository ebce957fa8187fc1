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
        let files: [InputFile]
        let skipped = SkippedFiles(keepPaths: strict)
        do {
            files = try discoverInputs(inputs, outputRoot: output, skipped: skipped)
        } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        try OutputRoot.prepare(output)
        // The same task a pool worker runs for a strip job.
        var options = JobOptions()
        options.incremental = false
        let job = ExecutableJob(kind: .strip, outputs: [], outputRoot: output,
                                strip: StripOptions(keepICC: !dropIcc, keepCopyright: keepCopyright,
                                                    orientation: OrientationHandling(rawValue: orientation)!,
                                                    keepGainMap: !dropGainMap),
                                options: options)
        // Planned before anything is read: no output may replace an input, nor two share a file.
        let collisions: [Int: JobError]
        do { collisions = try OutputClaims.check(job, inputs: files) } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        let clock = Stopwatch()
        var records: [TaskRecord] = []
        // Every file gets a record: one whose metadata cannot be removed (HEIF/AVIF: only a
        // re-encode could) fails with the reason, and the command exits 1.
        for (i, file) in files.enumerated() {
            let record = collisions[i].map { TaskRecord(failing: file, with: $0) } ?? TaskExecutor.run(job, input: file).record
            records.append(record)
            if let e = record.error { warn("error: \(e.message)") }
            if json {
                printJSONLine(record)
            } else if let work = record.strip, let out = record.outputs.first {
                let removed = work.removed.isEmpty ? "nothing" : work.removed.joined(separator: ", ")
                let how = work.transformed ? ", rotated losslessly" : work.orientation != 1 ? ", orientation tag \(work.orientation) kept" : ""
                print("ok   \(Paths.display(file.name)) -> \(out.path) \(formatBytes(record.bytesIn)) -> \(formatBytes(out.bytes)); removed \(removed)\(how)")
            }
        }
        let summary = summarise(records, skipped: skipped, strict: strict, json: json, seconds: clock.seconds, outputRoot: output)
        if json { printJSONLine(summary) } else { summary.printStripSummary() }
        if summary.failed > 0 { throw Exit.someFailed }
    }
}

extension RunSummary {
    /// `tessera strip`'s last line: counts, bytes before and after, failures by reason.
    func printStripSummary() {
        print(String(format: "%@, %d stripped, %d failed in %.2f s; %@ in, %@ out",
                     counted(tasks, "file"), succeeded, failed, elapsedSeconds, formatBytes(bytesIn), formatBytes(bytesOut)))
        if let line = SkippedFiles.line(skippedFiles ?? [:]) { print(line + " (--strict fails them)") }
        if !failures.isEmpty {
            print("failures: " + failures.map { "\($0.code) \($0.count)" }.joined(separator: ", "))
        }
    }
}
