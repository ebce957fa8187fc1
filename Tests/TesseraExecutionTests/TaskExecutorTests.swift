import Foundation
import TesseraImaging
import TesseraExecution
import TesseraTasks
import XCTest
import TesseraModel
import TesseraTestSupport

final class TaskExecutorTests: XCTestCase {
    /// What `tessera render` runs: a thumbnail job of presets, named per preset, not incremental.
    func job(out: String, presets: [String], template: String = OutputNaming.perPreset) throws -> ExecutableJob {
        var options = JobOptions()
        options.incremental = false
        return ExecutableJob(kind: .thumbnail,
                             outputs: try presets.map { OutputSpec(name: $0, recipe: try PresetCatalog.builtIn.recipe(named: $0), path: template) },
                             outputRoot: out, options: options)
    }

    func run(_ input: InputFile, out: String, presets: [String], template: String = OutputNaming.perPreset) throws -> TaskRecord {
        TaskExecutor.run(try job(out: out, presets: presets, template: template), input: input).record
    }

    func testGoodTaskWritesEveryOutputAndReportsTimings() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.write("in/photo.jpg", try jpeg(2000, 1500))
        let record = try run(InputFile(path: path, root: tmp.path + "/in"), out: tmp.path + "/out",
                             presets: ["thumbnail", "favicon", "widget"])
        XCTAssertEqual(record.status, .succeeded, "\(String(describing: record.error))")
        XCTAssertEqual(tmp.files(under: "out"), ["photo-favicon.jpg", "photo-thumbnail.jpg", "photo-widget.jpg"])
        XCTAssertEqual(record.outputs.map { "\($0.width)x\($0.height)" }, ["960x720", "64x64", "1024x768"])
        XCTAssertEqual(record.scaleEighths, 6)  // widget 1024 of 2000: 6/8 is the first to leave 1.35x
        XCTAssertGreaterThan(record.timings.decode, 0)
        XCTAssertGreaterThan(record.timings.total, record.timings.decode)
        XCTAssertEqual(record.bytesIn, try FileIO.read(path, limit: 1 << 30).count)
        for o in record.outputs { XCTAssertEqual(try FileIO.read(o.path, limit: 1 << 30).count, o.bytes) }
    }

    /// A bad file fails alone: typed error naming it, nothing written for it, and
    /// the good file next to it is rendered.
    func testBadInputFailsAloneAndWritesNothing() throws {
        let tmp = TemporaryDirectory()
        let good = try jpeg(300, 200)
        let inputs = [tmp.write("in/good.jpg", good), tmp.write("in/truncated.jpg", Array(good.prefix(good.count / 2))),
                      tmp.write("in/empty.jpg", []), tmp.write("in/text.jpg", Array("hello".utf8))]
        var records: [TaskRecord] = []
        for p in inputs {
            records.append(try run(InputFile(path: p, root: tmp.path + "/in"), out: tmp.path + "/out",
                                   presets: ["thumbnail", "favicon"]))
        }
        XCTAssertEqual(records.map(\.status), [.succeeded, .failed, .failed, .failed])
        XCTAssertEqual(records.compactMap { $0.error?.code }, ["truncated", "empty", "unsupported-format"])
        for r in records.dropFirst() { XCTAssertTrue(r.error!.message.contains(r.input), r.error!.message) }
        XCTAssertEqual(tmp.files(under: "out"), ["good-favicon.jpg", "good-thumbnail.jpg"])
    }

    func testOutputCollisionsAreRefused() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.write("in/a.jpg", try jpeg(100, 100))
        let record = try run(InputFile(path: path, root: tmp.path + "/in"), out: tmp.path + "/out",
                             presets: ["thumbnail", "favicon"], template: "{stem}.{ext}")
        XCTAssertEqual(record.error?.code, "output-collision")
        XCTAssertEqual(tmp.files(under: "out"), [])
    }

    func testRecordsAreJSON() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.write("a.jpg", try jpeg(100, 80))
        let record = try run(InputFile(path: path, root: tmp.path), out: tmp.path + "/o", presets: ["favicon"])
        let decoded = try JSONDecoder().decode(TaskRecord.self, from: try JSONEncoder().encode(record))
        XCTAssertEqual(decoded.outputs, record.outputs)
        XCTAssertEqual(decoded.status, .succeeded)
    }
}

/// What a task may write: its own outputs in any format, the strip output, its pyramid — never another input's.
final class OutputOwnershipTests: XCTestCase {
    func testATaskOwnsOnlyItsOwnFiles() {
        let a = InputFile(path: "/in/sub/a.jpg", root: "/in")
        var spec = JobSpec(name: "n", inputs: [.path("/in", patterns: ["*.jpg"], recursive: true)], output: "/out")
        spec.outputs = [OutputSpec(name: "thumb", recipe: Recipe(name: "thumb"), path: "{dir}/{stem}-{preset}.{ext}")]
        let render = spec.executable
        XCTAssertTrue(render.owns("sub/a-thumb.jpg", input: a))
        XCTAssertTrue(render.owns("sub/a-thumb.webp", input: a), "any format the recipe may pick")
        XCTAssertTrue(render.owns("./sub//a-thumb.jpg", input: a), "compared normalised")
        XCTAssertFalse(render.owns("sub/b-thumb.jpg", input: a), "another input's output")
        XCTAssertFalse(render.owns("sub/a-other.jpg", input: a))
        XCTAssertFalse(render.owns("../sub/a-thumb.jpg", input: a))
        spec.kind = .strip
        spec.outputs = []
        let strip = spec.executable
        XCTAssertTrue(strip.owns("sub/a.jpg", input: a))
        XCTAssertFalse(strip.owns("sub/b.jpg", input: a))
        spec.kind = .tiles
        let tiles = spec.executable
        XCTAssertTrue(tiles.owns("sub/a_files/0/0_0.jpg", input: a))
        XCTAssertTrue(tiles.owns("sub/a.dzi", input: a))
        XCTAssertFalse(tiles.owns("sub/ab_files/0/0_0.jpg", input: a), "a sibling whose name starts the same")
        XCTAssertFalse(tiles.owns("sub/b.dzi", input: a))
    }

    /// The same job written under another root is other work: a shared coordinator must not
    /// skip it because the first root has the files (reruns key on this hash).
    func testTheOutputRootIsPartOfTheRenditionKey() {
        let a = JobSpec(name: "n", inputs: [.path("/in", patterns: ["*.jpg"], recursive: true)], output: "/out/a")
        var b = a
        XCTAssertEqual(a.executable.recipeHash, b.executable.recipeHash)
        b.output = "/out/b"
        XCTAssertNotEqual(a.executable.recipeHash, b.executable.recipeHash)
    }
}

/// A retried tile task keeps the tiles its earlier attempt wrote (same job), and redoes
/// tiles older than the job.
final class TileResumeTests: XCTestCase {
    func testRetriedTileTaskWritesOnlyMissingTiles() throws {
        let dir = TemporaryDirectory()
        let image = PixelBuffer(width: 2000, height: 1200, layout: .rgb)
        image.withUnsafeMutableBytes { p in for i in 0..<p.count { p[i] = UInt8(truncatingIfNeeded: i / 3 + i % 7) } }
        let src = dir.write("in/big.jpg", try Codec.encodeJPEG(image, quality: 80))
        var job = JobSpec(name: "t", kind: .tiles, inputs: [.path(dir.path + "/in", patterns: [], recursive: true)],
                          output: dir.path + "/out", tiles: TileSettings()).executable
        job.options.incremental = false
        let input = InputFile(path: src, root: dir.path + "/in", part: .band(shrink: 0, rows: 0..<5))
        job.createdAt = Date().timeIntervalSince1970 - 1
        let first = TaskExecutor.run(job, input: input)
        XCTAssertEqual(first.record.status, .succeeded, "\(String(describing: first.record.error))")
        let tiles = try XCTUnwrap(first.record.tiles)
        XCTAssertEqual(tiles.tilesWritten, 5 * 8)  // 2000 px: 8 columns of 254
        // Each tile is an output record like a render's: named, placed, its format typed.
        XCTAssertEqual(first.record.outputs.count, 40)
        XCTAssertEqual(Set(first.record.outputs.map(\.name)), ["tile"])
        XCTAssertEqual(Set(first.record.outputs.map(\.format)), [.jpeg])
        XCTAssertTrue(first.record.outputs.allSatisfy { $0.path.hasPrefix(dir.path + "/out/big_files/") && $0.width > 0 })
        // The attempt was cut short: two tiles never made it.
        let gone = [dir.path + "/out/big_files/11/0_0.jpg", dir.path + "/out/big_files/11/7_4.jpg"]
        for g in gone { XCTAssertEqual(unlink(g), 0) }
        var inode: [String: UInt64] = [:]
        for o in first.record.outputs where !gone.contains(o.path) {
            var st = stat(); XCTAssertEqual(stat(o.path, &st), 0); inode[o.path] = UInt64(st.st_ino)
        }
        let retry = TaskExecutor.run(job, input: input)
        XCTAssertEqual(retry.record.tiles?.tilesWritten, 2)
        XCTAssertEqual(retry.record.tiles?.tilesSkipped, 38)
        for g in gone { XCTAssertTrue(FileManager.default.fileExists(atPath: g)) }
        for (path, ino) in inode { var st = stat(); _ = stat(path, &st); XCTAssertEqual(UInt64(st.st_ino), ino, "\(path) rewritten") }
        // A later job (tiles older than it) makes every tile again.
        job.createdAt = Date().timeIntervalSince1970 + 1
        XCTAssertEqual(TaskExecutor.run(job, input: input).record.tiles?.tilesWritten, 40)
    }
}
