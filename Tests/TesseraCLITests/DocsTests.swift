import Foundation
import TesseraTasks
import XCTest

/// What the docs say, checked against the code: every job kind in PROTOCOL.md, no
/// reference a reader cannot look up ("issue 13", "second audit").
final class DocsTests: XCTestCase {
    var root: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }

    func text(_ relative: String) throws -> String { try String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8) }

    func testProtocolListsEveryJobKind() throws {
        let proto = try text("docs/PROTOCOL.md")
        for kind in JobKind.allCases { XCTAssertTrue(proto.contains("`\(kind.rawValue)`"), "PROTOCOL.md omits \(kind.rawValue)") }
        XCTAssertFalse(proto.contains("100 lines"))
    }

    func testDocsCiteNothingAReaderCannotLookUp() throws {
        let decisions = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs/decisions").path)
            .map { "docs/decisions/" + $0 }
        let pattern = try NSRegularExpression(pattern: "\\b(issue|audit) ?#?[0-9]*\\b", options: [.caseInsensitive])
        for file in ["README.md", "docs/ARCHITECTURE.md", "docs/PROTOCOL.md", "docs/JSON.md"] + decisions {
            let t = try text(file)
            let hits = pattern.matches(in: t, range: NSRange(t.startIndex..., in: t)).map { (t as NSString).substring(with: $0.range) }
                .filter { $0.lowercased().contains("audit") || $0.rangeOfCharacter(from: .decimalDigits) != nil }
            XCTAssertEqual(hits, [], file)
        }
    }

    /// The module tables of ARCHITECTURE.md and README.md are the package's: every target
    /// Package.swift names is in them, every module they name exists, and ARCHITECTURE.md's
    /// "depends on" is each module's declared dependencies.
    func testModuleTablesAreThePackages() throws {
        let manifest = try text("Package.swift")
        let declaration = try NSRegularExpression(pattern: #"\.(target|testTarget|executableTarget|systemLibrary)\(\s*name: "(\w+)""#)
        var targets: [String: String] = [:]  // name -> kind
        for m in declaration.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)) {
            targets[(manifest as NSString).substring(with: m.range(at: 2))] = (manifest as NSString).substring(with: m.range(at: 1))
        }
        XCTAssertGreaterThan(targets.count, 30)
        let modules = targets.filter { $0.value == "target" || $0.value == "executableTarget" }.keys.filter { $0 != "TesseraTestSupport" }
        let cTargets = targets.filter { $0.value == "systemLibrary" }.keys
        let tests = targets.filter { $0.value == "testTarget" }.keys

        // The rows of the tables headed `| module |` or `| test target |`.
        func rows(_ file: String) throws -> [(name: String, cells: [String])] {
            var inTable = false
            return try text(file).split(separator: "\n", omittingEmptySubsequences: false).compactMap { line -> (String, [String])? in
                if line.hasPrefix("| module |") || line.hasPrefix("| test target |") { inTable = true }
                if !line.hasPrefix("|") { inTable = false }
                let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
                guard inTable, cells.count >= 4, cells[1].hasPrefix("`"), cells[1].hasSuffix("`") else { return nil }
                return (String(cells[1].dropFirst().dropLast()).replacingOccurrences(of: "Sources/", with: ""), Array(cells.dropFirst(2)))
            }
        }
        func names(_ cell: String) -> Set<String> {
            let quoted = try! NSRegularExpression(pattern: "`([A-Za-z][A-Za-z0-9]*)`")
            return Set(quoted.matches(in: cell, range: NSRange(cell.startIndex..., in: cell)).map { (cell as NSString).substring(with: $0.range(at: 1)) })
        }
        let architecture = try rows("docs/ARCHITECTURE.md")
        let readme = try rows("README.md")
        for (file, table) in [("docs/ARCHITECTURE.md", architecture), ("README.md", readme)] {
            let listed = Set(table.map(\.name))
            for module in modules { XCTAssertTrue(listed.contains(module), "\(file) has no row for \(module)") }
            for name in listed where name != "C*" && !name.hasSuffix("Tests") && name != "TesseraTestSupport" {
                XCTAssertTrue(modules.contains(name), "\(file) lists \(name), which Package.swift does not declare")
            }
        }
        // Every C target is named in the C* row, every test target has its row.
        let cRow = try XCTUnwrap(architecture.first { $0.name == "C*" })
        XCTAssertEqual(names(cRow.cells[0]), Set(cTargets))
        for test in tests { XCTAssertTrue(architecture.contains { $0.name == test }, "ARCHITECTURE.md has no row for \(test)") }
        // "depends on": the declared dependencies that are the package's own targets.
        let depsPattern = try NSRegularExpression(pattern: #"name: "(\w+)",\s*dependencies: \[([^\]]*)\]"#)
        for m in depsPattern.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)) {
            let name = (manifest as NSString).substring(with: m.range(at: 1))
            guard modules.contains(name) || name == "TesseraShim", let row = architecture.first(where: { $0.name == name }) else { continue }
            let list = (manifest as NSString).substring(with: m.range(at: 2))
            let quoted = try NSRegularExpression(pattern: #"^\s*"(\w+)""#, options: [.anchorsMatchLines])
            let declared = Set(list.split(separator: ",").compactMap { item -> String? in
                let s = String(item)
                guard let q = quoted.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) else { return nil }
                return (s as NSString).substring(with: q.range(at: 1))
            }).filter { targets[$0] != nil }
            XCTAssertEqual(names(row.cells[1]), declared, "ARCHITECTURE.md: what \(name) depends on")
        }
    }
}
