import XCTest
@testable import TesseraImaging
import TesseraModel

/// Writes GIFs byte by byte for the tests: a global palette, frames at offsets with their
/// disposal, transparency, delay, interlacing and optional local palette, the NETSCAPE2.0 loop
/// count. LZW data is "uncompressed" (every index a literal, a Clear before the code size
/// would grow), which every decoder reads.
struct TestGIF {
    struct Frame {
        var left = 0, top = 0, width: Int, height: Int
        var disposal = 0
        var transparent: Int?
        var delay = 10
        var interlaced = false
        var localPalette: [[UInt8]]?
        /// The palette index of pixel (x, y) of the frame.
        var index: (Int, Int) -> UInt8
    }

    var width: Int
    var height: Int
    var palette: [[UInt8]]
    var background = 0
    var loop: Int?
    var frames: [Frame]
    var version = "GIF89a"
    /// Real LZW (giflib's encoder: codes widen to 12 bits) instead of literals only; with
    /// `deferClear` a full table is kept (no Clear) to the end of the frame.
    var compress = false
    var deferClear = false

    static func compressed(_ indices: [UInt8], deferClear: Bool) -> [UInt8] {
        let clear = 256, end = 257
        var next = 258, width = 9
        var out: [UInt8] = []
        var acc = 0, bits = 0
        var table: [Int: Int] = [:]
        func emit(_ code: Int) {
            acc |= code << bits
            bits += width
            while bits >= 8 { out.append(UInt8(acc & 0xFF)); acc >>= 8; bits -= 8 }
            if next >= 1 << width && code <= 4095 && width < 12 { width += 1 }
        }
        emit(clear)
        var current = -1
        for p in indices.map(Int.init) {
            guard current >= 0 else { current = p; continue }
            let key = current << 8 | p
            if let code = table[key] { current = code; continue }
            emit(current)
            current = p
            if next >= 4095 && !deferClear {  // giflib: a Clear when the table is full
                emit(clear)
                next = 258
                width = 9
                table = [:]
            } else if next < 4096 {
                table[key] = next
                next += 1
            }
        }
        if current >= 0 { emit(current) }
        emit(end)
        if bits > 0 { out.append(UInt8(acc & 0xFF)) }
        return out
    }

    static func lzw(_ indices: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var acc: UInt32 = 0, bits = 0
        func put(_ code: UInt32) {
            acc |= code << UInt32(bits)
            bits += 9
            while bits >= 8 { out.append(UInt8(acc & 0xFF)); acc >>= 8; bits -= 8 }
        }
        var run = 0
        put(256)
        for i in indices {
            if run == 254 { put(256); run = 0 }
            put(UInt32(i))
            run += 1
        }
        put(257)
        if bits > 0 { out.append(UInt8(acc & 0xFF)) }
        return out
    }

    func bytes() -> [UInt8] {
        var out = Array(version.utf8)
        func u16(_ v: Int) { out += [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF)] }
        func table(_ p: [[UInt8]]) { for k in 0..<256 { out += k < p.count ? p[k] : [0, 0, 0] } }
        u16(width); u16(height)
        out += [0xF7, UInt8(background), 0]  // a 256-entry global table
        table(palette)
        if let loop { out += [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1]; u16(loop); out.append(0) }
        for f in frames {
            out += [0x21, 0xF9, 4, UInt8(f.disposal << 2 | (f.transparent != nil ? 1 : 0))]
            u16(f.delay)
            out += [UInt8(f.transparent ?? 0), 0]
            out.append(0x2C)
            u16(f.left); u16(f.top); u16(f.width); u16(f.height)
            out.append((f.localPalette != nil ? 0x87 : 0) | (f.interlaced ? 0x40 : 0))
            if let p = f.localPalette { table(p) }
            var rows = Array(0..<f.height)
            if f.interlaced {
                rows = stride(from: 0, to: f.height, by: 8).map { $0 } + stride(from: 4, to: f.height, by: 8).map { $0 }
                    + stride(from: 2, to: f.height, by: 4).map { $0 } + stride(from: 1, to: f.height, by: 2).map { $0 }
            }
            let indices = rows.flatMap { y in (0..<f.width).map { x in f.index(x, y) } }
            let data = compress ? TestGIF.compressed(indices, deferClear: deferClear) : TestGIF.lzw(indices)
            out.append(8)
            var i = 0
            while i < data.count {
                let n = min(255, data.count - i)
                out.append(UInt8(n))
                out += data[i..<i + n]
                i += n
            }
            out.append(0)
        }
        out.append(0x3B)
        return out
    }

    /// What a browser (and libnsgif, vips' loader) shows at frame `k`: RGBA.
    func expected(frame k: Int) -> [[UInt8]] {
        var canvas = [[UInt8]](repeating: [0, 0, 0, 0], count: width * height)
        for (n, f) in frames.enumerated() where n <= k {
            let before = canvas
            let p = f.localPalette ?? palette
            for y in 0..<f.height where f.top + y < height {
                for x in 0..<f.width where f.left + x < width {
                    let i = Int(f.index(x, y))
                    if i == f.transparent { continue }
                    canvas[(f.top + y) * width + f.left + x] = (i < p.count ? p[i] : [0, 0, 0]) + [255]
                }
            }
            guard n < k else { break }
            for y in 0..<f.height where f.top + y < height {
                for x in 0..<f.width where f.left + x < width {
                    let at = (f.top + y) * width + f.left + x
                    if f.disposal == 2 { canvas[at] = f.transparent != nil ? [0, 0, 0, 0] : palette[background] + [255] }
                    if f.disposal == 3 { canvas[at] = before[at] }
                }
            }
        }
        return canvas
    }
}

/// GIF sources: detection, every disposal method, transparency, interlacing, frames chosen
/// with `frame`, frame counts and loops in `inspect`, and hostile files failing typed.
final class GIFTests: XCTestCase {
    private let palette: [[UInt8]] = (0..<256).map { (k: Int) -> [UInt8] in
        let r = UInt8(k), g = UInt8(255 - k), b = UInt8((k * 7) & 0xFF)
        return [r, g, b]
    }

    private func decode(_ bytes: [UInt8], frame: Int = 0) throws -> PixelBuffer {
        var options = RenderOptions()
        options.frame = frame
        return try Renderer.decode(bytes, options: options)
    }

    private func assertShows(_ gif: TestGIF, frame k: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let image = try decode(gif.bytes(), frame: k)
        XCTAssertEqual(image.width, gif.width, file: file, line: line)
        XCTAssertEqual(image.height, gif.height, file: file, line: line)
        let want = gif.expected(frame: k)
        var wrong = 0
        for y in 0..<gif.height {
            for x in 0..<gif.width {
                let p = image.pixel(x: x, y: y)
                let w = want[y * gif.width + x]
                let got = image.layout.channels == 4 ? Array(p[0..<4]) : Array(p[0..<3]) + [255]
                if got != w && !(got[3] == 0 && w[3] == 0) { wrong += 1 }
            }
        }
        XCTAssertEqual(wrong, 0, "frame \(k): pixels differ from a browser's compositing", file: file, line: line)
    }

    func testDetectionAndExtension() {
        for sig in ["GIF87a", "GIF89a"] {
            XCTAssertEqual((Array(sig.utf8) + [1, 0, 1, 0, 0, 0, 0]).withUnsafeBytes { ImageFormat.sniff($0) }, .gif)
        }
        XCTAssertNil(Array("GIF90a\0\0".utf8).withUnsafeBytes { ImageFormat.sniff($0) })
        XCTAssertEqual(ImageFormat.byExtension["gif"], .gif)
        XCTAssertTrue(ImageFormat.gif.isWritable)
        XCTAssertFalse(ImageFormat.gif.keptByOriginal, "original/auto make a GIF's stills JPEG or PNG")
    }

    /// A still: palette colours exactly; opaque gives RGB, a transparent index RGBA with alpha 0.
    func testAStillFrameAndItsTransparency() throws {
        var gif = TestGIF(width: 37, height: 23, palette: palette,
                          frames: [TestGIF.Frame(width: 37, height: 23, index: { x, y in UInt8((x * 5 + y * 3) & 0xFF) })])
        let opaque = try decode(gif.bytes())
        XCTAssertEqual(opaque.layout, .rgb)
        try assertShows(gif, frame: 0)
        gif.frames[0].transparent = 0
        let clear = try decode(gif.bytes())
        XCTAssertEqual(clear.layout, .rgba)
        XCTAssertEqual(clear.pixel(x: 0, y: 0)[3], 0, "index 0 is transparent")
        XCTAssertEqual(Array(clear.pixel(x: 1, y: 0)[0..<4]), palette[5] + [255])
        try assertShows(gif, frame: 0)
        // Interlaced rows land where they belong; GIF87a reads the same.
        gif.frames[0].interlaced = true
        gif.version = "GIF87a"
        try assertShows(gif, frame: 0)
    }

    /// Frames at offsets with each disposal method (none, keep, background, previous), a
    /// transparent frame, a local palette, a frame running off the screen (clipped): every
    /// frame composites as a browser shows it.
    func testEveryDisposalMethodComposites() throws {
        let full = TestGIF.Frame(width: 40, height: 30, index: { x, y in UInt8((x + y * 2) & 0x7F) })
        var keep = TestGIF.Frame(left: 5, top: 4, width: 12, height: 10, disposal: 1, index: { x, _ in UInt8(200 + x) })
        keep.delay = 20
        let background = TestGIF.Frame(left: 20, top: 10, width: 15, height: 12, disposal: 2, index: { _, y in UInt8(150 + y) })
        var clearing = TestGIF.Frame(left: 2, top: 15, width: 10, height: 10, disposal: 2, transparent: 3, index: { x, y in UInt8((x + y) % 5) })
        clearing.localPalette = palette.reversed()
        let previous = TestGIF.Frame(left: 10, top: 2, width: 25, height: 20, disposal: 3, index: { x, y in UInt8(90 + (x * y) % 30) })
        let offscreen = TestGIF.Frame(left: 30, top: 25, width: 20, height: 20, disposal: 0, transparent: 7, index: { x, y in UInt8((x ^ y) & 15) })
        let gif = TestGIF(width: 40, height: 30, palette: palette, background: 9, loop: 0,
                          frames: [full, keep, background, clearing, previous, offscreen])
        for k in 0..<gif.frames.count { try assertShows(gif, frame: k) }
        // Beyond the last frame: typed, naming the count.
        XCTAssertThrowsError(try decode(gif.bytes(), frame: 6)) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .invalidRecipe)
            XCTAssertTrue("\(e)".contains("6 frames"), "\(e)")
        }
        // Inspect: frames, loop, duration.
        let info = try ImageInfo.inspect(gif.bytes())
        XCTAssertEqual(info.format, .gif)
        XCTAssertEqual(info.structure.first, "6 frames")
        XCTAssertEqual(info.codingProcess, "animated, 6 frames, looping forever, 0.7 s")
    }

    /// Real LZW — codes widening to 12 bits, a Clear when the table fills or (deferred) a full
    /// table kept — decodes exactly, by Tessera's decoder and by giflib's line reader alike.
    func testLZWAtEveryCodeWidthAndAFullTable() throws {
        for deferClear in [false, true] {
            var gif = TestGIF(width: 211, height: 157, palette: palette, frames: [
                TestGIF.Frame(width: 211, height: 157, index: { x, y in
                    x < 120 ? UInt8(truncatingIfNeeded: (x &* 2_654_435_761 ^ y &* 40_503) >> 9) : UInt8((y / 4 + x / 30) & 0xFF) }),
            ])
            gif.compress = true
            gif.deferClear = deferClear
            try assertShows(gif, frame: 0)
            let bytes = gif.bytes()
            let lines = try bytes.withUnsafeBytes { raw -> PixelBuffer in
                let d = try GIFDecoder(bytes: raw, limits: Limits())
                d.wholeFrameLimit = 0
                return try d.decode(frame: 0, limits: Limits())
            }
            let whole = try decode(bytes)
            XCTAssertEqual(meanAbsoluteDifference(lines, whole), 0, "giflib's lines and the whole-frame decoder agree")
            XCTAssertLessThan(bytes.count, 211 * 157 * 9 / 8, "real compression (\(bytes.count) bytes)")
        }
    }

    /// The record's decode path names the frame; `frame` on a still format is refused.
    func testDecodePathNamesTheFrameAndStillsHaveOnlyFrameZero() throws {
        let gif = TestGIF(width: 8, height: 8, palette: palette, frames: [
            TestGIF.Frame(width: 8, height: 8, index: { _, _ in 1 }), TestGIF.Frame(width: 4, height: 4, index: { _, _ in 2 }),
        ])
        var options = RenderOptions()
        options.frame = 1
        let result = try Renderer.render(gif.bytes(), recipes: [recipe([fit(4, 4)], format: .png)], options: options)
        XCTAssertEqual(result.recordedDecodePath, "gif-frame-1")
        XCTAssertEqual(result.outputs[0].file.record.format, .png)
        let png = try Codec.encodePNG(PixelBuffer(width: 2, height: 2, layout: .rgb))
        XCTAssertThrowsError(try Renderer.render(png, recipes: [recipe([], format: .png)], options: options)) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .invalidRecipe)
        }
    }

    /// Hostile GIFs fail typed and never allocate what they declare: a frame declaring
    /// 65,535 × 65,535 in a few bytes, data cut short, a screen too large for the limits,
    /// no frame at all, and random damage.
    func testHostileGIFsFailTyped() throws {
        let small = TestGIF(width: 32, height: 32, palette: palette, frames: [TestGIF.Frame(width: 32, height: 32, index: { x, _ in UInt8(x) })])
        var bomb = small.bytes()
        // The frame descriptor's width and height (after 6 + 7 + 768 + 8 bytes of GCE + 5).
        let descriptor = bomb.firstIndex(of: 0x2C)!
        bomb.replaceSubrange(descriptor + 5..<descriptor + 9, with: [0xFF, 0xFF, 0xFF, 0xFF])
        XCTAssertThrowsError(try decode(Array(bomb.prefix(descriptor + 40)))) { e in
            XCTAssertTrue([.truncated, .limitExceeded, .corrupt].contains((e as? ImagingError)?.code), "\(e)")
        }
        XCTAssertThrowsError(try decode(Array(small.bytes().dropLast(40)))) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .truncated, "\(e)")
        }
        let huge = TestGIF(width: 60_000, height: 60_000, palette: palette, frames: [TestGIF.Frame(width: 1, height: 1, index: { _, _ in 0 })])
        XCTAssertThrowsError(try decode(huge.bytes())) { e in XCTAssertEqual((e as? ImagingError)?.code, .limitExceeded, "\(e)") }
        let empty = TestGIF(width: 10, height: 10, palette: palette, frames: [])
        XCTAssertThrowsError(try decode(empty.bytes())) { e in XCTAssertNotNil(e as? ImagingError, "\(e)") }
        var generator = SystemRandomNumberGenerator()
        let anim = TestGIF(width: 30, height: 20, palette: palette, frames: (0..<4).map { k in
            TestGIF.Frame(left: k * 3, top: k, width: 20, height: 15, disposal: k % 4, transparent: k, index: { x, y in UInt8((x * k + y) & 31) })
        }).bytes()
        for _ in 0..<300 {
            var bad = anim
            for _ in 0..<3 { bad[Int.random(in: 6..<bad.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            for frame in [0, 3] {
                do { _ = try decode(bad, frame: frame) } catch is ImagingError {}
            }
        }
    }

    /// `animated: true`: an animated WebP with every frame, each the still render of that
    /// frame (same resampler), the delays (0 shown as 100 ms, as browsers do) and loop count
    /// kept; a still format gets the first frame; all frames' pixels count against the limit
    /// before anything is decoded.
    func testAnAnimatedGIFBecomesAnAnimatedWebP() throws {
        let frames = (0..<4).map { k in
            TestGIF.Frame(left: k * 4, top: k * 2, width: 40, height: 30, disposal: [1, 2, 3, 0][k], transparent: k == 2 ? 5 : nil,
                          delay: [10, 20, 0, 30][k], index: { x, y in UInt8((x * (k + 1) + y * 3 + k * 40) & 0xFF) })
        }
        let gif = TestGIF(width: 60, height: 40, palette: palette, loop: 3, frames: frames).bytes()
        let animated = recipe([fit(30, 30)], format: .webp) { $0.animated = true; $0.lossless = true }
        let result = try Renderer.render(gif, recipes: [animated, recipe([fit(30, 30)], format: .jpeg) { $0.animated = true }])
        XCTAssertEqual(result.recordedDecodePath, "gif-frames-4")
        XCTAssertEqual(result.outputs.map(\.format), [.webp, .jpeg], "a still format gets the first frame")
        XCTAssertEqual(result.outputs[0].size, Size(width: 30, height: 20))
        let webp = result.outputs[0].bytes
        try webp.withUnsafeBytes { raw in  // the decoder reads the bytes while it lives
        let decoder = try AnimatedWebPDecoder(bytes: raw, limits: Limits())
        XCTAssertEqual(decoder.frameCount, 4)
        XCTAssertEqual(decoder.loopCount, 3)
        var ends: [Int] = []
        var k = 0
        while let (image, end) = try decoder.next() {
            ends.append(end)
            var options = RenderOptions()
            options.frame = k
            let still = try Renderer.render(gif, recipes: [recipe([fit(30, 30)], format: .png)], options: options)
            let expected = try Renderer.decode(still.outputs[0].bytes)
            // Compare as RGBA (a still may come out RGB when opaque).
            var worst = 0
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let a = image.pixel(x: x, y: y), b = expected.pixel(x: x, y: y)
                    let alpha = expected.layout == .rgba ? Int(b[3]) : 255
                    worst = max(worst, abs(Int(a[3]) - alpha))
                    // Colour where the pixel shows (under alpha 0 any colour is the same pixel).
                    if alpha > 0 { for c in 0..<3 { worst = max(worst, abs(Int(a[c]) - Int(b[c]))) } }
                }
            }
            XCTAssertLessThanOrEqual(worst, 2, "frame \(k) is the still render of frame \(k)")
            k += 1
        }
        XCTAssertEqual(ends, [100, 300, 400, 700], "delays 10, 20, 0 (shown as 10) and 30 cs")
        }
        // maxFrames and maxDuration (0.1 + 0.2 + 0.1 + 0.3 s) refuse before any frame is decoded.
        var fewer = RenderOptions()
        fewer.maxFrames = 3
        XCTAssertThrowsError(try Renderer.render(gif, recipes: [animated], options: fewer)) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .limitExceeded, "\(e)")
            XCTAssertTrue("\(e)".contains("maxFrames"), "\(e)")
        }
        var shorter = RenderOptions()
        shorter.maxDuration = 0.5
        XCTAssertThrowsError(try Renderer.render(gif, recipes: [animated], options: shorter)) { e in
            XCTAssertTrue("\(e)".contains("maxDuration"), "\(e)")
        }
        fewer.maxFrames = 4
        shorter.maxDuration = 0.7
        XCTAssertNoThrow(try Renderer.render(gif, recipes: [animated], options: fewer))
        XCTAssertNoThrow(try Renderer.render(gif, recipes: [animated], options: shorter))
        // Limits: 4 frames of 60x40 are 9,600 pixels.
        var tight = RenderOptions()
        tight.limits.maxPixels = 9_000
        XCTAssertThrowsError(try Renderer.render(gif, recipes: [animated], options: tight)) { e in
            XCTAssertEqual((e as? ImagingError)?.code, .limitExceeded, "\(e)")
            XCTAssertTrue("\(e)".contains("4 frames"), "\(e)")
        }
    }

    /// An animated WebP source animates too (libwebp composites its frames): made here from a
    /// GIF at full size (lossless), then rendered animated at 30 px, its frames, timestamps and
    /// loop are those of the GIF rendered at 30 px.
    func testAnAnimatedWebPSourceStaysAnimated() throws {
        let frames = (0..<3).map { k in
            TestGIF.Frame(left: k * 5, top: k * 3, width: 40, height: 30, disposal: k == 1 ? 2 : 1, transparent: k == 1 ? 4 : nil,
                          delay: [15, 25, 35][k], index: { x, y in UInt8((x * (k + 2) + y * 5 + k * 30) & 0xFF) })
        }
        let gif = TestGIF(width: 60, height: 40, palette: palette, loop: 0, frames: frames).bytes()
        let full = recipe([], format: .webp) { $0.animated = true; $0.lossless = true }
        let webp = try Renderer.render(gif, recipes: [full]).outputs[0].bytes
        let small = recipe([fit(30, 30)], format: .webp) { $0.animated = true; $0.lossless = true }
        let fromWebP = try Renderer.render(webp, recipes: [small, recipe([fit(30, 30)], format: .png)])
        XCTAssertEqual(fromWebP.recordedDecodePath, "webp-frames-3")
        XCTAssertEqual(fromWebP.outputs[1].format, .png, "a still format: the first frame")
        let fromGIF = try Renderer.render(gif, recipes: [small]).outputs[0].bytes
        func animation(_ bytes: [UInt8]) throws -> (frames: [PixelBuffer], ends: [Int], loop: Int) {
            try bytes.withUnsafeBytes { raw in
                let d = try AnimatedWebPDecoder(bytes: raw, limits: Limits())
                var images: [PixelBuffer] = [], ends: [Int] = []
                while let (image, end) = try d.next() { images.append(image); ends.append(end) }
                return (images, ends, d.loopCount)
            }
        }
        let a = try animation(fromWebP.outputs[0].bytes), b = try animation(fromGIF)
        XCTAssertEqual(a.ends, [150, 400, 750])
        XCTAssertEqual(a.ends, b.ends)
        XCTAssertEqual(a.loop, 0)
        XCTAssertEqual(a.frames.count, b.frames.count)
        for (x, y) in zip(a.frames, b.frames) { XCTAssertLessThan(meanAbsoluteDifference(x, y), 1, "the same frames") }
    }

    /// GIF out: an animation written as GIF (a palette per frame, unchanged pixels kept from
    /// the last frame) reads back — through our own decoder — as the frames rendered one by one,
    /// within dithering; delays and the loop count kept; a photo as a one-frame GIF.
    func testGIFOutputKeepsTheFramesDelaysAndLoop() throws {
        let frames = (0..<4).map { k in
            TestGIF.Frame(left: k * 4, top: k * 2, width: 40, height: 30, disposal: [1, 1, 3, 0][k], transparent: nil,
                          delay: [10, 20, 30, 40][k], index: { x, y in UInt8((x * (k + 1) + y * 3 + k * 40) & 0xFF) })
        }
        let gif = TestGIF(width: 60, height: 40, palette: palette, loop: 2, frames: frames).bytes()
        let out = try Renderer.render(gif, recipes: [recipe([fit(45, 45)], format: .gif) { $0.animated = true }])
        XCTAssertEqual(out.outputs[0].format, .gif)
        XCTAssertEqual(out.outputs[0].size, Size(width: 45, height: 30))
        let written = out.outputs[0].bytes
        try written.withUnsafeBytes { raw in
            let d = try GIFDecoder(bytes: raw, limits: Limits())
            XCTAssertEqual(d.frameCount, 4)
            XCTAssertEqual(d.loopCount, 2)
            var delays: [Int] = []
            try d.frames(limits: Limits()) { k, canvas, delay in
                delays.append(delay)
                var options = RenderOptions()
                options.frame = k
                let still = try Renderer.decode(try Renderer.render(gif, recipes: [recipe([fit(45, 45)], format: .png)], options: options).outputs[0].bytes)
                var sum = 0
                for y in 0..<30 { for x in 0..<45 { for c in 0..<3 { sum += abs(Int(canvas.pixel(x: x, y: y)[c]) - Int(still.pixel(x: x, y: y)[c])) } } }
                // A 256-colour pseudo-random pattern resampled: the worst case for a palette (another frame differs by ~60).
                XCTAssertLessThan(Double(sum) / Double(45 * 30 * 3), 12, "frame \(k)")
            }
            XCTAssertEqual(delays, [100, 200, 300, 400])
        }
        // A photo-like still: one frame, close to the PNG render.
        let photo = try Codec.encodeJPEG(Fixtures.noise(width: 200, height: 150), quality: 95)
        let still = try Renderer.render(photo, recipes: [recipe([fit(100, 100)], format: .gif), recipe([fit(100, 100)], format: .png)])
        let g = try Renderer.decode(still.outputs[0].bytes), p = try Renderer.decode(still.outputs[1].bytes)
        XCTAssertEqual(g.width, 100)
        XCTAssertLessThan(meanAbsoluteDifference(g.layout == .rgb ? g : try rgb(g), p), 20, "noise is the worst case for 256 colours")
    }

    private func rgb(_ image: PixelBuffer) throws -> PixelBuffer {
        let out = try PixelBuffer.make(width: image.width, height: image.height, layout: .rgb)
        for y in 0..<image.height { for x in 0..<image.width { out.setPixel(x: x, y: y, Array(image.pixel(x: x, y: y).prefix(3))) } }
        return out
    }

    /// `../shared/corpus/stills`: every GIF renders or fails typed as its MANIFEST says, and
    /// frame 0 of each is exactly vips 8.18's (checked when the test was written: 12 files, 131
    /// frames equal to `pyvips` page by page).
    func testCorpusGIFsRenderOrFailTyped() throws {
        guard let dir = Fixtures.corpus("stills"),
              let manifest = try? String(contentsOf: dir.appendingPathComponent("MANIFEST.tsv"), encoding: .utf8) else {
            throw XCTSkip("corpus not present")
        }
        var rendered = 0, refused = 0
        for line in manifest.split(separator: "\n").dropFirst() {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count > 5, f[2] == "GIF" else { continue }
            let data = try bytes(of: dir.appendingPathComponent(f[0]))
            do {
                let result = try Renderer.render(data, recipes: [recipe([fit(256, 256)])])
                XCTAssertEqual(f[5], "ok", "\(f[0]) rendered, but the manifest expects an error")
                XCTAssertEqual(result.recordedDecodePath, "gif-frame-0")
                rendered += 1
            } catch let e as ImagingError {
                XCTAssertEqual(f[5], "error", "\(f[0]): \(e)")
                refused += 1
            }
        }
        XCTAssertEqual(rendered + refused, 14, "GIFs in the manifest")
        XCTAssertEqual(refused, 2)
    }
}
