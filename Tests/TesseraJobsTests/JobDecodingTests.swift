import Foundation
import TesseraJobs
import TesseraModel
import TesseraTasks
import XCTest
import Yams

/// One job decoding: a job file (YAML) and the same job as JSON (what scripts send) give
/// equal values, and equal errors. JSON used to ignore unknown fields (a misspelt option
/// was silently dropped) and a JSON tiles job got the thumbnail pixel limit.
final class JobDecodingTests: XCTestCase {
    private let jobsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("jobs").path

    /// The JSON a script would send for a YAML job: relative paths resolved against the file's directory.
    private func json(fromYAML yaml: String, base: String) throws -> Data {
        // Yams gives mappings keyed by AnyHashable: JSON objects are keyed by strings.
        func plain(_ v: Any) -> Any {
            if let m = v as? [AnyHashable: Any] {
                return Dictionary(uniqueKeysWithValues: m.map { ("\($0.key.base)", plain($0.value)) })
            }
            if let a = v as? [Any] { return a.map(plain) }
            return v
        }
        var object = try XCTUnwrap(plain(try Yams.load(yaml: yaml) as Any) as? [String: Any])
        func resolve(_ v: Any) -> Any {
            if let s = v as? String { return Location.resolve(s, from: base) }
            guard var m = v as? [String: Any] else { return v }
            for key in ["path", "manifest"] { if let s = m[key] as? String { m[key] = Location.resolve(s, from: base) } }
            return m
        }
        if let inputs = object["inputs"] as? [Any] { object["inputs"] = inputs.map(resolve) }
        if let output = object["output"] as? String { object["output"] = Location.resolve(output, from: base) }
        return try JSONSerialization.data(withJSONObject: object)
    }

    private func decodeJSON(_ data: Data) throws -> JobSpec {
        let spec = try JSONDecoder().decode(JobSpec.self, from: data)
        try spec.validate()
        return spec
    }

    func testEveryBundledJobIsTheSameValueFromYAMLAndJSON() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: jobsDirectory).filter { $0.hasSuffix(".yaml") }.sorted()
        XCTAssertGreaterThanOrEqual(files.count, 5)
        for name in files {
            let path = jobsDirectory + "/" + name
            let yaml = try String(contentsOfFile: path, encoding: .utf8)
            let fromYAML = try JobFile.parse(yaml: yaml, file: path, baseDirectory: jobsDirectory)
            let data = try json(fromYAML: yaml, base: jobsDirectory)
            do {
                let fromJSON = try decodeJSON(data)
                XCTAssertEqual(fromYAML, fromJSON, name)
            } catch {
                XCTFail("\(name): \(error) in \(String(decoding: data, as: UTF8.self))")
            }
        }
    }

    func testATilesJobGetsThePyramidLimitEitherWay() throws {
        let yaml = "name: t\nkind: tiles\ninputs: [/in]\noutput: /out\n"
        let fromYAML = try JobFile.parse(yaml: yaml, file: "t.yaml", baseDirectory: "/")
        let fromJSON = try decodeJSON(try json(fromYAML: yaml, base: "/"))
        XCTAssertEqual(fromYAML.options.maxMegapixels, JobOptions.tilesMaxMegapixels)
        XCTAssertEqual(fromJSON.options.maxMegapixels, JobOptions.tilesMaxMegapixels)
        XCTAssertEqual(fromYAML, fromJSON)
        // A limit the job gives is kept by both.
        let given = yaml + "options: {maxMegapixels: 50}\n"
        XCTAssertEqual(try JobFile.parse(yaml: given, file: "t.yaml", baseDirectory: "/").options.maxMegapixels, 50)
        XCTAssertEqual(try decodeJSON(try json(fromYAML: given, base: "/")).options.maxMegapixels, 50)
    }

    /// Video options and an animated output, alike from YAML and JSON; a time that is not one is refused.
    func testVideoOptionsAndAnimatedOutputs() throws {
        let yaml = "name: t\ninputs: [/in]\noutput: /out\noutputs:\n  - preset: thumbnail\n    animated: true\n"
            + "options: {at: 10%, frames: 6, fps: 2, maxFrames: 500, maxDuration: 60}\n"
        let fromYAML = try JobFile.parse(yaml: yaml, file: "t.yaml", baseDirectory: "/")
        XCTAssertEqual(fromYAML, try decodeJSON(try json(fromYAML: yaml, base: "/")))
        XCTAssertEqual(fromYAML.options.at, .fraction(0.1))
        XCTAssertEqual(fromYAML.options.renderOptions.previewFrames, 6)
        XCTAssertEqual(fromYAML.options.renderOptions.maxFrames, 500)
        XCTAssertEqual(fromYAML.options.renderOptions.decodeSeconds, fromYAML.options.timeout)
        XCTAssertTrue(fromYAML.outputs[0].recipe.output.animated)
        XCTAssertThrowsError(try JobFile.parse(yaml: yaml.replacingOccurrences(of: "at: 10%", with: "at: soon"), file: "t.yaml", baseDirectory: "/")) { e in
            XCTAssertTrue("\(e)".contains("options.at"), "\(e)")
        }
        XCTAssertThrowsError(try JobFile.parse(yaml: yaml.replacingOccurrences(of: "fps: 2", with: "fps: 0"), file: "t.yaml", baseDirectory: "/")) { e in
            XCTAssertTrue("\(e)".contains("options.fps"), "\(e)")
        }
    }

    /// `gainMap` on an output (and `keepGainMap` on a strip), alike from YAML and JSON; a mode that is not one is refused.
    func testGainMapFields() throws {
        let yaml = "name: t\ninputs: [/in]\noutput: /out\noutputs:\n  - preset: thumbnail\n    gainMap: drop\n  - preset: favicon\n"
        let fromYAML = try JobFile.parse(yaml: yaml, file: "t.yaml", baseDirectory: "/")
        XCTAssertEqual(fromYAML, try decodeJSON(try json(fromYAML: yaml, base: "/")))
        XCTAssertEqual(fromYAML.outputs[0].recipe.output.gainMap, .drop)
        XCTAssertNil(fromYAML.outputs[1].recipe.output.gainMap)
        XCTAssertEqual(PresetCatalog.builtIn["widget"]?.output.gainMap, .drop)
        XCTAssertThrowsError(try JobFile.parse(yaml: yaml.replacingOccurrences(of: "gainMap: drop", with: "gainMap: maybe"), file: "t.yaml", baseDirectory: "/")) { e in
            XCTAssertTrue("\(e)".contains("outputs[0].gainMap") && "\(e)".contains("keep, drop or apply"), "\(e)")
        }
        let strip = try JobFile.parse(yaml: "name: t\nkind: strip\ninputs: [/in]\noutput: /out\nstrip: {keepGainMap: false}\n", file: "t.yaml", baseDirectory: "/")
        XCTAssertEqual(strip.strip.keepGainMap, false)
    }

    /// Each mistake, written in YAML and sent as JSON: the same words, naming the same field.
    func testUnknownFieldsWrongTypesAndOutOfRangeValuesFailAlike() throws {
        let base = "name: t\ninputs: [/in]\noutput: /out\noutputs:\n  - preset: thumbnail\n"
        let mistakes: [(String, String, String)] = [
            ("unknown field", base + "prioritty: 2\n", "prioritty: unknown field (did you mean \"priority\"?)"),
            ("unknown option", base + "options: {maxMegapixel: 5}\n", "options.maxMegapixel: unknown field (did you mean \"maxMegapixels\"?)"),
            ("unknown output field", "name: t\ninputs: [/in]\noutput: /out\noutputs:\n  - {preset: thumbnail, pathh: x}\n",
             "outputs[0].pathh: unknown field (did you mean \"path\"?)"),
            ("unknown input field", "name: t\ninputs: [{path: /in, recursiv: false}]\noutput: /out\noutputs: [{preset: thumbnail}]\n",
             "inputs[0].recursiv: unknown field (did you mean \"recursive\"?)"),
            ("unknown strip field", "name: t\nkind: strip\ninputs: [/in]\noutput: /out\nstrip: {keepIcc: true, keepICCC: true}\n",
             "strip.keepICCC: unknown field (did you mean \"keepICC\"?)"),
            ("wrong type", base + "priority: high\n", "priority: expected an integer, got \"high\""),
            ("wrong option type", base + "options: {maxInputMB: big}\n", "options.maxInputMB: expected an integer, got \"big\""),
            ("out of range", base + "options: {maxAttempts: 0}\n", "options.maxAttempts"),
            ("page out of range", base + "options: {page: -1}\n", "options.page"),
            ("frame out of range", base + "options: {frame: -2}\n", "options.frame"),
            ("frame not a number", base + "options: {frame: last}\n", "options.frame: expected an integer, got \"last\""),
            ("out of range tiles", "name: t\nkind: tiles\ninputs: [/in]\noutput: /out\ntiles: {tileSize: 5}\n", "tiles.tileSize must be 16...4096"),
        ]
        for (what, yaml, expected) in mistakes {
            var yamlReason = "", jsonReason = ""
            do {
                _ = try JobFile.parse(yaml: yaml, file: "m.yaml", baseDirectory: "/")
                XCTFail("\(what): the YAML job was accepted")
            } catch let e as JobError {
                yamlReason = e.reason
            }
            let data = try json(fromYAML: yaml, base: "/")
            do {
                _ = try decodeJSON(data)
                XCTFail("\(what): the JSON job was accepted")
            } catch let e as JobError {
                jsonReason = e.reason
            } catch let e as DecodingError {
                jsonReason = describeDecoding(e, data: data)
            }
            XCTAssertTrue(yamlReason.hasPrefix(expected) || yamlReason.contains(expected), "\(what): YAML said \(yamlReason)")
            XCTAssertEqual(yamlReason, jsonReason, what)
        }
    }
}
