import Foundation
import XCTest
@testable import TesseraImaging
import TesseraModel
import TesseraTestSupport

/// Videos made here by Debian's `ffmpeg` (x264, x265, libvpx, SVT-AV1): a poster frame past a
/// black intro, upright after a phone's rotation, HLG tone-mapped, chosen by time; previews;
/// and damaged, cut and oversized files failing typed.
final class VideoTests: XCTestCase {
    nonisolated(unsafe) static var dir: String?

    /// The videos, made once: nil (the test skips) where there is no ffmpeg.
    static func videos() throws -> String {
        if let dir { return dir }
        guard which("ffmpeg") != nil else { throw XCTSkip("ffmpeg is not installed") }
        let d = NSTemporaryDirectory() + "tessera-video-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        func ffmpeg(_ args: [String]) throws {
            let r = try runProcess("ffmpeg", ["-v", "error", "-y"] + args, in: d)
            guard r.status == 0 else { throw XCTSkip("ffmpeg could not make a test video: \(r.stderr)") }
        }
        let source = "testsrc2=size=320x240:rate=25"
        // 2 s of black, then 3 s of moving colour; keyframes only every 250 frames (and at scene cuts).
        try ffmpeg(["-f", "lavfi", "-i", "color=black:size=320x240:rate=25:duration=2", "-f", "lavfi", "-i", source + ":duration=3",
                    "-filter_complex", "[0][1]concat=n=2:v=1[v]", "-map", "[v]", "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", "intro.mp4"])
        // A phone holds its camera sideways: stored landscape, a display matrix turning it 90°
        // clockwise (ffmpeg 5.1's rotate tag counts counterclockwise: 270 is an iPhone's -90).
        try ffmpeg(["-f", "lavfi", "-i", source + ":duration=2", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "flat.mp4"])
        try ffmpeg(["-i", "flat.mp4", "-c", "copy", "-metadata:s:v:0", "rotate=270", "phone.mov"])
        // 10-bit HEVC, BT.2020 primaries, HLG.
        try ffmpeg(["-f", "lavfi", "-i", source + ":duration=2", "-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le",
                    "-x265-params", "colorprim=bt2020:transfer=arib-std-b67:colormatrix=bt2020nc:log-level=error",
                    "-color_primaries", "bt2020", "-color_trc", "arib-std-b67", "-colorspace", "bt2020nc", "hlg.mp4"])
        try ffmpeg(["-f", "lavfi", "-i", source + ":duration=2", "-c:v", "libvpx-vp9", "-b:v", "200k", "clip.webm"])
        try? ffmpeg(["-f", "lavfi", "-i", source + ":duration=2", "-c:v", "libsvtav1", "-preset", "12", "clip-av1.mkv"])
        dir = d
        return d
    }

    override class func tearDown() {
        if let dir { try? FileManager.default.removeItem(atPath: dir) }
        dir = nil
    }

    func video(_ name: String) throws -> [UInt8] { try bytes(of: URL(fileURLWithPath: try Self.videos() + "/" + name)) }

    /// ffmpeg's own decode of the frame at `seconds`, turned as players turn it, scaled to `size` (PPM).
    func reference(_ name: String, at seconds: Double, size: Size) throws -> PixelBuffer {
        let d = try Self.videos()
        let r = try runProcess("ffmpeg", ["-v", "error", "-ss", String(seconds), "-i", name, "-frames:v", "1",
                                          "-vf", "scale=\(size.width):\(size.height):flags=area", "-f", "image2pipe",
                                          "-vcodec", "png", "-"], in: d)
        XCTAssertEqual(r.status, 0, r.stderr)
        return try Renderer.decode([UInt8](r.output))
    }

    func testDetectionByContentAndExtension() throws {
        for name in ["intro.mp4", "phone.mov", "clip.webm"] {
            let b = try video(name)
            XCTAssertEqual(b.withUnsafeBytes { ImageFormat.sniff($0) }, .video, name)
        }
        for ext in ["mp4", "MOV", "m4v", "mkv", "webm", "avi"] {
            XCTAssertEqual(ImageFormat.byExtension[ext.lowercased()], .video, ext)
        }
        // HEIF stays HEIF (its ftyp is an image's).
        let heic = try Codec.encodeHEIF(Fixtures.quadrants(width: 64, height: 64), hevc: true)
        XCTAssertEqual(heic.withUnsafeBytes { ImageFormat.sniff($0) }, .heif)
    }

    /// The default poster is past the black intro: a frame that is neither black nor flat,
    /// from 2 s on (no keyframe before it will do).
    func testThePosterSkipsABlackIntro() throws {
        let result = try Renderer.render(try video("intro.mp4"), recipes: [recipe([fit(160, 160)], format: .png)])
        let poster = try XCTUnwrap(result.frameTime)
        XCTAssertGreaterThanOrEqual(poster, 1.99, result.recordedDecodePath)
        XCTAssertTrue(result.recordedDecodePath.hasPrefix("video-"), result.recordedDecodePath)
        XCTAssertEqual(result.outputs[0].size, Size(width: 160, height: 120))
        let image = try Renderer.decode(result.outputs[0].bytes)
        let mean = Double(image.bytes.reduce(0) { $0 + Int($1) }) / Double(image.bytes.count)
        XCTAssertGreaterThan(mean, 60, "not the black intro")
        // The same frame as ffmpeg decodes at that time.
        let expected = try reference("intro.mp4", at: poster, size: Size(width: 160, height: 120))
        XCTAssertLessThan(meanAbsoluteDifference(image, expected), 10)
    }

    /// `at` picks the frame: seconds or a share of the length; the record says the time.
    func testAtChoosesTheFrame() throws {
        var options = RenderOptions()
        options.posterTime = .seconds(3)
        let r = try Renderer.render(try video("intro.mp4"), recipes: [recipe([fit(160, 160)], format: .png)], options: options)
        let t = try XCTUnwrap(r.frameTime)
        XCTAssertEqual(t, 3, accuracy: 0.13, "within a frame or two (frames nothing refers to are skipped)")
        XCTAssertTrue(r.recordedDecodePath.hasPrefix("video-frame@3."), r.recordedDecodePath)
        let expected = try reference("intro.mp4", at: t, size: Size(width: 160, height: 120))
        XCTAssertLessThan(meanAbsoluteDifference(try Renderer.decode(r.outputs[0].bytes), expected), 10)
        options.posterTime = .fraction(0.2)  // 1 s of 5: the black intro, since it was asked for
        let black = try Renderer.render(try video("intro.mp4"), recipes: [recipe([fit(160, 160)], format: .png)], options: options)
        XCTAssertEqual(try XCTUnwrap(black.frameTime), 1, accuracy: 0.13)
        let pixels = try Renderer.decode(black.outputs[0].bytes)
        XCTAssertLessThan(pixels.bytes.map(Int.init).max()!, 40)
        XCTAssertEqual(VideoTime("10%"), .fraction(0.1))
        XCTAssertEqual(VideoTime("1.5s"), .seconds(1.5))
        XCTAssertNil(VideoTime("soon"))
        XCTAssertEqual(VideoTime("-1"), .fromEnd(1), "seconds before the end")
        XCTAssertNil(VideoTime("150%"))
    }

    /// A phone video stored landscape with a 90° display matrix comes out portrait, as ffmpeg
    /// (and every player) shows it.
    func testAPhoneVideoIsUpright() throws {
        var options = RenderOptions()
        options.posterTime = .seconds(1)
        let r = try Renderer.render(try video("phone.mov"), recipes: [recipe([fit(120, 160)], format: .png)], options: options)
        XCTAssertEqual(r.outputs[0].size, Size(width: 120, height: 160))
        XCTAssertEqual(r.source.storedSize, Size(width: 320, height: 240))
        let expected = try reference("phone.mov", at: try XCTUnwrap(r.frameTime), size: Size(width: 120, height: 160))
        XCTAssertLessThan(meanAbsoluteDifference(try Renderer.decode(r.outputs[0].bytes), expected), 10)
        let info = try ImageInfo.inspect(try video("phone.mov"))
        XCTAssertEqual(info.orientation, 6, "turned 90° clockwise to display")
        XCTAssertEqual(info.displayWidth, 240)
        XCTAssertTrue(info.codingProcess?.contains("rotated 90°") ?? false, "\(String(describing: info.codingProcess))")
    }

    /// 10-bit HLG is tone-mapped to SDR like an HDR HEIF: the colour bars keep their hues and
    /// the picture is not washed out or blown out.
    func testHLGIsToneMapped() throws {
        let r = try Renderer.render(try video("hlg.mp4"), recipes: [recipe([fit(160, 160)], format: .png)])
        let image = try Renderer.decode(r.outputs[0].bytes)
        let sdr = try reference("flat.mp4", at: try XCTUnwrap(r.frameTime), size: Size(width: 160, height: 120))
        // testsrc2's bars: red at the left, cyan at the right.
        let red = image.pixel(x: 8, y: 60), cyan = image.pixel(x: 152, y: 60)
        XCTAssertGreaterThan(Int(red[0]), Int(red[1]) + 80, "red stays red: \(red)")
        XCTAssertGreaterThan(Int(cyan[2]), Int(cyan[0]) + 80, "cyan stays cyan: \(cyan)")
        XCTAssertLessThan(meanAbsoluteDifference(image, sdr), 40, "close to the SDR encode of the same frames")
    }

    func testVP9AndAV1() throws {
        let webm = try Renderer.render(try video("clip.webm"), recipes: [recipe([fit(64, 64)], format: .jpeg)])
        XCTAssertEqual(webm.outputs[0].size, Size(width: 64, height: 48))
        let d = try Self.videos()
        guard FileManager.default.fileExists(atPath: d + "/clip-av1.mkv") else { throw XCTSkip("no AV1 encoder in this ffmpeg") }
        let av1 = try Renderer.render(try video("clip-av1.mkv"), recipes: [recipe([fit(64, 64)], format: .jpeg)])
        XCTAssertEqual(av1.outputs[0].size, Size(width: 64, height: 48))
    }

    /// `animated: true` on a video: a looping animated WebP of `frames` frames sampled across
    /// it, each the frame ffmpeg decodes at that time; still formats get the poster.
    func testAnAnimatedPreview() throws {
        var options = RenderOptions()
        options.previewFrames = 6
        options.previewFPS = 5
        let preview = recipe([fit(80, 80)], format: .webp) { $0.animated = true; $0.lossless = true }
        let r = try Renderer.render(try video("phone.mov"), recipes: [preview, recipe([fit(80, 80)], format: .png)], options: options)
        XCTAssertEqual(r.recordedDecodePath, "video-frames-6")
        XCTAssertEqual(r.outputs.map(\.format), [.webp, .png])
        XCTAssertEqual(r.outputs[0].size, Size(width: 60, height: 80), "upright")
        try r.outputs[0].bytes.withUnsafeBytes { raw in
            let d = try AnimatedWebPDecoder(bytes: raw, limits: Limits())
            XCTAssertEqual(d.frameCount, 6)
            XCTAssertEqual(d.loopCount, 0)
            var k = 0
            var ends: [Int] = []
            while let (image, end) = try d.next() {
                ends.append(end)
                // Frame k is at (k + 1/2)/6 of the 2 s.
                let expected = try reference("phone.mov", at: 2 * (Double(k) + 0.5) / 6, size: Size(width: 60, height: 80))
                var rgb = try PixelBuffer.make(width: 60, height: 80, layout: .rgb)
                for y in 0..<80 { for x in 0..<60 { let p = image.pixel(x: x, y: y); rgb.setPixel(x: x, y: y, Array(p.prefix(3))) } }
                XCTAssertLessThan(meanAbsoluteDifference(rgb, expected), 14, "frame \(k)")
                k += 1
            }
            XCTAssertEqual(ends, [200, 400, 600, 800, 1000, 1200])
        }
    }

    /// Damage: cut files fail `truncated` (the container says it goes on), garbage after a
    /// container's signature `corrupt`, a frame size over the limit `limit-exceeded` before
    /// any frame is decoded; never a crash, never an output.
    func testDamagedVideosFailTyped() throws {
        let mp4 = try video("intro.mp4"), webm = try video("clip.webm")
        for (name, cut) in [("mp4", Array(mp4.prefix(mp4.count / 2))), ("webm", Array(webm.prefix(webm.count * 2 / 3)))] {
            assertThrowsImagingError(.truncated, try Renderer.render(cut, recipes: [recipe([fit(64, 64)])]), name)
        }
        var lenient = RenderOptions()
        lenient.strict = false
        // Lenient: what is there renders, when the poster is in it (the moov box leads here).
        let d = try Self.videos()
        _ = try runProcess("ffmpeg", ["-v", "error", "-y", "-i", "intro.mp4", "-c", "copy", "-movflags", "faststart", "fast.mp4"], in: d)
        let fast = try video("fast.mp4")
        let half = Array(fast.prefix(fast.count * 3 / 4))
        assertThrowsImagingError(.truncated, try Renderer.render(half, recipes: [recipe([fit(64, 64)])]))
        XCTAssertNoThrow(try Renderer.render(half, recipes: [recipe([fit(64, 64)])], options: lenient))

        // Junk after a signature: the demuxer runs out of it (truncated) or finds it wrong (corrupt).
        var junk: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3] + [UInt8](repeating: 0x42, count: 300)
        XCTAssertThrowsError(try Renderer.render(junk, recipes: [recipe([fit(64, 64)])])) { e in
            XCTAssertTrue([.corrupt, .truncated].contains((e as? ImagingError)?.code), "\(e)")
        }
        junk = [0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isomiso2".utf8) + [UInt8](repeating: 7, count: 500)
        XCTAssertThrowsError(try Renderer.render(junk, recipes: [recipe([fit(64, 64)])])) { e in
            XCTAssertTrue([.corrupt, .truncated].contains((e as? ImagingError)?.code), "\(e)")
        }
        // Bytes flipped through the middle of a real file: typed errors or a picture, never a crash.
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            var damaged = mp4
            for _ in 0..<40 { damaged[Int.random(in: 64..<damaged.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng) }
            do { _ = try Renderer.render(damaged, recipes: [recipe([fit(64, 64)])], options: lenient) } catch is ImagingError {}
        }
        // Playlists and concat lists name other files: they are text, never handed to FFmpeg.
        for text in ["#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n", "ffconcat version 1.0\nfile /etc/passwd\n"] {
            assertThrowsImagingError(.unsupportedFormat, try Renderer.render(Array(text.utf8), recipes: [recipe([fit(64, 64)])]))
        }
        // Decoding that outruns the task's time stops cleanly.
        var hurried = RenderOptions()
        hurried.decodeSeconds = 1e-6
        assertThrowsImagingError(.timedOut, try Renderer.render(mp4, recipes: [recipe([fit(64, 64)])], options: hurried))
        var small = RenderOptions()
        small.limits.maxPixels = 320 * 240 - 1
        assertThrowsImagingError(.limitExceeded, try Renderer.render(mp4, recipes: [recipe([fit(64, 64)])], options: small))
        var short = RenderOptions()
        short.maxDuration = 4
        let preview = recipe([fit(64, 64)], format: .webp) { $0.animated = true }
        assertThrowsImagingError(.limitExceeded, try Renderer.render(mp4, recipes: [preview], options: short))
    }
}
