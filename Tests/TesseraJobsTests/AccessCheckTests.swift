import Foundation
import TesseraJobs
import TesseraModel
import TesseraTasks
import TesseraTestSupport
import XCTest

/// Planning's guard on what a confined job reaches: roots judged after symbolic links, a
/// submitter's roots narrowing the coordinator's, buckets by prefix, and outputs that may
/// replace only what Tessera wrote.
final class AccessCheckTests: XCTestCase {
    var d = ""
    let fm = FileManager.default

    override func setUpWithError() throws {
        d = NSTemporaryDirectory() + "tessera-access-\(UUID().uuidString.prefix(8))"
        for sub in ["in/a", "in/b", "out", "secret"] { try fm.createDirectory(atPath: d + "/" + sub, withIntermediateDirectories: true) }
        for f in ["in/a/x.jpg", "in/b/y.jpg", "secret/z.jpg"] { fm.createFile(atPath: d + "/" + f, contents: Data([1])) }
        try fm.createSymbolicLink(atPath: d + "/in/a/link.jpg", withDestinationPath: d + "/secret/z.jpg")
        try fm.createSymbolicLink(atPath: d + "/in/dirlink", withDestinationPath: d + "/secret")
        try fm.createSymbolicLink(atPath: d + "/out/escape", withDestinationPath: d + "/secret")
    }

    override func tearDownWithError() throws { try? fm.removeItem(atPath: d) }

    func code(_ body: () throws -> Void) -> String? {
        do { try body() } catch let e as JobError { return e.code.rawValue } catch { return "\(error)" }
        return nil
    }

    func testPathsAreJudgedAfterTheirLinks() throws {
        let check = AccessCheck(roots: AccessRoots(read: [d + "/in"], write: [d + "/out"]), overwrite: true)
        XCTAssertNil(code { try check.check(InputFile(path: d + "/in/a/x.jpg", root: d + "/in")) })
        XCTAssertEqual(code { try check.check(InputFile(path: d + "/in/a/link.jpg", root: d + "/in")) }, "forbidden", "a file link out")
        XCTAssertEqual(code { try check.check(InputFile(path: d + "/in/dirlink/z.jpg", root: d + "/in")) }, "forbidden", "a folder link out")
        XCTAssertEqual(code { try check.check(InputFile(path: d + "/in/../secret/z.jpg", root: d)) }, "forbidden", "dot-dot")
        XCTAssertEqual(code { try check.check(InputFile(path: "/nowhere/at/all.jpg", root: "/nowhere")) }, "forbidden",
                       "a path that does not exist is refused the same way")
        XCTAssertNil(code { try check.check(InputFile(path: "https://example.com/a.jpg", root: "https://example.com")) },
                     "URLs are the source policy's")
        var spec = JobSpec(name: "j", inputs: [.path(d + "/in", patterns: [], recursive: true)], output: d + "/out/new/deeper")
        XCTAssertNil(code { try check.check(spec) }, "an output root that does not exist yet, inside the root")
        spec.output = d + "/out/escape/x"
        XCTAssertEqual(code { try check.check(spec) }, "forbidden")
        spec.output = d + "/outside"
        XCTAssertEqual(code { try check.check(spec) }, "forbidden", "a sibling whose name starts like the root")
        spec.output = d + "/out"
        spec.inputs = [.manifest(d + "/secret/list.txt")]
        XCTAssertEqual(code { try check.check(spec) }, "forbidden", "a manifest outside")
    }

    func testOwnRootsNarrowTheCoordinators() {
        let coordinator = AccessRoots(read: [d + "/in", "s3://photos/all"], write: [d + "/out"])
        let own = AccessRoots(read: [d + "/in/a", d + "/secret", "s3://photos/all/alice", "s3://other"], write: [d])
        let both = coordinator.narrowed(by: own, resolve: AccessCheck.resolve)
        XCTAssertEqual(both.read, [d + "/in/a", "s3://photos/all/alice"])
        XCTAssertEqual(both.write, [d + "/out"], "a wider own root keeps the coordinator's")
        XCTAssertTrue(AccessRoots.root("s3://photos/all", contains: "s3://photos/all/x/y.jpg", resolve: { $0 }))
        XCTAssertFalse(AccessRoots.root("s3://photos/all", contains: "s3://photos/allx/y.jpg", resolve: { $0 }), "at a / boundary")
        XCTAssertFalse(AccessRoots.root("s3://photos/all", contains: "s3://other/all/y.jpg", resolve: { $0 }))
        XCTAssertTrue(AccessRoots.root("s3://photos", contains: "s3://photos/any.jpg", resolve: { $0 }))
        XCTAssertThrowsError(try AccessRoots.parse("read relative/path\n", file: "alice.roots"))
        XCTAssertThrowsError(try AccessRoots.parse("delete /x\n", file: "alice.roots"))
        XCTAssertEqual(try AccessRoots.parse("# alice\nread /a\nwrite s3://b/p\n\n", file: "alice.roots"),
                       AccessRoots(read: ["/a"], write: ["s3://b/p"]))
    }

    func testOutputsReplaceOnlyWhatTesseraWrote() throws {
        let job = JobSpec(name: "j", inputs: [.path(d + "/in", patterns: [], recursive: true)], output: d + "/out",
                          outputs: [OutputSpec(name: "t", recipe: try PresetCatalog.builtIn.recipe(named: "favicon"), path: "{stem}.conf")])
        let input = InputFile(path: d + "/in/a/x.jpg", root: d + "/in/a")
        let roots = AccessRoots(read: [d + "/in"], write: [d + "/out"])
        XCTAssertNil(code { try AccessCheck(roots: roots).checkOutputs(of: input, in: job.executable) }, "nothing there yet")
        fm.createFile(atPath: d + "/out/x.conf", contents: Data("secret".utf8))
        XCTAssertEqual(code { try AccessCheck(roots: roots).checkOutputs(of: input, in: job.executable) }, "output-exists")
        XCTAssertNil(code { try AccessCheck(roots: roots, wroteBefore: { $0 == self.d + "/out/x.conf" }).checkOutputs(of: input, in: job.executable) })
        XCTAssertNil(code { try AccessCheck(roots: roots, overwrite: true).checkOutputs(of: input, in: job.executable) })
        var escaping = job
        escaping.outputs[0].path = "escape/{stem}.jpg"
        XCTAssertEqual(code { try AccessCheck(roots: roots, overwrite: true).checkOutputs(of: input, in: escaping.executable) }, "forbidden")
        XCTAssertEqual(code { try AccessCheck(roots: nil, refuseLocal: "no").check(input) }, "forbidden")
    }
}
