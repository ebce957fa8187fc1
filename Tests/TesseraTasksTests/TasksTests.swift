import Foundation
import TesseraModel
import TesseraTasks
import TesseraTestSupport
import XCTest

final class OutputNamingTests: XCTestCase {
    func testTemplateTokens() throws {
        let input = InputFile(path: "/photos/2024/trip/IMG_1.JPG", root: "/photos")
        XCTAssertEqual(input.relativeDirectory, "2024/trip")
        XCTAssertEqual(input.stem, "IMG_1")
        let tmp = TemporaryDirectory()
        let naming = OutputNaming(root: tmp.path, template: "{preset}/{dir}/{stem}.{ext}")
        XCTAssertEqual(try naming.path(for: input, preset: "thumbnail", format: .jpeg),
                       tmp.path + "/thumbnail/2024/trip/IMG_1.jpg")
        let top = InputFile(path: "/photos/a.png", root: "/photos")
        XCTAssertEqual(try OutputNaming(root: tmp.path, template: OutputNaming.single).path(for: top, preset: "x", format: .png),
                       tmp.path + "/a.png")
    }

    func testOutputsCannotEscapeTheRoot() throws {
        let tmp = TemporaryDirectory()
        func refused(_ relative: String) {
            XCTAssertThrowsError(try OutputNaming.confine(relative, under: tmp.path), relative) {
                XCTAssertEqual(($0 as? JobError)?.code, .unsafeOutputPath, relative)
            }
        }
        refused("../x.jpg")
        refused("a/../../x.jpg")
        refused("/etc/passwd")
        refused("")
        // A symlink inside the root that points outside it.
        let outside = TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: tmp.path + "/link", withDestinationPath: outside.path)
        refused("link/x.jpg")
        XCTAssertEqual(try OutputNaming.confine("./a//b.jpg", under: tmp.path), tmp.path + "/a/b.jpg")
        // A stem with ".." inside a name is just a name.
        XCTAssertEqual(try OutputNaming.confine("a..b.jpg", under: tmp.path), tmp.path + "/a..b.jpg")
    }
}

final class PathsTests: XCTestCase {
    /// The fast path (a path already normal is returned as is) agrees with the full one.
    func testNormalizeKeepsNormalPathsAndFixesTheRest() {
        let cases: [(String, String)] = [
            ("/a/b.jpg", "/a/b.jpg"), ("a/b", "a/b"), ("/", "/"), ("a", "a"), (".", "."), ("", "."),
            ("/a//b", "/a/b"), ("/a/./b", "/a/b"), ("/a/../b", "/b"), ("a/", "a"), ("./a", "a"),
            ("/..", "/"), ("../a", "../a"), ("/a/b/..", "/a"), ("/a/.b/c", "/a/.b/c"), ("/a/..b", "/a/..b"),
            ("/é/ü.jpg", "/é/ü.jpg"), ("//x", "/x"),
        ]
        for (input, expected) in cases { XCTAssertEqual(Paths.normalize(input), expected, input) }
    }
}

final class FileIOTests: XCTestCase {
    func testAtomicWriteLeavesNoTemporaryFiles() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.path + "/deep/er/out.jpg"
        try FileIO.writeAtomically([1, 2, 3], to: path)
        try FileIO.writeAtomically([4, 5], to: path)  // replaces
        XCTAssertEqual(try FileIO.read(path, limit: 100), [4, 5])
        XCTAssertEqual(tmp.files(), ["deep/er/out.jpg"])
        XCTAssertThrowsError(try FileIO.read(path, limit: 1)) { XCTAssertEqual(($0 as? JobError)?.code, .inputTooLarge) }
        XCTAssertThrowsError(try FileIO.read(tmp.path + "/missing", limit: 1)) { XCTAssertEqual(($0 as? JobError)?.code, .inputNotFound) }
        XCTAssertThrowsError(try FileIO.read(tmp.path, limit: 100), "a directory is not a file")
        XCTAssertThrowsError(try FileIO.writeAtomically([1], to: "/proc/nope/x.jpg"))
    }
}
