@testable import TesseraImaging
import TesseraModel
import XCTest

/// Tessera's JPEG front end (jpeg_frontend.c): its tables (effort 1), its dead-zone quantiser
/// and Huffman tables (effort 2, the default) and its trellis quantiser (effort 3) write
/// ordinary JPEGs that every decoder reads, smaller than libjpeg-turbo's (effort 0) at no
/// lower quality for the same setting.
final class JPEGFrontEndTests: XCTestCase {
    /// Every size, sampling, layout and scan mode decodes to its size and near its source;
    /// no effort is further from the source than libjpeg-turbo's at the same quality by more
    /// than its quantiser trades away.
    func testEveryEffortDecodesAtItsSizeAndNearItsSource() throws {
        let sizes = [(1, 1), (17, 9), (8, 8), (333, 217), (16, 40)]
        for (w, h) in sizes {
            for layout in [PixelLayout.rgb, .gray] {
                let source = Fixtures.noise(width: w, height: h, layout: layout, seed: UInt64(w * 31 + h))
                for sub in [ChromaSubsampling.s420, .s422, .s444] where layout == .rgb || sub == .s420 {
                    var errors: [Double] = []
                    for effort in 0...3 {
                        for progressive in [false, true] {
                            let label = "\(w)x\(h) \(layout) \(sub) effort \(effort) progressive \(progressive)"
                            let jpeg = try Codec.encodeJPEG(source, quality: 80, subsampling: sub,
                                                            progressive: progressive, effort: effort)
                            let back = try Codec.decodeJPEG(jpeg)
                            XCTAssertEqual(back.width, w, label)
                            XCTAssertEqual(back.height, h, label)
                            XCTAssertEqual(back.channels, layout.channels, label)
                            errors.append(meanAbsoluteDifference(back, source))
                        }
                    }
                    // Noise is the hardest case for a quantiser that zeroes coefficients.
                    XCTAssertLessThan(errors.max()!, errors[0] * 1.35 + 1, "\(w)x\(h) \(layout) \(sub): \(errors)")
                }
            }
        }
    }

    /// On a photo: at the same quality setting fewer bytes than libjpeg-turbo, and for no
    /// more bytes a higher SSIM (Gaussian window, as Benchmarks/quality.py). At the same
    /// setting the SSIM may be a little lower on a given photo (on the corpus it is higher on
    /// average: decision 024), so that is bounded, not required.
    func testAPhotoTakesFewerBytesAndScoresHigherForTheSameBytes() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../examples/images/mei_Canon_EOS_1000D.jpg").standardized
        let photo = try Codec.decodeJPEG(try bytes(of: url), scaleEighths: 2)
        func encode(_ q: Int, _ effort: Int) throws -> [UInt8] {
            try Codec.encodeJPEG(photo, quality: q, subsampling: .s420, effort: effort)
        }
        func score(_ jpeg: [UInt8]) throws -> Double { ssim(try Codec.decodeJPEG(jpeg), photo) }
        let theirs = try encode(80, 0), theirSSIM = try score(theirs)
        for effort in [2, 3] {
            let mine = try encode(80, effort), mySSIM = try score(mine)
            XCTAssertLessThan(Double(mine.count), Double(theirs.count) * 0.9, "effort \(effort), bytes at quality 80: \(mine.count) \(theirs.count)")
            XCTAssertGreaterThan(mySSIM, theirSSIM - 0.01, "effort \(effort), SSIM at quality 80: \(mySSIM) \(theirSSIM)")
            var q = 80, same = theirs
            while same.count > mine.count, q > 1 {
                q -= 2
                same = try encode(q, 0)
            }
            let sameSSIM = try score(same)
            XCTAssertGreaterThan(mySSIM, sameSSIM, "effort \(effort) at 80 (\(mine.count) B, SSIM \(mySSIM)) against effort 0 at \(q) (\(same.count) B, \(sameSSIM))")
        }
    }

    /// The front end's own Huffman statistics and tables (sequential JPEGs at effort 2 and 3)
    /// code every block: the same coefficients with libjpeg-turbo's tables decode to the same
    /// pixels, for every size (partial MCUs, dummy blocks), sampling, restart interval and
    /// quality (DC differences of 11 bits at 100), and the tables cost no more bytes than
    /// libjpeg-turbo's optimal ones.
    func testOwnHuffmanTablesCodeExactlyWhatLibjpegsWould() throws {
        var ours = 0, libjpegs = 0, differed = 0
        for (w, h) in [(1, 1), (7, 9), (17, 33), (100, 40), (333, 217), (64, 8)] {
            for layout in [PixelLayout.rgb, .gray] {
                let source = Fixtures.noise(width: w, height: h, layout: layout, seed: UInt64(w * 7 + h))
                for sub in [ChromaSubsampling.s420, .s422, .s444] where layout == .rgb || sub == .s420 {
                    for (restart, quality, effort) in [(0, 80, 2), (3, 100, 2), (1, 20, 3), (0, 95, 3)] {
                        let label = "\(w)x\(h) \(layout) \(sub) restart \(restart) q\(quality) effort \(effort)"
                        var s = JPEGEncoder.Settings(quality: quality, progressive: false, optimize: true, subsampling: sub,
                                                     restartInterval: restart, effort: effort)
                        let own = try JPEGEncoder.encode(source, s)
                        s.libjpegHuffman = true
                        let reference = try JPEGEncoder.encode(source, s)
                        XCTAssertEqual(try Codec.decodeJPEG(own).bytes, try Codec.decodeJPEG(reference).bytes, label)
                        // Equally optimal codes can differ in how many 0xFF bytes need stuffing.
                        XCTAssertLessThanOrEqual(Double(own.count), Double(reference.count) * 1.002 + 8, label)
                        differed += own == reference ? 0 : 1
                        ours += own.count
                        libjpegs += reference.count
                    }
                }
            }
        }
        XCTAssertLessThanOrEqual(Double(ours), Double(libjpegs) * 1.001, "all bytes: \(ours) against \(libjpegs)")
        // The tables list symbols most frequent first, libjpeg-turbo by value: the files differ.
        XCTAssertGreaterThan(differed, 0, "the front end's tables were used")
    }

    /// The DC-scan decoder reads the front end's progressive JPEGs exactly as libjpeg does.
    func testProgressiveOutputMatchesLibjpegOnTheDCPath() throws {
        for (w, h, sub) in [(320, 240, ChromaSubsampling.s420), (257, 129, .s422), (97, 313, .s444)] {
            let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: w, height: h), quality: 75, subsampling: sub,
                                            progressive: true, effort: 2)
            var o = RenderOptions()
            o.progressiveDC = true
            let fast = try Renderer.render(jpeg, recipes: [recipe([fit(20, 20)], format: .png)], options: o)
            o.progressiveDC = false
            let full = try Renderer.render(jpeg, recipes: [recipe([fit(20, 20)], format: .png)], options: o)
            XCTAssertEqual(fast.decodePath, .progressiveDC)
            XCTAssertEqual(fast.outputs[0].bytes, full.outputs[0].bytes, "\(w)x\(h) \(sub)")
        }
    }

    /// A recipe's JPEG effort is checked, and renders follow it.
    func testTheRecipeChoosesTheEffort() throws {
        var r = recipe([fit(200, 200)], quality: 0.8)
        r.output.jpegEffort = 4
        XCTAssertThrowsError(try r.validate()) { XCTAssertTrue("\($0)".contains("output.jpegEffort"), "\($0)") }
        let source = try Codec.encodeJPEG(Fixtures.noise(width: 400, height: 300), quality: 95)
        var sizes: [Int] = []
        for effort in [0, 2] {
            r.output.jpegEffort = effort
            sizes.append(try Renderer.render(source, recipes: [r]).outputs[0].bytes.count)
        }
        r.output.jpegEffort = nil
        XCTAssertEqual(try Renderer.render(source, recipes: [r]).outputs[0].bytes.count, sizes[1], "the default is effort 2")
        XCTAssertNotEqual(sizes[0], sizes[1])
    }
}

/// Mean SSIM over the three channels, 11×11 Gaussian window (sigma 1.5), as Benchmarks/quality.py.
func ssim(_ a: PixelBuffer, _ b: PixelBuffer) -> Double {
    precondition(a.width == b.width && a.height == b.height && a.channels == 3 && b.channels == 3)
    let w = a.width, h = a.height
    let kernel = (-5...5).map { exp(-Double($0 * $0) / (2 * 1.5 * 1.5)) }
    let norm = kernel.reduce(0, +)
    func blur(_ p: [Double]) -> [Double] {
        var t = [Double](repeating: 0, count: w * h), o = t
        for y in 0..<h {
            for x in 0..<w {
                var s = 0.0
                for k in -5...5 { s += kernel[k + 5] * p[y * w + min(max(x + k, 0), w - 1)] }
                t[y * w + x] = s / norm
            }
        }
        for y in 0..<h {
            for x in 0..<w {
                var s = 0.0
                for k in -5...5 { s += kernel[k + 5] * t[min(max(y + k, 0), h - 1) * w + x] }
                o[y * w + x] = s / norm
            }
        }
        return o
    }
    let c1 = (0.01 * 255.0) * (0.01 * 255.0), c2 = (0.03 * 255.0) * (0.03 * 255.0)
    let xa = a.bytes, xb = b.bytes
    var total = 0.0
    for c in 0..<3 {
        let p = (0..<w * h).map { Double(xa[$0 * 3 + c]) }, q = (0..<w * h).map { Double(xb[$0 * 3 + c]) }
        let mp = blur(p), mq = blur(q)
        let pp = blur(p.map { $0 * $0 }), qq = blur(q.map { $0 * $0 }), pq = blur(zip(p, q).map { $0 * $1 })
        var sum = 0.0, n = 0
        for y in 5..<h - 5 {
            for x in 5..<w - 5 {
                let i = y * w + x
                let vp = pp[i] - mp[i] * mp[i], vq = qq[i] - mq[i] * mq[i], cov = pq[i] - mp[i] * mq[i]
                sum += (2 * mp[i] * mq[i] + c1) * (2 * cov + c2) / ((mp[i] * mp[i] + mq[i] * mq[i] + c1) * (vp + vq + c2))
                n += 1
            }
        }
        total += sum / Double(n)
    }
    return total / 3
}
