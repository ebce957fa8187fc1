import Foundation
import TesseraExecution
import TesseraImaging
import TesseraJobs
import TesseraTasks
import XCTest
import TesseraModel
import TesseraTestSupport

/// `scales: [1, 2, 3]` on an output: device-pixel-ratio variants from one decode.
final class SizeVariantTests: XCTestCase {
    func testScalesMakeExactMultiplesNamedAtNx() throws {
        let tmp = TemporaryDirectory()
        let input = tmp.write("in/photo.jpg", try jpeg(2400, 1600))
        let yaml = """
        name: dpr
        inputs: [\(tmp.path)/in]
        output: \(tmp.path)/out
        outputs:
          - recipe: {name: card, operations: [{op: resize, width: 300, height: 200, mode: fill}]}
            scales: [1, 2, 3]
        """
        let spec = try JobFile.parse(yaml: yaml, file: "dpr.yaml", baseDirectory: tmp.path)
        let job = spec.executable
        XCTAssertEqual(job.outputs.map(\.name), ["card", "card@2x", "card@3x"])
        let outcome = TaskExecutor.run(job, input: InputFile(path: input, root: tmp.path + "/in"))
        XCTAssertEqual(outcome.record.status, .succeeded, "\(outcome.record.error?.message ?? "")")
        let sizes = Dictionary(uniqueKeysWithValues: outcome.record.outputs.map { (($0.path as NSString).lastPathComponent, [$0.width, $0.height]) })
        XCTAssertEqual(sizes, ["photo.jpg": [300, 200], "photo@2x.jpg": [600, 400], "photo@3x.jpg": [900, 600]])
        XCTAssertTrue((3...6).contains(outcome.record.scaleEighths ?? 0), "one DCT-scaled decode covering the largest (900 of 2400 px): \(outcome.record.scaleEighths ?? 0)/8")
        for (name, size) in sizes {
            let image = try Renderer.decode(Array(try Data(contentsOf: URL(fileURLWithPath: tmp.path + "/out/" + name))))
            XCTAssertEqual([image.width, image.height], size)
        }
        // Never upscaled past the source: @3x of a 1000 px box from a 2400 px photo stops at the source.
        var wide = spec
        wide.outputs[0].recipe.operations = [.resize(Resize(width: 1000, height: nil))]
        let big = TaskExecutor.run(wide.executable, input: InputFile(path: input, root: tmp.path + "/in"))
        XCTAssertEqual(big.record.outputs.map(\.width).sorted(), [1000, 2000, 2400])
        // Bad factors are refused with the field.
        for (bad, message) in [("[0, 2]", "outputs[0].scales"), ("[2, 2]", "outputs[0].scales"), ("[9]", "outputs[0].scales")] {
            let text = yaml.replacingOccurrences(of: "[1, 2, 3]", with: bad)
            XCTAssertThrowsError(try JobFile.parse(yaml: text, file: "dpr.yaml", baseDirectory: tmp.path)) { e in
                XCTAssertTrue("\(e)".contains(message), "\(bad): \(e)")
            }
        }
    }
}
