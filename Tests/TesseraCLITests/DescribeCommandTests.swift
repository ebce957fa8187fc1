import Foundation
import TesseraImaging
import TesseraModel
import TesseraTestSupport
import XCTest

/// Placeholders and fingerprints as a photo library meets them (issue 54): asked for on the
/// command line or in a job, in every record whatever the source format (JPEG, HEIC, AVIF,
/// WebP, PNG, GIF, video, camera raw), in the CSV beside the JSON, timed as their own stage.
final class DescribeCommandTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    func testEveryFormatsRecordCarriesPlaceholdersAndFingerprints() throws {
        let dir = NSTemporaryDirectory() + "tessera-describe-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/in", withIntermediateDirectories: true)
        let examples = Self.root + "/examples"
        let files = ["images/mei_Canon_EOS_1000D.jpg", "images/canon_portrait.heic", "images/iphone5.avif", "images/sharp_alpha.webp",
                     "images/kodak_kodim01.png", "media/life.gif", "media/mandelbrot.mp4", "raw/canon_1000d_gbrg.dng"]
        for f in files {
            try FileManager.default.copyItem(atPath: examples + "/" + f, toPath: dir + "/in/" + (f as NSString).lastPathComponent)
        }
        let job = dir + "/job.yaml"
        try """
            name: library
            inputs: [\(dir)/in]
            output: \(dir)/out
            options: {placeholders: true, fingerprints: true}
            outputs: [{name: small, recipe: {operations: [{op: resize, width: 200, height: 200, mode: fit}], output: {format: webp}}, path: "{stem}.{srcext}.{ext}"}]
            """.write(toFile: job, atomically: true, encoding: .utf8)
        let r = try tessera(["run", job, "-w", "2", "--journal", dir + "/j.sqlite", "--report", dir + "/report"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let records = try String(contentsOfFile: dir + "/report.jsonl", encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["type"] as? String == "record" }
        XCTAssertEqual(records.count, files.count)
        var phashes: [String: String] = [:]
        for rec in records {
            let name = ((rec["input"] as? String) ?? "").components(separatedBy: "/").last ?? ""
            XCTAssertEqual(rec["status"] as? String, "succeeded", "\(name): \(rec)")
            let p = try XCTUnwrap(rec["placeholders"] as? [String: String], "\(name) has no placeholders")
            let thumb = try XCTUnwrap(Data(base64Encoded: p["thumbhash"] ?? ""), "\(name): thumbhash is base64")
            XCTAssertTrue((5...40).contains(thumb.count), "\(name): \(thumb.count)-byte ThumbHash")
            let blur = try XCTUnwrap(p["blurhash"])
            XCTAssertTrue([6 + 2 * 11, 6 + 2 * 15].contains(blur.count), "\(name): BlurHash \(blur) of 4x3 or 4x4 components")
            let f = try XCTUnwrap(rec["fingerprints"] as? [String: String], "\(name) has no fingerprints")
            for key in ["phash", "dhash"] { XCTAssertNotNil(UInt64(f[key] ?? "", radix: 16), "\(name): \(key) \(f[key] ?? "")") }
            for key in ["averageColor", "dominantColor"] {
                XCTAssertNotNil(f[key].flatMap { $0.hasPrefix("#") && $0.count == 7 ? UInt32($0.dropFirst(), radix: 16) : nil }, "\(name): \(key)")
            }
            let t = try XCTUnwrap(rec["timingsMilliseconds"] as? [String: Double])
            XCTAssertGreaterThan(t["describe"] ?? 0, 0, "\(name): the describe stage is timed")
            phashes[name] = f["phash"]
        }
        // The raw file was made from the JPEG: the same picture, a near-identical pHash.
        let jpeg = try XCTUnwrap(phashes["mei_Canon_EOS_1000D.jpg"]), raw = try XCTUnwrap(phashes["canon_1000d_gbrg.dng"])
        XCTAssertLessThanOrEqual(try XCTUnwrap(Fingerprints.distance(jpeg, raw)), 8, "\(jpeg) against \(raw)")
        // The CSV says the same.
        let csv = try String(contentsOfFile: dir + "/report.csv", encoding: .utf8).split(separator: "\n")
        let header = csv[0].split(separator: ",").map(String.init)
        for column in ["describe_ms", "thumbhash", "blurhash", "phash", "dhash", "average_color", "dominant_color"] {
            XCTAssertTrue(header.contains(column), "CSV has no \(column): \(header)")
        }
        let phashColumn = try XCTUnwrap(header.firstIndex(of: "phash"))
        XCTAssertTrue(csv.dropFirst().contains { $0.split(separator: ",", omittingEmptySubsequences: false).count > phashColumn
            && $0.split(separator: ",", omittingEmptySubsequences: false)[phashColumn] == Substring(jpeg) })
        // Not asked: not made, not timed.
        let plain = try tessera(["render", dir + "/in/kodak_kodim01.png", "-s", "64", "-o", dir + "/plain", "--json"])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(plain.stdout.contains("placeholders") || plain.stdout.contains("fingerprints"))
        let asked = try tessera(["render", dir + "/in/kodak_kodim01.png", "-s", "64", "-o", dir + "/asked", "--json", "--placeholders"])
        XCTAssertTrue(asked.stdout.contains("\"placeholders\"") && !asked.stdout.contains("\"fingerprints\""), asked.stdout)
    }

    /// `tessera similar`: from a folder (each image decoded once) and from a job's records.
    func testSimilarGroupsNearDuplicates() throws {
        let dir = NSTemporaryDirectory() + "tessera-similar-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/in/sub", withIntermediateDirectories: true)
        let images = Self.root + "/examples/images"
        let a = [UInt8](try Data(contentsOf: URL(fileURLWithPath: images + "/mei_Canon_EOS_1000D.jpg")))
        let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: images + "/mei_Nokia_Lumia_800.jpg")))
        let c = [UInt8](try Data(contentsOf: URL(fileURLWithPath: images + "/kodak_kodim01.png")))
        try Data(a).write(to: URL(fileURLWithPath: dir + "/in/a.jpg"))
        try Data(try Codec.encodeJPEG(try Renderer.decode(a), quality: 40)).write(to: URL(fileURLWithPath: dir + "/in/sub/a-q40.jpg"))
        try Data(b).write(to: URL(fileURLWithPath: dir + "/in/b.jpg"))
        let half = try Renderer.render(b, recipes: [Recipe(name: "h", operations: [.resize(Resize(width: 400, height: 400, mode: .fit))],
                                                             output: OutputSettings(format: .webp))]).outputs[0].bytes
        try Data(half).write(to: URL(fileURLWithPath: dir + "/in/b-small.webp"))
        try Data(c).write(to: URL(fileURLWithPath: dir + "/in/c.png"))
        let r = try tessera(["similar", dir + "/in", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let groups = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String] }
        XCTAssertEqual(groups.map { $0.map { ($0 as NSString).lastPathComponent }.sorted() }.sorted { $0[0] < $1[0] },
                       [["a-q40.jpg", "a.jpg"], ["b-small.webp", "b.jpg"]], r.stdout)
        // The bundled samples hold two such pairs (a HEIC and an AVIF made from two of the JPEGs).
        let bundled = try tessera(["similar", images, "--json"])
        XCTAssertEqual(bundled.status, 0, bundled.stderr)
        let pairs = bundled.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String] }
        XCTAssertEqual(Set(pairs.map { Set($0.map { ($0 as NSString).lastPathComponent }) }),
                       [["canon_portrait.heic", "mei_Canon_EOS_1000D.jpg"], ["iphone5.avif", "mei_Apple_iPhone_5.jpg"]], bundled.stdout)
        // From records: the job's fingerprints, no image read again.
        let job = dir + "/job.yaml"
        try """
            name: prints
            inputs: [\(dir)/in]
            output: \(dir)/out
            options: {fingerprints: true}
            outputs: [{name: t, recipe: {operations: [{op: resize, width: 256, height: 256, mode: fit}], output: {format: jpeg}}, path: "{dir}/{stem}.{srcext}.{ext}"}]
            """.write(toFile: job, atomically: true, encoding: .utf8)
        let run = try tessera(["run", job, "-w", "1", "--journal", dir + "/j.sqlite", "--report", dir + "/report"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let fromRecords = try tessera(["similar", dir + "/report.jsonl"])
        XCTAssertEqual(fromRecords.status, 0, fromRecords.stderr)
        XCTAssertTrue(fromRecords.stdout.contains("group 1: 2 photos") && fromRecords.stdout.contains("group 2: 2 photos"), fromRecords.stdout)
        XCTAssertFalse(fromRecords.stdout.contains("c.png"), fromRecords.stdout)
        XCTAssertTrue(fromRecords.stderr.contains("5 photos, 2 groups"), fromRecords.stderr)
        // Records without fingerprints are named, not guessed.
        let bare = dir + "/bare.jsonl"
        try "{\"type\":\"record\",\"version\":1,\"input\":\"x.jpg\",\"status\":\"succeeded\"}\n".write(toFile: bare, atomically: true, encoding: .utf8)
        let none = try tessera(["similar", bare])
        XCTAssertEqual(none.status, 0)
        XCTAssertTrue(none.stderr.contains("1 record without fingerprints"), none.stderr)
        XCTAssertEqual(try tessera(["similar", bare, "--threshold", "40"]).status, 2)
    }
}
