import Foundation
import TesseraImaging
import XCTest

/// Runs the built `tessera` binary: exit codes, output files, printed records.
final class CLITests: XCTestCase {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var binary: URL {
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [dir, dir.deletingLastPathComponent(), Bundle.main.bundleURL] {
            let url = candidate.appendingPathComponent("tessera")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return dir.appendingPathComponent("tessera")
    }

    func tessera(_ args: [String], in cwd: String? = nil) throws -> Run {
        let p = Process()
        p.executableURL = CLITests.binary
        p.arguments = args
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                   stderr: String(decoding: e, as: UTF8.self))
    }

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
        XCTAssertTrue(r.stdout.contains("FAIL \(dir)/in/sub/broken.jpg: truncated JPEG"), r.stdout)
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
    }

    func testStripRemovesGPSAndKeepsOrientation() throws {
        let r = try tessera(["strip", dir + "/in/a.jpg", "-o", dir + "/clean"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/clean/a.jpg"))))
        XCTAssertFalse(info.hasGPS)
        XCTAssertEqual(info.orientation, 6)
    }

    func testUsageErrorsExitWithTwo() throws {
        XCTAssertEqual(try tessera(["render", dir + "/in", "-o", dir + "/out"]).status, 2, "no preset or recipe")
        XCTAssertEqual(try tessera(["render", dir + "/in", "-p", "nope", "-o", dir + "/out"]).status, 2, "unknown preset")
        XCTAssertEqual(try tessera(["render", dir + "/missing", "-p", "favicon", "-o", dir + "/out"]).status, 2)
        XCTAssertEqual(try tessera(["--frobnicate"]).status, 2)
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
