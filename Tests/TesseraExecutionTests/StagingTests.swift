import Foundation
import TesseraImaging
import TesseraExecution
import TesseraTasks
import XCTest
import TesseraModel
import TesseraTestSupport

/// Fenced attempts in the executor: outputs are staged and published only on commit;
/// what a killed attempt left is cleared by the next one.
final class StagingTests: XCTestCase {
    func job(_ root: String) throws -> ExecutableJob {
        ExecutableJob(kind: .thumbnail,
                      outputs: [OutputSpec(name: "favicon", recipe: try PresetCatalog.builtIn.recipe(named: "favicon"), path: OutputNaming.single)],
                      outputRoot: root, options: JobOptions())
    }

    func testCommittedAttemptPublishesAndClearsAKilledAttemptsLeftovers() throws {
        let tmp = TemporaryDirectory()
        let input = tmp.write("in/a.jpg", try jpeg(200, 150))
        let root = tmp.path + "/out"
        // Attempt 65537 was killed while writing its file; task 420 is another task in flight.
        _ = tmp.write("out/.tessera/staging/42.65537.0", [1, 2, 3])
        _ = tmp.write("out/.tessera/staging/420.1.0", [4, 5, 6])
        let asked = NSLock()
        nonisolated(unsafe) var commits = 0
        let fence = Fence(task: 42, attempt: 65538) {
            asked.lock(); commits += 1; asked.unlock()
            return true
        }
        let outcome = TaskExecutor.run(try job(root), input: InputFile(path: input, root: tmp.path + "/in"), fence: fence)
        XCTAssertEqual(outcome.record.status, .succeeded, outcome.record.error?.message ?? "")
        XCTAssertFalse(outcome.superseded)
        XCTAssertEqual(commits, 1)
        XCTAssertEqual(tmp.files(under: "out"), [".tessera/staging/420.1.0", "a.jpg"],
                       "the output, nothing of either attempt's staging, the other task's untouched")
        let info = try ImageInfo.inspect([UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/a.jpg"))))
        XCTAssertEqual(info.width, 64)
    }

    func testRefusedAttemptPublishesNothing() throws {
        let tmp = TemporaryDirectory()
        let input = tmp.write("in/a.jpg", try jpeg(200, 150))
        let root = tmp.path + "/out"
        let fence = Fence(task: 7, attempt: 3) { false }
        let outcome = TaskExecutor.run(try job(root), input: InputFile(path: input, root: tmp.path + "/in"), fence: fence)
        XCTAssertTrue(outcome.superseded)
        XCTAssertEqual(tmp.files(under: "out"), [], "nothing published, nothing left staged")
    }

    /// A deferred fence: the task ends with its file staged and its commit not asked; the
    /// caller's `finish` publishes it (the record then names it) or discards it.
    func testADeferredCommitPublishesOnlyWhenFinishedGranted() throws {
        let tmp = TemporaryDirectory()
        let input = tmp.write("in/a.jpg", try jpeg(200, 150))
        let root = tmp.path + "/out"
        let fence = Fence(task: 9, attempt: 2, deferred: true) {
            XCTFail("a deferred fence is not asked by the executor")
            return false
        }
        let outcome = TaskExecutor.run(try job(root), input: InputFile(path: input, root: tmp.path + "/in"), fence: fence)
        let pending = try XCTUnwrap(outcome.pendingCommit, outcome.record.error?.message ?? "")
        XCTAssertEqual(tmp.files(under: "out"), [".tessera/staging/9.2.0"], "staged, not published")
        XCTAssertEqual(outcome.record.outputs, [], "nothing is named before it is published")
        let done = pending.finish(granted: true)
        XCTAssertEqual(done.record.status, .succeeded)
        XCTAssertFalse(done.superseded)
        XCTAssertEqual(done.record.outputs.map(\.path), [root + "/a.jpg"])
        XCTAssertEqual(tmp.files(under: "out"), ["a.jpg"])
        XCTAssertGreaterThanOrEqual(done.record.timings.total, outcome.record.timings.total)

        let refused = TaskExecutor.run(try job(root + "2"), input: InputFile(path: input, root: tmp.path + "/in"), fence: fence)
        let back = try XCTUnwrap(refused.pendingCommit).finish(granted: false)
        XCTAssertTrue(back.superseded)
        XCTAssertEqual(tmp.files(under: "out2"), [], "nothing published, nothing left staged")
    }
}
