import ArgumentParser
import Foundation
import TesseraImaging
import TesseraJobs

struct Strip: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove metadata (EXIF incl. GPS, XMP, IPTC, comments) without re-encoding.",
        discussion: """
            The compressed image data is copied byte for byte. The output still displays
            upright: a minimal EXIF with only the Orientation tag is kept, or with
            --orientation transform the pixels are rotated losslessly when the image is a
            whole number of MCUs. The ICC profile is kept unless --drop-icc.
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

    @Flag(help: "One JSON record per file.")
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
        let options = StripOptions(keepICC: !dropIcc, keepCopyright: keepCopyright,
                                   orientation: OrientationHandling(rawValue: orientation)!)
        var failures = 0
        struct Line: Encodable {
            var type = "strip"
            var version = JSONOutput.version
            var input: String
            var output: String?
            var bytesIn: Int
            var bytesOut: Int?
            var removed: [String]?
            var orientation: Int?
            var transformed: Bool?
            var error: TaskRecord.Failure?
        }
        for file in files {
            var line = Line(input: file.path, bytesIn: 0)
            do {
                let bytes = try FileIO.read(file.path, limit: Limits.default.maxInputBytes)
                line.bytesIn = bytes.count
                let result: StripResult
                do { result = try LosslessStrip.strip(bytes, options: options) } catch let e as ImagingError {
                    throw e.naming(file.path)
                }
                let ext = file.fileExtension.isEmpty ? result.format.fileExtension : file.fileExtension
                let name = "\(file.stem).\(ext)"
                let relative = file.relativeDirectory.isEmpty ? name : file.relativeDirectory + "/" + name
                let path = try OutputNaming.confine(relative, under: output)
                try FileIO.writeAtomically(result.bytes, to: path)
                line.output = path
                line.bytesOut = result.bytes.count
                line.removed = result.removed
                line.orientation = result.orientation
                line.transformed = result.transformed
            } catch var e as JobError {
                failures += 1
                e.file = e.file ?? file.path
                line.error = .init(code: e.code.rawValue, message: e.description)
            } catch let e as ImagingError {
                failures += 1
                line.error = .init(code: e.code.rawValue, message: e.description)
            } catch {
                failures += 1
                line.error = .init(code: "internal", message: "\(file.path): \(error)")
            }
            if let e = line.error { warn("error: \(e.message)") }
            if json {
                printJSONLine(line)
            } else if line.error == nil {
                let removed = line.removed!.isEmpty ? "nothing" : line.removed!.joined(separator: ", ")
                let how = line.transformed! ? ", rotated losslessly" : line.orientation! != 1 ? ", orientation tag \(line.orientation!) kept" : ""
                print("ok   \(file.path) -> \(line.output!) \(formatBytes(line.bytesIn)) -> \(formatBytes(line.bytesOut!)); removed \(removed)\(how)")
            }
        }
        if failures > 0 { throw Exit.someFailed }
    }
}
