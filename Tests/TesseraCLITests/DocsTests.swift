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
}
