import Foundation
import TesseraImaging

/// One unit of work: a source file and every output made from it (decoded once).
public struct RenderTask: Sendable, Codable {
    public struct Output: Sendable, Codable, Equatable {
        /// Preset or recipe name, for `{preset}` in paths and for reports.
        public var name: String
        public var recipe: Recipe
        public init(name: String, recipe: Recipe) {
            self.name = name
            self.recipe = recipe
        }
    }

    public var input: InputFile
    public var outputs: [Output]
    public var naming: OutputNaming

    public init(input: InputFile, outputs: [Output], naming: OutputNaming) {
        self.input = input
        self.outputs = outputs
        self.naming = naming
    }
}

/// Milliseconds per stage of a task.
public struct TaskTimings: Sendable, Codable, Equatable {
    public var queueWait: Double = 0
    public var read: Double = 0
    public var decode: Double = 0
    public var resize: Double = 0
    /// Orientation, flattening, colour conversion.
    public var finish: Double = 0
    public var encode: Double = 0
    public var write: Double = 0
    public var total: Double = 0
    public init() {}
}

/// What happened to one task: the record reported per task, locally or to a coordinator.
public struct TaskRecord: Sendable, Codable {
    public enum Status: String, Sendable, Codable { case succeeded, failed, skipped }

    public struct OutputRecord: Sendable, Codable, Equatable {
        public var name: String
        public var path: String
        public var format: String
        public var width: Int
        public var height: Int
        public var bytes: Int
        public var jpegQuality: Int?
        /// The encoder quality (1...100) of a lossy output (JPEG, WebP, AVIF).
        public var quality: Int?

        public init(name: String, path: String, format: String, width: Int, height: Int, bytes: Int, jpegQuality: Int?) {
            self.name = name
            self.path = path
            self.format = format
            self.width = width
            self.height = height
            self.bytes = bytes
            self.jpegQuality = jpegQuality
        }
    }

    public struct Failure: Sendable, Codable, Equatable {
        public var code: String
        public var message: String
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    public init(input: String, status: Status) {
        self.input = input
        self.status = status
    }

    public var input: String
    public var status: Status
    public var error: Failure?
    public var bytesIn: Int = 0
    public var sourceFormat: String?
    public var sourceWidth: Int?
    public var sourceHeight: Int?
    /// DCT scale used, in eighths (8 = full size; 8 for PNG).
    public var scaleEighths: Int?
    /// How the pixels were obtained: jpeg, progressive-dc, exif-thumbnail, png.
    public var decodePath: String?
    public var outputs: [OutputRecord] = []
    public var timings = TaskTimings()
    /// Peak resident memory of the process while it ran the task, when measured.
    public var peakRSSBytes: Int?
    /// True when other tasks ran in the same process at the same time: the peak is
    /// then the process peak over the task's run (an upper bound), not the task's own.
    public var peakRSSShared: Bool?
    public var worker: String?
    /// What a tile task made (tiles jobs).
    public var tiles: TileWork?

    public var bytesOut: Int { outputs.reduce(0) { $0 + $1.bytes } }

    // JSON (docs/JSON.md): `"type": "record"` and the format version first; stage times in
    // `timingsMilliseconds`. Every field but input and status may be absent (older journals).
    enum CodingKeys: String, CodingKey {
        case type, version, input, status, error, bytesIn, bytesOut, sourceFormat, sourceWidth, sourceHeight, scaleEighths
        case decodePath, outputs, timings = "timingsMilliseconds", peakRSSBytes, peakRSSShared, worker, tiles
        case legacyTimings = "timings"
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        input = try c.decode(String.self, forKey: .input)
        status = try c.decode(Status.self, forKey: .status)
        error = try c.decodeIfPresent(Failure.self, forKey: .error)
        bytesIn = try c.decodeIfPresent(Int.self, forKey: .bytesIn) ?? 0
        sourceFormat = try c.decodeIfPresent(String.self, forKey: .sourceFormat)
        sourceWidth = try c.decodeIfPresent(Int.self, forKey: .sourceWidth)
        sourceHeight = try c.decodeIfPresent(Int.self, forKey: .sourceHeight)
        scaleEighths = try c.decodeIfPresent(Int.self, forKey: .scaleEighths)
        decodePath = try c.decodeIfPresent(String.self, forKey: .decodePath)
        outputs = try c.decodeIfPresent([OutputRecord].self, forKey: .outputs) ?? []
        timings = try c.decodeIfPresent(TaskTimings.self, forKey: .timings)
            ?? c.decodeIfPresent(TaskTimings.self, forKey: .legacyTimings) ?? TaskTimings()
        peakRSSBytes = try c.decodeIfPresent(Int.self, forKey: .peakRSSBytes)
        peakRSSShared = try c.decodeIfPresent(Bool.self, forKey: .peakRSSShared)
        worker = try c.decodeIfPresent(String.self, forKey: .worker)
        tiles = try c.decodeIfPresent(TileWork.self, forKey: .tiles)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode("record", forKey: .type)
        try c.encode(JSONOutput.version, forKey: .version)
        try c.encode(input, forKey: .input)
        try c.encode(status, forKey: .status)
        try c.encodeIfPresent(error, forKey: .error)
        try c.encode(bytesIn, forKey: .bytesIn)
        try c.encode(bytesOut, forKey: .bytesOut)
        try c.encodeIfPresent(sourceFormat, forKey: .sourceFormat)
        try c.encodeIfPresent(sourceWidth, forKey: .sourceWidth)
        try c.encodeIfPresent(sourceHeight, forKey: .sourceHeight)
        try c.encodeIfPresent(scaleEighths, forKey: .scaleEighths)
        try c.encodeIfPresent(decodePath, forKey: .decodePath)
        try c.encode(outputs, forKey: .outputs)
        try c.encode(timings, forKey: .timings)
        try c.encodeIfPresent(peakRSSBytes, forKey: .peakRSSBytes)
        try c.encodeIfPresent(peakRSSShared, forKey: .peakRSSShared)
        try c.encodeIfPresent(worker, forKey: .worker)
        try c.encodeIfPresent(tiles, forKey: .tiles)
    }
}

/// The machine-readable output of every command (`--json` lines, reports, results):
/// each object has `"type"` and this `"version"` (docs/JSON.md).
public enum JSONOutput {
    public static let version = 1
}

/// What running one task produced, beyond its record.
public struct TaskOutcome: Sendable {
    public var record: TaskRecord
    /// xxHash64 of the input bytes (0 when not read).
    public var inputHash: UInt64
    /// Whether a failure may pass on another attempt (I/O trouble), as opposed to
    /// the input's own fault (corrupt, unsupported), which is never retried.
    public var retryable: Bool
    /// Outputs to send back instead of writing (inline mode): path relative to the root.
    public var inlineOutputs: [(path: String, bytes: [UInt8])]
    /// The coordinator refused this attempt's commit (it was superseded): nothing was
    /// published and there is nothing to report.
    public var superseded = false
}

/// Runs tasks: read, render (decode once) or strip, write every output atomically.
/// Never throws: failures become a record naming the file and the reason, and no
/// output of a failed task is left behind.
public enum TaskExecutor {
    /// A `tessera render` task.
    public static func run(_ task: RenderTask, options: RenderOptions = RenderOptions()) -> TaskRecord {
        run(task, options: options, inlineInput: nil, returnInline: false).record
    }

    /// A `tessera render` task from bytes in memory (standard input), or giving its outputs back
    /// instead of writing them (standard output).
    public static func run(_ task: RenderTask, options: RenderOptions, inlineInput: [UInt8]?,
                           returnInline: Bool) -> TaskOutcome {
        var job = JobOptions()
        job.strict = options.strict
        job.incremental = false
        job.maxInputMB = max(1, options.limits.maxInputBytes >> 20)
        let exec = ExecutableJob(kind: .thumbnail, outputs: task.outputs,
                                 templates: task.outputs.map { _ in task.naming.template },
                                 outputRoot: task.naming.root, strip: StripOptions(), options: job)
        return run(exec, input: task.input, inlineInput: inlineInput, returnInline: returnInline, renderOptions: options)
    }

    /// One task of a job.
    /// - Parameters:
    ///   - inlineInput: the input's bytes when they came in the message.
    ///   - expectedHash: the input's hash when its outputs were last made with this recipe:
    ///     equal content means nothing to do (status `skipped`).
    ///   - returnInline: give outputs back instead of writing them.
    ///   - fence: in the pool, outputs are staged and published only when the coordinator
    ///     says this attempt is current (nil: written in place, as `tessera render` does).
    public static func run(_ job: ExecutableJob, input: InputFile, inlineInput: [UInt8]? = nil,
                           expectedHash: UInt64? = nil, returnInline: Bool = false,
                           renderOptions: RenderOptions? = nil, fence: Fence? = nil) -> TaskOutcome {
        let clock = ContinuousClock()
        let start = clock.now
        var outcome = TaskOutcome(record: TaskRecord(input: input.path, status: .failed), inputHash: 0,
                                  retryable: false, inlineOutputs: [])
        func ms(_ d: Duration) -> Double {
            Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        }
        var record = TaskRecord(input: input.path, status: .failed)
        do {
            if job.kind == .noop {
                record.status = .succeeded
                outcome.record = record
                return outcome
            }
            let options = renderOptions ?? job.options.renderOptions
            // Inline bytes as they came; files mapped, not copied.
            func body(_ bytes: UnsafeRawBufferPointer) throws {
                record.bytesIn = bytes.count
                // The content hash is only needed for incremental reruns.
                if job.options.incremental { outcome.inputHash = XXH64.hash(bytes) }
                record.timings.read = ms(clock.now - start)
                if job.options.incremental, let expected = expectedHash, expected == outcome.inputHash {
                    record.status = .skipped
                    return
                }
                var files: [(name: String, relative: String, bytes: [UInt8], size: Size?, format: ImageFormat, quality: Int?)] = []
                switch job.kind {
                case .thumbnail, .recompress:
                    let result: RenderResult
                    do {
                        result = try Renderer.render(bytes: bytes, recipes: job.outputs.map(\.recipe), options: options)
                    } catch let e as ImagingError {
                        throw e.naming(input.path)
                    }
                    record.sourceFormat = result.source.format.rawValue
                    record.sourceWidth = result.source.storedSize.width
                    record.sourceHeight = result.source.storedSize.height
                    record.scaleEighths = result.scaleEighths
                    record.decodePath = result.decodePath.rawValue
                    record.timings.decode = result.timings.decode * 1000
                    record.timings.resize = result.timings.resize * 1000
                    record.timings.finish = result.timings.finish * 1000
                    record.timings.encode = result.timings.encode * 1000
                    for out in result.outputs {
                        let i = out.recipeIndex
                        let naming = OutputNaming(root: job.outputRoot, template: job.templates[i])
                        let rel = try naming.relativePath(for: input, preset: job.outputs[i].name, format: out.format)
                        files.append((job.outputs[i].name, rel, out.bytes, out.size, out.format, out.quality))
                    }
                case .strip:
                    let t0 = clock.now
                    let result: StripResult
                    do { result = try LosslessStrip.strip(Array(bytes), options: job.strip) } catch let e as ImagingError {
                        throw e.naming(input.path)
                    }
                    record.sourceFormat = result.format.rawValue
                    record.timings.encode = ms(clock.now - t0)
                    let naming = OutputNaming(root: job.outputRoot, template: job.templates.first ?? OutputNaming.single)
                    let rel = try naming.relativePath(for: input, preset: "strip", format: result.format)
                    files.append(("strip", rel, result.bytes, nil, result.format, nil))
                case .tiles:
                    try runTiles(job, input: input, bytes: bytes, options: options, returnInline: returnInline,
                                 fence: fence, record: &record, outcome: &outcome)
                    record.status = .succeeded
                    return
                case .noop:
                    break
                }
                guard Set(files.map(\.relative)).count == files.count else {
                    throw JobError(.outputCollision, "two outputs would be written to the same path (\(files.map(\.relative).joined(separator: ", ")))",
                                   file: input.path)
                }
                let writeStart = clock.now
                if returnInline {
                    outcome.inlineOutputs = files.map { ($0.relative, $0.bytes) }
                } else if let fence {
                    // Staged, then published only while this attempt is the current one.
                    let staging = try Staging(root: job.outputRoot, fence: fence)
                    do {
                        for f in files { try staging.stage(f.relative, f.bytes) }
                    } catch {
                        staging.discard()
                        throw error
                    }
                    guard fence.commit() else {
                        staging.discard()
                        outcome.superseded = true
                        return
                    }
                    try staging.publish()
                } else {
                    var written: [String] = []
                    for f in files {
                        do {
                            let path = try OutputNaming.confine(f.relative, under: job.outputRoot)
                            try FileIO.writeAtomically(f.bytes, to: path)
                            written.append(path)
                        } catch {
                            // All of a task's outputs or none: remove what this task already wrote.
                            for done in written { unlink(done) }
                            throw error
                        }
                    }
                }
                for f in files {
                    var o = TaskRecord.OutputRecord(name: f.name, path: returnInline ? f.relative : job.outputRoot + "/" + f.relative,
                                                    format: f.format.rawValue, width: f.size?.width ?? 0,
                                                    height: f.size?.height ?? 0, bytes: f.bytes.count,
                                                    jpegQuality: f.format == .jpeg ? f.quality : nil)
                    o.quality = f.quality
                    record.outputs.append(o)
                }
                record.timings.write = ms(clock.now - writeStart)
                record.status = .succeeded
            }
            if let inlineInput {
                try inlineInput.withUnsafeBytes { try body($0) }
            } else {
                let mapped = try FileIO.map(input.path, limit: options.limits.maxInputBytes)
                try withExtendedLifetime(mapped) { try body(mapped.bytes) }
            }
        } catch let e as ImagingError {
            record.error = .init(code: e.code.rawValue, message: e.description)
        } catch var e as JobError {
            e.file = e.file ?? input.path
            record.error = .init(code: e.code.rawValue, message: e.description)
            outcome.retryable = e.code == .readFailed || e.code == .writeFailed
        } catch {
            record.error = .init(code: "internal", message: "\(input.path): \(error)")
            outcome.retryable = true
        }
        record.timings.total = ms(clock.now - start)
        outcome.record = record
        return outcome
    }

    /// A `tiles` task: one part of one pyramid.
    static func runTiles(_ job: ExecutableJob, input: InputFile, bytes: UnsafeRawBufferPointer, options: RenderOptions,
                         returnInline: Bool, fence: Fence?, record: inout TaskRecord, outcome: inout TaskOutcome) throws {
        guard let settings = job.tiles else { throw JobError(.invalidJob, "a tiles job without tile settings") }
        guard let part = PyramidPart(input.part) else {
            throw JobError(.invalidJob, "task names no pyramid part (\"\(input.part)\")", file: input.path)
        }
        let clock = ContinuousClock()
        let t0 = clock.now
        var limits = TilePlanner.limits(job.options)
        limits.maxInputBytes = options.limits.maxInputBytes
        let info: TileSourceInfo
        do { info = try TileSourceInfo.probe(bytes, limits: limits) } catch let e as ImagingError { throw e.naming(input.path) }
        record.sourceFormat = info.format.rawValue
        record.sourceWidth = info.width
        record.sourceHeight = info.height
        let name = TilePlanner.pyramidName(input)
        var renderer = TileRenderer(settings: settings, info: info, name: name)
        renderer.limits = limits
        renderer.strict = job.options.strict
        // Fenced: tiles are staged (adopting what an earlier, killed attempt of this part staged).
        let staging = returnInline ? nil : try fence.map { try Staging(root: job.outputRoot, fence: $0, adopt: true) }
        let writer = returnInline ? nil : try TileWriter(root: job.outputRoot, name: name, resumeAfter: job.createdAt,
                                                         staging: staging)
        var inline: [(path: String, bytes: [UInt8])] = []
        var writeTime = Duration.zero
        let work: TileWork
        do {
            work = try renderer.render(bytes, part: part, exists: { writer?.exists($0) ?? false }) { out in
                if let writer {
                    let w0 = clock.now
                    try writer.write(out.path, out.bytes)
                    writeTime += clock.now - w0
                } else {
                    inline.append((out.path, out.bytes))
                }
                // Every file is an output: incremental reruns check they all still exist.
                record.outputs.append(.init(name: out.width > 0 ? "tile" : "descriptor",
                                            path: returnInline ? out.path : job.outputRoot + "/" + out.path,
                                            format: (out.path as NSString).pathExtension, width: out.width,
                                            height: out.height, bytes: out.bytes.count, jpegQuality: nil))
            }
        } catch let e as ImagingError {
            // The input's fault: no attempt will do better, so leave no tiles of this part behind.
            writer?.removeWritten()
            throw e.naming(input.path)
        }
        if let staging, let fence {
            guard fence.commit() else {
                staging.discard()
                outcome.superseded = true
                return
            }
            let w0 = clock.now
            try staging.publish()
            writeTime += clock.now - w0
        }
        outcome.inlineOutputs = inline
        record.tiles = work
        record.scaleEighths = work.decode.scaleEighths
        record.decodePath = info.format == .jpeg ? "jpeg-\(work.decode.seek)" : "png-\(work.decode.seek)"
        func ms(_ d: Duration) -> Double { Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }
        record.timings.decode = work.decodeSeconds * 1000
        record.timings.encode = work.encodeSeconds * 1000
        record.timings.write = ms(writeTime)
        record.timings.finish = max(0, ms(clock.now - t0) - record.timings.decode - record.timings.encode - record.timings.write)
    }
}
