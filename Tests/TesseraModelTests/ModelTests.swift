import Foundation
import TesseraModel
import XCTest

/// How a task ended: one list, its names, and counts by it.
final class OutcomeTests: XCTestCase {
    /// An error's reason is one line, whatever a library's message held.
    func testAnErrorsReasonIsOneLine() {
        XCTAssertEqual(ImagingError(.corrupt, "bad box\n").reason, "bad box")
        XCTAssertEqual(ImagingError(.corrupt, "first\r\nsecond\n\nthird").description, "first second third [corrupt]")
        XCTAssertEqual(ImagingError(.truncated, "as it was").reason, "as it was")
    }

    func testOutcomesAreNamedOnceAndCountedByName() throws {
        XCTAssertEqual(Outcome.allCases.map(\.name), ["succeeded", "failed", "skipped", "cancelled"])
        // The journal's status column: the raw values never change.
        XCTAssertEqual(Outcome.allCases.map(\.rawValue), [0, 1, 2, 3])
        for o in Outcome.allCases {
            XCTAssertEqual(Outcome(name: o.name), o)
            let json = try JSONEncoder().encode([o])
            XCTAssertEqual(String(decoding: json, as: UTF8.self), "[\"\(o.name)\"]")
            XCTAssertEqual(try JSONDecoder().decode([Outcome].self, from: json), [o])
        }
        XCTAssertThrowsError(try JSONDecoder().decode([Outcome].self, from: Data("[\"done\"]".utf8)))
        var counts = OutcomeCounts()
        counts[.succeeded] += 3
        counts[.failed] += 1
        counts[.cancelled] += 2
        XCTAssertEqual(counts.total, 6)
        XCTAssertEqual(counts.worked, 4)
        XCTAssertEqual(counts, OutcomeCounts(succeeded: 3, failed: 1, cancelled: 2))
    }
}

/// Every millisecond of a task belongs to a stage, and a stage's share is defined once.
final class StageTimingsTests: XCTestCase {
    func testClosingGivesTheUntimedRestToOneStage() {
        var t = StageTimings()
        t.decode = 10
        t.encode = 5
        t.queueWait = 100  // before the task: not part of its total
        t.close(at: 18, remainderTo: .write)
        XCTAssertEqual(t.total, 18)
        XCTAssertEqual(t.write, 3)
        XCTAssertEqual(t.staged, 18)
        // Stages that already cover more than the clock (rounding) are left as they are.
        t.close(at: 17, remainderTo: .finish)
        XCTAssertEqual(t.finish, 0)
    }

    func testSharesAreOfTheStagesThatMakeUpATask() {
        let shares = StageTimings.shares(of: [.queueWait: 50, .decode: 30, .encode: 10, .total: 999])
        XCTAssertEqual(shares[.decode]!, 0.75, accuracy: 1e-12)
        XCTAssertEqual(shares[.encode]!, 0.25, accuracy: 1e-12)
        XCTAssertNil(shares[.queueWait])
        XCTAssertNil(shares[.total])
        XCTAssertEqual(shares.values.reduce(0, +), 1, accuracy: 1e-12)
        XCTAssertTrue(StageTimings.shares(of: [.queueWait: 5]).isEmpty)
    }
}

/// A task's peak memory, and whether it is the task's own or the process' over the task.
final class PeakMemoryTests: XCTestCase {
    func testTheHigherPeakWinsAndAnUpperBoundSaysSo() {
        let own = PeakMemory(bytes: 50_000_000, isUpperBound: false)
        let shared = PeakMemory(bytes: 80_000_000, isUpperBound: true)
        XCTAssertEqual(own.max(shared), shared)
        XCTAssertEqual(shared.max(own), shared)
        XCTAssertEqual(own.max(nil), own)
        // At the same figure, the task's own measurement is preferred to a bound.
        XCTAssertEqual(PeakMemory(bytes: 1, isUpperBound: true).max(PeakMemory(bytes: 1, isUpperBound: false)).isUpperBound, false)
        XCTAssertEqual(own.display, "50.0 MB")
        XCTAssertEqual(shared.display, "≤ 80.0 MB")
    }
}

/// One way to name an input to people: never a URL's query string.
final class DisplayNameTests: XCTestCase {
    func testURLsLoseTheirQueryAndBytesShowAsEscapes() {
        let signed = "https://bucket.example/photos/a.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=deadbeef#frag"
        XCTAssertEqual(DisplayName.of(signed), "https://bucket.example/photos/a.jpg")
        XCTAssertEqual(DisplayName.of("HTTP://h/x.png#top"), "HTTP://h/x.png")
        XCTAssertEqual(ImagingError(.corrupt, "bad", file: signed).description, "https://bucket.example/photos/a.jpg: bad [corrupt]")
        // A file name may hold a question mark: only URLs have query strings.
        XCTAssertEqual(DisplayName.of("/in/what?.jpg"), "/in/what?.jpg")
        var name = "/in/caf"
        name.unicodeScalars.append(Unicode.Scalar(DisplayName.escapeBase + 0xE9)!)
        XCTAssertEqual(DisplayName.of(name + ".jpg"), "/in/caf\\xE9.jpg")
    }
}

/// What was made: one record shape, the format typed until it is JSON.
final class OutputRecordTests: XCTestCase {
    func testFormatIsTheImageFormatsNameAndDescriptorsHaveNone() throws {
        let tile = OutputRecord(name: "tile", path: "p_files/0/0_0.jpg", format: .jpeg, width: 1, height: 1, bytes: 9, quality: 80)
        let descriptor = OutputRecord(name: "descriptor", path: "p.dzi", format: nil, width: 0, height: 0, bytes: 9, quality: nil)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode([tile, descriptor])) as! [[String: Any]]
        XCTAssertEqual(json[0]["format"] as? String, "jpeg")
        XCTAssertEqual(json[0]["jpegQuality"] as? Int, 80)
        XCTAssertNil(json[1]["format"])
        XCTAssertEqual(try JSONDecoder().decode([OutputRecord].self, from: JSONEncoder().encode([tile, descriptor])), [tile, descriptor])
        // Records written before one shape named a tile's format by its extension.
        let old = #"[{"name":"tile","path":"a.jpg","format":"jpg","width":1,"height":1,"bytes":9,"jpegQuality":70},"#
            + #"{"name":"descriptor","path":"a.dzi","format":"dzi","width":0,"height":0,"bytes":9}]"#
        let decoded = try JSONDecoder().decode([OutputRecord].self, from: Data(old.utf8))
        XCTAssertEqual(decoded.map(\.format), [.jpeg, nil])
        XCTAssertEqual(decoded[0].quality, 70)
    }
}

/// What a user sent, in a log line: escaped and bounded.
final class LogTextTests: XCTestCase {
    func testControlCharactersAreEscapedAndLongValuesCut() {
        XCTAssertEqual(LogText.field("a\nb\r\tc"), "a\\nb\\r\\tc")
        XCTAssertEqual(LogText.field("\u{1b}[31mred\u{7f}"), "\\x1b[31mred\\x7f")
        XCTAssertEqual(LogText.field("c1\u{85}ls\u{2028}rlo\u{202e}"), "c1\\x85ls\\u{2028}rlo\\u{202e}")
        XCTAssertEqual(LogText.field("photo é 東京.jpg"), "photo é 東京.jpg", "printable text is kept as it is")
        let long = String(repeating: "é", count: 1000)
        XCTAssertEqual(LogText.field(long), String(repeating: "é", count: 200) + "… (2000 bytes)")
        XCTAssertEqual(LogText.escaped("plain"), "plain")
        XCTAssertFalse(LogText.escaped(long + "\n").contains("\n"))
    }
}
