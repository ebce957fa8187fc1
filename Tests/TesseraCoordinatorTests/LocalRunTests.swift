import XCTest
import TesseraCoordinator
import TesseraTasks

/// `tessera run`'s policy, outside the executable: where the journal goes, what a rerun resumes.
final class LocalRunTests: XCTestCase {
    func testJournalSitsBesideLocalOutputsAndInTheStateDirectoryForBuckets() {
        XCTAssertEqual(LocalRun.journalPath(output: "/srv/out", stateDirectory: "/unused"), "/srv/out/.tessera/journal.sqlite")
        let a = LocalRun.journalPath(output: "s3://bucket/a", stateDirectory: "/state")
        let b = LocalRun.journalPath(output: "s3://bucket/b", stateDirectory: "/state")
        XCTAssertTrue(a.hasPrefix("/state/journal-") && a.hasSuffix(".sqlite"), a)
        XCTAssertNotEqual(a, b, "one journal per output root")
        XCTAssertEqual(a, LocalRun.journalPath(output: "s3://bucket/a", stateDirectory: "/state"))
        XCTAssertEqual(LocalRun.stateDirectory(["XDG_STATE_HOME": "/x", "HOME": "/h"]), "/x/tessera")
        // The XDG spec ignores a relative path.
        XCTAssertEqual(LocalRun.stateDirectory(["XDG_STATE_HOME": "rel", "HOME": "/h"]), "/h/.local/state/tessera")
    }

    func testARerunResumesItsOwnJobAndDropsTheOthers() {
        let mine = JobSpec(name: "t", kind: .thumbnail, inputs: [.manifest("/in.txt")], output: "/out")
        var other = mine
        other.name = "other settings"
        let found = [RecoveredJob(id: "j1", spec: other, done: 1, worked: 1, total: 5),
                     RecoveredJob(id: "j2", spec: mine, done: 3, worked: 2, total: 5),
                     RecoveredJob(id: "j3", spec: mine, done: 0, worked: 0, total: 5)]
        let (resume, drop) = LocalRun.resumption(of: mine, among: found)
        XCTAssertEqual(resume?.id, "j2")
        XCTAssertEqual(drop.map(\.id), ["j1", "j3"])
        XCTAssertNil(LocalRun.resumption(of: mine, among: [found[0]]).resume)
    }
}
