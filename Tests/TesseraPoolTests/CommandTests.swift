import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraTestSupport
import XCTest
import TesseraModel

/// The pool through the `tessera` command line.
final class CommandTests: XCTestCase {
    /// `tessera run`: one command, a summary, reports, and reruns that only do new work.
    func testRunIsIncremental() throws {
        let c = try Cluster()
        let inputs = try c.makeImages(24, width: 640, height: 480)
        let job = c.dir + "/job.yaml"
        try """
            name: incremental
            inputs: [in]
            output: out
            outputs:
              - preset: favicon
              - preset: thumbnail
            """.write(toFile: job, atomically: true, encoding: .utf8)
        let first = try tessera(["run", job, "--workers", "2", "--report", c.dir + "/report"])
        XCTAssertEqual(first.status, 0, first.out + first.err)
        XCTAssertTrue(first.out.contains("24 images"), first.out)
        XCTAssertTrue(first.out.contains("24 ok, 0 skipped"), first.out)
        XCTAssertTrue(first.out.contains("task time: p50"), first.out)
        XCTAssertTrue(first.out.contains("peak memory per worker"), first.out)
        let jsonl = try String(contentsOfFile: c.dir + "/report.jsonl", encoding: .utf8)
        XCTAssertEqual(jsonl.split(separator: "\n").count, 25, "24 records and the run's summary")
        XCTAssertTrue(jsonl.split(separator: "\n").last?.contains("\"type\":\"summary\"") ?? false)
        let csv = try String(contentsOfFile: c.dir + "/report.csv", encoding: .utf8)
        XCTAssertEqual(csv.split(separator: "\n").count, 25)
        XCTAssertTrue(csv.hasPrefix("input,status,"))
        // Again: nothing changed, nothing done.
        let second = try tessera(["run", job, "--workers", "2"])
        XCTAssertEqual(second.status, 0)
        XCTAssertTrue(second.out.contains("0 ok, 24 skipped"), second.out)
        XCTAssertTrue(second.out.contains("24 images in "), second.out)
        XCTAssertTrue(second.out.contains(", 0.0 images/s"), "skipped tasks do not count as work done\n" + second.out)
        // Change one input and delete another's output: exactly those two are redone.
        try Data(try Codec.encodeJPEG(Fixtures.solid(400, 300), quality: 80)).write(to: URL(fileURLWithPath: inputs[5]))
        try FileManager.default.removeItem(atPath: c.dir + "/out/img0004-thumbnail.jpg")
        let third = try tessera(["run", job, "--workers", "2", "--json"])
        XCTAssertEqual(third.status, 0)
        let summary = try JSONSerialization.jsonObject(with: Data(third.out.split(separator: "\n").last!.utf8)) as! [String: Any]
        XCTAssertEqual(summary["succeeded"] as? Int, 2)
        XCTAssertEqual(summary["skipped"] as? Int, 22)
        XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/img0004-thumbnail.jpg"))
        // A broken input: exit 1 and its reason in the summary.
        try Data("nope".utf8).write(to: URL(fileURLWithPath: c.dir + "/in/broken.jpg"))
        let fourth = try tessera(["run", job, "--workers", "1"])
        XCTAssertEqual(fourth.status, 1)
        XCTAssertTrue(fourth.out.contains("failed (unsupported-format): 1"), fourth.out)
        XCTAssertTrue(fourth.out.contains("broken.jpg"), fourth.out)
        // A job file with a mistake: exit 2, file:line: field.
        try "name: x\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnial}]\n".write(toFile: c.dir + "/bad.yaml",
                                                                                           atomically: true, encoding: .utf8)
        let bad = try tessera(["run", c.dir + "/bad.yaml"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.err.contains("bad.yaml:4: outputs[0].preset: unknown preset \"thumbnial\""), bad.err)
    }

    /// `tessera tiles`: a pyramid without a job file, the summary, and a usage error.
    func testTilesCommandMakesAPyramid() throws {
        let c = try Cluster()
        let src = c.dir + "/in/wide.jpg"
        try Data(try Codec.encodeJPEG(TilePoolTests.scene(3000, 1000, seed: 3), quality: 80)).write(to: URL(fileURLWithPath: src))
        let r = try tessera(["tiles", src, "-o", c.dir + "/out", "--workers", "2"])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue(r.out.contains("pyramids: 1 source, "), r.out)
        let g = PyramidGeometry(width: 3000, height: 1000, settings: TileSettings())
        XCTAssertTrue(r.out.contains("\(g.tileCount) tiles"), r.out)
        XCTAssertTrue(r.out.contains(" parts of 1 pyramid in "), "tiles jobs count parts, not images\n" + r.out)
        XCTAssertTrue(r.out.contains("outputs in \(c.dir)/out; journal \(c.dir)/out/.tessera/journal.sqlite"), r.out)
        // Bytes in: the source once, however many parts read it.
        let big = c.dir + "/in/big.jpg"
        try Data(try Codec.encodeJPEG(TilePoolTests.scene(6000, 4000, seed: 5), quality: 80)).write(to: URL(fileURLWithPath: big))
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: big)[.size] as? Int)
        let json = try tessera(["tiles", big, "-o", c.dir + "/outj", "--workers", "2", "--json", "--report", c.dir + "/tiles"])
        XCTAssertEqual(json.status, 0, json.err)
        let summary = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.out.split(separator: "\n").last!.utf8))
                                    as? [String: Any])
        let records = try String(contentsOfFile: c.dir + "/tiles.jsonl", encoding: .utf8).split(separator: "\n")
            .filter { !$0.contains("\"type\":\"summary\"") }.map { try JSONDecoder().decode(TaskRecord.self, from: Data($0.utf8)) }
        XCTAssertGreaterThan(records.filter { $0.bytesIn == size }.count, 1, "several parts read the source")
        XCTAssertEqual(summary["bytesIn"] as? Int, size)
        for f in ["wide.dzi", "wide.html", "wide_files/12/11_3.jpg", "wide_files/0/0_0.jpg"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/" + f), f)
        }
        let bad = try tessera(["tiles", src, "-o", c.dir + "/out2", "--layout", "zoomify"])
        XCTAssertEqual(bad.status, 2, bad.err)  // usage
        XCTAssertTrue(bad.err.contains("--layout must be one of deepzoom, iiif, iiif3"), bad.err)
    }

    /// `tessera tiles --layout tiff`: one pyramidal TIFF per source, made from the workers'
    /// tiles written into it as they are; every level a reduced-resolution page (or a SubIFD)
    /// half the one above rounded down until one fits in a tile, as `vips tiffsave --pyramid`
    /// lays it out; the tiles' folder gone; a TIFF source goes through stacks.
    func testTilesCommandWritesAPyramidalTIFF() throws {
        let c = try Cluster()
        let jpeg = c.dir + "/in/photo.jpg", png = c.dir + "/in/flat.png"
        let image = TilePoolTests.scene(3001, 2003, seed: 7)
        try Data(try Codec.encodeJPEG(image, quality: 90)).write(to: URL(fileURLWithPath: jpeg))
        try Data(try Codec.encodePNG(TilePoolTests.scene(1100, 700, seed: 8))).write(to: URL(fileURLWithPath: png))
        for (flags, out) in [([String](), "/out"), (["--subifd"], "/sub")] {
            let r = try tessera(["tiles", jpeg, png, "-o", c.dir + out, "--layout", "tiff", "--workers", "2"] + flags)
            XCTAssertEqual(r.status, 0, r.out + r.err)
            for name in ["photo", "flat"] {
                XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + out + "/\(name).tif.tiles"), "tiles removed")
                let tif = c.dir + out + "/\(name).tif"
                let run = try runProcess("tiffinfo", [tif])
                let info = (out: run.stdout, err: run.stderr)
                XCTAssertEqual(run.status, 0, info.err)
                let widths = info.out.split(separator: "\n").compactMap { line -> Int? in
                    guard let r = line.range(of: "Image Width: ") else { return nil }
                    return Int(line[r.upperBound...].prefix { $0.isNumber })
                }
                // 3001 → 1500 → 750 → 375 → 187 (fits in 256); 1100 → 550 → 275 → 137.
                XCTAssertEqual(widths, name == "photo" ? [3001, 1500, 750, 375, 187] : [1100, 550, 275, 137], info.out)
                XCTAssertEqual(info.out.components(separatedBy: "reduced-resolution image").count - 1, widths.count - 1)
                XCTAssertEqual(info.out.contains("SubIFD"), !flags.isEmpty, info.out)
                XCTAssertTrue(info.out.contains("Compression Scheme: JPEG") && info.out.contains("Tile Width: 256 Tile Length: 256"))
                // Our own reader takes the levels as the page's pyramid and the full page as the source.
                let inspect = try tessera(["inspect", tif])
                XCTAssertTrue(inspect.out.contains(name == "photo" ? "levels 1500x1001, 750x500" : "levels 550x350, 275x175"), inspect.out)
            }
            // A rerun redoes nothing while the file is there, and everything when it is gone.
            let rerun = try tessera(["tiles", jpeg, png, "-o", c.dir + out, "--layout", "tiff", "--workers", "2"] + flags)
            XCTAssertTrue(rerun.out.contains(" 0 ok, ") && rerun.out.contains(" skipped (unchanged), 0 failed"), rerun.out)
            try FileManager.default.removeItem(atPath: c.dir + out + "/flat.tif")
            let remade = try tessera(["tiles", jpeg, png, "-o", c.dir + out, "--layout", "tiff", "--workers", "2"] + flags)
            XCTAssertEqual(remade.status, 0, remade.out + remade.err)
            XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + out + "/flat.tif"), remade.out)
            XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + out + "/flat.tif.tiles"), "no packs left behind")
            XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + out + "/photo.tif.tiles"), "no packs left behind")
            // The full-size page is the source (JPEG quality 75 of it).
            let back = try Renderer.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: c.dir + out + "/photo.tif"))))
            XCTAssertEqual(Size(width: back.width, height: back.height), Size(width: 3001, height: 2003))
            var diff = 0
            for y in Swift.stride(from: 0, to: 2003, by: 7) {
                for x in Swift.stride(from: 0, to: 3001, by: 7) { diff += abs(Int(back.pixel(x: x, y: y)[1]) - Int(image.pixel(x: x, y: y)[1])) }
            }
            XCTAssertLessThan(Double(diff) / Double((2003 / 7 + 1) * (3001 / 7 + 1)), 4, "mean green error")
        }
        // A TIFF source, through stacks: the pyramid of the pyramid's own full page.
        let again = try tessera(["tiles", c.dir + "/out/photo.tif", "-o", c.dir + "/again", "--layout", "tiff", "--workers", "2", "--json"])
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/again/photo.tif"))
        // Its tail read the stripes its stack left, which are gone after.
        let summary = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(again.out.split(separator: "\n").last!.utf8)) as? [String: Any])
        let seeks = try XCTUnwrap((summary["pyramids"] as? [String: Any])?["seeks"] as? [String: Int])
        XCTAssertEqual(seeks["stripes"], 1, "\(seeks)")
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: c.dir + "/again/.tessera/stripes")) ?? [], [])
        let bad = try tessera(["tiles", jpeg, "-o", c.dir + "/bad", "--layout", "tiff", "--overlap", "1"])
        XCTAssertEqual(bad.status, 2, bad.err)
        XCTAssertTrue(bad.err.contains("TIFF tiles do not overlap"), bad.err)
        // PNG tiles: a lossless pyramid, Adobe Deflate with the horizontal predictor, the source exactly.
        let lossless = try tessera(["tiles", png, "-o", c.dir + "/lossless", "--layout", "tiff", "--format", "png", "--workers", "2"])
        XCTAssertEqual(lossless.status, 0, lossless.out + lossless.err)
        let deflated = try runProcess("tiffinfo", [c.dir + "/lossless/flat.tif"])
        XCTAssertTrue(deflated.stdout.contains("AdobeDeflate") && deflated.stdout.contains("horizontal differencing"), deflated.stdout)
        let exact = try Renderer.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: c.dir + "/lossless/flat.tif"))))
        XCTAssertEqual(exact.bytes, TilePoolTests.scene(1100, 700, seed: 8).bytes, "the full page is the source, exactly")
        let odd = try tessera(["tiles", jpeg, "-o", c.dir + "/bad", "--layout", "tiff", "--tile-size", "200"])
        XCTAssertTrue(odd.err.contains("multiple of 16"), odd.err)
    }

    /// On a terminal the progress bar fits its width and is redrawn in place (carriage
    /// return, clear to end of line), never wrapping.
    func testProgressBarFitsTheTerminal() throws {
        let c = try Cluster()
        _ = try c.makeImages(30, width: 800, height: 600)
        let job = c.dir + "/job.yaml"
        try "name: a job with a long name that would not fit a narrow terminal\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}]\n"
            .write(toFile: job, atomically: true, encoding: .utf8)
        // A pseudo-terminal 50 columns wide (python's pty and TIOCSWINSZ).
        let script = """
            import fcntl, os, pty, struct, sys, termios
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))
            out = b""
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            _, status = os.waitpid(pid, 0)
            sys.stdout.buffer.write(out)
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        let r = try runProcess("python3", ["-c", script, Cluster.binary.path, "run", job, "--workers", "2"])
        let text = r.stdout
        XCTAssertEqual(r.status, 0, text + r.stderr)
        let redraws = text.components(separatedBy: "\r").map { $0.replacingOccurrences(of: "\u{1B}[K", with: "") }
            .filter { $0.contains("ETA") }
        XCTAssertGreaterThan(redraws.count, 0, text)
        for line in redraws {
            let bar = line.split(separator: "\n").first.map(String.init) ?? line
            XCTAssertLessThan(bar.count, 50, "fits 50 columns: \(bar)")
        }
        XCTAssertTrue(text.contains("\u{1B}[K"), "clears to the end of the line")
    }

    func testSubmitStatusWaitResults() throws {
        let c = try Cluster()
        _ = try c.makeImages(9, width: 300, height: 200)
        try c.startCoordinator()
        try c.startWorker()
        try "name: cli\ninputs: [in]\noutput: out\noutputs: [{preset: favicon}]\n"
            .write(toFile: c.dir + "/job.yaml", atomically: true, encoding: .utf8)
        let submit = try tessera(["submit", c.dir + "/job.yaml", "--coordinator", c.endpoint, "--json"])
        XCTAssertEqual(submit.status, 0, submit.err)
        let reply = try JSONSerialization.jsonObject(with: Data(submit.out.utf8)) as! [String: Any]
        let id = try XCTUnwrap(reply["job"] as? String)
        XCTAssertEqual(reply["tasks"] as? Int, 9)
        let wait = try tessera(["wait", id, "--coordinator", c.endpoint])
        XCTAssertEqual(wait.status, 0)
        XCTAssertTrue(wait.out.contains("succeeded: 9/9 done"), wait.out)
        let status = try tessera(["status", "--coordinator", c.endpoint])
        XCTAssertTrue(status.out.contains("1 worker connected"), status.out)
        XCTAssertTrue(status.out.contains(id), status.out)
        let results = try tessera(["results", id, "--coordinator", c.endpoint, "--csv"])
        XCTAssertEqual(results.out.split(separator: "\n").count, 10)
        XCTAssertEqual(try tessera(["wait", "j-nope", "--coordinator", c.endpoint]).status, 2)
        XCTAssertEqual(try tessera(["status", "--coordinator", "ipc://\(c.dir)/nobody.sock", "--timeout", "1"]).status, 3)
    }
}

enum Fixtures {
    static func solid(_ w: Int, _ h: Int) -> PixelBuffer {
        let p = PixelBuffer(width: w, height: h, layout: .rgb)
        p.fill([10, 200, 30])
        return p
    }
}
