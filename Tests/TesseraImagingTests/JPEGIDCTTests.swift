import Foundation
import TesseraImaging
import TesseraModel
import TesseraShim
import XCTest

/// Tessera's SIMD inverse DCT at 3/8 (jpeg_idct.c) must give libjpeg-turbo's pixels exactly,
/// including on blocks whose coefficients are too large for its 32-bit lanes (those go to
/// libjpeg's own function).
final class JPEGIDCTTests: XCTestCase {
    override func setUpWithError() throws {
        #if !arch(x86_64)
        throw XCTSkip("the SIMD inverse DCT is x86-64 only")
        #endif
    }

    override func tearDown() {
        ts_jpeg_own_idct(1)
        super.tearDown()
    }

    /// `own`: Tessera's inverse DCTs; `float` too, those within a level of libjpeg's (without
    /// it, only the bit-exact 3×3).
    func decoded(_ jpeg: [UInt8], own: Bool, float: Bool = false, eighths: Int = 3) throws -> PixelBuffer {
        ts_jpeg_own_idct(own ? 1 : 0)
        ts_jpeg_float_idct(float ? 1 : 0)
        defer {
            ts_jpeg_own_idct(1)
            ts_jpeg_float_idct(1)
        }
        return try Codec.decodeJPEG(jpeg, scaleEighths: eighths)
    }

    /// Same pixels from both, and Tessera's was in use on `expected` components.
    func assertSame(_ jpeg: [UInt8], _ what: String, components expected: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let before = ts_jpeg_own_idct_components()
        let own = try decoded(jpeg, own: true)
        XCTAssertEqual(ts_jpeg_own_idct_components() - before, expected, "\(what): components on the SIMD path", file: file, line: line)
        let library = try decoded(jpeg, own: false)
        XCTAssertEqual(own.width, library.width, what, file: file, line: line)
        XCTAssertEqual(own.height, library.height, what, file: file, line: line)
        XCTAssertTrue(own.bytes == library.bytes, "\(what): pixels differ", file: file, line: line)
    }

    /// `jpeg` with every quantisation table replaced by `values` (8-bit tables below 256, 16-bit
    /// from there): the coefficients stay, their dequantised magnitudes grow.
    static func requantised(_ jpeg: [UInt8], _ values: (Int) -> Int, sixteenBit: Bool) -> [UInt8] {
        var out = Array(jpeg.prefix(2)), i = 2
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF {
            let marker = jpeg[i + 1], length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if marker == 0xDA { break }
            if marker == 0xDB {
                var body: [UInt8] = [], p = i + 4
                while p < i + 2 + length {
                    let precision = jpeg[p] >> 4, id = jpeg[p] & 15
                    body.append((sixteenBit ? 0x10 : 0) | id)
                    for k in 0..<64 {
                        let v = values(k)
                        if sixteenBit { body += [UInt8(v >> 8), UInt8(v & 255)] } else { body.append(UInt8(v)) }
                    }
                    p += 1 + 64 * (precision == 0 ? 1 : 2)
                }
                out += [0xFF, 0xDB, UInt8((body.count + 2) >> 8), UInt8((body.count + 2) & 255)] + body
            } else {
                out += jpeg[i..<(i + 2 + length)]
            }
            i += 2 + length
        }
        return out + jpeg[i...]
    }

    func testMatchesLibjpegAt3Eighths() throws {
        let cases: [(ChromaSubsampling, Int, Int, Int, Bool)] = [
            (.s420, 320, 240, 85, false), (.s420, 333, 217, 100, false), (.s422, 257, 129, 75, false),
            (.s444, 97, 313, 95, false), (.s444, 160, 120, 30, false), (.s420, 9, 7, 90, false), (.s420, 1, 1, 90, false),
            (.s420, 301, 199, 90, true), (.s444, 130, 96, 60, true),
        ]
        for (sub, w, h, quality, progressive) in cases {
            for image in [JPEGEntropyTests.scene(width: w, height: h), Fixtures.noise(width: w, height: h)] {
                let jpeg = try Codec.encodeJPEG(image, quality: quality, subsampling: sub, progressive: progressive)
                // 4:2:0 decodes its chroma at 6/8 (libjpeg scales it up in the IDCT): only luma is 3×3.
                try assertSame(jpeg, "\(sub) \(w)×\(h) q\(quality)\(progressive ? " progressive" : "")",
                               components: sub == .s420 ? 1 : 3)
            }
        }
        let gray = try Codec.encodeJPEG(JPEGEntropyTests.scene(width: 250, height: 170, layout: .gray), quality: 80)
        try assertSame(gray, "gray", components: 1)
        // Other scales keep libjpeg's functions.
        let before = ts_jpeg_own_idct_components()
        for eighths in [1, 2, 4, 5, 8] { _ = try decoded(gray, own: true, eighths: eighths) }
        XCTAssertEqual(ts_jpeg_own_idct_components(), before)
    }

    /// Coefficients near and far past the 32-bit bound: quantisation tables of up to 255 (8-bit)
    /// and of 40,000 and 65,535 (16-bit, negative as libjpeg's 16-bit multipliers) over a
    /// quality-100 noise image, whose coefficients reach the hundreds.
    func testLargeCoefficientsMatchLibjpeg() throws {
        let jpeg = try Codec.encodeJPEG(Fixtures.noise(width: 96, height: 80), quality: 100, subsampling: .s444)
        for q in [1, 7, 13, 27, 60, 255] {
            try assertSame(Self.requantised(jpeg, { _ in q }, sixteenBit: false), "every multiplier \(q)", components: 3)
        }
        try assertSame(Self.requantised(jpeg, { k in 1 + (k * 37) % 255 }, sixteenBit: false), "mixed multipliers", components: 3)
        for q in [300, 40_000, 65_535] {
            try assertSame(Self.requantised(jpeg, { _ in q }, sixteenBit: true), "16-bit multiplier \(q)", components: 3)
        }
    }

    /// Largest and mean absolute difference, and mean difference, between two decodes of one size.
    static func difference(_ a: PixelBuffer, _ b: PixelBuffer) -> (max: Int, mean: Double, signed: Double) {
        let x = a.bytes, y = b.bytes
        var largest = 0, sum = 0, signed = 0
        for i in x.indices {
            let d = Int(x[i]) - Int(y[i])
            largest = max(largest, abs(d))
            sum += abs(d)
            signed += d
        }
        let n = Double(max(1, x.count))
        return (largest, Double(sum) / n, Double(signed) / n)
    }

    /// The float inverse DCTs (5/8-7/8, and 4:2:0 chroma at 10/8-14/8): a gray image within one
    /// level of libjpeg's (RGB within three: a level of Cr is 1.4 of R), and equal almost everywhere.
    func testFloatSizesStayWithinOneLevelOfLibjpeg() throws {
        let cases: [(ChromaSubsampling, Int, Int, Int)] = [
            (.s420, 320, 240, 85), (.s420, 333, 217, 100), (.s422, 257, 129, 75), (.s444, 97, 313, 95),
            (.s444, 160, 120, 30), (.s420, 9, 7, 90),
        ]
        var worst = 0.0, signed = 0.0, samples = 0.0
        for (sub, w, h, quality) in cases {
            for layout in [PixelLayout.rgb, .gray] {
                for image in [JPEGEntropyTests.scene(width: w, height: h, layout: layout), Fixtures.noise(width: w, height: h, layout: layout)] {
                    let jpeg = try Codec.encodeJPEG(image, quality: quality, subsampling: sub)
                    for eighths in [5, 6, 7] {
                        let before = ts_jpeg_own_idct_components()
                        let own = try decoded(jpeg, own: true, float: true, eighths: eighths)
                        XCTAssertEqual(ts_jpeg_own_idct_components() - before, layout == .gray ? 1 : 3,
                                       "\(sub) at \(eighths)/8: components on the float path")
                        let library = try decoded(jpeg, own: false, eighths: eighths)
                        XCTAssertEqual(own.width, library.width)
                        let d = Self.difference(own, library)
                        XCTAssertLessThanOrEqual(d.max, layout == .gray ? 1 : 3, "\(layout) \(sub) \(w)×\(h) q\(quality) at \(eighths)/8")
                        worst = max(worst, d.mean)
                        signed += d.signed * Double(own.bytes.count)
                        samples += Double(own.bytes.count)
                    }
                }
            }
        }
        // Rounding noise, not a shift: ties round up as libjpeg's do (a DC-only block exactly).
        XCTAssertLessThan(worst, 0.1, "mean difference")
        XCTAssertLessThan(abs(signed / samples), 0.005, "mean signed difference over every case")
    }

    func testCorpusPhotosMatch() throws {
        let files = Fixtures.corpusFiles("photos").filter { $0.pathExtension == "jpg" }
        guard !files.isEmpty else { throw XCTSkip("corpus not present") }
        for f in files {
            let jpeg = try bytes(of: f)
            let own = try decoded(jpeg, own: true), library = try decoded(jpeg, own: false)
            XCTAssertTrue(own.bytes == library.bytes, f.lastPathComponent)
        }
    }
}
