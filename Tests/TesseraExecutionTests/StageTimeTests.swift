import Foundation
import TesseraExecution
import TesseraImaging
import TesseraTasks
import TesseraTestSupport
import XCTest
import TesseraModel

/// Every millisecond of a task belongs to a stage: HEIF/AVIF decodes in libheif were outside
/// every stage (stage shares summed to 0.62–0.72).
final class StageTimeTests: XCTestCase {
    func testStagesAddUpToTheTotalForEveryFormat() throws {
        let tmp = TemporaryDirectory()
        let image = PixelBuffer(width: 1600, height: 1200, layout: .rgb)
        for y in 0..<image.height {
            for x in 0..<image.width {
                image.setPixel(x: x, y: y, [UInt8(truncatingIfNeeded: x * 7 ^ y), UInt8(truncatingIfNeeded: y * 3), UInt8(truncatingIfNeeded: x + y)])
            }
        }
        var sources: [(String, [UInt8])] = [
            ("jpg", try Codec.encodeJPEG(image, quality: 85)), ("png", try Codec.encodePNG(image)),
            ("webp", try Codec.encodeWebP(image)), ("avif", try Codec.encodeHEIF(image)),
        ]
        if Codec.canEncodeHEIC { sources.append(("heic", try Codec.encodeHEIF(image, hevc: true))) }
        let recipe = try PresetCatalog.builtIn.recipe(named: "thumbnail")
        var options = JobOptions()
        options.incremental = false
        let job = ExecutableJob(kind: .thumbnail, outputs: [OutputSpec(name: "t", recipe: recipe, path: OutputNaming.single)],
                                outputRoot: tmp.path + "/out", options: options)
        var renderOptions = RenderOptions()
        renderOptions.heifThumbnails = false
        for (ext, bytes) in sources {
            let path = tmp.write("in/source-\(ext).\(ext)", bytes)
            for _ in 0..<2 {  // the first run of a format also loads its codec
                let record = TaskExecutor.run(job, input: InputFile(path: path, root: tmp.path + "/in"), renderOptions: renderOptions).record
                XCTAssertEqual(record.status, .succeeded, record.error?.message ?? "")
                let t = record.timings
                let staged = Stage.allCases.filter { $0 != .total && $0 != .queueWait }.map { t[$0] }.reduce(0, +)
                XCTAssertEqual(staged, t.total, accuracy: max(0.02 * t.total, 0.2),
                               "\(ext): stages \(staged) ms of \(t.total) ms (decode \(t.decode), resize \(t.resize), finish \(t.finish), encode \(t.encode), read \(t.read), write \(t.write))")
                XCTAssertGreaterThan(t.decode, 0, ext)
                XCTAssertGreaterThan(t.encode, 0, ext)
                // What no stage timed goes to finish: a codec's work left untimed (libheif's
                // decode was) would show there, not in decode.
                XCTAssertLessThan(t.finish, 0.15 * t.total + 0.5, "\(ext): finish \(t.finish) ms of \(t.total) ms")
                XCTAssertGreaterThan(t.decode, t.finish, ext)
            }
        }
    }
}
