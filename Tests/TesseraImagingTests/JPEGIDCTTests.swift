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

    func decoded(_ jpeg: [UInt8], own: Bool, eighths: Int = 3) throws -> PixelBuffer {
        ts_jpeg_own_idct(own ? 1 : 0)
        defer { ts_jpeg_own_idct(1) }
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
