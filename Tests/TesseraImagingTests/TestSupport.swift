import Foundation
import TesseraImaging
import XCTest
import TesseraModel

/// Colours of the four quadrants of the orientation fixture, in display order.
enum Quadrant: CaseIterable {
    case topLeft, topRight, bottomLeft, bottomRight

    var color: [UInt8] {
        switch self {
        case .topLeft: return [230, 20, 20]      // red
        case .topRight: return [20, 200, 20]     // green
        case .bottomLeft: return [20, 20, 230]   // blue
        case .bottomRight: return [240, 240, 240] // white
        }
    }
}

enum Fixtures {
    /// An RGB image whose quadrants have the `Quadrant` colours.
    static func quadrants(width: Int, height: Int) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: .rgb)
        for y in 0..<height {
            for x in 0..<width {
                let q: Quadrant = y < height / 2 ? (x < width / 2 ? .topLeft : .topRight)
                                                 : (x < width / 2 ? .bottomLeft : .bottomRight)
                image.setPixel(x: x, y: y, q.color)
            }
        }
        return image
    }

    /// Deterministic noise (hard to compress): for byte-budget tests.
    static func noise(width: Int, height: Int, layout: PixelLayout = .rgb, seed: UInt64 = 1) -> PixelBuffer {
        let image = PixelBuffer(width: width, height: height, layout: layout)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        for y in 0..<height {
            for x in 0..<width {
                var px = [UInt8]()
                for c in 0..<layout.channels {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17
                    // Smooth-ish base plus noise, so JPEG quality matters.
                    let base = (x * 255 / max(width - 1, 1) + y * 97 / max(height - 1, 1) + c * 60) % 256
                    px.append(UInt8(clamping: base + Int(state % 64) - 32))
                }
                image.setPixel(x: x, y: y, px)
            }
        }
        return image
    }

    static func solid(width: Int, height: Int, _ color: [UInt8]) -> PixelBuffer {
        let layout: PixelLayout = color.count == 1 ? .gray : color.count == 3 ? .rgb : .rgba
        let image = PixelBuffer(width: width, height: height, layout: layout)
        image.fill(color)
        return image
    }

    /// ../shared/corpus (or $TESSERA_CORPUS) when present.
    static func corpus(_ sub: String) -> URL? {
        let env = ProcessInfo.processInfo.environment["TESSERA_CORPUS"]
        let root = env.map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/corpus")
        let dir = root.appendingPathComponent(sub)
        return FileManager.default.fileExists(atPath: dir.path) ? dir : nil
    }

    static func corpusFiles(_ sub: String) -> [URL] {
        guard let dir = corpus(sub) else { return [] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasSuffix(".jpg") || $0.hasSuffix(".png") }.sorted().map { dir.appendingPathComponent($0) }
    }
}

func bytes(of url: URL) throws -> [UInt8] { [UInt8](try Data(contentsOf: url)) }

func recipe(_ ops: [RecipeOperation] = [], format: OutputFormat = .jpeg, quality: Double = 0.9,
            configure: (inout OutputSettings) -> Void = { _ in }) -> Recipe {
    var o = OutputSettings(format: format, quality: quality)
    configure(&o)
    return Recipe(name: "test", operations: ops, output: o)
}

func fit(_ w: Int?, _ h: Int?) -> RecipeOperation { .resize(Resize(width: w, height: h, mode: .fit)) }
func fill(_ w: Int, _ h: Int) -> RecipeOperation { .resize(Resize(width: w, height: h, mode: .fill)) }

/// Renders one recipe and decodes its output back to pixels.
func renderAndDecode(_ source: [UInt8], _ r: Recipe, options: RenderOptions = RenderOptions()) throws
    -> (output: RenderedOutput, pixels: PixelBuffer) {
    let result = try Renderer.render(source, recipes: [r], options: options)
    let out = result.outputs[0]
    return (out, try Renderer.decode(out.bytes))
}

/// Mean absolute difference per channel sample between two same-size images.
func meanAbsoluteDifference(_ a: PixelBuffer, _ b: PixelBuffer) -> Double {
    precondition(a.width == b.width && a.height == b.height && a.channels == b.channels)
    let x = a.bytes, y = b.bytes
    var sum = 0
    for i in 0..<x.count { sum += abs(Int(x[i]) - Int(y[i])) }
    return Double(sum) / Double(x.count)
}

func assertColor(_ actual: [UInt8], _ expected: [UInt8], tolerance: Int, _ message: String = "",
                 file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(actual.count, expected.count, message, file: file, line: line)
    for (a, e) in zip(actual, expected) where abs(Int(a) - Int(e)) > tolerance {
        XCTFail("\(message): got \(actual), expected \(expected) ±\(tolerance)", file: file, line: line)
        return
    }
}

func assertThrowsImagingError(_ code: ImagingError.Code, _ body: @autoclosure () throws -> Any, _ message: String = "",
                              file: StaticString = #filePath, line: UInt = #line) {
    do {
        _ = try body()
        XCTFail("expected \(code), got success \(message)", file: file, line: line)
    } catch let e as ImagingError {
        XCTAssertEqual(e.code, code, "\(e)", file: file, line: line)
    } catch {
        XCTFail("expected ImagingError \(code), got \(error)", file: file, line: line)
    }
}
