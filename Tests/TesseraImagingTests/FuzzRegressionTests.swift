import Foundation
@testable import TesseraImaging
import XCTest
import TesseraModel

/// What coverage-guided fuzzing found (Fuzz/regressions/TARGET/, Benchmarks/fuzz.sh), replayed
/// in the ordinary debug build: each input gets its typed error (or renders) instead of the
/// crash or runaway allocation it caused. The sanitizer build replays them too (`fuzz.sh replay`).
final class FuzzRegressionTests: XCTestCase {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    func input(_ target: String, _ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: Self.fuzz.appendingPathComponent("regressions/\(target)/\(name)")))
    }

    var limits: Limits {
        var l = Limits()
        l.maxPixels = 4_000_000
        l.maxMemoryBytes = 256 << 20
        return l
    }

    func render(_ bytes: [UInt8]) throws -> RenderResult {
        var options = RenderOptions()
        options.limits = limits
        let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 64, height: 64, mode: .fill, gravity: .attention))],
                            output: OutputSettings(format: .jpeg, quality: 0.7))
        return try bytes.withUnsafeBytes { try Renderer.render(bytes: $0, recipes: [recipe], options: options) }
    }

    /// A 515-byte progressive JPEG declaring 28514x25202 (718 MP): recompressing it to JPEG XL
    /// had libjxl allocate its coefficients (over 512 MB). Its size is checked first now.
    func testRecompressingAJPEGOverThePixelLimitFailsBeforeLibjxl() throws {
        let bytes = try input("jxl", "recompress-jpeg-declares-718-megapixels.jpg")
        XCTAssertThrowsError(try bytes.withUnsafeBytes { try LosslessJXL.recompress($0, limits: limits) }) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .limitExceeded, "\($0)")
        }
        // Within the pixel limit, the memory budget counts the coefficients.
        var budget = Limits()
        budget.maxMemoryBytes = 16 << 20
        let big = try Codec.encodeJPEG(Fixtures.noise(width: 800, height: 600), quality: 80)
        XCTAssertThrowsError(try big.withUnsafeBytes { try LosslessJXL.recompress($0, limits: budget) }) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .outOfMemory, "\($0)")
        }
    }

    /// A 900-byte PNG whose tEXt chunk declares 1.6 GB: libpng allocated the declared length
    /// before reading it. Now the chunks before the image data are checked against the file.
    func testPNGChunkLongerThanTheFileIsTruncatedWithoutAllocating() throws {
        let bytes = try input("inspect", "png-text-length-91c4dd6e.png")
        XCTAssertThrowsError(try render(bytes)) {
            XCTAssertEqual(($0 as? ImagingError)?.code, .truncated, "\($0)")
            XCTAssertTrue("\($0)".contains("tEXt chunk of 1650786321 bytes"), "\($0)")
        }
        XCTAssertThrowsError(try ImageInfo.inspect(bytes), "inspect (the target that found it) too") {
            XCTAssertEqual(($0 as? ImagingError)?.code, .truncated, "\($0)")
        }
    }

    /// A 1.8 kB JPEG whose ICC profile's description tag declares 400 MB: Little CMS
    /// allocated it (its own ceiling is 512 MB). Now each lcms allocation is capped at 64 MB:
    /// the description is unreadable, the memory is never asked for.
    func testICCDescriptionDeclaringHundredsOfMegabytesIsNotAllocated() throws {
        let bytes = try input("inspect", "icc-desc-400mb-6b78db7c.jpg")
        // The peak resident size, reset first (/proc/self/clear_refs: 5), then read (VmHWM).
        func peakKB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        let before = peakKB()
        let info = try ImageInfo.inspect(bytes)
        XCTAssertEqual(info.iccProfile, "unnamed")
        XCTAssertEqual(info.iccBytes, 588)
        XCTAssertLessThan(peakKB() - before, 100 << 10, "the peak grew by the declared 400 MB")
    }

    /// The progressive DC decoder on a damaged 48x32 progressive JPEG.
    func testProgressiveDCOnADamagedScan() throws {
        let bytes = try input("progressive", "dc-crash-025e88b3.jpg")
        try bytes.withUnsafeBytes { raw in
            let decoder = try JPEGDecoder(bytes: raw, limits: limits)
            XCTAssertTrue(ProgressiveDC.applies(to: decoder.header))
            // The fast path skips the AC scans and reached a DC scan whose table selector was 15.
            for exact in [true, false] {
                XCTAssertThrowsError(try ProgressiveDC.decode(raw, header: decoder.header, exact: exact)) {
                    XCTAssertTrue($0 is ProgressiveDC.Unsupported, "falls back to libjpeg: \($0)")
                }
            }
        }
    }

    /// A 3.6 kB progressive JPEG whose header says 48x32 and whose second SOF2 says far more:
    /// the DC decoder sized its coefficient planes from the second one (a 2 GB allocation).
    /// Now only the frame libjpeg read (and the limits checked) is accepted.
    func testProgressiveDCTakesOnlyTheHeadersFrame() throws {
        let bytes = try input("progressive", "dc-second-frame-2gb-25b537cb.jpg")
        try bytes.withUnsafeBytes { raw in
            let decoder = try JPEGDecoder(bytes: raw, limits: limits)
            XCTAssertEqual([decoder.header.width, decoder.header.height], [48, 32])
            XCTAssertThrowsError(try ProgressiveDC.decode(raw, header: decoder.header, exact: false)) {
                XCTAssertTrue("\($0)".contains("a frame other than the one in the header"), "\($0)")
            }
        }
        XCTAssertThrowsError(try render(bytes), "libjpeg, the fallback, reports the damage") {
            XCTAssertTrue($0 is ImagingError, "\($0)")
        }
    }

    /// A JPEG with "FF 00" and RST markers between segments (libjpeg skips them): copied
    /// after a scan once the APPn between them was dropped, they read as part of the scan and
    /// the COM behind swallowed the rest of the file, so the stripped output did not parse.
    /// Now stray markers are dropped and every output is walked again before it is returned.
    func testStripDropsStrayBytesBetweenSegments() throws {
        let bytes = try input("strip", "jpeg-ff00-between-segments-1e360446.jpg")
        for options in [StripOptions(), StripOptions(keepICC: false, keepCopyright: true, orientation: .transform)] {
            let result = try LosslessStrip.strip(bytes, options: options)
            XCTAssertTrue(result.removed.contains("stray markers"), "\(result.removed)")
            let info = try ImageInfo.inspect(result.bytes)
            XCTAssertEqual(Set([info.width, info.height]), [29, 37])
        }
    }

    /// Every strip seed and regression input is stripped to an output `inspect` reads, or
    /// refused with a typed error.
    func testEveryStripInputGivesAReadableOutputOrATypedError() throws {
        var outputs = 0, refused = 0
        for dir in ["corpus/strip", "regressions/strip"] {
            let url = Self.fuzz.appendingPathComponent(dir)
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path) {
                let bytes = Array(try Data(contentsOf: url.appendingPathComponent(name)))
                do {
                    let result = try LosslessStrip.strip(bytes)
                    XCTAssertNoThrow(try ImageInfo.inspect(result.bytes), "\(dir)/\(name)")
                    outputs += 1
                } catch is ImagingError { refused += 1 }
            }
        }
        XCTAssertGreaterThan(outputs, 10)
        XCTAssertGreaterThan(refused, 1)
    }

    /// Every committed seed and regression input goes through the whole render without a
    /// crash: an image or a typed error.
    func testEveryFuzzInputRendersOrFailsTyped() throws {
        var count = 0
        for dir in ["corpus/render", "corpus/progressive", "corpus/png", "regressions/progressive", "regressions/inspect",
                    "regressions/render", "regressions/strip"] {
            let url = Self.fuzz.appendingPathComponent(dir)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? [] {
                let bytes = Array(try Data(contentsOf: url.appendingPathComponent(name)))
                do { _ = try render(bytes) } catch is ImagingError {} catch {
                    XCTFail("\(dir)/\(name): untyped error \(error)")
                }
                count += 1
            }
        }
        XCTAssertGreaterThan(count, 30)
    }
}
