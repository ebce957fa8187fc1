import Foundation
import TesseraImaging
import TesseraStorage
import TesseraTasks
import TesseraModel

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

/// One file a task made, before it is written: its record (path relative to the root) and bytes.
struct OutputFile {
    var record: TaskRecord.OutputRecord
    var bytes: [UInt8]
}

/// Runs tasks: read, render (decode once) or strip, write every output atomically.
/// Never throws: failures become a record naming the file and the reason, and no
/// output of a failed task is left behind.
public enum TaskExecutor {
    /// One task of a job.
    /// - Parameters:
    ///   - inlineInput: the input's bytes when they came in the message.
    ///   - expectedHash: the input's hash when its outputs were last made with this recipe:
    ///     equal content means nothing to do (status `skipped`).
    ///   - returnInline: give outputs back instead of writing them.
    ///   - expectedOutputs: object-storage outputs of that rendition, which must still exist to skip.
    ///   - fence: in the pool, outputs are staged and published only when the coordinator
    ///     says this attempt is current (nil: written in place, as `tessera render` does).
    ///   - stores: how URL inputs are fetched and object-storage outputs stored.
    ///   - prefetched: the input, already fetched (a worker overlaps downloads with work).
    public static func run(_ job: ExecutableJob, input: InputFile, inlineInput: [UInt8]? = nil,
                           expectedHash: UInt64? = nil, expectedOutputs: [String] = [], returnInline: Bool = false,
                           renderOptions: RenderOptions? = nil, fence: Fence? = nil,
                           stores: RemoteStores = RemoteStores(), prefetched: Result<Fetched, Error>? = nil) -> TaskOutcome {
        let clock = Stopwatch()
        // A presigned URL's query string is a credential: records name the URL without it.
        let name = Location.withoutQuery(input.path)
        var outcome = TaskOutcome(record: TaskRecord(input: name, status: .failed), inputHash: 0,
                                  retryable: false, inlineOutputs: [])
        var record = TaskRecord(input: name, status: .failed)
        do {
            if job.kind == .noop {
                record.status = .succeeded
                outcome.record = record
                return outcome
            }
            let options = renderOptions ?? job.options.renderOptions
            let storage = stores.storage(job.storage)
            let remoteInput = inlineInput == nil && Location.isRemote(input.path)
            let remoteOutputs = remoteOutputs(job, returnInline)
            if remoteInput || remoteOutputs { record.transfer = .init() }
            // An object listed with its version: unchanged version and recipe, outputs still
            // there (HEAD) — skipped without downloading it.
            if remoteInput, job.options.incremental, let etag = input.etag, let expected = expectedHash,
               expected == versionHash(etag), try expectedOutputs.allSatisfy(storage.exists) {
                outcome.inputHash = expected
                record.status = .skipped
                record.transfer?.etag = etag
                record.timings.total = clock.milliseconds
                outcome.record = record
                return outcome
            }
            // Inline bytes as they came; files mapped, not copied; URLs fetched (or from the cache).
            func body(_ bytes: UnsafeRawBufferPointer, version: String?) throws {
                record.bytesIn = bytes.count
                // The content hash (or the store's version of an object) is only needed for incremental reruns.
                if job.options.incremental { outcome.inputHash = version.map(versionHash) ?? XXH64.hash(bytes) }
                if job.options.incremental, let expected = expectedHash, expected == outcome.inputHash,
                   try expectedOutputs.allSatisfy(storage.exists) {
                    record.status = .skipped
                    return
                }
                // Everything up to here that is not the download: opening and mapping the file,
                // hashing, the rerun check.
                record.timings.read = max(0, clock.milliseconds - record.timings.fetch)
                // Every millisecond of a task belongs to a stage: what the renderer does not
                // time itself (naming, staging, commit) is the write stage's.
                var workEnd = clock.milliseconds
                var files: [OutputFile] = []
                switch job.kind {
                case .thumbnail, .recompress:
                    let result: RenderResult
                    let r0 = clock.milliseconds
                    do {
                        result = try Renderer.render(bytes: bytes, recipes: job.outputs.map(\.recipe), options: options)
                    } catch let e as ImagingError {
                        throw e.naming(input.path)
                    }
                    workEnd = r0 + result.timings.total
                    record.sourceFormat = result.source.format.rawValue
                    record.sourceWidth = result.source.storedSize.width
                    record.sourceHeight = result.source.storedSize.height
                    record.scaleEighths = result.scaleEighths
                    record.decodePath = result.decodePath.rawValue
                    for stage in [Stage.decode, .resize, .finish, .encode] { record.timings[stage] = result.timings[stage] }
                    for out in result.outputs {
                        let spec = job.outputs[out.recipeIndex]
                        let rel = try job.naming(spec).relativePath(for: input, preset: spec.name, format: out.format)
                        files.append(OutputFile(record: .init(name: spec.name, path: rel, format: out.format.rawValue,
                                                              width: out.size.width, height: out.size.height,
                                                              bytes: out.bytes.count, quality: out.quality),
                                                bytes: out.bytes))
                    }
                case .strip:
                    let t0 = clock.milliseconds
                    let result: StripResult
                    do { result = try LosslessStrip.strip(Array(bytes), options: job.strip) } catch let e as ImagingError {
                        throw e.naming(input.path)
                    }
                    record.sourceFormat = result.format.rawValue
                    record.timings.encode = clock.milliseconds - t0
                    workEnd = clock.milliseconds
                    record.strip = .init(removed: result.removed, orientation: result.orientation, transformed: result.transformed)
                    // Stripping keeps names: `{ext}` is the input's own extension.
                    let rel = try job.naming(job.outputs.first).relativePath(
                        for: input, preset: "strip", ext: input.fileExtension.isEmpty ? result.format.fileExtension : input.fileExtension)
                    files.append(OutputFile(record: .init(name: "strip", path: rel, format: result.format.rawValue,
                                                          width: 0, height: 0, bytes: result.bytes.count, quality: nil),
                                            bytes: result.bytes))
                case .tiles:
                    try runTiles(job, input: input, bytes: bytes, options: options, returnInline: returnInline,
                                 fence: fence, record: &record, outcome: &outcome)
                    record.status = .succeeded
                    return
                case .noop:
                    break
                }
                let relatives = files.map(\.record.path)
                guard Set(relatives).count == files.count else {
                    throw JobError(.outputCollision, "two outputs would be written to the same path (\(relatives.joined(separator: ", ")))",
                                   file: input.path)
                }
                let writeStart = workEnd
                if returnInline {
                    outcome.inlineOutputs = files.map { ($0.record.path, $0.bytes) }
                } else if remoteOutputs {
                    // Objects appear whole (S3 semantics): asked first, then uploaded.
                    if let fence, !fence.commit() {
                        outcome.superseded = true
                        return
                    }
                    var stored: [String] = []
                    for f in files {
                        let url = Location.join(job.outputRoot, f.record.path)
                        let cacheControl = job.outputs.first { $0.name == f.record.name }?.cacheControl ?? job.storage?.cacheControl
                        do {
                            try f.bytes.withUnsafeBytes {
                                try storage.store($0, to: url, contentType: Location.contentType(forExtension: (url as NSString).pathExtension),
                                                  cacheControl: cacheControl)
                            }
                        } catch {
                            // All of a task's outputs or none.
                            for done in stored { storage.delete(done) }
                            throw error
                        }
                        stored.append(url)
                        record.transfer?.storedBytes += f.bytes.count
                    }
                    record.timings.store = clock.milliseconds - writeStart
                } else if let fence {
                    // Staged, then published only while this attempt is the current one.
                    let staging = try Staging(root: job.outputRoot, fence: fence)
                    do {
                        for f in files { try staging.stage(f.record.path, f.bytes) }
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
                            let path = try OutputNaming.confine(f.record.path, under: job.outputRoot)
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
                    var o = f.record
                    if !returnInline { o.path = Location.join(job.outputRoot, o.path) }
                    record.outputs.append(o)
                }
                if !remoteOutputs { record.timings.write = clock.milliseconds - writeStart }
                record.status = .succeeded
            }
            if let inlineInput {
                try inlineInput.withUnsafeBytes { try body($0, version: nil) }
            } else if remoteInput {
                let f0 = clock.milliseconds
                let fetched = try prefetched?.get() ?? storage.fetch(input.path, knownETag: input.etag, limit: options.limits.maxInputBytes)
                record.timings.fetch = clock.milliseconds - f0
                record.transfer?.downloadMilliseconds = prefetched == nil ? record.timings.fetch : fetched.seconds * 1000
                record.transfer?.fetchedBytes = fetched.transferred
                record.transfer?.cacheHit = fetched.cacheHit
                record.transfer?.etag = fetched.etag
                try withExtendedLifetime(fetched) { try body(fetched.bytes.bytes, version: fetched.etag) }
            } else {
                let mapped = try FileIO.map(input.path, limit: options.limits.maxInputBytes)
                try withExtendedLifetime(mapped) { try body(mapped.bytes, version: nil) }
            }
        } catch let e as ImagingError {
            record.error = .init(code: e.code.rawValue, message: e.description)
        } catch var e as JobError {
            e.file = e.file ?? input.path
            record.error = .init(code: e.code.rawValue, message: e.description)
            outcome.retryable = e.isRetryable
        } catch {
            record.error = .init(code: "internal", message: "\(input.path): \(error)")
            outcome.retryable = true
        }
        // What follows the last timed step (the record's outputs) is the write stage's.
        if record.status == .succeeded {
            record.timings.close(at: clock.milliseconds, remainderTo: remoteOutputs(job, returnInline) ? .store : .write)
        } else {
            record.timings.total = clock.milliseconds
        }
        record.finishedAt = Date().timeIntervalSince1970
        outcome.record = record
        return outcome
    }

    private static func remoteOutputs(_ job: ExecutableJob, _ returnInline: Bool) -> Bool {
        !returnInline && Location.isRemote(job.outputRoot)
    }

    /// What reruns compare for an object whose store gave a version (ETag): unchanged
    /// version, unchanged bytes, without reading them.
    static func versionHash(_ etag: String) -> UInt64 { XXH64.hash(Array(("etag:" + etag).utf8)) }

    /// A `tiles` task: one part of one pyramid.
    static func runTiles(_ job: ExecutableJob, input: InputFile, bytes: UnsafeRawBufferPointer, options: RenderOptions,
                         returnInline: Bool, fence: Fence?, record: inout TaskRecord, outcome: inout TaskOutcome) throws {
        guard let settings = job.tiles else { throw JobError(.invalidJob, "a tiles job without tile settings") }
        guard let part = input.part else {
            throw JobError(.invalidJob, "a tiles task names no pyramid part", file: input.path)
        }
        let clock = Stopwatch()
        var limits = job.options.tileLimits
        limits.maxInputBytes = options.limits.maxInputBytes
        let info: TileSourceInfo
        do { info = try TileSourceInfo.probe(bytes, limits: limits) } catch let e as ImagingError { throw e.naming(input.path) }
        record.sourceFormat = info.format.rawValue
        record.sourceWidth = info.width
        record.sourceHeight = info.height
        let name = input.pyramidName
        var renderer = TileRenderer(settings: settings, info: info, name: name)
        renderer.limits = limits
        renderer.strict = job.options.strict
        // Fenced: tiles are staged (adopting what an earlier, killed attempt of this part staged).
        let staging = returnInline ? nil : try fence.map { try Staging(root: job.outputRoot, fence: $0, adopt: true) }
        let writer = returnInline ? nil : try TileWriter(root: job.outputRoot, name: name, resumeAfter: job.createdAt,
                                                         staging: staging)
        var inline: [(path: String, bytes: [UInt8])] = []
        var writeTime = 0.0
        let work: TileWork
        do {
            work = try renderer.render(bytes, part: part, exists: { writer?.exists($0) ?? false }) { out in
                if let writer {
                    let w0 = clock.milliseconds
                    try writer.write(out.path, out.bytes)
                    writeTime += clock.milliseconds - w0
                } else {
                    inline.append((out.path, out.bytes))
                }
                // Every file is an output: incremental reruns check they all still exist.
                record.outputs.append(.init(name: out.width > 0 ? "tile" : "descriptor",
                                            path: returnInline ? out.path : Location.join(job.outputRoot, out.path),
                                            format: (out.path as NSString).pathExtension, width: out.width,
                                            height: out.height, bytes: out.bytes.count, quality: nil))
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
            let w0 = clock.milliseconds
            try staging.publish()
            writeTime += clock.milliseconds - w0
        }
        outcome.inlineOutputs = inline
        record.tiles = work
        record.scaleEighths = work.decode.scaleEighths
        record.decodePath = info.format == .jpeg ? "jpeg-\(work.decode.seek)" : "png-\(work.decode.seek)"
        record.timings.decode = work.timings.decode
        record.timings.encode = work.timings.encode
        record.timings.write = writeTime
        record.timings.finish = max(0, clock.milliseconds - record.timings.decode - record.timings.encode - record.timings.write)
    }
}
