import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import XCTest
import TesseraModel

/// Tiles jobs through a real coordinator and worker processes: every pyramid part runs
/// exactly once, every tile of the grid is on disk once, reruns redo nothing.
final class TilePoolTests: XCTestCase {
    /// A photo-like image made row by row (a band decode has something to get wrong).
    static func scene(_ width: Int, _ height: Int, seed: UInt64) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: .rgb)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        image.withUnsafeMutableBytes { p in
            for y in 0..<height {
                for x in 0..<width {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17
                    let o = (y * width + x) * 3
                    p[o] = UInt8(truncatingIfNeeded: x / 7 + Int(state % 16))
                    p[o + 1] = UInt8(truncatingIfNeeded: y / 5 + Int(state % 8))
                    p[o + 2] = UInt8(truncatingIfNeeded: (x + y) / 11)
                }
            }
        }
        return image
    }

    func expectedFiles(_ root: String, name: String, width: Int, height: Int, settings: TileSettings = TileSettings()) -> Set<String> {
        let g = PyramidGeometry(width: width, height: height, settings: settings)
        var files: Set<String> = [root + "/" + name + ".dzi", root + "/" + name + ".html"]
        for k in 0..<g.levelCount {
            for r in 0..<g.rows(k) { for c in 0..<g.columns(k) { files.insert(root + "/" + g.path(name: name, k: k, column: c, row: r, suffix: "jpg")) } }
        }
        return files
    }

    func files(under root: String) -> Set<String> {
        var out: Set<String> = []
        let e = FileManager.default.enumerator(atPath: root)
        while let f = e?.nextObject() as? String {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + f, isDirectory: &isDir), !isDir.boolValue { out.insert(root + "/" + f) }
        }
        return out
    }

    func testPyramidJobOverTwoWorkersWritesEveryTileOnce() throws {
        for inline in [false, true] {
            let c = try Cluster()
            // 6000 px = 375 MCUs of 16 px: a restart interval of 375 starts every MCU row.
            let a = c.dir + "/in/a.jpg", b = c.dir + "/in/sub/b.png", bad = c.dir + "/in/bad.jpg"
            try FileManager.default.createDirectory(atPath: c.dir + "/in/sub", withIntermediateDirectories: true)
            let jpeg = try Codec.encodeJPEG(TilePoolTests.scene(6000, 4000, seed: 1), quality: 85, restartInterval: 375)
            try Data(jpeg).write(to: URL(fileURLWithPath: a))
            try Data(try Codec.encodePNG(TilePoolTests.scene(1500, 1100, seed: 2))).write(to: URL(fileURLWithPath: b))
            try Data(jpeg.prefix(jpeg.count * 2 / 3)).write(to: URL(fileURLWithPath: bad))
            try c.startCoordinator()
            try c.startWorker(inline ? ["--inline"] : [])
            try c.startWorker(inline ? ["--inline"] : [])
            let spec = try c.job(kind: .tiles) { s in
                s.outputs = []
                s.tiles = TileSettings()
                s.options.maxMegapixels = JobOptions.tilesMaxMegapixels
            }
            let submitted = try c.client.submit(spec)
            XCTAssertGreaterThan(submitted.tasks, 4, "a 24 MP source splits into bands")
            let end = try c.client.wait(job: submitted.job, within: 300)
            XCTAssertEqual(end.state, .failed, "the truncated source fails")
            XCTAssertEqual(end.failed, 1, "one task for the truncated source, not one per band")
            XCTAssertEqual(end.succeeded, submitted.tasks - 1, c.logs().suffix(3000).description)
            let records = try c.records(submitted.job)
            XCTAssertEqual(records.count, submitted.tasks)
            let parts = records.compactMap { r in r.tiles.map { r.input + "#" + ($0.part?.description ?? "") } }
            XCTAssertEqual(Set(parts).count, parts.count, "every part exactly once")
            let failed = try XCTUnwrap(records.first { $0.status == .failed })
            XCTAssertEqual(failed.error?.code, "truncated")
            XCTAssertTrue(failed.error?.message.contains("bad.jpg") == true)
            let ok = records.filter { $0.status == .succeeded }
            XCTAssertEqual(Set(ok.compactMap(\.worker)).count, 2, "both workers made tiles")
            XCTAssertTrue(ok.contains { $0.tiles?.decode.seek == .restartMarker }, "stripes of a.jpg start at restart markers")
            XCTAssertTrue(ok.allSatisfy { ($0.peakMemory?.bytes ?? 0) > 0 && $0.timings.total > 0 })

            let out = c.dir + "/out"
            let expected = expectedFiles(out, name: "a", width: 6000, height: 4000)
                .union(expectedFiles(out, name: "sub/b", width: 1500, height: 1100))
            XCTAssertEqual(files(under: out), expected, "every tile once, nothing of bad.jpg, no temporary files (inline: \(inline))")
            let written = ok.flatMap(\.outputs).map(\.path)
            XCTAssertEqual(written.count, Set(written).count, "no tile written twice")
            XCTAssertEqual(Set(written), expected)
            // Sizes as recorded, and as the grid says.
            for o in ok.flatMap(\.outputs).filter({ $0.name == "tile" }).prefix(400) {
                let px = try Codec.decodeJPEG([UInt8](try Data(contentsOf: URL(fileURLWithPath: o.path))))
                XCTAssertEqual([px.width, px.height], [o.width, o.height], o.path)
            }
            // A full-size (level 13) tile shows the same window of a whole decode.
            let full = try Codec.decodeJPEG(jpeg)
            let g = PyramidGeometry(width: 6000, height: 4000, settings: TileSettings())
            let t = g.tile(0, column: 11, row: 9)
            let tile = try Codec.decodeJPEG([UInt8](try Data(contentsOf: URL(fileURLWithPath: out + "/a_files/13/11_9.jpg"))))
            var sum = 0, n = 0
            for y in stride(from: t.y.lowerBound, to: t.y.upperBound, by: 3) {
                for x in stride(from: t.x.lowerBound, to: t.x.upperBound, by: 3) {
                    let p = full.pixel(x: x, y: y), q = tile.pixel(x: x - t.x.lowerBound, y: y - t.y.lowerBound)
                    sum += zip(p, q).map { abs(Int($0) - Int($1)) }.reduce(0, +)
                    n += 3
                }
            }
            XCTAssertEqual([tile.width, tile.height], [t.x.count, t.y.count])
            XCTAssertLessThan(Double(sum) / Double(n), 6, "tile 13/11_9 shows its window of the source (mean difference)")

            // The same job again: every part unchanged, nothing rewritten.
            let again = try c.client.submit(spec)
            let end2 = try c.client.wait(job: again.job, within: 300)
            XCTAssertEqual(end2.skipped, submitted.tasks - 1, c.logs().suffix(2000).description)
            XCTAssertEqual(end2.failed, 1)
        }
    }

    /// SIGKILL the coordinator mid-job and start it again on the same journal: every part
    /// ends exactly once, and each pyramid's descriptor (held until its other parts are
    /// done) is written after the restart too.
    func testCoordinatorRestartKeepsDescriptorsWaiting() throws {
        let c = try Cluster()
        var names: [String] = []
        for i in 0..<8 {
            let name = "p\(i)"
            try Data(try Codec.encodeJPEG(TilePoolTests.scene(3000, 2000, seed: UInt64(10 + i)), quality: 85))
                .write(to: URL(fileURLWithPath: c.dir + "/in/\(name).jpg"))
            names.append(name)
        }
        try c.startCoordinator()
        try c.startWorker()
        let spec = try c.job(kind: .tiles) { s in
            s.outputs = []
            s.tiles = TileSettings()
        }
        let submitted = try c.client.submit(spec)
        _ = try c.waitFor(submitted.job) { $0.done >= 6 }
        kill(c.coordinator!.processIdentifier, SIGKILL)
        c.coordinator!.waitUntilExit()
        usleep(300_000)
        try c.startCoordinator()
        let end = try c.client.wait(job: submitted.job, within: 300)
        XCTAssertEqual(end.state, .succeeded, c.logs().suffix(3000).description)
        let records = try c.records(submitted.job)
        XCTAssertEqual(records.count, submitted.tasks)
        let parts = records.compactMap { r in r.tiles.map { r.input + "#" + ($0.part?.description ?? "") } }
        XCTAssertEqual(Set(parts).count, submitted.tasks, "every part exactly once")
        var expected: Set<String> = []
        for n in names { expected.formUnion(expectedFiles(c.dir + "/out", name: n, width: 3000, height: 2000)) }
        XCTAssertEqual(files(under: c.dir + "/out").filter { !$0.contains("/.tessera/") }, expected)
    }

    /// A part that fails for good (here: its level directory cannot be made) leaves the
    /// pyramid without a descriptor: the descriptor part waits for every other part and
    /// fails with the reason instead of describing tiles that are not there.
    func testPyramidWithAFailedPartGetsNoDescriptor() throws {
        let c = try Cluster()
        let src = c.dir + "/in/a.jpg"
        try Data(try Codec.encodeJPEG(TilePoolTests.scene(3000, 2000, seed: 4), quality: 85)).write(to: URL(fileURLWithPath: src))
        // Level 12 (full size) of a 3000 px wide image: a file where its directory should be.
        try FileManager.default.createDirectory(atPath: c.dir + "/out/a_files", withIntermediateDirectories: true)
        try Data("in the way".utf8).write(to: URL(fileURLWithPath: c.dir + "/out/a_files/12"))
        try c.startCoordinator()
        try c.startWorker()
        try c.startWorker()
        let spec = try c.job(kind: .tiles) { s in
            s.outputs = []
            s.tiles = TileSettings()
            s.options.maxAttempts = 1
        }
        let submitted = try c.client.submit(spec)
        let end = try c.client.wait(job: submitted.job, within: 300)
        XCTAssertEqual(end.state, .failed)
        let records = try c.records(submitted.job)
        XCTAssertEqual(records.count, submitted.tasks)
        let descriptor = try XCTUnwrap(records.first { $0.error?.code == "incomplete" }, c.logs().suffix(2000).description)
        XCTAssertTrue(descriptor.error!.message.contains("a.jpg: pyramid not finished"), descriptor.error!.message)
        XCTAssertTrue(records.contains { $0.error?.code == "write-failed" })
        XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + "/out/a.dzi"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: c.dir + "/out/a.html"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: c.dir + "/out/a_files/11/0_0.jpg"), "the other levels were made")
    }
}
