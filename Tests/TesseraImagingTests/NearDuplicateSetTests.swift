import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel

/// The near-duplicate threshold, chosen on data: every bundled photo (and the corpus's, when
/// present) with its re-encode, a 2 % crop, a half-size copy and two exposure changes, against
/// every other photo. Precision and recall of "pHash within the threshold" over all pairs.
final class NearDuplicateSetTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The pHash `tessera similar` and a render's `fingerprints` give.
    func phash(_ file: [UInt8]) throws -> UInt64 {
        let image = try Renderer.decode(file, recipe: recipe([fit(256, 256)], format: .png))
        let small = Describe.reduced(image)
        return try XCTUnwrap(UInt64(Describe.fingerprints(width: small.width, height: small.height, rgba: small.rgba).phash, radix: 16))
    }

    /// What a library ends up holding twice: the photo re-encoded, cropped 2 % a side, at half
    /// size, 15 % brighter and darker (from a 1200 px copy: the size a library's previews are).
    func variants(of file: [UInt8]) throws -> [(String, [UInt8])] {
        let full = try Renderer.decode(file, recipe: recipe([fit(1200, 1200)], format: .png))
        let w = full.width, h = full.height, ch = full.channels
        let dx = max(1, w / 50), dy = max(1, h / 50)
        let crop = PixelBuffer(width: w - 2 * dx, height: h - 2 * dy, layout: full.layout)
        for y in 0..<crop.height { crop.row(y).update(from: full.row(y + dy) + dx * ch, count: crop.width * ch) }
        func exposed(_ k: Double) -> PixelBuffer {
            let out = PixelBuffer(width: w, height: h, layout: full.layout)
            let table = (0..<256).map { UInt8(max(0, min(255, (Double($0) * k).rounded()))) }
            for y in 0..<h {
                let src = full.row(y), dst = out.row(y)
                for i in 0..<(w * ch) { dst[i] = ch == 4 && i % 4 == 3 ? src[i] : table[Int(src[i])] }
            }
            return out
        }
        let half = try Renderer.render(file, recipes: [recipe([fit(max(1, w / 2), max(1, h / 2))], quality: 0.85)]).outputs[0].bytes
        return [
            ("re-encoded q50", try Codec.encodeJPEG(full, quality: 50)),
            ("2% crop", try Codec.encodePNG(crop)),
            ("half size", half),
            ("exposure +15%", try Codec.encodeJPEG(exposed(1.15), quality: 85)),
            ("exposure -15%", try Codec.encodeJPEG(exposed(0.85), quality: 85)),
        ]
    }

    func testTheThresholdSeparatesNearDuplicatesFromOtherPhotos() throws {
        var sources: [(String, [UInt8])] = []
        let images = Self.root.appendingPathComponent("examples/images")
        // Distinct photos only: the bundled HEIC and AVIF were made from two of the JPEGs (they
        // are near-duplicates of them, and `tessera similar examples/images` says so), and the
        // corpus holds the bundled PNG too.
        for name in try FileManager.default.contentsOfDirectory(atPath: images.path).sorted()
        where name.hasSuffix(".jpg") || name.hasSuffix(".png") {
            sources.append((name, try bytes(of: images.appendingPathComponent(name))))
        }
        for url in Fixtures.corpusFiles("photos").prefix(24) where !sources.contains(where: { $0.0 == url.lastPathComponent }) {
            sources.append((url.lastPathComponent, try bytes(of: url)))
        }
        // Each photo's family: the photo and its variants.
        var family: [Int] = [], hashes: [UInt64] = [], labels: [String] = []
        for (k, (name, file)) in sources.enumerated() {
            hashes.append(try phash(file)); family.append(k); labels.append(name)
            for (what, bytes) in try variants(of: file) {
                hashes.append(try phash(bytes)); family.append(k); labels.append("\(name) \(what)")
            }
        }
        var same: [Int] = [], other: [Int] = []
        for i in hashes.indices {
            for j in (i + 1)..<hashes.count {
                let d = (hashes[i] ^ hashes[j]).nonzeroBitCount
                if family[i] == family[j] { same.append(d) } else { other.append(d) }
            }
        }
        func rates(_ t: Int) -> (precision: Double, recall: Double) {
            let tp = same.filter { $0 <= t }.count, fp = other.filter { $0 <= t }.count
            return (tp + fp == 0 ? 1 : Double(tp) / Double(tp + fp), Double(tp) / Double(same.count))
        }
        let table = [4, 6, 8, 10, 12, 14, 16, 20].map { t -> String in
            let r = rates(t)
            return "t=\(t): precision \(String(format: "%.3f", r.precision)) recall \(String(format: "%.3f", r.recall))"
        }
        print("near-duplicates: \(sources.count) photos x 6, \(same.count) same-photo pairs (largest distances \(same.sorted().suffix(12))), "
              + "\(other.count) other pairs (closest \(other.sorted().prefix(12)))\n  " + table.joined(separator: "\n  "))
        let chosen = rates(NearDuplicates.defaultThreshold)
        XCTAssertGreaterThanOrEqual(chosen.recall, 0.9, table.joined(separator: "; "))
        XCTAssertGreaterThanOrEqual(chosen.precision, 0.98, table.joined(separator: "; "))
        // Grouped, every family is one group and no group mixes photos.
        let groups = NearDuplicates.groups(hashes, threshold: NearDuplicates.defaultThreshold)
        for g in groups { XCTAssertEqual(Set(g.map { family[$0] }).count, 1, "a group mixes photos: \(g.map { labels[$0] })") }
    }
}
