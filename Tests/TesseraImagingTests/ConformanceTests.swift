import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel
import TesseraTestSupport

/// The conformance matrix: every loader the registry lists (`SourceLoaders.all`) goes
/// through the same cells, on a sample made here — valid; cut at 10, 50 and 90 %; 64
/// seeded bit flips; zero bytes; a header declaring 60000×60000; strict and lenient; each
/// limit; `inspect`'s fields; the cheapest decode against a full one; orientation where
/// the format has one. A loader added to the registry without a sample here fails the
/// matrix: a new format inherits every cell.
final class ConformanceTests: XCTestCase {
    /// One format's sample and what it must give.
    struct Sample {
        var name: String
        var bytes: [UInt8]
        /// Stored size.
        var size: Size
        /// What `inspect`'s colour says, in part, and its bits per sample.
        var colour: String
        var bits = 8
        /// An animated sample of the format (its frames and seconds), for the length limits.
        var animated: (bytes: [UInt8], frames: Int, seconds: Double)?
        /// The quadrants (`Fixtures.quadrants`, 160×120 stored) turned by orientation 6.
        var oriented: [UInt8]?
        /// The file with a header declaring 60000×60000 (`hugeSide` for video).
        var huge: [UInt8]?
        var hugeSide = 60000
        /// Whether a file cut past its first tenth has rows before the cut to show (lenient).
        /// HEIF's image item decodes whole or not at all; a video's first keyframe holds most
        /// of a short clip, and a frame cut short is not shown; a raw file's sensor data is
        /// demosaiced whole (LibRaw would fill what is missing with zeros).
        var partial = true
    }

    static let picture = makePicture(width: 320, height: 240)

    /// A smooth picture with edges and a little grain (what a photo has).
    static func makePicture(width w: Int, height h: Int) -> PixelBuffer {
        let image = PixelBuffer(width: w, height: h, layout: .rgb)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for y in 0..<h {
            for x in 0..<w {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                let grain = Int(state % 9) - 4
                let disc = (x - w / 2) * (x - w / 2) + (y - h / 2) * (y - h / 2) < w * h / 19
                image.setPixel(x: x, y: y, [UInt8(clamping: x * 255 / (w - 1) + grain), UInt8(clamping: y * 255 / (h - 1) + grain),
                                            UInt8(clamping: (disc ? 40 : 200) + grain)])
            }
        }
        return image
    }

    static let quadrants = Fixtures.quadrants(width: 160, height: 120)

    // MARK: - Samples, one per format, made here

    static func jpeg() throws -> Sample {
        let bytes = try Codec.encodeJPEG(picture, quality: 92)
        return Sample(name: "JPEG", bytes: bytes, size: Size(width: 320, height: 240), colour: "ycbcr",
                      oriented: try Codec.encodeJPEG(quadrants, quality: 95, exif: Exif.build(orientation: 6)),
                      huge: patchJPEGFrame(bytes, side: 60000))
    }

    static func png() throws -> Sample {
        let bytes = try Codec.encodePNG(picture)
        let exif = Array(Exif.build(orientation: 6).dropFirst(6))  // eXIf holds the TIFF part
        return Sample(name: "PNG", bytes: bytes, size: Size(width: 320, height: 240), colour: "rgb",
                      oriented: pngInserting(chunk: "eXIf", exif, into: try Codec.encodePNG(quadrants)),
                      huge: pngDeclaring(bytes, side: 60000))
    }

    static func webp() throws -> Sample {
        let bytes = try Codec.encodeWebP(picture, quality: 90)
        let frames = (0..<3).map { i in Fixtures.solid(width: 64, height: 48, [UInt8(60 * i), 100, 200]) }
        let encoder = try AnimatedWebPEncoder(width: 64, height: 48, quality: 80, lossless: false, method: 4, loop: 0)
        for (i, f) in frames.enumerated() { try encoder.add(f, at: i * 500) }
        let animated = try encoder.finish(at: 1500)
        let exif = Array(Exif.build(orientation: 6).dropFirst(6))
        return Sample(name: "WebP", bytes: bytes, size: Size(width: 320, height: 240), colour: "YUV",
                      animated: (animated, 3, 1.5),
                      oriented: webpExtended(try Codec.encodeWebP(quadrants, quality: 95), canvas: Size(width: 160, height: 120), exif: exif),
                      huge: webpExtended(bytes, canvas: Size(width: 60000, height: 60000), exif: nil))
    }

    static func heif() throws -> Sample? {
        guard Codec.canEncodeAVIF else { return nil }
        let bytes = try Codec.encodeHEIF(picture, quality: 90)
        return Sample(name: "HEIF/AVIF", bytes: bytes, size: Size(width: 320, height: 240), colour: "YCbCr",
                      oriented: try Codec.encodeHEIF(quadrants, quality: 95, orientation: 6),
                      huge: heifDeclaring(bytes, side: 60000), partial: false)
    }

    static func jxl() throws -> Sample {
        let bytes = try JXLEncoder.encode(picture, .init(quality: 90, effort: 3))
        var turned = JXLEncoder.Settings(quality: 95, effort: 3)
        turned.orientation = 6
        return Sample(name: "JPEG XL", bytes: bytes, size: Size(width: 320, height: 240), colour: "XYB",
                      oriented: try JXLEncoder.encode(quadrants, turned), huge: jxlDeclaring(bytes, side: 60000))
    }

    static func gif() throws -> Sample {
        let bytes = try GIFEncoder.encode(picture)
        var palette: [[UInt8]] = [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]]
        palette += Array(repeating: [0, 0, 0], count: 4)
        let frames = (0..<3).map { i in TestGIF.Frame(width: 64, height: 48, delay: 50) { x, _ in UInt8((x / 16 + i) % 4) } }
        let animated = TestGIF(width: 64, height: 48, palette: palette, loop: 0, frames: frames).bytes()
        return Sample(name: "GIF", bytes: bytes, size: Size(width: 320, height: 240), colour: "palette",
                      animated: (animated, 3, 1.5), huge: gifDeclaring(bytes, side: 60000))
    }

    static func tiff() throws -> Sample {
        let p = picture
        var page = TestTIFF.Page(width: 320, height: 240)
        page.rowsPerStrip = 16
        page.sample = { x, y, s in UInt32(p.pixel(x: x, y: y)[s]) }
        // The directory first, as cameras write it: a file cut short keeps its strips' map.
        let bytes = tiffDirectoryFirst(TestTIFF(pages: [page]).bytes())
        var turned = TestTIFF.Page(width: 160, height: 120)
        turned.orientation = 6
        let q = quadrants
        turned.sample = { x, y, s in UInt32(q.pixel(x: x, y: y)[s]) }
        return Sample(name: "TIFF", bytes: bytes, size: Size(width: 320, height: 240), colour: "RGB",
                      oriented: tiffDirectoryFirst(TestTIFF(pages: [turned]).bytes()), huge: tiffDeclaring(bytes, side: 60000))
    }

    static func video() throws -> Sample? {
        guard which("ffmpeg") != nil else { return nil }
        let dir = TemporaryDirectory()
        func ffmpeg(_ args: [String]) throws -> [UInt8] {
            let r = try runProcess("ffmpeg", ["-v", "error", "-y"] + args, in: dir.path)
            guard r.status == 0 else { throw ImagingError(.encodeFailed, "ffmpeg could not make a sample: \(r.stderr)") }
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.path + "/" + args.last!)))
        }
        // The picture for 2 s at 10 frames a second, its index first (faststart), as phones
        // and the web write it: a file cut short keeps it.
        _ = dir.write("p.png", try Codec.encodePNG(picture))
        let bytes = try ffmpeg(["-loop", "1", "-i", "p.png", "-t", "2", "-r", "10", "-c:v", "libx264", "-preset", "veryfast",
                                "-pix_fmt", "yuv420p", "-movflags", "+faststart", "v.mp4"])
        _ = dir.write("q.png", try Codec.encodePNG(quadrants))
        _ = try ffmpeg(["-loop", "1", "-i", "q.png", "-t", "1", "-r", "5", "-c:v", "libx264", "-pix_fmt", "yuv420p", "q.mp4"])
        // ffmpeg 5.1's rotate tag counts counterclockwise: 270 displays turned 90° clockwise (orientation 6).
        let oriented = try ffmpeg(["-i", "q.mp4", "-c", "copy", "-metadata:s:v:0", "rotate=270", "qr.mp4"])
        // FFmpeg refuses frame sizes over 2^28 pixels itself: 16000×16000 (256 MP) is the
        // largest a header can declare to reach Tessera's own limit (100 MP).
        let raw = try ffmpeg(["-f", "lavfi", "-i", "testsrc=size=256x256:rate=5:duration=0.2", "-c:v", "rawvideo",
                              "-pix_fmt", "yuv420p", "r.mkv"])
        return Sample(name: "video", bytes: bytes, size: Size(width: 320, height: 240), colour: "yuv420p (4:2:0)",
                      animated: (bytes, 20, 2), oriented: oriented, huge: matroskaDeclaring(raw, side: 16000), hugeSide: 16000,
                      partial: false)
    }

    static func raw() throws -> Sample {
        let bytes = try Codec.encodeDNG(picture, pattern: "GRBG", bits: 12)
        return Sample(name: "raw", bytes: bytes, size: Size(width: 320, height: 240), colour: "CFA", bits: 12,
                      oriented: try Codec.encodeDNG(quadrants, orientation: 6), huge: tiffDeclaring(bytes, side: 60000),
                      partial: false)
    }

    /// The sample of each registered loader's format (nil: none could be made on this machine).
    static func sample(for loader: any SourceLoader.Type) throws -> Sample? {
        switch loader {
        case is JPEGLoader.Type: return try jpeg()
        case is PNGLoader.Type: return try png()
        case is WebPLoader.Type: return try webp()
        case is HEIFLoader.Type: return try heif()
        case is JXLLoader.Type: return try jxl()
        case is GIFLoader.Type: return try gif()
        case is TIFFLoader.Type: return try tiff()
        case is VideoLoader.Type: return try video()
        case is RawLoader.Type: return try raw()
        default: return nil
        }
    }

    // MARK: - The cells

    enum Outcome {
        case rendered(RenderResult, PixelBuffer)
        case failed(ImagingError)
        case other(Error)

        var error: ImagingError? { if case .failed(let e) = self { return e } else { return nil } }
        var summary: String {
            switch self {
            case .rendered(let r, let p): return "rendered \(p.width)x\(p.height) \(r.warnings)"
            case .failed(let e): return "\(e.code): \(e.reason)"
            case .other(let e): return "untyped \(e)"
            }
        }
    }

    static func render(_ bytes: [UInt8], strict: Bool = true, box: Int? = 64, animated: Bool = false,
                       configure: (inout RenderOptions) -> Void = { _ in }) -> Outcome {
        var options = RenderOptions()
        options.strict = strict
        options.decodeSeconds = 20  // nothing hangs
        configure(&options)
        do {
            let r = try Renderer.render(bytes, recipes: [recipe(box.map { [fit($0, $0)] } ?? [], format: animated ? .webp : .png) {
                $0.animated = animated
            }], options: options)
            return .rendered(r, try Renderer.decode(r.outputs[0].bytes))
        } catch let e as ImagingError {
            return .failed(e)
        } catch {
            return .other(error)
        }
    }

    /// A cell's verdict: nil when it passes, else what went wrong; "n/a" cells pass.
    typealias Cell = (name: String, run: (Sample) -> String?)

    static let cells: [Cell] = [
        ("valid", { s in
            guard case .rendered(let r, let p) = render(s.bytes) else { return render(s.bytes).summary }
            let want = Size(width: 64, height: 48)
            return Size(width: p.width, height: p.height) == want && r.warnings.isEmpty ? nil : "\(p.width)x\(p.height) \(r.warnings)"
        }),
        ("cut 10/50/90 %", { s in
            for percent in [10, 50, 90] {
                let cut = Array(s.bytes.prefix(s.bytes.count * percent / 100))
                let strict = render(cut)
                guard strict.error?.code == .truncated else { return "\(percent) % strict: \(strict.summary)" }
                // Lenient: what decoded, the rest gray and said; a cut before anything could
                // decode (a WebP's first partition holds every block's modes) fails typed.
                let lenient = render(cut, strict: false)
                if case .rendered(let r, let p) = lenient {
                    guard p.width == 64, p.height == 48, r.warnings.contains(where: { $0.hasPrefix("truncated") }) else {
                        return "\(percent) % lenient: \(lenient.summary)"
                    }
                } else if lenient.error?.code != .truncated || (s.partial && percent > 10) {
                    return "\(percent) % lenient: \(lenient.summary)"
                }
            }
            return nil
        }),
        ("64 bit flips", { s in
            var random = SeededGenerator(seed: 52)
            for i in 0..<64 {
                var damaged = s.bytes
                let bit = Int.random(in: 0..<damaged.count * 8, using: &random)
                damaged[bit / 8] ^= UInt8(1 << (bit % 8))
                for strict in [true, false] {
                    switch render(damaged, strict: strict) {
                    case .rendered(_, let p) where p.width > 0 && p.height > 0: continue
                    case .failed: continue
                    case let o: return "flip \(i) (bit \(bit)), \(strict ? "strict" : "lenient"): \(o.summary)"
                    }
                }
            }
            return nil
        }),
        ("0 bytes", { _ in render([]).error?.code == .empty ? nil : render([]).summary }),
        ("60000²", { s in
            guard let huge = s.huge else { return "no sample declaring \(s.hugeSide)²" }
            let o = render(huge)
            guard o.error?.code == .limitExceeded else { return o.summary }
            guard case .success(let info) = Result(catching: { try ImageInfo.inspect(huge) }) else { return nil }
            return info.width == s.hugeSide && info.height == s.hugeSide ? nil : "inspect says \(info.width)x\(info.height)"
        }),
        ("limits", { s in
            let pixels = render(s.bytes) { $0.limits.maxPixels = s.size.width * s.size.height - 1 }
            guard pixels.error?.code == .limitExceeded else { return "maxPixels: \(pixels.summary)" }
            let memory = render(s.bytes) { $0.limits.maxMemoryBytes = 64 << 10 }
            guard memory.error?.code == .outOfMemory else { return "memory: \(memory.summary)" }
            let timeout = render(s.bytes) { $0.decodeSeconds = 1e-9 }
            guard timeout.error?.code == .timedOut else { return "timeout: \(timeout.summary)" }
            // A still is one frame: never over a frame limit.
            if s.animated?.bytes != s.bytes, case .failed(let e) = render(s.bytes, configure: { $0.maxFrames = 1; $0.maxDuration = 0.01 }) {
                return "a still under maxFrames 1: \(e)"
            }
            // An animation or a video longer than asked is refused whatever is made of it: a still or an animation.
            if let a = s.animated {
                for animated in [false, true] {
                    let frames = render(a.bytes, box: 32, animated: animated) { $0.maxFrames = a.frames - 1 }
                    let seconds = render(a.bytes, box: 32, animated: animated) { $0.maxDuration = a.seconds / 2 }
                    let what = animated ? "animated" : "still"
                    guard frames.error?.code == .limitExceeded else { return "maxFrames \(a.frames - 1), \(what): \(frames.summary)" }
                    guard seconds.error?.code == .limitExceeded else { return "maxDuration \(a.seconds / 2), \(what): \(seconds.summary)" }
                }
                guard case .rendered = render(a.bytes, box: 32, animated: true, configure: { $0.maxFrames = a.frames; $0.maxDuration = a.seconds + 0.2 })
                else { return "the animation within its limits does not render" }
            }
            return nil
        }),
        ("inspect", { s in
            guard let info = try? ImageInfo.inspect(s.bytes) else { return "inspect failed" }
            guard info.width == s.size.width, info.height == s.size.height else { return "size \(info.width)x\(info.height)" }
            guard info.colorSpace.contains(s.colour) else { return "colour \(info.colorSpace), expected \(s.colour)" }
            guard info.bitDepth == s.bits else { return "bits \(info.bitDepth)" }
            if let a = s.animated {
                guard let animated = try? ImageInfo.inspect(a.bytes) else { return "inspect of the animation failed" }
                guard animated.frames == a.frames, let d = animated.durationSeconds, abs(d - a.seconds) < 0.11 else {
                    return "animation: \(animated.frames) frames, \(animated.durationSeconds ?? -1) s"
                }
            }
            return nil
        }),
        ("cheapest ≈ full", { s in
            guard case .rendered(let r, let cheap) = render(s.bytes, box: 80),
                  case .rendered(_, let full) = render(s.bytes, box: 80, configure: {
                      $0.scalePolicy = DecodeScalePolicy(preferredEighths: [8], fallbackEighths: [], minimumResidual: 1)
                      $0.heifThumbnails = false
                      $0.progressiveDC = false
                  }) else { return "a render failed" }
            guard cheap.width == full.width, cheap.height == full.height, cheap.channels == 3 else { return "sizes differ" }
            let score = ssim(cheap, full)
            return score >= 0.98 ? nil : "SSIM \(String(format: "%.4f", score)) at \(r.scaleEighths)/8"
        }),
        ("orientation", { s in
            guard let oriented = s.oriented else { return nil }  // the format has none (GIF)
            guard case .rendered(_, let p) = render(oriented, box: nil) else { return render(oriented, box: nil).summary }
            guard p.width == 120, p.height == 160 else { return "\(p.width)x\(p.height), not 120x160" }
            // Turned 90° clockwise: the stored bottom-left (blue) shows top left, the stored top-left (red) top right.
            let tl = p.pixel(x: 10, y: 10), tr = p.pixel(x: 110, y: 10)
            func near(_ a: [UInt8], _ b: [UInt8]) -> Bool { zip(a, b).allSatisfy { abs(Int($0) - Int($1)) <= 48 } }
            return near(tl, Quadrant.bottomLeft.color) && near(tr, Quadrant.topLeft.color) ? nil : "top left \(tl), top right \(tr)"
        }),
    ]

    func testEveryRegisteredLoaderPassesEveryCell() throws {
        var rows: [(String, [String?])] = []
        for loader in SourceLoaders.all {
            guard let sample = try Self.sample(for: loader) else {
                // Every format's sample can be made where CI runs (libheif with aom, ffmpeg).
                if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("\(loader): no sample on this machine") }
                rows.append(("\(loader)", Self.cells.map { _ in "no sample on this machine" }))
                continue
            }
            if let dump = ProcessInfo.processInfo.environment["TESSERA_CONFORMANCE_SAMPLES"] {
                // The samples, to look at or feed the command line.
                try FileManager.default.createDirectory(atPath: dump, withIntermediateDirectories: true)
                let name = sample.name.lowercased().replacingOccurrences(of: "/", with: "-").replacingOccurrences(of: " ", with: "")
                for (suffix, bytes) in [("", sample.bytes), ("-oriented", sample.oriented), ("-huge", sample.huge), ("-animated", sample.animated?.bytes)] {
                    if let bytes { try Data(bytes).write(to: URL(fileURLWithPath: "\(dump)/\(name)\(suffix)")) }
                }
            }
            rows.append((sample.name, Self.cells.map { $0.run(sample) }))
        }
        // The matrix, as the closing note gives it.
        var text = "backend".padding(toLength: 10, withPad: " ", startingAt: 0)
            + Self.cells.map { $0.name.padding(toLength: 16, withPad: " ", startingAt: 0) }.joined() + "\n"
        for (name, verdicts) in rows {
            text += name.padding(toLength: 10, withPad: " ", startingAt: 0)
                + verdicts.map { ($0 == nil ? "pass" : "FAIL").padding(toLength: 16, withPad: " ", startingAt: 0) }.joined() + "\n"
        }
        let passed = rows.reduce(0) { $0 + $1.1.filter { $0 == nil }.count }
        text += "\(passed) of \(rows.count * Self.cells.count) cells pass"
        print(text)
        for (name, verdicts) in rows {
            for (cell, verdict) in zip(Self.cells, verdicts) where verdict != nil {
                XCTFail("\(name), \(cell.name): \(verdict!)")
            }
        }
    }

    // MARK: - Making samples say what they must

    static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return ~c
    }

    static func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    /// A JPEG whose frame header (SOF) declares `side`×`side`.
    static func patchJPEGFrame(_ jpeg: [UInt8], side: Int) -> [UInt8]? {
        var out = jpeg
        var i = 2
        while i + 9 < out.count {
            guard out[i] == 0xFF else { return nil }
            let marker = out[i + 1], length = Int(out[i + 2]) << 8 | Int(out[i + 3])
            if (0xC0...0xC2).contains(marker) {
                out[i + 5] = UInt8(side >> 8); out[i + 6] = UInt8(side & 0xFF)
                out[i + 7] = UInt8(side >> 8); out[i + 8] = UInt8(side & 0xFF)
                return out
            }
            i += 2 + length
        }
        return nil
    }

    /// A PNG with a chunk inserted before its first IDAT.
    static func pngInserting(chunk type: String, _ data: [UInt8], into png: [UInt8]) -> [UInt8] {
        var at = 8
        while at + 8 <= png.count {
            let length = Int(png[at]) << 24 | Int(png[at + 1]) << 16 | Int(png[at + 2]) << 8 | Int(png[at + 3])
            if String(decoding: png[at + 4..<at + 8], as: UTF8.self) == "IDAT" { break }
            at += 12 + length
        }
        let body = Array(type.utf8) + data
        return Array(png[..<at]) + be32(data.count) + body + be32(Int(crc32(body[...]))) + Array(png[at...])
    }

    /// A PNG whose IHDR declares `side`×`side` (its CRC made right).
    static func pngDeclaring(_ png: [UInt8], side: Int) -> [UInt8] {
        var out = png
        out.replaceSubrange(16..<24, with: be32(side) + be32(side))
        out.replaceSubrange(29..<33, with: be32(Int(crc32(out[12..<29]))))
        return out
    }

    /// A simple (VP8) WebP made extended: a VP8X header declaring `canvas`, and an EXIF chunk.
    static func webpExtended(_ webp: [UInt8], canvas: Size, exif: [UInt8]?) -> [UInt8] {
        func le(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(v >> (8 * $0) & 0xFF) } }
        var vp8x: [UInt8] = Array("VP8X".utf8) + le(10, 4) + [exif != nil ? 0x08 : 0, 0, 0, 0]
        vp8x += le(canvas.width - 1, 3) + le(canvas.height - 1, 3)
        var body = Array("WEBP".utf8) + vp8x + Array(webp[12...])
        if let exif {
            body += Array("EXIF".utf8) + le(exif.count, 4) + exif
            if exif.count % 2 == 1 { body.append(0) }
        }
        return Array("RIFF".utf8) + le(body.count, 4) + body
    }

    /// A HEIF whose `ispe` boxes declare `side`×`side`.
    static func heifDeclaring(_ heif: [UInt8], side: Int) -> [UInt8]? {
        var out = heif
        var found = false
        for i in 0..<max(0, out.count - 16) where out[i] == 0x69 && out[i + 1] == 0x73 && out[i + 2] == 0x70 && out[i + 3] == 0x65 {
            out.replaceSubrange(i + 8..<i + 16, with: be32(side) + be32(side))
            found = true
        }
        return found ? out : nil
    }

    /// A bare JPEG XL codestream whose size header declares `side`×`side`: the header's bits
    /// rewritten (1:1 aspect, an 18-bit height), the rest of the stream after them as it was.
    static func jxlDeclaring(_ jxl: [UInt8], side: Int) -> [UInt8]? {
        guard jxl.count > 4, jxl[0] == 0xFF, jxl[1] == 0x0A else { return nil }
        var position = 16
        func read(_ n: Int) -> Int {
            var v = 0
            for k in 0..<n { v |= Int(jxl[(position + k) / 8] >> ((position + k) % 8) & 1) << k }
            position += n
            return v
        }
        func readU32() { _ = read([9, 13, 18, 30][read(2)]) }
        if read(1) == 1 {
            _ = read(5)
            if read(3) == 0 { _ = read(5) }
        } else {
            readU32()
            if read(3) == 0 { readU32() }
        }
        var out: [UInt8] = [0xFF, 0x0A]
        var bits = 0
        func write(_ v: Int, _ n: Int) {
            for k in 0..<n {
                if bits % 8 == 0 { out.append(0) }
                out[out.count - 1] |= UInt8((v >> k) & 1) << (bits % 8)
                bits += 1
            }
        }
        write(0, 1)  // not small
        write(2, 2)  // an 18-bit height follows
        write(side - 1, 18)
        write(1, 3)  // ratio 1:1
        for p in position..<jxl.count * 8 { write(Int(jxl[p / 8] >> (p % 8) & 1), 1) }
        return out
    }

    /// A GIF whose screen and first frame declare `side`×`side`.
    static func gifDeclaring(_ gif: [UInt8], side: Int) -> [UInt8]? {
        var out = gif
        let le: [UInt8] = [UInt8(side & 0xFF), UInt8(side >> 8)]
        out.replaceSubrange(6..<8, with: le)
        out.replaceSubrange(8..<10, with: le)
        var i = 13 + (out[10] & 0x80 != 0 ? 3 << (Int(out[10] & 7) + 1) : 0)
        while i < out.count {
            switch out[i] {
            case 0x21:
                i += 2
                while i < out.count, out[i] != 0 { i += Int(out[i]) + 1 }
                i += 1
            case 0x2C:
                out.replaceSubrange(i + 5..<i + 7, with: le)
                out.replaceSubrange(i + 7..<i + 9, with: le)
                return out
            default: return nil
            }
        }
        return nil
    }

    static func u16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
    static func u32(_ b: [UInt8], _ i: Int) -> Int { u16(b, i) | u16(b, i + 2) << 16 }
    static func put32(_ b: inout [UInt8], _ i: Int, _ v: Int) { for k in 0..<4 { b[i + k] = UInt8(v >> (8 * k) & 0xFF) } }

    /// A (little-endian, one-page) TIFF whose width and length tags say `side`.
    static func tiffDeclaring(_ tiff: [UInt8], side: Int) -> [UInt8] {
        var out = tiff
        let ifd = u32(out, 4)
        for e in 0..<u16(out, ifd) {
            let at = ifd + 2 + e * 12
            if u16(out, at) == 256 || u16(out, at) == 257 { put32(&out, at + 8, side) }
        }
        return out
    }

    /// The same (little-endian, one-page) TIFF with its directory right after the header,
    /// before the image data, and the data's offsets moved to match.
    static func tiffDirectoryFirst(_ tiff: [UInt8]) -> [UInt8] {
        let ifd = u32(tiff, 4), n = u16(tiff, ifd)
        let sizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8]
        let directory = 2 + n * 12 + 4
        var block = [UInt8](repeating: 0, count: directory)
        block[0] = UInt8(n & 0xFF); block[1] = UInt8(n >> 8)
        // The block is the directory, then the values too long for their entries.
        var values: [UInt8] = []
        var placed: [(entry: Int, tag: Int, type: Int, count: Int, inline: Bool, at: Int)] = []
        for e in 0..<n {
            let at = ifd + 2 + e * 12
            let tag = u16(tiff, at), type = u16(tiff, at + 2), count = u32(tiff, at + 4)
            let size = (sizes[type] ?? 4) * count
            for k in 0..<12 { block[2 + e * 12 + k] = tiff[at + k] }
            if size > 4 {
                let from = u32(tiff, at + 8)
                placed.append((e, tag, type, count, false, values.count))
                values += tiff[from..<from + size]
            } else {
                placed.append((e, tag, type, count, true, 0))
            }
        }
        let shift = directory + values.count  // where the old bytes after the header now lie
        for p in placed {
            let entry = 2 + p.entry * 12
            if !p.inline { put32(&block, entry + 8, 8 + directory + p.at) }
            guard p.tag == 273 || p.tag == 324 else { continue }
            if p.inline {
                put32(&block, entry + 8, u32(block, entry + 8) + shift)
            } else {
                for k in 0..<p.count { put32(&values, p.at + 4 * k, u32(values, p.at + 4 * k) + shift) }
            }
        }
        var out = Array(tiff[0..<8])
        put32(&out, 4, 8)
        return out + block + values + Array(tiff[8...])
    }

    /// A Matroska file whose (two-byte) PixelWidth and PixelHeight say `side`.
    static func matroskaDeclaring(_ mkv: [UInt8], side: Int) -> [UInt8]? {
        var out = mkv
        for id: UInt8 in [0xB0, 0xBA] {
            guard let i = (0..<out.count - 4).first(where: { out[$0] == id && out[$0 + 1] == 0x82 && out[$0 + 2] == 0x01 && out[$0 + 3] == 0x00 })
            else { return nil }
            out[i + 2] = UInt8(side >> 8)
            out[i + 3] = UInt8(side & 0xFF)
        }
        return out
    }
}
