import Foundation
@testable import TesseraImaging
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraModel
import TesseraShim

/// The fuzz targets: each takes hostile bytes to one parser. Any typed error is fine; a
/// crash, a hang (> 1 s), a sanitizer report or an allocation over 512 MB is a finding.
/// `FUZZ_TARGET` names the one to run (Benchmarks/fuzz.sh sets it).
enum Targets {
    static let all: [String: (UnsafeRawBufferPointer) -> Void] = [
        "render": render, "inspect": inspect, "exif": exif, "progressive": progressive,
        "png": png, "strip": strip, "wire": wire, "job": job, "tiff": tiff, "gif": gif,
        "video": video, "jxl": jxl, "entropy": entropy, "raw": raw,
    ]

    /// Tight limits: a fuzz input may declare any size.
    static var limits: Limits {
        var l = Limits()
        l.maxPixels = 4_000_000
        l.maxInputBytes = 4 << 20
        l.maxMemoryBytes = 256 << 20
        l.maxDecoderMemory = 64 << 20
        return l
    }

    /// One input rendered to a small box: format detection, JPEG segments and EXIF, the
    /// progressive DC decoder, PNG chunks, the WebP and HEIF glue, orientation, attention
    /// analysis, resampling and encoding.
    static func render(_ data: UnsafeRawBufferPointer) {
        var options = RenderOptions()
        options.limits = limits
        options.hdr = .keep  // HDR sources also make the gain map that undoes their tone map
        let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 64, height: 64, mode: .fill, gravity: .attention))],
                            output: OutputSettings(format: .jpeg, quality: 0.7))
        // An Ultra HDR source's map is kept: what is written must read back as a usable map.
        guard let result = try? Renderer.render(bytes: data, recipes: [recipe], options: options) else { return }
        for out in result.outputs where out.file.record.gainMap?.action == "kept" {
            guard case .usable? = out.bytes.withUnsafeBytes({ UltraHDR.locate($0, limits: Limits()) }) else {
                preconditionFailure("a kept gain map does not read back")
            }
        }
    }

    /// Camera raw through LibRaw and our container checks: `inspect`, a render at each decode
    /// (the cheapest that serves, half size, a full demosaic, the preview), and `strip`'s refusal.
    static func raw(_ data: UnsafeRawBufferPointer) {
        guard data.withUnsafeBytes({ ImageFormat.sniff($0) }) == .raw else { return }
        _ = try? ImageInfo.inspect(Array(data))
        for mode in RawDecode.allCases {
            var options = RenderOptions()
            options.limits = limits
            options.raw = mode
            options.decodeSeconds = 0.5
            let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 48, height: 48, mode: .fit))],
                                output: OutputSettings(format: .png))
            _ = try? Renderer.render(bytes: data, recipes: [recipe], options: options)
        }
        _ = try? LosslessStrip.strip(Array(data))
    }

    /// Small DNGs for the raw target's seeds: each CFA pattern, depths, orientations, a preview.
    static func writeRawSeeds(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let image = PixelBuffer(width: 48, height: 32, layout: .rgb)
        for y in 0..<32 { for x in 0..<48 { image.setPixel(x: x, y: y, [UInt8(x * 5), UInt8(y * 7), UInt8((x + y) * 3)]) } }
        let preview = try Codec.encodeJPEG(image, quality: 60)
        for (i, (pattern, bits, orientation, withPreview)) in [("RGGB", 12, 1, false), ("BGGR", 16, 6, true), ("GRBG", 10, 3, false),
                                                                ("GBRG", 8, 8, true)].enumerated() {
            let dng = try Codec.encodeDNG(image, pattern: pattern, bits: bits, orientation: orientation,
                                          preview: withPreview ? preview : nil)
            try Data(dng).write(to: URL(fileURLWithPath: "\(directory)/dng-\(i)-\(pattern.lowercased())-\(bits)bit.dng"))
        }
    }

    /// TIFF and BigTIFF through libtiff and our unpacking: `inspect` (every page's directory)
    /// and a render to a small box (strips, tiles, planes, the RGBA reader, orientation).
    static func tiff(_ data: UnsafeRawBufferPointer) {
        guard data.withUnsafeBytes({ ImageFormat.sniff($0) }) == .tiff else { return }
        _ = try? ImageInfo.inspect(Array(data))
        var options = RenderOptions()
        options.limits = limits
        let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 48, height: 48, mode: .fit))],
                            output: OutputSettings(format: .png))
        _ = try? Renderer.render(bytes: data, recipes: [recipe], options: options)
    }

    /// GIF through giflib and our compositing: `inspect` (the frame scan), a render of frame 0
    /// and of a later frame (transparency, interlacing, every disposal, clipping), and every
    /// frame into an animated WebP and an animated GIF.
    static func gif(_ data: UnsafeRawBufferPointer) {
        guard data.withUnsafeBytes({ ImageFormat.sniff($0) }) == .gif else { return }
        _ = try? ImageInfo.inspect(Array(data))
        let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 48, height: 48, mode: .fit))],
                            output: OutputSettings(format: .png))
        for frame in [0, 3] {
            var options = RenderOptions()
            options.limits = limits
            options.frame = frame
            _ = try? Renderer.render(bytes: data, recipes: [recipe], options: options)
        }
        // Every frame, into an animated WebP.
        var options = RenderOptions()
        options.limits = limits
        var animated = recipe
        animated.output = OutputSettings(format: .webp, quality: 0.5)
        animated.output.animated = true
        animated.output.webpMethod = 0
        // And into an animated GIF (our quantiser, frame differencing, giflib's writer).
        var asGIF = recipe
        asGIF.output = OutputSettings(format: .gif)
        asGIF.output.animated = true
        _ = try? Renderer.render(bytes: data, recipes: [animated, asGIF], options: options)
    }

    /// Videos through FFmpeg (demuxers for MP4/MOV, Matroska/WebM and AVI, every decoder
    /// Debian's libavcodec has, libswscale): `inspect`, the default poster (keyframes, the
    /// black/flat check, every-frame fallback), a poster at a time, and a 3-frame preview.
    /// Each decode is cut off after 0.2 s (`timed-out`), as a task's timeout would.
    static func video(_ data: UnsafeRawBufferPointer) {
        guard data.withUnsafeBytes({ ImageFormat.sniff($0) }) == .video else { return }
        _ = try? ImageInfo.inspect(Array(data))
        let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: 48, height: 48, mode: .fit))],
                            output: OutputSettings(format: .png))
        var options = RenderOptions()
        options.limits = limits
        options.decodeSeconds = 0.2
        options.strict = false
        _ = try? Renderer.render(bytes: data, recipes: [recipe], options: options)
        options.posterTime = .fraction(0.5)
        _ = try? Renderer.render(bytes: data, recipes: [recipe], options: options)
        options.posterTime = nil
        options.previewFrames = 3
        var animated = recipe
        animated.output = OutputSettings(format: .webp, quality: 0.5)
        animated.output.animated = true
        animated.output.webpMethod = 0
        _ = try? Renderer.render(bytes: data, recipes: [animated], options: options)
    }

    /// JPEG XL through libjxl and our glue: `inspect` (header, colour, Exif/XMP boxes), renders
    /// to two sizes (HDR tone-mapped with its gain rows), and JPEG reconstruction. A JPEG recompresses losslessly: what comes back must
    /// be its bytes.
    static func jxl(_ data: UnsafeRawBufferPointer) {
        let format = data.withUnsafeBytes { ImageFormat.sniff($0) }
        if format == .jpeg {
            if let jxl = try? LosslessJXL.recompress(data, limits: limits) {
                guard (try? jxl.withUnsafeBytes { try JXLDecoder.reconstructJPEG($0) }) == Array(data) else {
                    preconditionFailure("a recompressed JPEG does not come back")
                }
            }
            return
        }
        guard format == .jxl else { return }
        _ = try? ImageInfo.inspect(Array(data))
        var options = RenderOptions()
        options.limits = limits
        options.hdr = .keep
        for box in [48, 4] {
            let recipe = Recipe(name: "fuzz", operations: [.resize(Resize(width: box, height: box, mode: .fit))],
                                output: OutputSettings(format: .png))
            _ = try? Renderer.render(bytes: data, recipes: [recipe], options: options)
        }
        _ = try? JXLDecoder.reconstructJPEG(data)
    }

    /// The JPEG marker/segment walker with EXIF, ICC and XMP reading, and the PNG chunk
    /// walker with its text and colour chunks, as `tessera inspect` runs them.
    static func inspect(_ data: UnsafeRawBufferPointer) {
        _ = try? ImageInfo.inspect(Array(data))
        _ = try? JPEGSegments(data)
    }

    /// EXIF (TIFF structure) through libexif and our reading of it: orientation, copyright,
    /// GPS presence, the embedded thumbnail.
    static func exif(_ data: UnsafeRawBufferPointer) {
        _ = Exif.read(Array(data))
    }

    /// The progressive-JPEG DC decoder (our own bit reader, Huffman tables and scans), behind
    /// libjpeg's header reading, exact and fast.
    static func progressive(_ data: UnsafeRawBufferPointer) {
        guard let decoder = try? JPEGDecoder(bytes: data, limits: limits) else { return }
        let header = decoder.header
        guard ProgressiveDC.applies(to: header), header.width * header.height <= limits.maxPixels else { return }
        _ = try? ProgressiveDC.decode(data, header: header, exact: true)
        _ = try? ProgressiveDC.decode(data, header: header, exact: false)
    }

    /// Tessera's Huffman decoders (jpeg_entropy.c: baseline and progressive) against
    /// libjpeg-turbo's on the same bytes (differential): at three DCT scales, strict and
    /// lenient, the same pixels or the same
    /// failure. Allowed differences: strict mode refuses a code in no table, which
    /// libjpeg-turbo often lets pass; and entropy-coded data with fill bytes (0xFF 0xFF) is
    /// only decoded, not compared — libjpeg-turbo's fast path takes them for a marker,
    /// decodes zeros, then redoes the MCU in its slow path over the coefficients the first
    /// attempt left behind (found by this target: -1 in every position the redo leaves zero).
    static func entropy(_ data: UnsafeRawBufferPointer) {
        guard let probe = try? JPEGDecoder(bytes: data, limits: limits) else { return }
        let header = probe.header
        guard header.width * header.height <= 1_000_000 else { return }
        let layout: JPEGDecoder.OutputLayout = header.components == 1 ? .gray : header.components == 4 ? .cmyk : .rgb
        func decode(own: Bool, strict: Bool, scale: Int) -> Result<[UInt8], ImagingError> {
            ts_jpeg_own_entropy(own ? 1 : 0)
            defer { ts_jpeg_own_entropy(1) }
            do {
                let d = try JPEGDecoder(bytes: data, limits: limits, strict: strict)
                let size = try d.start(scaleEighths: scale, layout: layout)
                let stride = size.width * layout.channels
                var pixels = [UInt8](repeating: 0, count: stride * size.height)
                var row = 0
                try pixels.withUnsafeMutableBufferPointer { p in
                    while row < size.height {
                        let n = try d.read(into: p.baseAddress! + row * stride, stride: stride, maxRows: size.height - row)
                        if n == 0 { break }
                        row += n
                    }
                }
                try d.finish()
                return .success(pixels)
            } catch let e as ImagingError {
                return .failure(e)
            } catch {
                return .failure(ImagingError(.corrupt, "\(error)"))
            }
        }
        let bytes = data.bindMemory(to: UInt8.self)
        let scan = (0..<max(0, bytes.count - 1)).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA } ?? bytes.count
        let fillBytes = (scan..<max(scan, bytes.count - 1)).contains { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xFF }
        for strict in [true, false] {
            for scale in [1, 3, 8] {
                let own = decode(own: true, strict: strict, scale: scale), library = decode(own: false, strict: strict, scale: scale)
                if fillBytes { continue }
                switch (own, library) {
                case let (.success(a), .success(b)):
                    precondition(a == b, "pixels differ at \(scale)/8, strict \(strict)")
                case (.failure, .failure):
                    break
                case let (.failure(e), .success):
                    precondition(strict && e.reason.contains("bad Huffman code"), "only Tessera's decoder failed: \(e)")
                case let (.success, .failure(e)):
                    preconditionFailure("only libjpeg failed, strict \(strict): \(e)")
                }
            }
        }
    }

    /// The PNG chunk walker.
    static func png(_ data: UnsafeRawBufferPointer) {
        guard let chunks = try? PNGChunks(data) else { return }
        for c in chunks.chunks { precondition(c.range.upperBound <= data.count && c.data.upperBound <= c.range.upperBound) }
    }

    /// Lossless metadata stripping of JPEG and PNG: the output, when there is one, must
    /// parse again.
    static func strip(_ data: UnsafeRawBufferPointer) {
        let input = Array(data)
        for options in [StripOptions(), StripOptions(keepICC: false, keepCopyright: true, orientation: .transform)] {
            guard let result = try? LosslessStrip.strip(input, options: options) else { continue }
            precondition((try? ImageInfo.inspect(result.bytes)) != nil, "a stripped output does not parse")
            if result.gainMap?.action == "kept" {
                guard case .usable? = result.bytes.withUnsafeBytes({ UltraHDR.locate($0, limits: Limits()) }) else {
                    preconditionFailure("a kept gain map does not read back after strip")
                }
            }
        }
    }

    /// Wire messages: frames split at "\n--\n", parsed as an envelope, then decoded as
    /// every message type either side accepts (binary task assignments and reports, JSON
    /// control and client messages).
    static func wire(_ data: UnsafeRawBufferPointer) {
        var frames: [[UInt8]] = []
        var current: [UInt8] = []
        let bytes = Array(data)
        var i = 0
        while i < bytes.count {
            if i + 4 <= bytes.count, bytes[i] == 10, bytes[i + 1] == 45, bytes[i + 2] == 45, bytes[i + 3] == 10 {
                frames.append(current)
                current = []
                i += 4
            } else {
                current.append(bytes[i])
                i += 1
            }
        }
        frames.append(current)
        guard let e = try? Envelope(frames: frames) else { return }
        _ = try? TaskAssignment.decode(e)
        _ = try? TaskReport.decode(e)
        _ = try? TaskRef.decode(e.body)
        _ = try? e.decode(WorkerHello.self)
        _ = try? e.decode(Welcome.self)
        _ = try? e.decode(WorkerHeartbeat.self)
        _ = try? e.decode(JobAnnouncement.self)
        _ = try? e.decode(WorkerBye.self)
        if let submit = try? e.decode(SubmitRequest.self) { _ = try? submit.job.validate() }
        _ = try? e.decode(JobQuery.self)
        _ = try? e.decode(StatusReply.self)
        _ = try? ResultsReply(body: e.body)
        _ = try? e.decode(ErrorReply.self)
    }

    /// Job files, YAML and JSON (JSON is YAML), through the one validation; recipe files.
    static func job(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        _ = try? JobFile.parse(yaml: text, file: "fuzz.yaml", baseDirectory: "/nonexistent-fuzz-base")
        _ = try? Recipe.decode(json: Data(data))
    }
}

/// Seeds for the wire target, made by the real encoders: each envelope's frames joined by
/// the target's separator.
enum WireSeeds {
    static func write(to directory: String) throws {
        let refs = [TaskRef(task: 1, attempt: 1), TaskRef(task: 2, attempt: 3)]
        let spec = try JobFile.parse(yaml: "name: seed\ninputs: [a.jpg]\noutput: out\noutputs:\n  - preset: widget\n    path: \"{dir}/{stem}.{ext}\"\n",
                                     file: "seed.yaml", baseDirectory: "/tmp")
        var record = TaskRecord(input: "a.jpg", status: .succeeded)
        record.outputs = [OutputRecord(name: "thumbnail", path: "out/a.jpg", format: .jpeg, width: 64, height: 48,
                                            bytes: 1234, quality: 80)]
        let envelopes: [String: Envelope] = [
            "hello": Envelope(MessageType.hello, json: WorkerHello(worker: "w-1", host: "h", pid: 42, concurrency: 2, credit: 4,
                                                                   inline: true, holding: refs)),
            "welcome": Envelope(MessageType.welcome, json: Welcome(coordinator: "c-1", heartbeatMilliseconds: 1000)),
            "heartbeat": Envelope(MessageType.heartbeat, json: WorkerHeartbeat(running: refs, queued: [], rssBytes: 1 << 20, cpuSeconds: 1.5)),
            "job": Envelope(MessageType.job, json: JobAnnouncement(job: "j-1", spec: spec.executable)),
            "tasks": TaskAssignment.envelope([
                TaskAssignment(ref: refs[0], job: "j-1", input: InputFile(path: "/in/a.jpg", root: "/in"), leaseSeconds: 30),
                TaskAssignment(ref: refs[1], job: "j-1", input: InputFile(path: "s3://b/k.jpg", root: "s3://b/", etag: "e"),
                               expectedHash: 7, expectedOutputs: [ExpectedOutput(path: "s3://b/out/k.jpg", size: 1234, hash: 99)], inlineInput: [0xFF, 0xD8, 0xFF, 0xD9],
                               leaseSeconds: 30),
            ]),
            "report": TaskReport.envelope([
                TaskReport(ref: refs[0], status: .succeeded, inputHash: 9, record: Array(try JSONEncoder().encode(record)),
                           inlineOutputs: [InlineFile(path: "out/a.jpg", bytes: [1, 2, 3])]),
                TaskReport(ref: refs[1], status: .failed, retryable: true, errorCode: "corrupt", errorMessage: "bad"),
            ]),
            "commit": Envelope(MessageType.commit, body: TaskRef.encode(refs)),
            "submit": Envelope(MessageType.submit, json: SubmitRequest(job: spec)),
            "status": Envelope(MessageType.status, json: JobQuery(job: "j-1", after: 3, limit: 10)),
            "results": ResultsReply(records: [Array(try JSONEncoder().encode(record))], next: 4).envelope,
            "error": Envelope(MessageType.error, json: ErrorReply(code: "invalid-job", message: "no")),
            "bye": Envelope(MessageType.bye, json: WorkerBye(returned: refs)),
        ]
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, e) in envelopes {
            let bytes = Array(e.frames.map { $0 }.joined(separator: Array("\n--\n".utf8)))
            try Data(bytes).write(to: URL(fileURLWithPath: directory + "/" + name + ".msg"))
        }
    }
}

/// libFuzzer's entry: the target chosen at start.
nonisolated(unsafe) var selected: (UnsafeRawBufferPointer) -> Void = Targets.render

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// SwiftPM names an executable's entry `<Target>_main`: choose the target, then hand over
/// to libFuzzer's driver.
@_cdecl("FuzzTargets_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    if let directory = ProcessInfo.processInfo.environment["FUZZ_WRITE_RAW_SEEDS"] {
        do { try Targets.writeRawSeeds(to: directory) } catch {
            FileHandle.standardError.write(Data("cannot write the raw seeds: \(error)\n".utf8))
            return 1
        }
        return 0
    }
    if let directory = ProcessInfo.processInfo.environment["FUZZ_WRITE_SEEDS"] {
        do { try WireSeeds.write(to: directory) } catch {
            FileHandle.standardError.write(Data("cannot write the wire seeds: \(error)\n".utf8))
            return 1
        }
        return 0
    }
    let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? "render"
    guard let target = Targets.all[name] else {
        FileHandle.standardError.write(Data("unknown FUZZ_TARGET \(name): one of \(Targets.all.keys.sorted().joined(separator: ", "))\n".utf8))
        return 2
    }
    selected = target
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOne(data, size) }
}
