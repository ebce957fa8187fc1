import ArgumentParser
import Foundation
import TesseraExecution
import TesseraJobs
import TesseraModel
import TesseraReports
import TesseraTasks

struct Transcode: ParsableCommand {
    static let configuration = CommandConfiguration(
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
        let files: [InputFile]
        let skipped = SkippedFiles(keepPaths: strict)
        do {
            files = try discoverInputs(inputs, outputRoot: output, skipped: skipped)
        } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        try OutputRoot.prepare(output)
        var options = JobOptions()
        options.incremental = false
        // The same task a pool worker runs for a transcode job.
        let job = ExecutableJob(kind: .transcode, outputs: [], outputRoot: output, options: options)
        let collisions: [Int: JobError]
        do { collisions = try OutputClaims.check(job, inputs: files) } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        let clock = Stopwatch()
        var records: [TaskRecord] = []
        for (i, file) in files.enumerated() {
            let record = collisions[i].map { TaskRecord(failing: file, with: $0) } ?? TaskExecutor.run(job, input: file).record
            records.append(record)
            if let e = record.error { warn("error: \(e.message)") }
            if json {
                printJSONLine(record)
            } else if let out = record.outputs.first {
                print("ok   \(Paths.display(file.name)) -> \(out.path) \(formatBytes(record.bytesIn)) -> \(formatBytes(out.bytes)) "
                      + "(\(Self.change(record.bytesIn, out.bytes)))")
            }
        }
        let summary = summarise(records, skipped: skipped, strict: strict, json: json, seconds: clock.seconds, outputRoot: output)
        // The saving counts the files recompressed (a failed file has no output to compare).
        let done = records.filter { $0.status == .succeeded }
        if json { printJSONLine(summary) } else {
            summary.printTranscodeSummary(recompressedIn: done.reduce(0) { $0 + $1.bytesIn }, out: done.reduce(0) { $0 + $1.bytesOut })
        }
        if summary.failed > 0 { throw Exit.someFailed }
    }
}

extension RunSummary {
    /// `tessera transcode`'s last line: counts, bytes before and after and the saving.
    func printTranscodeSummary(recompressedIn: Int, out: Int) {
        print(String(format: "%@, %d recompressed, %d failed in %.2f s; %@ in, %@ out",
                     counted(tasks, "file"), succeeded, failed, elapsedSeconds, formatBytes(bytesIn), formatBytes(bytesOut))
              + (succeeded > 0 ? "; recompressed \(formatBytes(recompressedIn)) -> \(formatBytes(out)) (\(Transcode.change(recompressedIn, out)))" : ""))
        if let line = SkippedFiles.line(skippedFiles ?? [:]) { print(line + " (--strict fails them)") }
        if !failures.isEmpty {
            print("failures: " + failures.map { "\($0.code) \($0.count)" }.joined(separator: ", "))
        }
    }
}
