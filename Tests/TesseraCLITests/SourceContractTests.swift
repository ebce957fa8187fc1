import Foundation
import TesseraImaging
import TesseraModel
import TesseraTestSupport
import XCTest

/// One contract for every source format, as a user meets it (issue 52): damaged files
/// shown with `--lenient` whatever their format, the length limits for stills and
/// animations alike, `inspect` saying what each format has, a JPEG that JPEG XL cannot
/// hold refused for what it is (and libjxl silent), and failed tasks keeping their timings.
/// Every file is made here; each case failed on the main of that day.
final class SourceContractTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "tessera-contract-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = dir + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A picture with edges, `width`×`height`.
    func picture(_ width: Int = 120, _ height: Int = 90) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: .rgb)
        for y in 0..<height {
            for x in 0..<width {
                image.setPixel(x: x, y: y, [UInt8(x * 255 / width), UInt8(y * 255 / height), (x / 10 + y / 10) % 2 == 0 ? 30 : 220])
            }
        }
        return image
    }

    /// Renders `file` with `args`; the JSON record and the exit status.
    func render(_ file: String, _ args: [String] = []) throws -> (status: Int32, record: [String: Any], stderr: String) {
        let out = dir + "/out-\(UUID().uuidString.prefix(6))"
        let r = try tessera(["render", file, "-o", out, "-s", "64", "--json"] + args)
        let lines = String(decoding: r.output, as: UTF8.self).split(separator: "\n")
        let record = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["type"] as? String == "record" } ?? [:]
        return (r.status, record, r.stderr)
    }

    func code(_ record: [String: Any]) -> String? { (record["error"] as? [String: Any])?["code"] as? String }
    func warnings(_ record: [String: Any]) -> [String] { record["warnings"] as? [String] ?? [] }

    func testAGIFCutShortRendersWithLenientAndFailsTypedWithout() throws {
        let gif = try Renderer.render(try Codec.encodePNG(picture()), recipes: [Recipe(name: "g", output: OutputSettings(format: .gif))])
            .outputs[0].bytes
        // One byte short (its trailer), then three (into the last frame's data).
        for (cut, expected) in [(1, "truncated: GIF data ends after 1 frame"), (3, "truncated: ")] {
            let file = try write("cut\(cut).gif", Array(gif.dropLast(cut)))
            let strict = try render(file)
            XCTAssertEqual(strict.status, 1)
            XCTAssertEqual(code(strict.record), "truncated", "\(strict.record)")
            let lenient = try render(file, ["--lenient"])
            XCTAssertEqual(lenient.status, 0, lenient.stderr)
            XCTAssertEqual(lenient.record["status"] as? String, "succeeded")
            XCTAssertTrue(warnings(lenient.record).contains { $0.hasPrefix(expected) }, "\(warnings(lenient.record))")
        }
        // Cut in the middle: the rows that decoded, the rest gray — and said.
        let half = try write("half.gif", Array(gif.prefix(gif.count / 2)))
        let lenient = try render(half, ["--lenient"])
        XCTAssertEqual(lenient.status, 0, lenient.stderr)
        let said = warnings(lenient.record).first ?? ""
        XCTAssertTrue(said.range(of: #"^truncated: \d+ of 90 rows"#, options: .regularExpression) != nil, said)
    }

    func testAPNGWithoutIENDRendersWithLenientAndFailsTypedWithout() throws {
        let png = try Codec.encodePNG(picture())
        XCTAssertEqual(Array(png.suffix(8).prefix(4)), Array("IEND".utf8))
        let file = try write("noiend.png", Array(png.dropLast(12)))
        let strict = try render(file)
        XCTAssertEqual(strict.status, 1)
        XCTAssertEqual(code(strict.record), "truncated")
        XCTAssertTrue((strict.record["error"] as? [String: Any])?["message"].map { "\($0)".contains("without IEND") } ?? false, "\(strict.record)")
        let lenient = try render(file, ["--lenient"])
        XCTAssertEqual(lenient.status, 0, lenient.stderr)
        XCTAssertEqual(warnings(lenient.record), ["truncated: every row decoded; truncated PNG (the file ends after its image data, without IEND)"])
        // Every row is the file's: the output is the one the whole PNG gives.
        let whole = try render(try write("whole.png", png))
        let a = (lenient.record["outputs"] as? [[String: Any]])?.first?["xxh64"] as? String
        let b = (whole.record["outputs"] as? [[String: Any]])?.first?["xxh64"] as? String
        XCTAssertNotNil(a)
        XCTAssertEqual(a, b)
    }

    func testLengthLimitsHoldForStillsFromVideos() throws {
        guard which("ffmpeg") != nil else { throw XCTSkip("ffmpeg is not installed") }
        let r = try runProcess("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=30:duration=5",
                                          "-c:v", "libx264", "-pix_fmt", "yuv420p", "clip.mp4"], in: dir)
        XCTAssertEqual(r.status, 0, r.stderr)
        let clip = dir + "/clip.mp4"
        // --max-duration 2 on a 5 s clip: refused for its poster (a still) as for an animation.
        for extra in [[], ["--animated"]] {
            let long = try render(clip, ["--max-duration", "2"] + extra)
            XCTAssertEqual(long.status, 1, "\(extra)")
            XCTAssertEqual(code(long.record), "limit-exceeded", "\(long.record)")
            let many = try render(clip, ["--max-frames", "10"] + extra)
            XCTAssertEqual(code(many.record), "limit-exceeded", "\(many.record)")
        }
        XCTAssertEqual(try render(clip, ["--max-duration", "6", "--max-frames", "150"]).status, 0)
    }

    /// `inspect --raw-cameras`: LibRaw's own list, with its version; no file needed.
    func testInspectListsTheCamerasLibRawReads() throws {
        let r = try tessera(["inspect", "--raw-cameras"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        let head = try XCTUnwrap(lines.first)
        XCTAssertTrue(head.hasPrefix("LibRaw 0."), head)
        XCTAssertTrue(head.hasSuffix("\(lines.count - 1) camera models"), head)
        XCTAssertGreaterThan(lines.count, 500)
        for model in ["Canon EOS 5D Mark III", "Nikon D3100", "Sony DSC-RX100"] {
            XCTAssertTrue(lines.contains(model), "\(model) not in LibRaw's list")
        }
        XCTAssertEqual(try tessera(["inspect"]).status, 2, "no files and no --raw-cameras is a usage error")
    }

    func testInspectSaysWhatEachFormatHas() throws {
        // A 1-bit min-is-black TIFF, 64×32, its directory first.
        var tiff: [UInt8] = [0x49, 0x49, 42, 0, 8, 0, 0, 0]
        let entries: [(UInt16, UInt16, UInt32)] = [(256, 4, 64), (257, 4, 32), (258, 3, 1), (259, 3, 1), (262, 3, 1),
                                                   (273, 4, 0), (277, 3, 1), (278, 4, 32), (279, 4, 256)]
        let dataAt = UInt32(8 + 2 + entries.count * 12 + 4)
        func le(_ v: UInt32, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(v >> (8 * UInt32($0)) & 0xFF) } }
        tiff += le(UInt32(entries.count), 2)
        for (tag, type, value) in entries {
            tiff += le(UInt32(tag), 2) + le(UInt32(type), 2) + le(1, 4) + le(tag == 273 ? dataAt : value, 4)
        }
        tiff += le(0, 4) + [UInt8](repeating: 0xAA, count: 256)
        let bilevel = try write("bw.tif", tiff)
        let human = String(decoding: try tessera(["inspect", bilevel]).output, as: UTF8.self)
        XCTAssertTrue(human.contains("colour       min-is-black, 1 sample, 1-bit"), human)
        XCTAssertFalse(human.contains("RGB"), human)
        XCTAssertFalse(human.contains("progressive"), human)
        XCTAssertFalse(human.contains("orientation"), "a TIFF without the tag has no orientation to show: \(human)")

        guard which("ffmpeg") != nil else { throw XCTSkip("ffmpeg is not installed") }
        let r = try runProcess("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=25:duration=2",
                                          "-c:v", "libx264", "-pix_fmt", "yuv420p", "v.mp4"], in: dir)
        XCTAssertEqual(r.status, 0, r.stderr)
        let video = String(decoding: try tessera(["inspect", dir + "/v.mp4"]).output, as: UTF8.self)
        XCTAssertTrue(video.contains("colour       yuv420p (4:2:0), 8-bit"), video)
        XCTAssertTrue(video.contains("frames       50, 2.00 s"), video)
        for absent in ["RGB", "progressive", "orientation"] { XCTAssertFalse(video.contains(absent), "\(absent): \(video)") }
        let json = try JSONSerialization.jsonObject(with: try tessera(["inspect", "--json", dir + "/v.mp4"]).output) as? [String: Any]
        let info = json?["info"] as? [String: Any]
        XCTAssertEqual(info?["colorSpace"] as? String, "yuv420p (4:2:0)")
        XCTAssertEqual(info?["frames"] as? Int, 50)
        XCTAssertEqual(info?["durationSeconds"] as? Double, 2)
        XCTAssertNil(info?["orientationFrom"])
        // A JPEG: its scan order, where its orientation comes from, the cheaper decodes.
        let jpeg = try write("o.jpg", try Codec.encodeJPEG(picture(), exif: Exif.build(orientation: 6)))
        let j = String(decoding: try tessera(["inspect", jpeg]).output, as: UTF8.self)
        XCTAssertTrue(j.contains("scan         sequential"), j)
        XCTAssertTrue(j.contains("orientation  6 (EXIF)"), j)
        XCTAssertTrue(j.contains("cheaper      DCT scales 1/8-8/8"), j)
    }

    func testAJPEGThatJPEGXLCannotHoldIsRefusedForWhatItIsAndLibjxlSaysNothing() throws {
        // A sound JPEG (libjpeg reads it) that libjxl will not take: a second DRI segment.
        var jpeg = try Codec.encodeJPEG(picture(), quality: 85, restartInterval: 2)
        let sos = (0..<jpeg.count - 1).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }!
        jpeg.insert(contentsOf: [0xFF, 0xDD, 0x00, 0x04, 0x00, 0x02], at: sos)
        let file = try write("dri.jpg", jpeg)
        XCTAssertEqual(try render(file).status, 0, "the JPEG is sound")
        let r = try tessera(["transcode", file, "-o", dir + "/jxl", "--json"])
        XCTAssertEqual(r.status, 1)
        let record = String(decoding: r.output, as: UTF8.self).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["type"] as? String == "record" }
        let error = record?["error"] as? [String: Any]
        XCTAssertEqual(error?["code"] as? String, "unsupported-feature", "\(String(describing: record))")
        let message = error?["message"] as? String ?? ""
        XCTAssertTrue(message.contains("cannot be recompressed losslessly to JPEG XL"), message)
        XCTAssertTrue(message.contains("(libjxl: Duplicate DRI marker"), "libjxl's reason is in the error: \(message)")
        XCTAssertFalse(message.contains("corrupt"), message)
        for chatter in ["JXL_FAILURE", "./lib/jxl", "enc_jpeg"] {
            XCTAssertFalse(r.stderr.contains(chatter), "libjxl printed on stderr: \(r.stderr)")
        }
        // Human output: one line for it, nothing of libjxl's.
        let human = try tessera(["transcode", file, "-o", dir + "/jxl2"])
        let lines = human.stderr.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.contains("dri.jpg") }.count, 1, human.stderr)
        XCTAssertFalse(human.stderr.contains("JXL_FAILURE"), human.stderr)
    }

    func testAFailedTaskKeepsItsStageTimings() throws {
        let file = try write("big.jpg", try Codec.encodeJPEG(picture(1600, 1200), quality: 95))
        let out = dir + "/budget"
        let r = try tessera(["render", file, "-o", out, "-s", "1024", "--max-bytes", "3000", "--json"])
        XCTAssertEqual(r.status, 1)
        let record = String(decoding: r.output, as: UTF8.self).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["type"] as? String == "record" }
        XCTAssertEqual((record?["error"] as? [String: Any])?["code"] as? String, "budget-exceeded")
        let t = record?["timingsMilliseconds"] as? [String: Double] ?? [:]
        XCTAssertGreaterThan(t["decode"] ?? 0, 0, "\(t)")
        XCTAssertGreaterThan(t["resize"] ?? 0, 0, "\(t)")
        XCTAssertGreaterThan(t["encode"] ?? 0, 0, "\(t)")
        // The summary counts them too.
        let human = String(decoding: try tessera(["render", file, "-o", out + "2", "-s", "1024", "--max-bytes", "3000"]).output, as: UTF8.self)
        let line = human.split(separator: "\n").first { $0.contains("failed in") } ?? ""
        XCTAssertNil(line.range(of: "decode 0 ms, resize 0 ms, encode 0 ms"), String(line))
    }

    /// Camera raw beside JPEG and HEIF in one job (issue 53): every file rendered, every raw
    /// upright, the decode each took in its record; content decides (a DNG named .jpg is raw,
    /// a JPEG named .nef a JPEG).
    func testAFolderOfJPEGHEIFAndRawRendersInOneJob() throws {
        let input = dir + "/in"
        try FileManager.default.createDirectory(atPath: input, withIntermediateDirectories: true)
        // Quadrants: red, green / blue, white (as stored).
        let red: [UInt8] = [230, 20, 20], green: [UInt8] = [20, 200, 20], blue: [UInt8] = [20, 20, 230], white: [UInt8] = [240, 240, 240]
        func quadrants(_ w: Int, _ h: Int) -> PixelBuffer {
            let image = PixelBuffer(width: w, height: h, layout: .rgb)
            for y in 0..<h { for x in 0..<w { image.setPixel(x: x, y: y, y < h / 2 ? (x < w / 2 ? red : green) : (x < w / 2 ? blue : white)) } }
            return image
        }
        let stored = quadrants(480, 320)
        let preview = try Codec.encodeJPEG(quadrants(240, 160), quality: 90)
        let files: [(String, [UInt8])] = [
            ("a.jpg", try Codec.encodeJPEG(stored, quality: 90)),
            ("b.avif", try Codec.encodeHEIF(stored, quality: 90, orientation: 6)),
            ("c.dng", try Codec.encodeDNG(stored, orientation: 6)),
            ("d.nef.dng", try Codec.encodeDNG(stored, pattern: "BGGR", orientation: 8, preview: preview)),
            ("raw-named.jpg", try Codec.encodeDNG(stored, pattern: "GRBG", bits: 14, orientation: 3)),
            ("jpeg-named.nef", try Codec.encodeJPEG(stored, quality: 90, exif: Exif.build(orientation: 6))),
        ]
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: input + "/" + name)) }
        let job = dir + "/mixed.yaml"
        try """
            name: mixed
            inputs: [\(input)]
            output: \(dir)/out
            outputs: [{name: small, recipe: {operations: [{op: resize, width: 96, height: 96, mode: fit}], output: {format: png}}, path: "{stem}.{srcext}.{ext}"}]
            """.write(toFile: job, atomically: true, encoding: .utf8)
        let r = try tessera(["run", job, "-w", "2", "--journal", dir + "/j.sqlite", "--report", dir + "/report.jsonl"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let records = try String(contentsOfFile: dir + "/report.jsonl", encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["type"] as? String == "record" }
        XCTAssertEqual(records.count, files.count)
        var paths: [String: String] = [:]
        for rec in records {
            XCTAssertEqual(rec["status"] as? String, "succeeded", "\(rec)")
            let name = ((rec["input"] as? String) ?? "").components(separatedBy: "/").last ?? ""
            paths[name] = rec["decodePath"] as? String
            // A raw file rendered from its preview is still a raw source, of the raw image's size.
            if (rec["decodePath"] as? String)?.hasPrefix("raw") == true {
                XCTAssertEqual(rec["sourceFormat"] as? String, "raw", "\(name)")
            }
        }
        XCTAssertEqual(paths["c.dng"], "raw-half")
        XCTAssertEqual(paths["d.nef.dng"], "raw-preview", "a 240x160 preview covers 96 px")
        XCTAssertEqual(paths["raw-named.jpg"], "raw-half", "content, not the name")
        XCTAssertEqual(paths["jpeg-named.nef"]?.hasPrefix("jpeg") ?? false, true, "\(paths)")
        // Upright: every portrait source shows portrait, its stored bottom-left (blue) at the top left.
        for (name, portrait, topLeft) in [("a.jpg", false, red), ("b.avif", true, blue), ("c.dng", true, blue),
                                          ("d.nef.dng", true, green), ("raw-named.jpg", false, white), ("jpeg-named.nef", true, blue)] {
            let out = try Renderer.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(dir)/out/\(name).png"))))
            XCTAssertEqual(out.height > out.width, portrait, "\(name): \(out.width)x\(out.height)")
            let px = out.pixel(x: 6, y: 6)
            XCTAssertTrue(zip(px, topLeft).allSatisfy { abs(Int($0) - Int($1)) <= 40 }, "\(name): top left \(px), expected \(topLeft)")
        }
    }
}
