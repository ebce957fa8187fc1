import ArgumentParser
import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraModel

struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show format, dimensions, subsampling, orientation, ICC and metadata of images.")

    @Argument(help: "Image files.", completion: .file())
    var files: [String] = []

    @Flag(help: "One JSON object per file.")
    var json = false

    @Flag(help: "List the camera models the installed LibRaw reads raw files of, and its version.")
    var rawCameras = false

    func validate() throws {
        if files.isEmpty && !rawCameras { throw ValidationError("give one or more image files (or --raw-cameras)") }
    }

    func run() throws {
        if rawCameras {
            let version = try RawSupport.version(), cameras = try RawSupport.cameras()
            if json {
                struct Line: Encodable { var libraw: String; var cameras: [String] }
                printJSONLine(Line(libraw: version, cameras: cameras), type: "raw-cameras")
            } else {
                print("LibRaw \(version): \(cameras.count) camera models")
                for c in cameras { print(c) }
            }
            if files.isEmpty { return }
        }
        var failed = false
        for file in files {
            do {
                let bytes = try FileIO.read(file, limit: Limits.default.maxInputBytes)
                let info = try ImageInfo.inspect(bytes)
                if json {
                    struct Line: Encodable { var file: String; var info: ImageInfo }
                    printJSONLine(Line(file: file, info: info), type: "inspect")
                } else {
                    printHuman(file, info)
                }
            } catch {
                failed = true
                let message = (error as? ImagingError)?.naming(file).description ?? "\(error)"
                if json {
                    struct Failure: Encodable { var file: String; var error: String }
                    printJSONLine(Failure(file: file, error: message), type: "error")
                } else {
                    warn("error: \(message)")
                }
            }
        }
        if failed { throw Exit.someFailed }
    }

    /// "APP2 ICC APP2 ICC APP2 ICC" -> "APP2 ICC x3".
    func collapsed(_ parts: [String]) -> String {
        var out: [(String, Int)] = []
        for p in parts {
            if let last = out.last, last.0 == p { out[out.count - 1].1 += 1 } else { out.append((p, 1)) }
        }
        return out.map { $0.1 > 1 ? "\($0.0) x\($0.1)" : $0.0 }.joined(separator: " ")
    }

    func printHuman(_ file: String, _ i: ImageInfo) {
        func yn(_ b: Bool) -> String { b ? "yes" : "no" }
        var lines: [(String, String)] = [
            ("format", i.format.rawValue + (i.codingProcess.map { " (\($0))" } ?? "")),
            ("size", "\(i.width)x\(i.height)" + (i.orientation >= 5 ? " (displays \(i.displayWidth)x\(i.displayHeight))" : "")),
            ("file", formatBytes(i.bytes)),
            ("colour", i.colorSpace + (i.subsampling.map { $0 != i.colorSpace ? " \($0)" : "" } ?? "")
                + ", \(i.bitDepth)-bit" + (i.hasAlpha ? ", alpha" : "")),
        ]
        // What only some formats have: shown where the file has it.
        if let s = i.scan { lines.append(("scan", s)) }
        if let from = i.orientationFrom { lines.append(("orientation", "\(i.orientation) (\(from))")) }
        if i.pages > 1 { lines.append(("pages", (i.pagesAtLeast == true ? "at least " : "") + "\(i.pages)")) }
        if i.frames > 1 || i.durationSeconds != nil {
            lines.append(("frames", "\(i.frames)" + (i.durationSeconds.map { String(format: ", %.2f s", $0) } ?? "")))
        }
        if !i.alternatives.isEmpty { lines.append(("cheaper", i.alternatives.joined(separator: "; "))) }
        if let c = i.capture {
            if !c.lens.isEmpty { lines.append(("lens", c.lens)) }
            if let t = c.takenUnixSeconds {
                let f = DateFormatter()
                f.dateFormat = "yyyy-MM-dd HH:mm:ss"
                f.timeZone = TimeZone(identifier: "UTC")
                lines.append(("taken", f.string(from: Date(timeIntervalSince1970: t)) + " (camera clock)"))
            }
            var exposure: [String] = []
            if let s = c.shutterSeconds { exposure.append(s >= 1 ? String(format: "%.1f s", s) : "1/\(Int((1 / s).rounded())) s") }
            if let a = c.aperture { exposure.append(String(format: "f/%.1f", a)) }
            if let iso = c.iso { exposure.append("ISO \(Int(iso))") }
            if let f = c.focalLength { exposure.append(String(format: "%.0f mm", f)) }
            if !exposure.isEmpty { lines.append(("exposure", exposure.joined(separator: " "))) }
            if let g = c.gps, g.count >= 2 { lines.append(("position", String(format: "%.5f, %.5f", g[0], g[1]))) }
        }
        lines += [
            ("icc", i.iccProfile.map { "\($0) [\(i.iccColorSpace ?? "?")], \(i.iccBytes ?? 0) bytes" } ?? "none"),
            ("exif", i.hasExif ? "yes" + (i.camera.map { " (\($0))" } ?? "") : "no"),
            ("gps", yn(i.hasGPS)),
        ]
        if let r = i.restartInterval { lines.append(("restart", "every \(r) MCUs")) }
        if let g = i.pngGamma { lines.append(("gamma", String(format: "%.5f", g))) }
        if let t = i.exifThumbnailBytes { lines.append(("exif thumb", formatBytes(t))) }
        if let c = i.copyright { lines.append(("copyright", c)) }
        lines.append(("xmp/iptc/com", "\(yn(i.hasXMP))/\(yn(i.hasIPTC))/\(i.comments)"))
        if i.trailingBytes > 0 { lines.append(("after EOI", formatBytes(i.trailingBytes))) }
        if let g = i.gainMap {
            var text = "\(g.width)x\(g.height), \(formatBytes(g.bytes)), headroom \(String(format: "%.2f", g.headroom)) stops"
                + " (\(g.kind): \(g.metadata.isEmpty ? "no metadata" : g.metadata.joined(separator: " + ")))"
            if let p = g.problem { text = "unusable: \(p)" }
            lines.append(("gain map", text))
        }
        lines.append(("structure", collapsed(i.structure)))
        print(file)
        for (k, v) in lines { print("  " + k.padding(toLength: 13, withPad: " ", startingAt: 0) + v) }
    }
}
