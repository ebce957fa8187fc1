import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import XCTest
import TesseraModel
import TesseraTestSupport

/// What planning refuses and fails before anything is decoded (`OutputClaims`), and what a
/// failed publish leaves (nothing).
final class OutputClaimsTests: XCTestCase {
    func job(_ root: String, formats: [FormatChoice] = [], template: String = OutputNaming.single,
             format: OutputFormat = .jpeg) throws -> ExecutableJob {
        var recipe = try PresetCatalog.builtIn.recipe(named: "favicon")
        recipe.output.format = format
        recipe.output.formats = formats
        return ExecutableJob(kind: .thumbnail, outputs: [OutputSpec(name: "favicon", recipe: recipe, path: template)],
                             outputRoot: root, options: JobOptions())
    }

    /// Every publish of a task fails (its place is taken by a directory): the staged files go too.
    func testAFailedPublishLeavesNothingStaged() throws {
        let tmp = TemporaryDirectory()
        let input = tmp.write("in/a.jpg", try jpeg(200, 150))
        let root = tmp.path + "/out"
        _ = tmp.write("out/a.jpg/occupied", [1])  // rename(staged, out/a.jpg) fails: a non-empty directory is there
        let outcome = TaskExecutor.run(try job(root), input: InputFile(path: input, root: tmp.path + "/in"),
                                       fence: Fence(task: 9, attempt: 1) { true })
        XCTAssertEqual(outcome.record.status, .failed)
        XCTAssertEqual(outcome.record.error?.code, "write-failed", outcome.record.error?.message ?? "")
        XCTAssertEqual(tmp.files(under: "out/.tessera"), [], "the staging area is removed with what it held")
    }

    func testAnOutputThatWouldReplaceAnInputIsRefusedNamingBoth() throws {
        let tmp = TemporaryDirectory()
        let a = tmp.write("photos/a.jpg", try jpeg(20, 20)), b = tmp.write("photos/b.png", [0])
        let files = [InputFile(path: a, root: tmp.path + "/photos"), InputFile(path: b, root: tmp.path + "/photos")]
        // Into the input folder itself: a.jpg's thumbnail is a.jpg.
        XCTAssertThrowsError(try OutputClaims.check(try job(tmp.path + "/photos"), inputs: files)) { error in
            let e = error as? JobError
            XCTAssertEqual(e?.code, .outputReplacesInput)
            XCTAssertEqual(e?.file, a)
            XCTAssertTrue(e?.reason.contains("\(tmp.path)/photos/a.jpg") ?? false, e?.reason ?? "")
        }
        // b.png rendered to JPEG is b.jpg: no input is called that, nothing is refused.
        XCTAssertEqual(try OutputClaims.check(try job(tmp.path + "/photos", template: "{dir}/{stem}-t.{ext}"), inputs: files), [:])
        // The same folder through a symlink, and the output of another input (a.png's output a.jpg).
        symlink(tmp.path + "/photos", tmp.path + "/link")
        let other = tmp.write("photos/a.png", [0])
        XCTAssertThrowsError(try OutputClaims.check(try job(tmp.path + "/link", formats: [FormatChoice(.jpeg)]),
                                                    inputs: [InputFile(path: other, root: tmp.path + "/photos")] + files)) { error in
            XCTAssertEqual((error as? JobError)?.code, .outputReplacesInput)
            XCTAssertEqual((error as? JobError)?.file, a, "the input that would be lost is named")
            XCTAssertTrue((error as? JobError)?.reason.contains("of \(other)") ?? false, "and the input whose output it is")
        }
    }

    func testInputsWhoseOutputsShareAFileBothFailNamingEachOther() throws {
        let tmp = TemporaryDirectory()
        let files = ["x.jpg", "x.png", "y.jpg"].map { InputFile(path: tmp.write("c/" + $0, [0]), root: tmp.path + "/c") }
        let collisions = try OutputClaims.check(try job(tmp.path + "/out", formats: [FormatChoice(.webp)]), inputs: files)
        XCTAssertEqual(collisions.keys.sorted(), [0, 1])
        XCTAssertEqual(collisions[0]?.code, .outputCollision)
        XCTAssertTrue(collisions[0]?.reason.contains("\(tmp.path)/out/x.webp would also be written by \(files[1].path)") ?? false,
                      collisions[0]?.reason ?? "")
        XCTAssertTrue(collisions[1]?.reason.contains("by \(files[0].path)") ?? false)
        XCTAssertTrue(collisions[1]?.reason.contains("{srcext}") ?? false, "the fix is suggested")
        // {srcext} tells them apart.
        XCTAssertEqual(try OutputClaims.check(try job(tmp.path + "/out", formats: [FormatChoice(.webp)], template: "{dir}/{stem}.{srcext}.{ext}"),
                                              inputs: files), [:])
        // Sources keeping their own format (original) do not collide.
        XCTAssertEqual(try OutputClaims.check(try job(tmp.path + "/out", format: .original), inputs: files), [:])
        XCTAssertEqual(try OutputClaims.check(try job(tmp.path + "/out", format: .jpeg), inputs: files).count, 2, "x.jpg twice")
    }

    /// A walk does not read the output folder back when it lies inside the input folder.
    func testWalksSkipTheOutputRoot() throws {
        let tmp = TemporaryDirectory()
        _ = tmp.write("nest/a.jpg", [0])
        _ = tmp.write("nest/thumbs/a.jpg", [0])
        _ = tmp.write("nest/.tessera/x.jpg", [0])
        _ = tmp.write("nest/sub/b.jpg", [0])
        let found = try JobPlanner.expand(tmp.path + "/nest", outputRoot: tmp.path + "/nest/thumbs").map(\.path)
        XCTAssertEqual(found, [tmp.path + "/nest/a.jpg", tmp.path + "/nest/sub/b.jpg"])
        XCTAssertEqual(try JobPlanner.expand(tmp.path + "/nest").count, 3, "without an output root only hidden folders are skipped")
    }
}
