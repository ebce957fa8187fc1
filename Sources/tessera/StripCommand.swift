import ArgumentParser
import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks

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

    @Argument(help: "Image files or directories.")
    var inputs: [String]

    @Option(name: .shortAndLong, help: "Output directory.")
    var output: String

    @Option(help: "tag (keep only the Orientation tag) or transform (rotate losslessly).")
    var orientation: String = "tag"

    @Flag(help: "Drop the ICC profile too.")
    var dropIcc = false

    @Flag(help: "Keep the EXIF Copyright tag.")
    var keepCopyright = false

    @Flag(help: "One JSON record per file (docs/JSON.md: a record with `strip`).")
    var json = false

    func validate() throws {
        guard OrientationHandling(rawValue: orientation) != nil else {
            throw ValidationError("--orientation must be tag or transform")
        }
    }

    func run() throws {
        var files: [InputFile]
        do {
            files = try InputDiscovery.expand(inputs)
            // From directories, only what strips losslessly (a HEIF/AVIF named on its own gets the reason).
            let named = Set(inputs)
            let heif: Set<String> = ["heic", "heif", "hif", "avif"]
            let skipped = files.filter { !named.contains($0.path) && heif.contains($0.fileExtension) }
            if !skipped.isEmpty {
                warn("note: skipped \(skipped.count) HEIF/AVIF file\(skipped.count == 1 ? "" : "s") (lossless stripping handles JPEG, PNG and WebP; renders never copy metadata)")
                files.removeAll { f in skipped.contains { $0.path == f.path } }
            }
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
                                                    orientation: OrientationHandling(rawValue: orientation)!),
                                options: options)
        var failures = 0
        for file in files {
            let record = TaskExecutor.run(job, input: file).record
            if let e = record.error {
                failures += 1
                warn("error: \(e.message)")
            }
            if json {
                printJSONLine(record)
            } else if let work = record.strip, let out = record.outputs.first {
                let removed = work.removed.isEmpty ? "nothing" : work.removed.joined(separator: ", ")
                let how = work.transformed ? ", rotated losslessly" : work.orientation != 1 ? ", orientation tag \(work.orientation) kept" : ""
                print("ok   \(file.path) -> \(out.path) \(formatBytes(record.bytesIn)) -> \(formatBytes(out.bytes)); removed \(removed)\(how)")
            }
        }
        if failures > 0 { throw Exit.someFailed }
    }
}
