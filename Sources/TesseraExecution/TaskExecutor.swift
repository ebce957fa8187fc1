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
    public var inlineOutputs: [InlineFile]
    /// The coordinator refused this attempt's commit (it was superseded): nothing was
    /// published and there is nothing to report.
    public var superseded = false
    /// Staged outputs waiting for the coordinator's answer (a deferred fence): the task is
    /// not over until `finish(granted:)` publishes or discards them.
    public var pendingCommit: PendingCommit?
}

/// A task whose outputs are staged and whose commit is asked: `finish(granted:)` renames
/// them into place (or removes them) and gives the task's final outcome. The wait for the
/// answer is in no stage (the worker's executor runs its next task meanwhile); the renames
/// are the write stage's.
public final class PendingCommit: @unchecked Sendable {
    private var task: TaskExecutor.Run
    private let staging: FileStaging
    private let outputs: [OutputRecord]
    private let input: String
    private var finished = false

    init(task: TaskExecutor.Run, staging: FileStaging, outputs: [OutputRecord], input: String) {
        self.task = task
        self.staging = staging
        self.outputs = outputs
        self.input = input
    }

    /// Publishes (granted) or discards (refused, or no answer) the staged outputs; once.
    public func finish(granted: Bool) -> TaskOutcome {
        precondition(!finished, "a pending commit is finished once")
        finished = true
        let clock = Stopwatch()
        if !granted {
            staging.discard()
            task.superseded = true
        } else {
            do {
                try staging.publish()
                task.record.outputs += outputs
            } catch {
                task.record.status = .failed
                task.fail(error, input: input)
            }
        }
        let spent = clock.milliseconds
        task.record.timings.write += spent
        task.record.timings.total += spent
        task.record.finishedAt = Date().timeIntervalSince1970
        return task.outcome
    }
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
                           expectedHash: UInt64? = nil, expectedOutputs: [ExpectedOutput] = [], returnInline: Bool = false,
                           renderOptions: RenderOptions? = nil, fence: Fence? = nil,
                           stores: RemoteStores = RemoteStores(), prefetched: Result<Fetched, Error>? = nil) -> TaskOutcome {
        let clock = Stopwatch()
        // A presigned URL's query string is a credential: records name the URL without it.
        var task = Run(record: TaskRecord(input: Location.withoutQuery(input.path), status: .failed), clock: clock)
        let publishing = Publishing(job, returnInline: returnInline, fence: fence)
        do {
            guard job.kind != .noop else {
                task.record.status = .succeeded
                return task.outcome
            }
            let options = renderOptions ?? job.options.renderOptions
            if let roots = job.access?.roots { try confine(input, job, to: roots) }
            let storage = stores.storage(job.storage, sources: job.access?.sources)
            let remoteInput = inlineInput == nil && Location.isRemote(input.path)
            if remoteInput || publishing == .objectStore { task.record.transfer = .init() }
            // An object listed with its version: unchanged version and recipe, outputs still
            // there (HEAD) — skipped without downloading it.
            if remoteInput, job.options.incremental, let etag = input.etag, let expected = expectedHash,
               expected == versionHash(etag), try expectedOutputs.allSatisfy({ try unchanged($0, storage) }) {
                task.inputHash = expected
                task.record.status = .skipped
                task.record.transfer?.etag = etag
                task.record.timings.total = clock.milliseconds
                return task.outcome
            }
            try withInput(input, inline: inlineInput, remote: remoteInput, prefetched: prefetched, storage: storage,
                          limit: options.limits.maxInputBytes, task: &task) { bytes, version, task in
                // 1. Read: the content hash (or the store's version) for incremental reruns.
                task.record.bytesIn = bytes.count
                if job.options.incremental {
                    task.inputHash = version.map(versionHash) ?? ContentHashes.shared.hash(bytes, of: task.inputIdentity, release: task.releaseInput)
                }
                if job.options.incremental, let expected = expectedHash, expected == task.inputHash,
                   try expectedOutputs.allSatisfy({ try unchanged($0, storage) }) {
                    task.record.status = .skipped
                    return
                }
                // Everything up to here that is not the download: opening and mapping the file,
                // hashing, the rerun check.
                task.record.timings.read = max(0, clock.milliseconds - task.record.timings.fetch)
                // 2. Make the files (tiles stream theirs and publish them as they go).
                if job.kind == .tiles {
                    try runTiles(job, input: input, bytes: bytes, options: options, returnInline: returnInline,
                                 fence: fence, task: &task)
                    if !task.superseded { task.record.status = .succeeded }
                    return
                }
                var options = options
                options.inputIsFileMap = task.inputIsFileMap
                let files = try produce(job, input: input, bytes: bytes, options: options, record: &task.record)
                // 3. Publish them, all or none; every millisecond not timed by the renderer
                // (naming, staging, commit) belongs to the write stage (store for objects).
                try publish(files, of: job, as: publishing, fence: fence, storage: storage, task: &task)
                if !task.superseded { task.record.status = .succeeded }
            }
        } catch {
            task.fail(error, input: input.path)
        }
        // What follows the last timed step (the record's outputs) is the write stage's.
        if task.record.status == .succeeded {
            task.record.timings.close(at: clock.milliseconds, remainderTo: publishing == .objectStore ? .store : .write)
        } else {
            task.record.timings.total = clock.milliseconds
        }
        task.record.finishedAt = Date().timeIntervalSince1970
        var outcome = task.outcome
        if let staged = task.staged {
            task.staged = nil
            if task.record.status == .succeeded {
                outcome.pendingCommit = PendingCommit(task: task, staging: staged.staging, outputs: staged.outputs, input: input.path)
            } else {
                staged.staging.discard()
            }
        }
        return outcome
    }

    /// A confined job's input and output root, judged again where they are read and written
    /// (the coordinator judged them at planning; a symbolic link changed since is caught here).
    static func confine(_ input: InputFile, _ job: ExecutableJob, to roots: AccessRoots) throws {
        func inside(_ path: String, _ allowed: [String]) -> Bool {
            let resolved = Paths.realPath(path) ?? path
            return allowed.contains { AccessRoots.root($0, contains: resolved, resolve: { Paths.realPath($0) ?? $0 }) }
        }
        if !Location.isRemote(input.path), !inside(input.path, roots.read) {
            throw JobError(.forbidden, "outside the roots this job may read (it resolves to \(Paths.display(Paths.realPath(input.path) ?? input.path)))",
                           file: input.path)
        }
        if !Location.isRemote(job.outputRoot), Paths.exists(job.outputRoot), !inside(job.outputRoot, roots.write) {
            throw JobError(.forbidden, "the output root is outside the roots this job may write", file: job.outputRoot)
        }
    }

    /// One task while it runs: its record and what the outcome will carry.
    struct Run {
        var record: TaskRecord
        let clock: Stopwatch
        var inputHash: UInt64 = 0
        var retryable = false
        var inlineOutputs: [InlineFile] = []
        var superseded = false
        /// Staged by a deferred fence, with the records of its files: published when the answer comes.
        var staged: (staging: FileStaging, outputs: [OutputRecord])?
        /// The input's bytes map its file (not inline, not fetched): decoders may drop pages read past.
        var inputIsFileMap = false
        /// The input file's identity when it is a local file.
        var inputIdentity: FileIdentity?
        /// Drops the input's pages before an offset (a file map: hashing does not keep it resident).
        var releaseInput: ((Int) -> Void)?

        var outcome: TaskOutcome {
            TaskOutcome(record: record, inputHash: inputHash, retryable: retryable, inlineOutputs: inlineOutputs,
                        superseded: superseded)
        }

        /// A failure as the record says it: the input's fault (never retried) or trouble that may pass.
        mutating func fail(_ error: Error, input: String) {
            switch error {
            case let e as ImagingError:
                record.error = .init(code: e.code.rawValue, message: e.description)
                // The stages it went through before failing count, as a success's do.
                if let t = e.timings {
                    for stage in [Stage.decode, .resize, .finish, .encode] where record.timings[stage] == 0 { record.timings[stage] = t[stage] }
                }
            case var e as JobError:
                e.file = e.file ?? input
                record.error = .init(code: e.code.rawValue, message: e.description)
                retryable = e.isRetryable
            default:
                record.error = .init(code: "internal", message: "\(input): \(error)")
                retryable = true
            }
        }
    }

    /// Calls `body` with the input's bytes: inline bytes as they came, files mapped (not
    /// copied), URLs fetched (or from the cache, or already, by the prefetcher).
    private static func withInput(_ input: InputFile, inline: [UInt8]?, remote: Bool, prefetched: Result<Fetched, Error>?,
                                  storage: RemoteStorage, limit: Int, task: inout Run,
                                  _ body: (UnsafeRawBufferPointer, String?, inout Run) throws -> Void) throws {
        if let inline {
            try inline.withUnsafeBytes { try body($0, nil, &task) }
        } else if remote {
            let f0 = task.clock.milliseconds
            let fetched = try prefetched?.get() ?? storage.fetch(input.path, knownETag: input.etag, limit: limit)
            task.record.timings.fetch = task.clock.milliseconds - f0
            task.record.transfer?.downloadMilliseconds = prefetched == nil ? task.record.timings.fetch : fetched.seconds * 1000
            task.record.transfer?.fetchedBytes = fetched.transferred
            task.record.transfer?.cacheHit = fetched.cacheHit
            task.record.transfer?.etag = fetched.etag
            try withExtendedLifetime(fetched) { try body(fetched.bytes.bytes, fetched.etag, &task) }
        } else {
            let mapped = try FileIO.map(input.path, limit: limit)
            task.inputIsFileMap = true
            task.inputIdentity = mapped.identity
            task.releaseInput = { mapped.release(before: $0) }
            defer { task.releaseInput = nil }
            try withExtendedLifetime(mapped) { try body(mapped.bytes, nil, &task) }
        }
    }

    /// The files of a thumbnail, recompress or strip task, named, with their source in the record.
    private static func produce(_ job: ExecutableJob, input: InputFile, bytes: UnsafeRawBufferPointer, options: RenderOptions,
                                record: inout TaskRecord) throws -> [OutputFile] {
        var files: [OutputFile] = []
        switch job.kind {
        case .thumbnail, .recompress:
            let result: RenderResult
            do {
                result = try Renderer.render(bytes: bytes, recipes: job.outputs.map(\.recipe), options: options)
            } catch let e as ImagingError {
                throw e.naming(input.path)
            }
            record.sourceFormat = result.source.format
            record.sourceWidth = result.source.storedSize.width
            record.sourceHeight = result.source.storedSize.height
            record.scaleEighths = result.scaleEighths
            record.decodePath = result.recordedDecodePath
            record.gainMap = result.gainMap
            record.placeholders = result.placeholders
            record.fingerprints = result.fingerprints
            if !result.warnings.isEmpty { record.warnings = (record.warnings ?? []) + result.warnings }
            for stage in [Stage.decode, .resize, .finish, .describe, .encode] { record.timings[stage] = result.timings[stage] }
            for out in result.outputs {
                let spec = job.outputs[out.recipeIndex]
                let rel = try job.naming(spec).relativePath(for: input, preset: spec.name, format: out.format)
                var file = out.file
                file.record.name = spec.name
                file.record.path = rel
                files.append(file)
            }
        case .strip:
            let clock = Stopwatch()
            let result: StripResult
            do { result = try LosslessStrip.strip(Array(bytes), options: job.strip) } catch let e as ImagingError {
                throw e.naming(input.path)
            }
            record.sourceFormat = result.format
            record.timings.encode = clock.milliseconds
            record.strip = .init(removed: result.removed, orientation: result.orientation, transformed: result.transformed,
                                 gainMap: result.gainMap)
            // Stripping keeps names: `{ext}` is the input's own extension.
            let rel = try job.naming(job.outputs.first).relativePath(
                for: input, preset: "strip", ext: input.fileExtension.isEmpty ? result.format.fileExtension : input.fileExtension)
            files.append(OutputFile(.init(name: "strip", path: rel, format: result.format, width: 0, height: 0,
                                          bytes: result.bytes.count, quality: nil), bytes: result.bytes))
        case .transcode:
            let clock = Stopwatch()
            let jxl: [UInt8]
            do { jxl = try LosslessJXL.recompress(bytes, limits: options.limits) } catch let e as ImagingError {
                throw e.naming(input.path)
            }
            record.sourceFormat = .jpeg
            record.timings.encode = clock.milliseconds
            let rel = try job.naming(job.outputs.first).relativePath(for: input, preset: "transcode", ext: "jxl")
            files.append(OutputFile(.init(name: "transcode", path: rel, format: .jxl, width: 0, height: 0,
                                          bytes: jxl.count, quality: nil), bytes: jxl))
        case .tiles, .noop:
            break
        }
        let relatives = files.map(\.record.path)
        guard Set(relatives).count == files.count else {
            throw JobError(.outputCollision, "two outputs would be written to the same path (\(relatives.joined(separator: ", ")))",
                           file: input.path)
        }
        return files
    }

    /// Where a task's files go.
    enum Publishing: Equatable {
        /// Back in the report (workers without shared storage).
        case inline
        /// Uploaded to object storage (S3 semantics: objects appear whole), after the commit.
        case objectStore
        /// Staged under the root, published by rename after the commit (the pool).
        case fencedStaging
        /// Written in place, atomically (`tessera render`, no coordinator to ask).
        case direct

        init(_ job: ExecutableJob, returnInline: Bool, fence: Fence?) {
            if returnInline { self = .inline } else if Location.isRemote(job.outputRoot) { self = .objectStore } else {
                self = fence == nil ? .direct : .fencedStaging
            }
        }
    }

    /// Asks the coordinator whether this attempt is still the current one. When it is not,
    /// `discard` undoes what the attempt staged and the task ends superseded: nothing was
    /// published, nothing is reported. Without a fence (`tessera render`) there is no one to ask.
    static func commit(_ fence: Fence?, task: inout Run, discard: () -> Void = {}) -> Bool {
        guard let fence, !fence.commit() else { return true }
        discard()
        task.superseded = true
        return false
    }

    /// Publishes a task's files, all of them or none.
    private static func publish(_ files: [OutputFile], of job: ExecutableJob, as publishing: Publishing, fence: Fence?,
                                storage: RemoteStorage, task: inout Run) throws {
        let writeStart = task.clock.milliseconds
        // Each file's hash in its record: what a rerun checks an output that changed on disk against.
        var files = files
        for i in files.indices { files[i].record.contentHash = XXH64.hash(files[i].bytes) }
        switch publishing {
        case .inline:
            task.inlineOutputs = files.map { InlineFile(path: $0.record.path, bytes: $0.bytes) }
        case .objectStore:
            guard commit(fence, task: &task) else { return }
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
                    for done in stored { storage.delete(done) }
                    throw error
                }
                stored.append(url)
                task.record.transfer?.storedBytes += f.bytes.count
            }
        case .fencedStaging:
            let staging = try FileStaging(root: job.outputRoot, fence: fence!)
            do {
                for f in files { try staging.stage(f.record.path, f.bytes) }
            } catch {
                staging.discard()
                throw error
            }
            if fence!.deferred {
                // The caller asks and finishes (`PendingCommit`): the records are its to add.
                task.staged = (staging, files.map { var o = $0.record; o.path = Location.join(job.outputRoot, o.path); return o })
                task.record.timings.write = task.clock.milliseconds - writeStart
                return
            }
            guard commit(fence, task: &task, discard: staging.discard) else { return }
            try staging.publish()
        case .direct:
            var written: [String] = []
            for f in files {
                do {
                    let path = try OutputNaming.confine(f.record.path, under: job.outputRoot)
                    try FileIO.writeAtomically(f.bytes, to: path)
                    written.append(path)
                } catch {
                    for done in written { unlink(done) }
                    throw error
                }
            }
        }
        for f in files {
            var o = f.record
            if publishing != .inline { o.path = Location.join(job.outputRoot, o.path) }
            task.record.outputs.append(o)
        }
        let spent = task.clock.milliseconds - writeStart
        if publishing == .objectStore { task.record.timings.store = spent } else { task.record.timings.write = spent }
    }

    /// Whether an earlier output is as that rendition left it: an object still there; a
    /// file of its size whose bytes still hash the same (an output truncated or rewritten is
    /// rendered again).
    static func unchanged(_ output: ExpectedOutput, _ storage: RemoteStorage) throws -> Bool {
        guard !Location.isRemote(output.path), output.size != nil || output.hash != nil else { return try storage.exists(output.path) }
        guard let mapped = try? FileIO.map(output.path, limit: Int.max / 2) else { return false }
        if let size = output.size, mapped.count != size { return false }
        if let hash = output.hash, withExtendedLifetime(mapped, { XXH64.hash(mapped.bytes) }) != hash { return false }
        return true
    }

    /// What reruns compare for an object whose store gave a version (ETag): unchanged
    /// version, unchanged bytes, without reading them.
    static func versionHash(_ etag: String) -> UInt64 { XXH64.hash(Array(("etag:" + etag).utf8)) }

    /// Stripes of a pyramid's tail level in `ROOT/.tessera/stripes/KEY/`, KEY naming the
    /// pyramid, its grid and its source (name, tile size, overlap, layout, tile format, background,
    /// the job's creation time, size, and a hash of its first and last 64 kB): the
    /// stacks' workers write them (atomically; an attempt superseded writes the same bytes),
    /// the tail's reads them and removes the folder.
    static func stripeStore(root: String, name: String, info: TileSourceInfo, settings: TileSettings, job: String,
                            bytes: UnsafeRawBufferPointer) -> StripeStore {
        let edge = min(bytes.count, 65536)
        let grid = "\(settings.tileSize)|\(settings.overlap)|\(settings.layout.rawValue)|\(settings.format.rawValue)|\(settings.background)|\(job)"
        var key = XXH64.hash(Array("\(name)|\(grid)|\(info.width)x\(info.height)|\(bytes.count)".utf8))
        key = XXH64.hash(UnsafeRawBufferPointer(rebasing: bytes[0..<edge]), seed: key)
        key = XXH64.hash(UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - edge)...]), seed: key)
        let dir = root + "/.tessera/stripes/" + String(key, radix: 16)
        return StripeStore(save: { part, data in
            try FileIO.writeAtomically(data, to: dir + "/" + part.description)
        }, load: { part in
            try? FileIO.read(dir + "/" + part.description, limit: 256 << 20)
        }, remove: {
            try? FileManager.default.removeItem(atPath: dir)
        })
    }

    /// A `tiles` task: one part of one pyramid.
    static func runTiles(_ job: ExecutableJob, input: InputFile, bytes: UnsafeRawBufferPointer, options: RenderOptions,
                         returnInline: Bool, fence: Fence?, task: inout Run) throws {
        guard let settings = job.tiles else { throw JobError(.invalidJob, "a tiles job without tile settings") }
        try settings.validate()  // the coordinator checked them; a worker does not trust the wire
        guard let part = input.part else {
            throw JobError(.invalidJob, "a tiles task names no pyramid part", file: input.path)
        }
        let clock = Stopwatch()
        var limits = job.options.tileLimits
        limits.maxInputBytes = options.limits.maxInputBytes
        let info: TileSourceInfo
        do { info = try TileSourceInfo.probe(bytes, limits: limits) } catch let e as ImagingError { throw e.naming(input.path) }
        task.record.sourceFormat = info.format
        task.record.sourceWidth = info.width
        task.record.sourceHeight = info.height
        let name = input.pyramidName
        if part == .descriptor && settings.layout == .tiff {
            try assemblePyramidTIFF(job, settings: settings, info: info, name: name, returnInline: returnInline,
                                    fence: fence, task: &task)
            return
        }
        var renderer = TileRenderer(settings: settings, info: info, name: name)
        renderer.limits = limits
        renderer.strict = job.options.strict
        renderer.inputIsFileMap = task.inputIsFileMap
        if !returnInline && !Location.isRemote(job.outputRoot) {
            renderer.stripes = stripeStore(root: job.outputRoot, name: name, info: info, settings: settings,
                                           job: job.createdAt.map { String($0) } ?? "", bytes: bytes)
        }
        // Fenced: tiles are staged (adopting what an earlier, killed attempt of this part staged).
        let staging = returnInline ? nil : try fence.map { try Staging(root: job.outputRoot, fence: $0, adopt: true) }
        let writer = returnInline ? nil : try TileWriter(root: job.outputRoot, name: name, resumeAfter: job.createdAt,
                                                         staging: staging)
        var inline: [InlineFile] = []
        var writeTime = 0.0
        let work: TileWork
        do {
            work = try renderer.render(bytes, part: part, exists: { writer?.exists($0) ?? false }) { out in
                var record = out.record
                if let writer {
                    let w0 = clock.milliseconds
                    try writer.write(record.path, out.bytes)
                    writeTime += clock.milliseconds - w0
                    record.path = Location.join(job.outputRoot, record.path)
                } else {
                    inline.append(InlineFile(path: record.path, bytes: out.bytes))
                }
                if settings.layout == .tiff {
                    // A pack is gone once the TIFF is written: the part's product is the TIFF, which
                    // a rerun checks (a part runs again only when the file is missing). Its bytes
                    // are the file's, counted once, by the part that writes it.
                    record = OutputRecord(name: "pyramid", path: Location.join(job.outputRoot, name + ".tif"), format: .tiff,
                                          width: info.width, height: info.height, bytes: 0, quality: nil)
                }
                // Every file is an output: incremental reruns check they all still exist.
                task.record.outputs.append(record)
            }
        } catch let e as ImagingError {
            // The input's fault: no attempt will do better, so leave no tiles of this part behind.
            writer?.removeWritten()
            throw e.naming(input.path)
        }
        if let staging {
            guard commit(fence, task: &task, discard: staging.discard) else { return }
            let w0 = clock.milliseconds
            try staging.publish()
            writeTime += clock.milliseconds - w0
        }
        task.inlineOutputs = inline
        task.record.tiles = work
        task.record.scaleEighths = work.decode.scaleEighths
        task.record.decodePath = work.decode.decodePath(info.format)
        task.record.timings.decode = work.timings.decode
        task.record.timings.encode = work.timings.encode
        task.record.timings.write = writeTime
        task.record.timings.finish = max(0, clock.milliseconds - task.record.timings.decode - task.record.timings.encode - task.record.timings.write)
    }
}

/// Content hashes of local inputs, remembered by file identity for the life of the process:
/// a worker making several parts of one pyramid (or a source named twice) reads a 150 MB
/// TIFF once to hash it, not once a part. Any change to the file — size, mtime, or the change
/// time no tool can set back — is a new identity and hashes again.
final class ContentHashes: @unchecked Sendable {
    static let shared = ContentHashes()
    private let lock = NSLock()
    private var known: [FileIdentity: UInt64] = [:]
    /// Small: the point is the parts of one source arriving close together.
    private let capacity = 256

    func hash(_ bytes: UnsafeRawBufferPointer, of identity: FileIdentity?, release: ((Int) -> Void)?) -> UInt64 {
        if let identity, let h = lock.withLock({ known[identity] }) { return h }
        let h = XXH64.hash(bytes, hashed: release)
        if let identity {
            lock.withLock {
                if known.count >= capacity { known.removeAll(keepingCapacity: true) }
                known[identity] = h
            }
        }
        return h
    }
}
