import Foundation
import TesseraImaging
import TesseraTestSupport
import XCTest
import TesseraModel

/// Runs the built `tessera` binary: exit codes, output files, printed records.
final class CLITests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "tessera-cli-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/in/sub", withIntermediateDirectories: true)
        let image = PixelBuffer(width: 400, height: 300, layout: .rgb)
        image.fill([90, 120, 150])
        let good = try Codec.encodeJPEG(image, quality: 85, exif: Exif.build(orientation: 6, gps: (1, 2)))
        try Data(good).write(to: URL(fileURLWithPath: dir + "/in/a.jpg"))
        try Data(good).write(to: URL(fileURLWithPath: dir + "/in/sub/b.jpg"))
        try Data(good.prefix(good.count / 2)).write(to: URL(fileURLWithPath: dir + "/in/sub/broken.jpg"))
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func testRenderWritesGoodFilesAndReportsBadOnes() throws {
        let r = try tessera(["render", dir + "/in", "-p", "thumbnail", "-p", "favicon", "-o", dir + "/out", "-t", "2"])
        XCTAssertEqual(r.status, 1, "some files failed: exit 1\n\(r.stdout)\(r.stderr)")
        XCTAssertTrue(r.stderr.contains("error: \(dir)/in/sub/broken.jpg: truncated JPEG"), r.stderr)
        XCTAssertTrue(r.stderr.hasSuffix("[truncated]\n"), r.stderr)
        XCTAssertTrue(r.stdout.contains("3 images, 2 ok, 1 failed"), r.stdout)
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir + "/out").sorted()
        XCTAssertEqual(files, ["a-favicon.jpg", "a-thumbnail.jpg", "sub", "sub/b-favicon.jpg", "sub/b-thumbnail.jpg"])
        let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/out/a-thumbnail.jpg"))))
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 300, height: 400), "orientation 6 applied")
        XCTAssertFalse(info.hasGPS)
    }

    func testRenderJSONLines() throws {
        let r = try tessera(["render", dir + "/in/a.jpg", "-p", "favicon", "-o", dir + "/out", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.stdout.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(lines.count, 2)
        XCTAssertEqual(lines[0]?["status"] as? String, "succeeded")
        XCTAssertEqual(lines[1]?["succeeded"] as? Int, 1)
        for line in lines { XCTAssertEqual(line?["version"] as? Int, 1) }
        XCTAssertEqual(lines[0]?["type"] as? String, "record")
        XCTAssertEqual(lines[1]?["type"] as? String, "summary")
        XCTAssertNotNil((lines[0]?["timingsMilliseconds"] as? [String: Any])?["decode"])
        XCTAssertNotNil(lines[1]?["elapsedSeconds"] as? Double)
    }

    /// `-s`, `--fit`, `-q`, `--format`, `--keep` without a recipe file, as vipsthumbnail and sharp take them.
    func testRenderTakesSizeQualityAndFormat() throws {
        let fit = try tessera(["render", dir + "/in/a.jpg", "-s", "100", "-o", dir + "/fit"])
        XCTAssertEqual(fit.status, 0, fit.stderr)
        var info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/fit/a.jpg"))))
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 75, height: 100), "upright, inside 100x100")
        XCTAssertFalse(info.hasGPS)
        let fill = try tessera(["render", dir + "/in/a.jpg", "-s", "64x32", "--fit", "fill", "--format", "png", "-o", dir + "/fill"])
        XCTAssertEqual(fill.status, 0, fill.stderr)
        info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/fill/a.png"))))
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 64, height: 32))
        let width = try tessera(["render", dir + "/in/a.jpg", "-s", "60x", "-q", "0.3", "-o", dir + "/w", "--json"])
        XCTAssertEqual(width.status, 0, width.stderr)
        XCTAssertTrue(width.stdout.contains("\"jpegQuality\":30"), width.stdout)
        info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/w/a.jpg"))))
        XCTAssertEqual(info.width, 60)
        // A preset with -q: that preset at that quality.
        let preset = try tessera(["render", dir + "/in/a.jpg", "-p", "favicon", "-q", "0.5", "-o", dir + "/p", "--json"])
        XCTAssertTrue(preset.stdout.contains("\"jpegQuality\":50"), preset.stdout)
    }

    /// A vips/sharp user's `-q 85` is refused with the hint, not clamped to 1.0.
    /// `--crop`, `--gravity attention`, `--trim` without a recipe file; bad values refused with the reason.
    func testCropTrimAndGravityOptions() throws {
        let aspect = try tessera(["render", dir + "/in/a.jpg", "--crop", "16:9", "--gravity", "attention", "-o", dir + "/wide"])
        XCTAssertEqual(aspect.status, 0, aspect.stderr)
        var info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/wide/a.jpg"))))
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 300, height: 169), "16:9 of the upright 300x400")
        let rect = try tessera(["render", dir + "/in/a.jpg", "--crop", "10,20,100,50", "--trim", "-o", dir + "/rect"])
        XCTAssertEqual(rect.status, 0, rect.stderr)
        info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/rect/a.jpg"))))
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 100, height: 50), "a uniform image: trim keeps it whole")
        for (args, message) in [(["--crop", "wide"], "--crop takes W:H or X,Y,W,H"), (["--crop", "0:9"], "--crop W:H needs two positive numbers"),
                                (["--crop", "0,0,0,5"], "operations[0].width: expected 1...65500 pixels"),
                                (["-s", "50", "--gravity", "attention"], "--gravity places a fill crop or an aspect crop"),
                                (["--crop", "1:1", "--gravity", "middle"], "--gravity must be one of")] {
            let r = try tessera(["render", dir + "/in/a.jpg"] + args + ["-o", dir + "/bad"])
            XCTAssertEqual(r.status, 2, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
    }

    /// Numbers out of range and files that are not JSON: exit 2 with the field, the range and the value — never a trap.
    func testNumbersAndFilesAreCheckedAtTheBoundary() throws {
        try Data(#"{"operations":[{"op":"resize","width":1.5}]}"#.utf8).write(to: URL(fileURLWithPath: dir + "/frac.json"))
        try Data("name: x\ninputs: [a]\n".utf8).write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let a = dir + "/in/a.jpg"
        for (args, message) in [(["render", a, "-s", "64", "--max-megapixels", "1e300"], "--max-megapixels: expected 0.01...4295 megapixels, got 1e+300"),
                                (["render", a, "-s", "64", "--max-megapixels", "nan"], "got nan"),
                                (["render", a, "-s", "64", "--max-input-mb", "99999999999999"], "--max-input-mb: expected 1...65536 MB"),
                                (["tiles", a, "--memory-budget", "99999999999999"], "tiles.memoryBudgetMB: expected 32...1048576"),
                                (["worker", "--connect", "tcp://127.0.0.1:1", "--concurrency", "0"], "--concurrency must be 1...256, got 0"),
                                (["worker", "--connect", "tcp://127.0.0.1:1", "--memory-limit", "99999999999999"], "--memory-limit must be 64...16777216"),
                                (["run", dir + "/job.yaml", "--log-level", "loud"], "--log-level must be one of"),
                                (["render", a, "-r", dir + "/frac.json"], "operations[0].width: expected a whole number, got 1.5"),
                                (["render", a, "-r", dir + "/job.yaml"], "not JSON (it looks like YAML"),
                                (["render", a, "-s", "64", "-q", "1.5"], "--quality must be 0...1, got 1.5"),
                                (["render", a, "-s", "64", "-q", "-1"], "--quality must be 0...1, got -1.0"),
                                (["render", a, "-s", "64", "--sharpen", "-2"], "--sharpen must be 0.3...10, got -2.0"),
                                (["run", dir + "/job.yaml", "-w", "-3"], "--workers must be 1...256, got -3"),
                                (["render", a, "-s", "64", "--template", "{foo}.jpg"], "--template unknown token {foo}"),
                                (["render", a, "-s", "64", "--template", "{stem}\n.{ext}"], "--template contains a control character")] {
            let r = try tessera(args + ["-o", dir + "/bad"].filter { _ in args[0] != "worker" && args[0] != "run" })
            XCTAssertEqual(r.status, 2, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
    }

    func testQualityAboveOneIsRefusedWithAHint() throws {
        let r = try tessera(["render", dir + "/in/a.jpg", "-s", "64", "-q", "85", "-o", dir + "/out"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.hasPrefix("error: --quality must be 0...1"), r.stderr)
        XCTAssertTrue(r.stderr.contains("0.85"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out/a.jpg"))
        try #"{"format": "tessera.recipe", "version": 1, "output": {"quality": 90}}"#
            .write(toFile: dir + "/r.json", atomically: true, encoding: .utf8)
        let recipe = try tessera(["render", dir + "/in/a.jpg", "-r", dir + "/r.json", "-o", dir + "/out"])
        XCTAssertEqual(recipe.status, 2)
        XCTAssertTrue(recipe.stderr.contains("\(dir)/r.json: recipe: output.quality: expected 0...1"), recipe.stderr)
        XCTAssertTrue(recipe.stderr.contains("0.9"), recipe.stderr)
    }

    /// `-` reads standard input and, as the output, writes standard output.
    func testStandardInputAndOutput() throws {
        let r = try tessera(["render", "-", "-s", "40", "--format", "png", "-o", "-"],
                            input: try Data(contentsOf: URL(fileURLWithPath: dir + "/in/a.jpg")))
        XCTAssertEqual(r.status, 0, r.stderr)
        let info = try ImageInfo.inspect([UInt8](r.output))
        XCTAssertEqual(info.format, .png)
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 30, height: 40))
        let two = try tessera(["render", dir + "/in", "-s", "40", "-o", "-"])
        XCTAssertEqual(two.status, 2, "-o - takes one input")
    }

    /// An output root that cannot be made is a usage error before any decoding.
    func testUnwritableOutputRootIsAUsageError() throws {
        try "x".write(toFile: dir + "/file", atomically: true, encoding: .utf8)
        for root in [dir + "/file", dir + "/file/below", "/proc/tessera-out"] {
            let r = try tessera(["render", dir + "/in", "-s", "64", "-o", root])
            XCTAssertEqual(r.status, 2, root + ": " + r.stderr)
            XCTAssertTrue(r.stderr.hasPrefix("error: "), r.stderr)
            XCTAssertTrue(r.stderr.contains("[output-root]"), r.stderr)
            XCTAssertEqual(r.stdout, "", "nothing decoded")
        }
    }

    /// One error style: `error: ...`, nearest valid value suggested, no placeholders.
    func testErrorsHaveOneStyle() throws {
        let cases: [([String], String)] = [
            (["render", dir + "/in", "-s", "64", "--fit", "fil", "-o", dir + "/o"], "(did you mean \"fit\"?)"),
            (["render", dir + "/in", "-p", "thumbnial", "-o", dir + "/o"], "(did you mean \"thumbnail\"?)"),
            (["render", dir + "/in", "-s", "64", "--format", "jepg", "-o", dir + "/o"], "(did you mean \"jpeg\"?)"),
            (["render", dir + "/in", "-s", "64", "--keep", "icd", "-o", dir + "/o"], "(did you mean \"icc\"?)"),
            (["render", dir + "/in", "-s", "6x4x", "-o", dir + "/o"], "--size"),
            (["render", dir + "/in", "-o", dir + "/o"], "give a size"),
            (["frobnicate"], "frobnicate"),
        ]
        for (args, expected) in cases {
            let r = try tessera(args)
            XCTAssertEqual(r.status, 2, args.joined(separator: " "))
            XCTAssertTrue(r.stderr.hasPrefix("error: "), r.stderr)
            XCTAssertTrue(r.stderr.contains(expected), r.stderr)
            XCTAssertFalse(r.stderr.contains("Error:"), r.stderr)
            XCTAssertFalse(r.stderr.contains("<input>"), r.stderr)
        }
    }

    /// No option says its default twice, and the root help lists the exit codes.
    func testHelpSaysEachDefaultOnce() throws {
        let root = try tessera(["--help"])
        XCTAssertTrue(root.stdout.contains("Exit codes: 0"), root.stdout)
        for command in ["render", "run", "tiles", "strip", "inspect", "presets", "submit", "status", "wait", "cancel",
                        "results", "coordinator", "worker", "keygen"] {
            let help = try tessera([command, "--help"])
            XCTAssertEqual(help.status, 0, command)
            // Options wrap over lines: join each option's help before counting.
            let text = help.stdout.replacingOccurrences(of: "\n                          ", with: " ")
            for line in text.split(separator: "\n") {
                XCTAssertLessThanOrEqual(line.components(separatedBy: "default").count - 1, 1, "\(command): \(line)")
            }
        }
    }

    func testStripRemovesGPSAndKeepsOrientation() throws {
        let r = try tessera(["strip", dir + "/in/a.jpg", "-o", dir + "/clean"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/clean/a.jpg"))))
        XCTAssertFalse(info.hasGPS)
        XCTAssertEqual(info.orientation, 6)
    }

    /// `transcode`: JPEGs to JPEG XL that give back their bytes; the broken one fails alone.
    /// The JPEG XL renders and is written; the same work as a job on the pool.
    func testTranscodeToJPEGXLAndBack() throws {
        let r = try tessera(["transcode", dir + "/in", "-o", dir + "/jxl"])
        XCTAssertEqual(r.status, 1, "the broken JPEG fails: exit 1\n\(r.stdout)\(r.stderr)")
        XCTAssertTrue(r.stdout.contains("3 files, 2 recompressed, 1 failed"), r.stdout)
        XCTAssertTrue(r.stdout.contains("% smaller"), r.stdout)
        XCTAssertTrue(r.stderr.contains("broken.jpg"), r.stderr)
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir + "/jxl").sorted()
        XCTAssertEqual(files, ["a.jxl", "sub", "sub/b.jxl"])
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/in/a.jpg")))
        let jxl = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/jxl/a.jxl")))
        XCTAssertEqual(try jxl.withUnsafeBytes { try LosslessJXL.reconstructJPEG($0) }, original)
        // JPEG XL in (upright: orientation 6 came along), JPEG XL out.
        let render = try tessera(["render", dir + "/jxl/a.jxl", "-s", "100", "--format", "jxl", "-o", dir + "/thumbs"])
        XCTAssertEqual(render.status, 0, render.stderr)
        let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/thumbs/a.jxl"))))
        XCTAssertEqual(info.format, .jxl)
        XCTAssertEqual(Size(width: info.displayWidth, height: info.displayHeight), Size(width: 75, height: 100))
        try Data("name: t\nkind: transcode\ninputs: [\(dir)/in/a.jpg]\noutput: \(dir)/job\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let run = try tessera(["run", dir + "/job.yaml", "-w", "1"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/job/a.jxl"))), jxl, "the pool writes the same file")
    }

    func testUsageErrorsExitWithTwo() throws {
        XCTAssertEqual(try tessera(["render", dir + "/in", "-o", dir + "/out"]).status, 2, "no preset or recipe")
        XCTAssertEqual(try tessera(["render", dir + "/in", "-p", "nope", "-o", dir + "/out"]).status, 2, "unknown preset")
        XCTAssertEqual(try tessera(["render", dir + "/missing", "-p", "favicon", "-o", dir + "/out"]).status, 2)
        XCTAssertEqual(try tessera(["--frobnicate"]).status, 2)
        let prefetch = try tessera(["worker", "--connect", "tcp://127.0.0.1:1", "--prefetch", "-1"])
        XCTAssertEqual(prefetch.status, 2, prefetch.stderr)
        XCTAssertTrue(prefetch.stderr.contains("--prefetch must be 0...256, got -1"), prefetch.stderr)
        // An --allow file holds keys, not API tokens: CORS for an API that is not served is refused.
        try "worker 0123\n".write(toFile: dir + "/allow.txt", atomically: true, encoding: .utf8)
        let cors = try tessera(["coordinator", "--bind", "tcp://127.0.0.1:0", "--journal", dir + "/j.db", "--metrics-port", "0",
                                "--api-cors", "https://app.example", "--allow", dir + "/allow.txt"])
        XCTAssertEqual(cors.status, 2, cors.stderr)
        XCTAssertTrue(cors.stderr.contains("--api-cors needs the API") && cors.stderr.contains("is a file of keys"), cors.stderr)
    }

    func testPresetsAndInspect() throws {
        let presets = try tessera(["presets"])
        XCTAssertEqual(presets.status, 0)
        for name in ["default", "highDefinition", "thumbnail", "compressedThumbnail", "favicon", "compressedFavicon", "widget"] {
            XCTAssertTrue(presets.stdout.contains(name), name)
        }
        let inspect = try tessera(["inspect", "--json", dir + "/in/a.jpg"])
        XCTAssertEqual(inspect.status, 0)
        let obj = try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any]
        let info = obj?["info"] as? [String: Any]
        XCTAssertEqual(info?["orientation"] as? Int, 6)
        XCTAssertEqual(info?["hasGPS"] as? Bool, true)
        XCTAssertEqual(try tessera(["inspect", dir + "/in/sub/broken.jpg"]).status, 1)
    }
}

/// The media job (`jobs/media-previews.yaml`): a photo, an animated GIF and a video (with a
/// black first second), each a 320 px still and a 160 px animated preview.
final class MediaJobTests: XCTestCase {
    func testAFolderOfPhotosGIFsAndVideosGetsStillsAndPreviews() throws {
        let repo = ReadmeTests.repository.path
        let out = NSTemporaryDirectory() + "tessera-media-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try tessera(["run", repo + "/jobs/media-previews.yaml", "--output", out, "--report", out + "/records"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("3 ok"), r.stdout)
        func frames(_ name: String) throws -> Int {
            let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out + "/" + name)))
            // ANMF chunks: one per frame of an animated WebP (none in a still).
            return (0..<max(0, b.count - 4)).filter { b[$0] == 0x41 && b[$0 + 1] == 0x4E && b[$0 + 2] == 0x4D && b[$0 + 3] == 0x46 }.count
        }
        XCTAssertGreaterThan(try frames("life.preview.webp"), 8, "the GIF's own frames")
        XCTAssertGreaterThanOrEqual(try frames("mandelbrot.preview.webp"), 9, "12 samples (the black ones merged)")
        XCTAssertEqual(try frames("mei_Canon_EOS_1000D.preview.webp"), 0, "a photo's preview is a still")
        let poster = try Renderer.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: out + "/mandelbrot.still.jpg"))))
        XCTAssertEqual(poster.width, 320)
        let mean = Double(poster.bytes.reduce(0) { $0 + Int($1) }) / Double(poster.bytes.count)
        XCTAssertGreaterThan(mean, 30, "the poster is past the black second")
        let records = try String(contentsOfFile: out + "/records.jsonl", encoding: .utf8)
        XCTAssertTrue(records.contains("\"video-frames-12\""), records)
        XCTAssertTrue(records.contains("\"gif-frames-"), records)
    }
}

/// libcurl, FFmpeg, libheif and libjxl are opened at their first use, not linked: on a
/// machine where they cannot be loaded (here: stand-ins without their functions, found first
/// on LD_LIBRARY_PATH), only URL inputs, videos, HEIC and JPEG XL fail, `unsupported-feature`
/// naming the library, and the photo beside them renders.
final class OptionalLibraryTests: XCTestCase {
    func testWithoutCurlFFmpegHEIFOrJXLOnlyThoseInputsFail() throws {
        let dir = NSTemporaryDirectory() + "tessera-nolibs-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/libs", withIntermediateDirectories: true)
        try "int tessera_stand_in;\n".write(toFile: dir + "/libs/empty.c", atomically: true, encoding: .utf8)
        // The sonames the binary asks for: libcurl's, and FFmpeg's first (libavutil).
        let system = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/x86_64-linux-gnu")) ?? []
        let avutil = system.first { $0.range(of: #"^libavutil\.so\.[0-9]+$"#, options: .regularExpression) != nil }
        for soname in ["libcurl.so.4", "libheif.so.1", "libjxl.so.0.7"] + (avutil.map { [$0] } ?? []) {
            let cc = try? runProcess("clang", ["-shared", "-o", dir + "/libs/" + soname, "-Wl,-soname," + soname,
                                               dir + "/libs/empty.c"])
            guard cc?.status == 0 else { throw XCTSkip("no C compiler to make a stand-in library: \(cc?.stderr ?? "")") }
        }
        let repo = ReadmeTests.repository.path
        let photo = repo + "/examples/images/mei_Canon_EOS_1000D.jpg", video = repo + "/examples/media/mandelbrot.mp4"
        let heic = repo + "/examples/images/canon_portrait.heic", jxl = repo + "/Fuzz/corpus/jxl/gray.jxl"
        let r = try tessera(["render", photo, video, heic, jxl, "http://127.0.0.1:9/x.jpg", "-s", "64", "-o", dir + "/out"],
                            environment: ["LD_LIBRARY_PATH": dir + "/libs"])
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("5 images, 1 ok, 4 failed"), r.stdout)
        XCTAssertTrue(r.stderr.contains("canon_portrait.heic: HEIC and AVIF need libheif.so.1, and it lacks"), r.stderr)
        XCTAssertTrue(r.stderr.contains("gray.jxl: JPEG XL need libjxl.so.0.7, and it lacks"), r.stderr)
        // Writing one is refused the same way.
        let avif = try tessera(["render", photo, "-s", "64", "--format", "avif", "-o", dir + "/avif"],
                               environment: ["LD_LIBRARY_PATH": dir + "/libs"])
        XCTAssertEqual(avif.status, 1, avif.stdout + avif.stderr)
        XCTAssertTrue(avif.stderr.contains("[unsupported-feature]"), avif.stderr)
        XCTAssertTrue(r.stderr.contains("http://127.0.0.1:9/x.jpg: HTTP transfers need libcurl, and libcurl.so.4 lacks"), r.stderr)
        if avutil != nil {
            XCTAssertTrue(r.stderr.contains("mandelbrot.mp4: video inputs need FFmpeg's libraries"), r.stderr)
        }
        XCTAssertEqual(r.stderr.components(separatedBy: "[unsupported-feature]").count - 1, 4, r.stderr)
        let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/out/mei_Canon_EOS_1000D.jpg"))))
        XCTAssertEqual(max(info.width, info.height), 64)
        // The same command with the machine's own libraries: the video renders too.
        let real = try tessera(["render", photo, video, heic, jxl, "-s", "64", "-o", dir + "/real"])
        XCTAssertEqual(real.status, 0, real.stdout + real.stderr)
    }
}
