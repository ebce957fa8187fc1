import Foundation
import TesseraImaging
import TesseraTestSupport
import XCTest
import TesseraModel

/// What a new user ran into (lost originals, files silently skipped, misreported counts):
/// each case as the user typed it, against the built binary.
final class NewUserTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "tessera-newuser-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/in/sub", withIntermediateDirectories: true)
        let image = PixelBuffer(width: 400, height: 300, layout: .rgb)
        image.fill([90, 120, 150])
        try write("in/a.jpg", try Codec.encodeJPEG(image, quality: 85))
        try write("in/sub/b.jpg", try Codec.encodeJPEG(image, quality: 85))
        try write("in/c.png", try Codec.encodePNG(image))
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func write(_ relative: String, _ bytes: [UInt8]) throws {
        let path = dir + "/" + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    func bytes(_ relative: String) -> Data? { FileManager.default.contents(atPath: dir + "/" + relative) }

    /// `render DIR -s 100 -o DIR` replaced the originals with thumbnails, exit 0.
    func testRenderingIntoTheInputFolderIsRefusedBeforeAnythingIsDecoded() throws {
        let original = bytes("in/a.jpg")
        let r = try tessera(["render", dir + "/in", "-s", "100", "-o", dir + "/in"])
        XCTAssertEqual(r.status, 2, r.stdout + r.stderr)
        XCTAssertTrue(r.stderr.contains("[output-replaces-input]"), r.stderr)
        XCTAssertTrue(r.stderr.contains("\(dir)/in/a.jpg"), r.stderr)
        XCTAssertEqual(bytes("in/a.jpg"), original, "the original is untouched")
        // Through a symlinked output folder, and as a job on the pool.
        symlink(dir + "/in", dir + "/alias")
        XCTAssertEqual(try tessera(["render", dir + "/in", "-s", "100", "-o", dir + "/alias"]).status, 2)
        XCTAssertEqual(try tessera(["strip", dir + "/in", "-o", dir + "/in"]).status, 2)
        try Data("name: t\ninputs: [in]\noutput: alias\noutputs: [{preset: thumbnail, path: \"{dir}/{stem}.{ext}\"}]\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let run = try tessera(["run", dir + "/job.yaml", "-w", "1"])
        XCTAssertEqual(run.status, 2, run.stdout + run.stderr)
        XCTAssertTrue(run.stderr.contains("output-replaces-input"), run.stderr)
        XCTAssertEqual(bytes("in/a.jpg"), original)
        // Named apart, the same folder is fine.
        let apart = try tessera(["render", dir + "/in", "-s", "100", "-o", dir + "/in", "--template", "{dir}/{stem}-small.{ext}"])
        XCTAssertEqual(apart.status, 0, apart.stderr)
        XCTAssertNotNil(bytes("in/a-small.jpg"))
    }

    /// `render nest -o nest/thumbs` twice made `nest/thumbs/thumbs/…`.
    func testAnOutputFolderInsideTheInputsIsNotReadBack() throws {
        for _ in 0..<2 {
            let r = try tessera(["render", dir + "/in", "-s", "50", "-o", dir + "/in/thumbs"])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stdout.contains("3 images, 3 ok"), r.stdout)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/in/thumbs/thumbs"))
        try Data("name: t\ninputs: [in]\noutput: in/jobthumbs\noutputs: [{preset: thumbnail}]\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        for _ in 0..<2 { XCTAssertEqual(try tessera(["run", dir + "/job.yaml", "-w", "1"]).status, 0) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/in/jobthumbs/jobthumbs"))
    }

    /// `run job.yaml --journal j.sqlite` (a journal in the current folder) stopped with
    /// "cannot create the output root" naming an empty path.
    func testAJournalNamedWithoutAFolderLivesInTheCurrentOne() throws {
        try Data("name: t\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}]\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let r = try tessera(["run", "job.yaml", "-w", "1", "--journal", "j.sqlite"], in: dir)
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/j.sqlite"))
        XCTAssertNotNil(bytes("out/a.jpg"))
    }

    /// `x.jpg` and `x.png` to WebP reported "2 ok" and left one `x.webp`.
    func testInputsThatMapToOneOutputFailNamingEachOther() throws {
        try write("coll/x.jpg", try XCTUnwrap(bytes("in/a.jpg")).map { $0 })
        try write("coll/x.png", try XCTUnwrap(bytes("in/c.png")).map { $0 })
        try write("coll/y.jpg", try XCTUnwrap(bytes("in/a.jpg")).map { $0 })
        let r = try tessera(["render", dir + "/coll", "-s", "64", "--format", "webp", "-o", dir + "/out"])
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("3 images, 1 ok, 2 failed"), r.stdout)
        XCTAssertTrue(r.stderr.contains("\(dir)/coll/x.jpg: its output \(dir)/out/x.webp would also be written by \(dir)/coll/x.png"), r.stderr)
        XCTAssertTrue(r.stderr.contains("\(dir)/coll/x.png: its output \(dir)/out/x.webp would also be written by \(dir)/coll/x.jpg"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out/x.webp"), "neither wrote it")
        let fixed = try tessera(["render", dir + "/coll", "-s", "64", "--format", "webp", "-o", dir + "/out2",
                                 "--template", "{dir}/{stem}.{srcext}.{ext}"])
        XCTAssertEqual(fixed.status, 0, fixed.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/out2").sorted(), ["x.jpg.webp", "x.png.webp", "y.jpg.webp"])
        // On the pool: the colliding tasks fail at planning, the others run.
        try Data("name: t\ninputs: [coll]\noutput: pool\noutputs: [{preset: thumbnail, formats: [webp]}]\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let run = try tessera(["run", dir + "/job.yaml", "-w", "1", "--json"])
        XCTAssertEqual(run.status, 1, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains("\"failed\":2"), run.stdout)
        XCTAssertTrue(run.stdout.contains("\"succeeded\":1"), run.stdout)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir + "/pool").filter { !$0.hasPrefix(".") }, ["y.webp"])
    }

    /// `strip` left GPS in HEIC files with exit 0 and a note.
    func testStripFailsAFileWhoseMetadataItCannotRemove() throws {
        let image = PixelBuffer(width: 64, height: 48, layout: .rgb)
        image.fill([10, 200, 30])
        try write("phone/p.avif", try Codec.encodeHEIF(image, exif: Exif.build(orientation: 1, gps: (48.8, 2.3))))
        try write("phone/a.jpg", try Codec.encodeJPEG(image, quality: 85, exif: Exif.build(orientation: 1, gps: (48.8, 2.3))))
        let r = try tessera(["strip", dir + "/phone", "-o", dir + "/clean"])
        XCTAssertEqual(r.status, 1, r.stdout + r.stderr)
        XCTAssertTrue(r.stderr.contains("\(dir)/phone/p.avif: its metadata (EXIF with GPS, XMP) cannot be removed"), r.stderr)
        XCTAssertTrue(r.stdout.contains("2 files, 1 stripped, 1 failed"), r.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/clean/p.avif"))
        let json = try tessera(["strip", dir + "/phone", "-o", dir + "/clean2", "--json"])
        XCTAssertTrue(json.stdout.contains("\"status\":\"failed\""), json.stdout)
        XCTAssertTrue(json.stdout.contains("\"type\":\"summary\""), json.stdout)
    }

    /// "failed (unsupported-format): 7" listed 5 without saying so; "1 images".
    func testTheSummarySaysHowManyFailuresItLeftOut() throws {
        for i in 0..<7 { try write("bad/f\(i).jpg", Array("not an image at all".utf8)) }
        try Data("name: t\ninputs: [bad]\noutput: out\noutputs: [{preset: thumbnail}]\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let r = try tessera(["run", dir + "/job.yaml", "-w", "1"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("failed (unsupported-format): 7"), r.stdout)
        XCTAssertTrue(r.stdout.contains("  and 2 more ("), r.stdout)
        try Data("name: t\ninputs: [in/a.jpg]\noutput: one\noutputs: [{preset: thumbnail}]\n".utf8)
            .write(to: URL(fileURLWithPath: dir + "/one.yaml"))
        let one = try tessera(["run", dir + "/one.yaml", "-w", "1"])
        XCTAssertTrue(one.stdout.contains("1 image in"), one.stdout)
    }
}

extension NewUserTests {
    /// `status` with no coordinator waited 30 s; `submit --timeout 5` waited 120 s.
    func testClientsSayThereIsNoCoordinatorAtOnceAndHonourTheirTimeout() throws {
        let port = freePort()
        for endpoint in ["tcp://127.0.0.1:\(port)", "ipc://\(dir)/none.sock"] {
            let start = Date()
            let r = try tessera(["status", "--coordinator", endpoint])
            XCTAssertEqual(r.status, 3, r.stderr)
            XCTAssertLessThan(Date().timeIntervalSince(start), 2.0, "\(endpoint): 'no coordinator' within 2 s")
            XCTAssertTrue(r.stderr.contains("no coordinator at \(endpoint)"), r.stderr)
        }
        // Something that accepts connections and never answers: the time-out, as given.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(listener, 16), 0)
        try Data("name: t\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}]\n".utf8).write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let start = Date()
        let r = try tessera(["submit", dir + "/job.yaml", "--coordinator", "tcp://127.0.0.1:\(port)", "--timeout", "2"])
        let took = Date().timeIntervalSince(start)
        XCTAssertEqual(r.status, 3, r.stderr)
        XCTAssertTrue(r.stderr.contains("within 2 s"), r.stderr)
        XCTAssertGreaterThan(took, 1.9)
        XCTAssertLessThan(took, 4)
    }

    /// A folder's BMPs, icons and text files were dropped without a word; an empty folder gave exit 0 silently.
    func testFilesPassedOverAreListedAndStrictFailsThem() throws {
        for (name, text) in [("b.bmp", "x"), ("c.ico", "x"), ("d.BMP", "x"), ("notes.txt", "x"), (".hidden.txt", "x")] {
            try write("in/" + name, Array(text.utf8))
        }
        try write("empty/readme.pdf", Array("x".utf8))
        let r = try tessera(["render", dir + "/in", dir + "/empty", "-s", "32", "-o", dir + "/out"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("skipped 5 files that are not images Tessera reads: 2 .bmp, 1 .ico, 1 .pdf, 1 .txt"), r.stdout)
        XCTAssertTrue(r.stderr.contains("warning: \(dir)/empty: no images (1 other file)"), r.stderr)
        let json = try tessera(["render", dir + "/in", "-s", "32", "-o", dir + "/out2", "--json"])
        let summary = json.stdout.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(summary.contains("\"skippedFiles\":{\".bmp\":2,\".ico\":1,\".txt\":1}"), summary)
        let strict = try tessera(["render", dir + "/in", "-s", "32", "-o", dir + "/out3", "--strict"])
        XCTAssertEqual(strict.status, 1, strict.stdout)
        XCTAssertTrue(strict.stdout.contains("7 images, 3 ok, 4 failed"), strict.stdout)
        XCTAssertTrue(strict.stderr.contains("\(dir)/in/c.ico: not an image Tessera reads (.ico)"), strict.stderr)
        try Data("name: t\ninputs: [in]\noutput: pool\noutputs: [{preset: thumbnail}]\n".utf8).write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        let run = try tessera(["run", dir + "/job.yaml", "-w", "1"])
        XCTAssertTrue(run.stdout.contains("skipped 4 files that are not images Tessera reads: 2 .bmp, 1 .ico, 1 .txt"), run.stdout)
    }

    /// `run --output s3://…` made a local folder `./s3:/…`.
    func testLocationOptionsReadURLsAsURLs() throws {
        try Data("name: t\ninputs: [in]\noutput: out\noutputs: [{preset: thumbnail}]\n".utf8).write(to: URL(fileURLWithPath: dir + "/job.yaml"))
        // No store answers on this port: the job fails to reach it, and no local folder is made for the URL.
        let r = try tessera(["run", dir + "/job.yaml", "-w", "1", "--output", "s3://bucket/out",
                             "--input", "s3://bucket/in/"], in: dir,
                            environment: ["AWS_ENDPOINT_URL": "http://127.0.0.1:\(freePort())", "AWS_ACCESS_KEY_ID": "k",
                                          "AWS_SECRET_ACCESS_KEY": "s", "XDG_STATE_HOME": dir + "/state"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("s3://bucket/"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/s3:"), "no local folder named after the URL")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/.tessera"), "no journal in the working directory")
    }
}

extension NewUserTests {
    /// `--max-bytes` without a size said "give a size" before "Unknown option"; plain
    /// re-encoding demanded `-s`.
    func testArgumentErrorsComeFirstAndReencodingKeepsTheSize() throws {
        let unknown = try tessera(["render", dir + "/in/a.jpg", "--bogus", "-o", dir + "/b"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.hasPrefix("error: Unknown option '--bogus'"), unknown.stderr)
        let webp = try tessera(["render", dir + "/in/a.jpg", "--format", "webp", "-o", dir + "/re"])
        XCTAssertEqual(webp.status, 0, webp.stderr)
        let info = try ImageInfo.inspect([UInt8](try XCTUnwrap(bytes("re/a.webp"))))
        XCTAssertEqual(Size(width: info.width, height: info.height), Size(width: 400, height: 300), "the size is kept")
        let budget = try tessera(["render", dir + "/in/a.jpg", "--max-bytes", "3000", "--progressive", "-o", dir + "/small", "--json"])
        XCTAssertEqual(budget.status, 0, budget.stderr)
        XCTAssertLessThanOrEqual(try XCTUnwrap(bytes("small/a.jpg")).count, 3000)
        let lossless = try tessera(["render", dir + "/in/c.png", "--format", "webp", "--lossless", "--effort", "9", "-o", dir + "/ll"])
        XCTAssertEqual(lossless.status, 0, lossless.stderr)
        let decoded = try Renderer.decode([UInt8](try XCTUnwrap(bytes("ll/c.webp"))))
        XCTAssertEqual(decoded.pixel(x: 10, y: 10), [90, 120, 150], "lossless: the exact pixels")
        XCTAssertEqual(try tessera(["render", dir + "/in/a.jpg", "--effort", "12", "-o", dir + "/x"]).status, 2)
        let nothing = try tessera(["render", dir + "/in/a.jpg", "-o", dir + "/x"])
        XCTAssertEqual(nothing.status, 2)
        XCTAssertTrue(nothing.stderr.contains("--format webp"), nothing.stderr)
    }

    /// Bash completion completed subcommands and flags only.
    func testBashCompletionCompletesPathsAndValues() throws {
        let script = try tessera(["--generate-completion-script", "bash"]).stdout
        XCTAssertTrue(script.contains("'--fit')\n        __tessera_add_completions -W 'fit'$'\\n''fill'"), "values of --fit")
        XCTAssertTrue(script.contains("-W 'original'$'\\n''jpeg'"), "values of --format")
        XCTAssertTrue(script.contains("'thumbnail'$'\\n''compressedThumbnail'"), "preset names for -p")
        XCTAssertTrue(script.contains("'deepzoom'"), "values of --layout")
        XCTAssertTrue(script.contains("'trace'$'\\n''debug'"), "values of --log-level")
        XCTAssertTrue(script.contains("-fX '!*.@(yaml|yml|json)'"), "job files")
        XCTAssertTrue(script.contains("__tessera_add_completions -f"), "image paths")
    }
}
