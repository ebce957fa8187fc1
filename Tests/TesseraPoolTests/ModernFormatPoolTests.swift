import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import XCTest
import TesseraModel

/// HEIC/AVIF/WebP through the pool and the command line (issue 14).
final class ModernFormatPoolTests: XCTestCase {
    /// A folder of phone formats (any case of extension) run to three web formats each.
    func testJobWithModernInputsAndSeveralFormats() throws {
        let c = try Cluster()
        let scene = TilePoolTests.scene(900, 600, seed: 4)
        try Data(try Codec.encodeHEIF(scene, quality: 70)).write(to: URL(fileURLWithPath: c.dir + "/in/a.AVIF"))
        try Data(try Codec.encodeWebP(scene, quality: 80)).write(to: URL(fileURLWithPath: c.dir + "/in/b.webp"))
        if Codec.canEncodeHEIC {
            try Data(try Codec.encodeHEIF(scene, quality: 70, hevc: true, orientation: 6, thumbnailBox: 200))
                .write(to: URL(fileURLWithPath: c.dir + "/in/c.HEIC"))
        }
        try Data(try Codec.encodeHEIF(scene, quality: 70)).write(to: URL(fileURLWithPath: c.dir + "/in/d.hif"))
        let job = c.dir + "/job.yaml"
        try """
            name: web
            inputs: [in]
            output: out
            outputs:
              - preset: webThumbnail
                path: "{stem}.{ext}"
              - preset: favicon
                formats: [webp, {format: avif, quality: 0.5}]
                path: "{stem}-fav.{ext}"
            """.write(toFile: job, atomically: true, encoding: .utf8)
        let r = try tessera(["run", job, "--workers", "2", "--report", c.dir + "/report"])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        let n = Codec.canEncodeHEIC ? 4 : 3
        XCTAssertTrue(r.out.contains("\(n) images"), r.out)
        let files = try FileManager.default.contentsOfDirectory(atPath: c.dir + "/out").filter { !$0.hasPrefix(".") }.sorted()
        for stem in ["a", "b", "d"] + (Codec.canEncodeHEIC ? ["c"] : []) {
            for ext in ["avif", "webp", "jpg"] { XCTAssertTrue(files.contains("\(stem).\(ext)"), "\(stem).\(ext) in \(files)") }
            for ext in ["webp", "avif"] { XCTAssertTrue(files.contains("\(stem)-fav.\(ext)"), "\(stem)-fav.\(ext) in \(files)") }
        }
        if Codec.canEncodeHEIC {
            // The HEIC was stored landscape with irot for portrait: outputs are upright portrait.
            let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: c.dir + "/out/c.jpg"))))
            XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 213, height: 320))
            let records = try String(contentsOfFile: c.dir + "/report.jsonl", encoding: .utf8)
            XCTAssertTrue(records.contains("\"decodePath\":\"heif-thumbnail\"") || records.contains("\"decodePath\":\"heif-primary\""), records)
        }
    }

    /// A crash inside a decoder costs its task, not the pool: the HEIC task that kills its
    /// worker is failed as poison, the others succeed.
    func testDecoderCrashIsAttributedToItsTask() throws {
        let c = try Cluster(coordinatorArguments: ["--worker-timeout", "2", "--poison", "2"])
        let scene = TilePoolTests.scene(400, 300, seed: 5)
        try Data(try Codec.encodeHEIF(scene, quality: 60)).write(to: URL(fileURLWithPath: c.dir + "/in/crasher.avif"))
        for i in 0..<4 { try Data(try Codec.encodeHEIF(scene, quality: 60)).write(to: URL(fileURLWithPath: c.dir + "/in/ok\(i).avif")) }
        try c.startCoordinator()
        let args = ["--crash-on", "crasher"]
        try c.startWorker(args)
        let job = try c.client.submit(try c.job(presets: ["favicon"])).job
        let deadline = Date().addingTimeInterval(90)
        var end: JobStatus?
        while Date() < deadline {
            if let s = try? c.client.status(job: job).jobs.first, s.isTerminal { end = s; break }
            if c.workers.allSatisfy({ !$0.isRunning }) { try c.startWorker(args) }
            usleep(50_000)
        }
        let s = try XCTUnwrap(end)
        XCTAssertEqual(s.succeeded, 4)
        XCTAssertEqual(s.failed, 1)
        let failed = try XCTUnwrap(try c.records(job).first { $0.status == .failed })
        XCTAssertTrue(failed.input.hasSuffix("crasher.avif"))
        XCTAssertEqual(failed.error?.code, "poison")
    }

    /// Tile pyramids of WebP and AVIF sources (decoded whole within the budget), and a clear
    /// refusal when the whole image is over it.
    func testTilesFromModernSources() throws {
        let c = try Cluster()
        let scene = TilePoolTests.scene(1500, 1000, seed: 6)
        try Data(try Codec.encodeWebP(scene, quality: 85)).write(to: URL(fileURLWithPath: c.dir + "/in/w.webp"))
        try Data(try Codec.encodeHEIF(scene, quality: 70)).write(to: URL(fileURLWithPath: c.dir + "/in/h.avif"))
        let r = try tessera(["tiles", c.dir + "/in", "-o", c.dir + "/out", "--workers", "2"])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue(r.out.contains("pyramids: 2 sources"), r.out)
        let g = PyramidGeometry(width: 1500, height: 1000, settings: TileSettings())
        for name in ["w", "h"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/\(name).dzi"))
            let top = "\(c.dir)/out/\(name)_files/\(g.levelCount - 1)/0_0.jpg"
            let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: top))))
            XCTAssertEqual(info.width, 254 + 1, "first tile of the top level: tile size plus one overlap")
        }
        let big = c.dir + "/big.webp"
        try Data(try Codec.encodeWebP(TilePoolTests.scene(4500, 3500, seed: 7), quality: 50)).write(to: URL(fileURLWithPath: big))
        let tight = try tessera(["tiles", big, "-o", c.dir + "/out2", "--workers", "1", "--memory-budget", "32"])
        XCTAssertEqual(tight.status, 1, tight.out + tight.err)
        XCTAssertTrue((tight.out + tight.err).contains("is decoded whole"), tight.out + tight.err)
    }
}
