import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel
import TesseraTestSupport

/// Placeholders and fingerprints against the reference implementations from PyPI (`thumbhash`,
/// Evan Wallace's encoder ported; `blurhash`, Wolt's; `imagehash`), run on the same small image.
final class DescribeTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The bundled photos and the corpus's (when present), plus made pictures: an alpha one and a portrait.
    func sources() throws -> [(String, [UInt8])] {
        var files: [(String, [UInt8])] = []
        let images = Self.root.appendingPathComponent("examples/images")
        for name in try FileManager.default.contentsOfDirectory(atPath: images.path).sorted() where !name.hasSuffix(".md") {
            files.append((name, try bytes(of: images.appendingPathComponent(name))))
        }
        for url in Fixtures.corpusFiles("photos") { files.append((url.lastPathComponent, try bytes(of: url))) }
        files.append(("made-portrait.png", try Codec.encodePNG(ConformanceTests.makePicture(width: 300, height: 420))))
        return files
    }

    /// Each argument `PATH<tab>THUMBHASH<tab>BLURHASH` (Tessera's): the reference encoders on the PNG
    /// (the PyPI ThumbHash port cannot encode an image with alpha: a precedence slip in
    /// `rgba_to_thumb_hash`, null then), and Tessera's hashes through the reference decoders.
    static let reference = #"""
    import sys, json, base64, numpy as np
    from PIL import Image
    import thumbhash, blurhash, imagehash
    for arg in sys.argv[1:]:
        path, ours_t, ours_b = arg.split("\t")
        im = Image.open(path).convert("RGBA")
        w, h = im.size
        try:
            th = base64.b64encode(bytes(thumbhash.rgba_to_thumb_hash(w, h, list(im.tobytes())))).decode()
        except TypeError:
            th = None
        mine = base64.b64decode(ours_t)
        cx, cy = [int(v) for v in path.split(".")[-2].split("x")]
        bh = blurhash.encode(np.array(im.convert("RGB")), cx, cy)
        b = np.array(blurhash.decode(ours_b, 32, 32), dtype=float)
        dc = blurhash.blurhash.base83_decode(ours_b[2:6])
        a = np.array(im, dtype=float).reshape(-1, 4)
        alpha = a[:, 3:] / 255
        mean = ((a[:, :3] * alpha).sum(0) / max(alpha.sum(), 1e-9)).tolist()
        print(json.dumps({"thumbhash": th, "blurhash": bh, "phash": str(imagehash.phash(im)), "dhash": str(imagehash.dhash(im)),
            "mean": mean, "rgbMean": [blurhash.linear_to_srgb(v) for v in np.vectorize(blurhash.srgb_to_linear)(a[:, :3]).mean(0)], "alpha": float(alpha.mean()),
            "thumbMean": [v * 255 for v in thumbhash.thumb_hash_to_average_rgba(mine)[:3]],
            "thumbAlpha": thumbhash.thumb_hash_to_average_rgba(mine)[3],
            "thumbAspect": thumbhash.thumb_hash_to_approximate_aspect_ratio(mine), "blurMean": b.reshape(-1, 3).mean(0).tolist(),
            "blurDC": [(dc >> 16) & 255, (dc >> 8) & 255, dc & 255]}))
    """#

    func testHashesAreTheReferenceImplementations() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("describe-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var ours: [(name: String, path: String, p: Placeholders, f: Fingerprints, aspect: Double)] = []
        for (name, file) in try sources() {
            // The smallest output a task would make, then the describe stage's own reduction.
            let image = try Renderer.decode(file, recipe: recipe([fit(256, 256)], format: .png))
            let small = Describe.reduced(image)
            XCTAssertLessThanOrEqual(max(small.width, small.height), 100, name)
            let (cx, cy) = Describe.blurHashComponents(width: small.width, height: small.height)
            let buffer = PixelBuffer(width: small.width, height: small.height, layout: .rgba)
            for y in 0..<small.height { for x in 0..<small.width { buffer.setPixel(x: x, y: y, Array(small.rgba[(y * small.width + x) * 4..<(y * small.width + x) * 4 + 4])) } }
            let path = dir.appendingPathComponent("\(ours.count).\(cx)x\(cy).png").path
            try Data(try Codec.encodePNG(buffer)).write(to: URL(fileURLWithPath: path))
            ours.append((name, path, Describe.placeholders(width: small.width, height: small.height, rgba: small.rgba),
                         Describe.fingerprints(width: small.width, height: small.height, rgba: small.rgba),
                         Double(image.width) / Double(image.height)))
        }
        let script = dir.appendingPathComponent("reference.py").path
        try Self.reference.write(toFile: script, atomically: true, encoding: .utf8)
        let run = try runProcess("python3", [script] + ours.map { "\($0.path)\t\($0.p.thumbhash)\t\($0.p.blurhash)" })
        XCTAssertEqual(run.status, 0, "the reference implementations (pip install thumbhash blurhash imagehash): \(run.stderr)")
        let lines = run.stdout.split(separator: "\n").filter { $0.hasPrefix("{") }  // the ThumbHash port prints the aspect it computes
        XCTAssertEqual(lines.count, ours.count, String(run.stdout.prefix(600)))
        var phashDistances: [Int] = [], dhashDistances: [Int] = [], thumbSame = 0, blurSame = 0
        for (mine, line) in zip(ours, lines) {
            let ref = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let reference = ref["thumbhash"] as? String
            if mine.p.thumbhash == reference { thumbSame += 1 }
            if reference == nil { thumbSame += 1 }  // alpha: the port cannot say; the decoders below still check it
            if mine.p.blurhash == ref["blurhash"] as? String { blurSame += 1 }
            XCTAssertEqual(mine.p.blurhash, ref["blurhash"] as? String, mine.name)
            phashDistances.append(try XCTUnwrap(Fingerprints.distance(mine.f.phash, try XCTUnwrap(ref["phash"] as? String))))
            dhashDistances.append(try XCTUnwrap(Fingerprints.distance(mine.f.dhash, try XCTUnwrap(ref["dhash"] as? String))))
            // Decoded by the reference decoders: the placeholder's colours are the photo's, its aspect the photo's.
            // BlurHash averages in linear light and ignores alpha: its colour is the pixels' linear mean.
            let mean = try XCTUnwrap(ref["mean"] as? [Double]), rgbMean = try XCTUnwrap(ref["rgbMean"] as? [Double])
            let alpha = try XCTUnwrap(ref["alpha"] as? Double), thumbAlpha = try XCTUnwrap(ref["thumbAlpha"] as? Double)
            // The port's `thumb_hash_to_rgba` paints wrong colours even for hashes its own encoder
            // made: its `thumb_hash_to_average_rgba` is the reference decoding checked.
            let thumb = try XCTUnwrap(ref["thumbMean"] as? [Double])
            let blur = try XCTUnwrap(ref["blurDC"] as? [Double]), painted = try XCTUnwrap(ref["blurMean"] as? [Double])
            XCTAssertEqual(thumbAlpha, alpha, accuracy: 0.1, "\(mine.name): ThumbHash's decoded opacity")
            for c in 0..<3 {
                XCTAssertEqual(thumb[c], mean[c], accuracy: 16, "\(mine.name): ThumbHash's decoded colour \(thumb) against \(mean)")
                XCTAssertEqual(blur[c], rgbMean[c], accuracy: 3, "\(mine.name): BlurHash's colour \(blur) against \(rgbMean)")
                XCTAssertEqual(painted[c], rgbMean[c], accuracy: 40, "\(mine.name): BlurHash's decoded picture \(painted) against \(rgbMean)")
            }
            let aspect = try XCTUnwrap(ref["thumbAspect"] as? Double)
            XCTAssertEqual(aspect, mine.aspect, accuracy: mine.aspect * 0.15, "\(mine.name): ThumbHash's aspect")
        }
        // ThumbHash: the same bytes, but where Python's round (to even) and JavaScript's
        // Math.round (half up, which Tessera follows) part on an exact half.
        XCTAssertGreaterThanOrEqual(Double(thumbSame), Double(ours.count) * 0.9, "ThumbHash identical for \(thumbSame) of \(ours.count)")
        XCTAssertEqual(blurSame, ours.count)
        // Same pixels in, same hashes out: the 32x32 and 9x8 reductions are Pillow's, to the bit
        // (42 of 42 identical when written); a median tie may still part them.
        print("describe: \(ours.count) images; ThumbHash identical \(thumbSame), BlurHash \(blurSame); pHash distances \(phashDistances.sorted()), dHash \(dhashDistances.sorted())")
        XCTAssertGreaterThanOrEqual(Double(phashDistances.filter { $0 == 0 }.count), Double(ours.count) * 0.9, "\(phashDistances)")
        XCTAssertGreaterThanOrEqual(Double(dhashDistances.filter { $0 == 0 }.count), Double(ours.count) * 0.9, "\(dhashDistances)")
        XCTAssertLessThanOrEqual(phashDistances.max() ?? 0, 4, "\(phashDistances)")
        XCTAssertLessThanOrEqual(dhashDistances.max() ?? 0, 4, "\(dhashDistances)")
    }

    /// The hashes tell a photo's re-encode and resize from another photo.
    func testFingerprintsFindTheSamePhotoAndNotAnother() throws {
        let images = Self.root.appendingPathComponent("examples/images")
        let a = try bytes(of: images.appendingPathComponent("mei_Canon_EOS_1000D.jpg"))
        let b = try bytes(of: images.appendingPathComponent("mei_Nokia_Lumia_800.jpg"))
        func prints(_ file: [UInt8], _ box: Int, quality: Double = 0.9) throws -> Fingerprints {
            var o = RenderOptions()
            o.fingerprints = true
            o.placeholders = true
            let r = try Renderer.render(file, recipes: [recipe([fit(box, box)], quality: quality)], options: o)
            XCTAssertNotNil(r.placeholders)
            XCTAssertGreaterThan(r.timings.describe, 0)
            return try XCTUnwrap(r.fingerprints)
        }
        let original = try prints(a, 400)
        let reencoded = try renderAndDecode(a, recipe([fit(900, 900)], quality: 0.5))
        let again = try prints(try Codec.encodeJPEG(reencoded.pixels, quality: 60), 250)
        let other = try prints(b, 400)
        XCTAssertLessThanOrEqual(try XCTUnwrap(Fingerprints.distance(original.phash, again.phash)), 6)
        XCTAssertLessThanOrEqual(try XCTUnwrap(Fingerprints.distance(original.dhash, again.dhash)), 8)
        XCTAssertGreaterThan(try XCTUnwrap(Fingerprints.distance(original.phash, other.phash)), 16)
        XCTAssertTrue(original.averageColor.hasPrefix("#") && original.averageColor.count == 7, original.averageColor)
        // Nothing asked, nothing made.
        let plain = try Renderer.render(a, recipes: [recipe([fit(64, 64)])])
        XCTAssertNil(plain.placeholders)
        XCTAssertNil(plain.fingerprints)
        XCTAssertEqual(plain.timings.describe, 0)
    }
}
