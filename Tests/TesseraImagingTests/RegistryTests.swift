import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel

/// The registry (`SourceLoaders.all`) is the one place source formats are listed: outside
/// the backends (`Codecs/`) and their container parsers (`Metadata/`), no code names a
/// format's decoder or loader, or branches on a source's format.
final class RegistryTests: XCTestCase {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// What a special case looks like: a format's decoder, loader or row source named; an
    /// `if let jpeg …` chain; a source's format compared with a format; a switch case of a
    /// format only read (HEIF, TIFF, video).
    static let specialCases = [
        #"\b(JPEG|PNG|WebP|HEIF|JXL|GIF|TIFF|Video)(Decoder|Loader|RowSource)\b"#,
        #"if let (jpeg|png|webp|heif|jxl|gif|tiff|video)\b"#,
        #"(sourceFormat|source\.format|info\.format|header\.format|summary\.format)\s*[!=]=\s*\.(jpeg|png|webp|heif|avif|jxl|gif|tiff|video)\b"#,
        #"case \.(heif|video)\b"#,
    ]

    static let exempt = ["TesseraImaging/Codecs/", "TesseraImaging/Metadata/", "TesseraModel/ImageFormat.swift"]

    func testFormatsAreListedOnlyInTheRegistry() throws {
        let patterns = try Self.specialCases.map { try NSRegularExpression(pattern: $0) }
        var found: [String] = []
        var scanned = 0
        let walk = FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil)
        while let url = walk?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let relative = String(url.path.dropFirst(Self.sources.path.count + 1))
            guard !Self.exempt.contains(where: { relative.hasPrefix($0) }) else { continue }
            scanned += 1
            let text = try String(contentsOf: url, encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let l = String(line)
                if l.trimmingCharacters(in: .whitespaces).hasPrefix("//") { continue }
                if patterns.contains(where: { $0.firstMatch(in: l, range: NSRange(l.startIndex..., in: l)) != nil }) {
                    found.append("\(relative):\(n + 1): \(l.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        XCTAssertGreaterThan(scanned, 100, "the sources were found")
        XCTAssertEqual(found, [], "format special cases outside the registry and its backends")
    }

    /// The check finds what it is for (it cannot pass by matching nothing).
    func testTheCheckFindsASpecialCase() throws {
        let patterns = try Self.specialCases.map { try NSRegularExpression(pattern: $0) }
        for line in ["let d = try JPEGDecoder(bytes: b)", "if let webp { }", "guard r.sourceFormat == .png else",
                     "case .video: return 6"] {
            XCTAssertTrue(patterns.contains { $0.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil }, line)
        }
    }

    /// Every format Tessera names has one loader, and the loaders sniff by content only.
    func testEveryFormatHasOneLoader() {
        for format in ImageFormat.allCases {
            XCTAssertEqual(SourceLoaders.all.filter { $0.formats.contains(format) }.count, 1, "\(format)")
        }
        XCTAssertNil([UInt8]("not an image at all".utf8).withUnsafeBytes { SourceLoaders.sniff($0) })
    }
}
