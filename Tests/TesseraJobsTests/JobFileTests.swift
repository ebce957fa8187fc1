import Foundation
import TesseraImaging
import TesseraExecution
import TesseraJobs
import TesseraTasks
import XCTest
import TesseraTestSupport

final class JobFileTests: XCTestCase {
    func parse(_ yaml: String, base: String = "/base") throws -> JobSpec {
        try JobFile.parse(yaml: yaml, file: "jobs/test.yaml", baseDirectory: base)
    }

    /// The error's text for a job file, or "" when it parses.
    func error(_ yaml: String) -> String {
        do {
            _ = try parse(yaml)
            return ""
        } catch let e as JobError {
            XCTAssertEqual(e.code, .invalidJob)
            return e.description
        } catch { return "\(error)" }
    }

    func testFullJobFile() throws {
        let tmp = TemporaryDirectory()
        _ = tmp.write("list.txt", Array("a.jpg\n# comment\n\nsub/b.png\n".utf8))
        let spec = try parse("""
            name: everything
            kind: thumbnail
            priority: 7
            inputs:
              - photos
              - {path: /abs/scans, glob: ["*.png", "*.tif"], recursive: false}
              - manifest: \(tmp.path)/list.txt
            output: out/thumbs
            outputs:
              - preset: widget
              - preset: favicon
                name: icon
                path: "icons/{dir}/{stem}.{ext}"
              - name: card
                recipe:
                  operations:
                    - {op: resize, width: 600, height: 400, mode: fill}
                    - {op: rotate, degrees: 90}
                  output: {format: png, pngCompression: 9, keep: [copyright]}
            options: {maxMegapixels: 50, timeout: 30, maxAttempts: 5, inline: true}
            """)
        XCTAssertEqual(spec.name, "everything")
        XCTAssertEqual(spec.priority, 7)
        XCTAssertEqual(spec.output, "/base/out/thumbs")
        XCTAssertEqual(spec.inputs, [.path("/base/photos", patterns: [], recursive: true),
                                     .path("/abs/scans", patterns: ["*.png", "*.tif"], recursive: false),
                                     .manifest(tmp.path + "/list.txt")])
        XCTAssertEqual(spec.outputs.map(\.name), ["widget", "icon", "card"])
        XCTAssertEqual(spec.outputs[1].path, "icons/{dir}/{stem}.{ext}")
        XCTAssertEqual(spec.outputs[2].recipe.output.format, .png)
        XCTAssertEqual(spec.outputs[2].recipe.operations.count, 2)
        XCTAssertEqual(spec.options.maxMegapixels, 50)
        XCTAssertTrue(spec.options.inline)
        // The same job travels as JSON and comes back equal.
        XCTAssertEqual(try JSONDecoder().decode(JobSpec.self, from: try JSONEncoder().encode(spec)), spec)
    }

    func testErrorsNameFileLineAndField() {
        XCTAssertEqual(error("name: x\ninputs: [a]\noutput: o\noutputs:\n  - preset: widgit\n"),
                       "jobs/test.yaml:5: outputs[0].preset: unknown preset \"widgit\" (known: default, highDefinition, thumbnail, compressedThumbnail, favicon, compressedFavicon, widget, web, webThumbnail) [invalid-job]")
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\nouputs: []\n")
            .hasPrefix("jobs/test.yaml:4: ouputs: unknown field (did you mean \"outputs\"?)"))
        XCTAssertTrue(error("inputs: [a]\noutput: o\n").contains("name: missing"))
        XCTAssertTrue(error("name: x\noutput: o\noutputs: [{preset: widget}]\n").contains("inputs: missing"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutputs: [{preset: widget}]\n").contains("output: missing"))
        XCTAssertTrue(error("name: x\nkind: resize\ninputs: [a]\noutput: o\n").contains("jobs/test.yaml:2: kind: expected one of thumbnail, strip, recompress, transcode, tiles, noop"))
        XCTAssertTrue(error("name: x\nkind: tiles\ninputs: [a]\noutput: o\ntiles:\n  layout: zoomify\n")
            .contains("jobs/test.yaml:6: tiles.layout: expected one of deepzoom, iiif, iiif3, tiff, got \"zoomify\""))
        XCTAssertTrue(error("name: x\nkind: tiles\ninputs: [a]\noutput: o\ntiles: {layout: iiif, overlap: 2}\n")
            .contains("IIIF tiles do not overlap"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: widget}]\ntiles: {}\n")
            .contains("tiles: only a tiles job (kind: tiles) takes tile settings"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\n").contains("a thumbnail job needs at least one output"))
        XCTAssertTrue(error("name: x\npriority: high\ninputs: [a]\noutput: o\noutputs: [{preset: widget}]\n")
            .contains(":2: priority: expected an integer, got \"high\""))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs:\n  - preset: widget\n    path: \"../{stem}.{ext}\"\n")
            .contains(":6: outputs[0].path: must not contain \"..\""))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs:\n  - preset: widget\n    path: \"/etc/{stem}\"\n")
            .contains("must be relative to the output root"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs:\n  - preset: widget\n    path: \"{name}.jpg\"\n")
            .contains("unknown token {name}"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs:\n  - preset: widget\n    path: \"all.jpg\"\n")
            .contains("must contain {stem}"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs:\n  - name: c\n    recipe:\n      operations:\n        - {op: resize, width: 0}\n")
            .contains(":7: outputs[0].recipe: operations[0].width: expected 1...65500, got 0"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: widget}, {preset: widget}]\n")
            .contains("\"widget\" is used twice"))
        XCTAssertTrue(error("name: x\ninputs: [{manifest: /nope.txt}]\noutput: o\noutputs: [{preset: widget}]\n")
            .contains("no such file /nope.txt"))
        XCTAssertTrue(error("name: [unclosed\n").contains("not valid YAML"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: widget}]\noptions: {maxAttempts: 0}\n")
            .contains("options.maxAttempts: expected 1...100"))
    }

    /// A watermark named by a relative path is found beside the job file (or the recipe file).
    func testOverlayPathsAreRelativeToTheJobFile() throws {
        let spec = try parse("""
        name: marked
        inputs: [in]
        output: out
        outputs:
          - recipe: {name: m, operations: [{op: overlay, path: marks/logo.png, opacity: 0.5}, {op: overlay, path: /abs/logo.png}]}
        """)
        let paths = spec.outputs[0].recipe.operations.compactMap { op -> String? in
            if case .overlay(let o) = op { return o.path } else { return nil }
        }
        XCTAssertEqual(paths, ["/base/marks/logo.png", "/abs/logo.png"])
    }

    func testControlCharactersInTheOutputRootAreRefused() {
        for root in ["/out/nul\u{0}evil", "/out/line\nbreak"] {
            let spec = JobSpec(name: "n", inputs: [.path("/in", patterns: ["*.jpg"], recursive: false)], output: root)
            XCTAssertThrowsError(try spec.validate()) { XCTAssertTrue("\($0)".contains("output: must not contain NUL or control characters"), "\($0)") }
        }
    }

    func testStripJobNeedsNoOutputs() throws {
        let spec = try parse("name: s\nkind: strip\ninputs: [p]\noutput: o\nstrip: {keepICC: false, orientation: transform}\n")
        XCTAssertEqual(spec.kind, .strip)
        XCTAssertFalse(spec.strip.keepICC)
        XCTAssertEqual(spec.strip.orientation, .transform)
    }

    func testExampleJobsInTheRepositoryParse() throws {
        let jobs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("jobs")
        let files = try FileManager.default.contentsOfDirectory(atPath: jobs.path).filter { $0.hasSuffix(".yaml") }
        XCTAssertGreaterThanOrEqual(files.count, 4)
        for f in files { XCTAssertNoThrow(try JobFile.load(path: jobs.path + "/" + f), f) }
    }

    func testPlannerGlobsManifestsAndDeduplicates() throws {
        let tmp = TemporaryDirectory()
        let img = try jpeg(8, 8)
        for p in ["a.jpg", "b.png", "c.jpeg", "sub/d.jpg", "sub/deeper/e.JPG", "notes.txt"] { _ = tmp.write("in/" + p, img) }
        _ = tmp.write("list.txt", Array("in/a.jpg\nin/sub/d.jpg\n".utf8))
        func plan(_ inputs: [InputSource]) throws -> [String] {
            try JobPlanner.inputs(of: JobSpec(name: "t", inputs: inputs, output: tmp.path + "/out"))
                .map { String($0.path.dropFirst(tmp.path.count + 1)) }
        }
        XCTAssertEqual(try plan([.path(tmp.path + "/in", patterns: [], recursive: true)]),
                       ["in/a.jpg", "in/b.png", "in/c.jpeg", "in/sub/d.jpg", "in/sub/deeper/e.JPG"])
        XCTAssertEqual(try plan([.path(tmp.path + "/in", patterns: ["*.png"], recursive: true)]), ["in/b.png"])
        XCTAssertEqual(try plan([.path(tmp.path + "/in", patterns: [], recursive: false)]), ["in/a.jpg", "in/b.png", "in/c.jpeg"])
        XCTAssertEqual(try plan([.path(tmp.path + "/in", patterns: ["sub/*.jpg"], recursive: true)]), ["in/sub/d.jpg"])
        // A manifest's entries keep their directories for {dir}; duplicates collapse.
        let fromManifest = try JobPlanner.inputs(of: JobSpec(name: "t", inputs: [.manifest(tmp.path + "/list.txt"),
                                                                                .path(tmp.path + "/in/a.jpg", patterns: [], recursive: true)],
                                                             output: tmp.path + "/out"))
        XCTAssertEqual(fromManifest.count, 2)
        XCTAssertEqual(fromManifest[1].relativeDirectory, "in/sub")
        XCTAssertThrowsError(try plan([.path(tmp.path + "/missing", patterns: [], recursive: true)]))
    }

    func testXXH64MatchesTheReference() {
        XCTAssertEqual(XXH64.hash([]), 0xEF46_DB37_51D8_E999)
        XCTAssertEqual(XXH64.hash(Array("a".utf8)), 0xD24E_C4F1_A98C_6E5B)
        XCTAssertEqual(XXH64.hash(Array("abc".utf8)), 0x44BC_2CF5_AD77_0999)
        let long = Array("Nobody inspects the spammish repetition".utf8)
        XCTAssertEqual(XXH64.hash(long), 0xFBCE_A83C_8A37_8BF1)
    }

    /// A "billion laughs" alias bomb fails at once with a clear error (issue 13, item 6).
    func testYAMLAliasBombIsRefusedQuickly() throws {
        var anchors = ["      a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        var previous = "a"
        for c in "bcdefghi" {
            anchors.append("      \(c): &\(c) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ", ") + "]")
            previous = String(c)
        }
        let yaml = "name: bomb\ninputs: [/tmp]\noutput: /tmp/o\noutputs:\n  - name: x\n    recipe:\n      format: tessera.recipe\n"
            + "      version: 1\n      junk:\n" + anchors.map { "  " + $0 }.joined(separator: "\n") + "\n"
        XCTAssertLessThan(yaml.utf8.count, 1024)
        let start = Date()
        let message = error(yaml)
        XCTAssertLessThan(Date().timeIntervalSince(start), 1, "refused within a second")
        XCTAssertTrue(message.contains("expands to more than 100000 nodes through its aliases"), message)
        // Aliases as such are fine.
        XCTAssertEqual(error("name: ok\ninputs: [&dir /photos]\noutput: *dir\noutputs: [{preset: favicon}]\n"), "")
    }

    /// Numbers out of range name the field, the range and the value, with the line.
    func testNumericOptionsHaveRanges() {
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: favicon}]\noptions:\n  maxMegapixels: 1e300\n")
            .contains("jobs/test.yaml:6: options.maxMegapixels: expected 0.01...4295 megapixels, got 1e+300"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: favicon}]\noptions: {maxInputMB: -1}\n")
            .contains("options.maxInputMB: expected 1...65536 MB, got -1"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: favicon}]\noptions: {timeout: .inf}\n")
            .contains("options.timeout: expected 0.1...604800 seconds"))
        XCTAssertTrue(error("name: x\ninputs: [a]\noutput: o\noutputs: [{preset: favicon, path: \"a\\0{stem}\"}]\n")
            .contains("outputs[0].path: contains a control character"))
    }

    /// A job from a script (JSON) passes the same validation with the same messages as a
    /// job file, and can bring its own presets.
    func testJSONJobsAreValidatedLikeJobFiles() throws {
        func json(_ text: String) -> String {
            do {
                let spec = try JSONDecoder().decode(JobSpec.self, from: Data(text.utf8))
                try spec.validate()
                return ""
            } catch let e as JobError {
                return e.reason
            } catch {
                return "\(error)"
            }
        }
        let base = #""name": "x", "inputs": ["/a"], "output": "/o""#
        for (yamlTail, jsonTail, message) in [
            ("outputs: [{preset: favicon}]\noptions: {maxAttempts: 0}\n", #""outputs": [{"preset": "favicon"}], "options": {"maxAttempts": 0}"#,
             "options.maxAttempts: expected 1...100 attempts, got 0"),
            ("outputs: [{preset: favicon}, {preset: favicon}]\n", #""outputs": [{"preset": "favicon"}, {"preset": "favicon"}]"#,
             "outputs[1].name: \"favicon\" is used twice"),
            ("outputs: [{preset: favicon, path: \"{dir}/x.{ext}\"}]\n", #""outputs": [{"preset": "favicon", "path": "{dir}/x.{ext}"}]"#,
             "outputs[0].path: must contain {stem}, or every input writes the same file"),
        ] {
            let y = error("name: x\ninputs: [/a]\noutput: /o\n" + yamlTail)
            XCTAssertTrue(y.contains(message), y)
            XCTAssertEqual(json("{" + base + ", " + jsonTail + "}"), message)
        }
        // Presets of its own, used by name like the built-in ones.
        let custom = try JSONDecoder().decode(JobSpec.self, from: Data(("{" + base + #", "presets": {"card": {"format": "tessera.recipe", "version": 1, "#
            + #""operations": [{"op": "resize", "width": 300, "height": 200, "mode": "fill"}], "output": {"format": "webp", "quality": 0.7}}}, "#
            + #""outputs": [{"preset": "card"}, {"preset": "favicon"}]}"#).utf8))
        try custom.validate()
        XCTAssertEqual(custom.outputs.map(\.name), ["card", "favicon"])
        XCTAssertEqual(custom.outputs[0].recipe.resize?.width, 300)
        XCTAssertEqual(custom.outputs[0].recipe.output.format, .webp)
        XCTAssertTrue(json("{" + base + #", "outputs": [{"preset": "crad"}]}"#).hasPrefix("outputs[0]: preset: unknown preset"),
                      json("{" + base + #", "outputs": [{"preset": "crad"}]}"#))
        let bad = json("{" + base + #", "presets": {"bad": {"format": "tessera.recipe", "version": 1, "output": {"quality": 90}}}, "#
                       + #""outputs": [{"preset": "bad"}]}"#)
        XCTAssertTrue(bad.hasPrefix("presets.bad: ") && bad.contains("output.quality: expected 0...1"), bad)
    }
}
