import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import XCTest
import TesseraModel
import TesseraTestSupport

final class InputDiscoveryTests: XCTestCase {
    func testDirectoriesAreSearchedRecursivelyForImages() throws {
        let tmp = TemporaryDirectory()
        let img = try jpeg(8, 8)
        _ = tmp.write("b.jpg", img)
        _ = tmp.write("A/c.JPEG", img)
        _ = tmp.write("A/B/d.png", img)
        _ = tmp.write("A/g.TIF", img)
        _ = tmp.write("h.tiff", img)
        _ = tmp.write("notes.txt", Array("x".utf8))
        _ = tmp.write(".hidden/e.jpg", img)
        _ = tmp.write(".f.jpg", img)
        let found = try InputDiscovery.expand([tmp.path])
        XCTAssertEqual(found.map { String($0.path.dropFirst(tmp.path.count + 1)) }, ["A/B/d.png", "A/c.JPEG", "A/g.TIF", "b.jpg", "h.tiff"])
        XCTAssertEqual(found[0].relativeDirectory, "A/B")
        let flat = try InputDiscovery.expand([tmp.path], recursive: false)
        XCTAssertEqual(flat.count, 2)
        XCTAssertThrowsError(try InputDiscovery.expand([tmp.path + "/missing.jpg"])) {
            XCTAssertEqual(($0 as? JobError)?.code, .inputNotFound)
        }
        // Files named explicitly are taken whatever their extension (content is sniffed).
        let odd = tmp.write("photo.data", img)
        XCTAssertEqual(try InputDiscovery.expand([odd]).count, 1)
    }
}

final class JobPlannerTests: XCTestCase {
    func testSymlinkLoopsAreWalkedOnce() throws {
        let tmp = TemporaryDirectory()
        _ = tmp.write("a/photo.jpg", try jpeg(8, 8))
        try FileManager.default.createSymbolicLink(atPath: tmp.path + "/a/loop", withDestinationPath: ".")
        try FileManager.default.createSymbolicLink(atPath: tmp.path + "/a/up", withDestinationPath: "..")
        let job = JobSpec(name: "t", inputs: [.path(tmp.path, patterns: [], recursive: true)], output: tmp.path + "/out")
        let files = try JobPlanner.inputs(of: job)
        XCTAssertEqual(files.map { String($0.path.dropFirst(tmp.path.count)) }, ["/a/photo.jpg"])
    }
}
