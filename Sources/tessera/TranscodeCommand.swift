import ArgumentParser
import Foundation
import TesseraExecution
import TesseraJobs
import TesseraModel
import TesseraReports
import TesseraTasks

struct Transcode: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transcode",
        abstract: "Recompress JPEGs to JPEG XL without loss: the original JPEG's bytes can be given back exactly.",
        discussion: """
            Each JPEG's DCT coefficients are coded again by libjxl (about a fifth smaller), \
            with the data that reconstructs the JPEG byte for byte (djxl FILE.jxl FILE.jpg). \
            Every output is decoded back and compared with its JPEG before it is written: a \
            file that would not come back whole fails, and nothing is written for it. \
            Metadata (EXIF, XMP, ICC) stays, as it must for the bytes to come back. Outputs \
            are named like the inputs, with .jxl. The same work as a job: kind: transcode.

            \(Exit.help)
            """)

    @Argument(help: "JPEG files or directories.", completion: .file())
    var inputs: [String]

    @Option(name: .shortAndLong, help: "Output directory.", completion: .directory)
    var output: String

    @Option(help: "Output format (jxl: the one lossless recompression there is).", completion: .list(["jxl"]))
    var to: String = "jxl"

    @Flag(help: "One JSON record per file (docs/JSON.md).")
    var json = false

    @Flag(help: "Count files in input folders that are not images Tessera reads as failures (default: listed as skipped).")
    var strict = false

    /// "18.4 % smaller" (or larger).
    static func change(_ before: Int, _ after: Int) -> String {
        guard before > 0 else { return "no bytes in" }
        let pct = 100 * (1 - Double(after) / Double(before))
        return String(format: "%.1f %% %@", abs(pct), pct >= 0 ? "smaller" : "larger")
    }

    func validate() throws {
        guard to == "jxl" else { throw ValidationError("--to must be jxl (JPEG XL), got \(to)") }
    }

    func run() throws {
        var options = JobOptions()
        options.incremental = false
        // The same task a pool worker runs for a transcode job.
        let job = ExecutableJob(kind: .transcode, outputs: [], outputRoot: output, options: options)
        let (records, summary, finish) = try runFileByFile(job, inputs: inputs, strict: strict, json: json) { file, record in
            record.outputs.first.map { out in
                "ok   \(Paths.display(file.name)) -> \(out.path) \(formatBytes(record.bytesIn)) -> \(formatBytes(out.bytes)) "
                    + "(\(Self.change(record.bytesIn, out.bytes)))"
            }
        }
        // The saving counts the files recompressed (a failed file has no output to compare).
        let done = records.filter { $0.status == .succeeded }
        if json { printJSONLine(summary) } else {
            let before = done.reduce(0) { $0 + $1.bytesIn }, after = done.reduce(0) { $0 + $1.bytesOut }
            summary.printFileSummary(done: "recompressed", extra: done.isEmpty ? ""
                                     : "; recompressed \(formatBytes(before)) -> \(formatBytes(after)) (\(Self.change(before, after)))")
        }
        try finish()
        if summary.failed > 0 { throw Exit.someFailed }
    }
}
