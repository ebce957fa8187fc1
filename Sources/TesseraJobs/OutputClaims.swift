import Foundation
import TesseraTasks

/// Planning's guard on outputs, before anything is decoded: no output may replace one of
/// the job's inputs (`render DIR -o DIR` would overwrite the originals), and no two inputs
/// may write one file (`x.jpg` and `x.png` rendered to WebP are both `x.webp`).
///
/// Each planned output, and each input lying under the output root, is one entry keyed by
/// the 64-bit hash of its path relative to the root (XXH64), with the task that claims it.
/// The formats an `original`/`auto` output may still turn into are only compared with the
/// inputs under the output root (usually none): as the tasks come, and again at the end
/// (`recheck`) when such an input came after tasks it was not compared with. A hash match is
/// confirmed on the paths themselves (the earlier task's input is looked up) before
/// anything is refused or failed. Measured at a million tasks: docs/decisions/017.
public struct OutputClaims {
    enum Kind: UInt8 {
        /// What an output is planned to be.
        case output
        /// An input of the job, under the output root.
        case input
    }

    struct Claim {
        var task: UInt64
        var kind: Kind
    }

    /// A claim in 4 bytes (the task as an offset from the first task, the kind in the top
    /// bit): 12 bytes a dictionary slot with its key, not 24.
    private func packed(_ c: Claim) -> UInt32 { UInt32(truncatingIfNeeded: c.task &- base) | (c.kind == .input ? 1 << 31 : 0) }
    private func unpacked(_ v: UInt32) -> Claim { Claim(task: base &+ UInt64(v & 0x7FFF_FFFF), kind: v >> 31 == 1 ? .input : .output) }

    let job: ExecutableJob
    /// The earlier input of a task (from the planner's batch or the journal).
    let input: (UInt64) -> InputFile?
    private var claims: [UInt64: UInt32] = [:]
    /// The first task's id: claims hold offsets from it.
    private var base: UInt64 = 0
    /// Inputs under the output root: hash of the path relative to the root → task.
    private var inputsUnderRoot: [UInt64: UInt64] = [:]
    private var tasks = 0
    /// An input directory → its path relative to the output root ("" for the root itself),
    /// or nil when it is not under it.
    private var directories: [String: String?] = [:]
    private let rootIdentity: [UInt64]?
    /// Tasks whose outputs collide with another task's, with the error each fails with.
    public private(set) var collisions: [UInt64: JobError] = [:]
    /// An input under the output root came after other tasks: call `recheck` for each task.
    public private(set) var needsRecheck = false

    /// - Parameter input: the input of an earlier task, to confirm a hash match and name it.
    public init(job: ExecutableJob, input: @escaping (UInt64) -> InputFile?) {
        self.job = job
        self.input = input
        rootIdentity = Location.isRemote(job.outputRoot) ? nil : OutputClaims.identity(job.outputRoot)
    }

    /// Whether this job makes files at all (a no-op job does not).
    public var isActive: Bool { job.kind != .noop }

    static func hash(_ path: String) -> UInt64 {
        var key = path
        return key.withUTF8 { XXH64.hash(UnsafeRawBufferPointer($0)) }
    }

    /// Claims `input`'s outputs (and the input itself when it lies under the output root) for
    /// `task`. Throws `output-replaces-input` when an output would replace an input of the
    /// job; records a collision when another task plans the same output file.
    public mutating func add(_ input: InputFile, task: UInt64) throws {
        guard isActive else { return }
        if tasks == 0 { base = task }
        if input.part == nil || input.part == .descriptor, let own = relativeInput(input) {
            if tasks > 0 { needsRecheck = true }
            inputsUnderRoot[OutputClaims.hash(own)] = task
            try claim(own, task: task, kind: .input, input: input)
        }
        tasks += 1
        let planned = job.plannedOutputs(for: input, alternatives: !inputsUnderRoot.isEmpty)
        for rel in planned.expected { try claim(rel, task: task, kind: .output, input: input) }
        for rel in planned.possible { try checkAgainstInputs(rel, task: task, input: input) }
    }

    /// After planning, when `needsRecheck`: every task's outputs in any format they may take,
    /// against the inputs under the output root.
    public mutating func recheck(_ input: InputFile, task: UInt64) throws {
        let planned = job.plannedOutputs(for: input, alternatives: true)
        for rel in planned.expected + planned.possible { try checkAgainstInputs(rel, task: task, input: input) }
    }

    private mutating func checkAgainstInputs(_ relative: String, task: UInt64, input: InputFile) throws {
        guard let owner = inputsUnderRoot[OutputClaims.hash(relative)] else { return }
        let original = owner == task ? input : self.input(owner)
        guard let original else { return }
        guard relativeInput(original) == relative else { return }
        throw replaces(original, by: input, relative)
    }

    private func replaces(_ original: InputFile, by writer: InputFile, _ relative: String) -> JobError {
        let output = Paths.display(Location.join(job.outputRoot, relative))
        return JobError(.outputReplacesInput,
                        (writer == original ? "its own output \(output) would replace it" : "the output \(output) of \(Paths.display(writer.name)) would replace it")
                        + "; write the outputs to another folder (-o), or name them apart with a template"
                        + " (--template '{dir}/{stem}-thumb.{ext}', or `path:` in a job file)",
                        file: original.name)
    }

    private mutating func claim(_ relative: String, task: UInt64, kind: Kind, input: InputFile) throws {
        let hash = OutputClaims.hash(relative)
        guard let stored = claims[hash] else {
            claims[hash] = packed(Claim(task: task, kind: kind))
            return
        }
        let earlier = unpacked(stored)
        // Confirm on the paths: the earlier task's own claim of this exact file.
        let other = earlier.task == task ? input : self.input(earlier.task)
        guard let other, confirms(relative, claimedBy: other, as: earlier.kind) else { return }
        if kind == .input || earlier.kind == .input {
            throw kind == .input ? replaces(input, by: other, relative) : replaces(other, by: input, relative)
        }
        guard earlier.task != task else { return }
        let fix = "tell them apart with {srcext} in the template (--template '{dir}/{stem}.{srcext}.{ext}', or `path:` in a job file)"
        let path = Paths.display(Location.join(job.outputRoot, relative))
        if collisions[task] == nil {
            collisions[task] = JobError(.outputCollision, "its output \(path) would also be written by \(Paths.display(other.name)); \(fix)",
                                        file: input.name)
        }
        if collisions[earlier.task] == nil {
            collisions[earlier.task] = JobError(.outputCollision, "its output \(path) would also be written by \(Paths.display(input.name)); \(fix)",
                                                file: other.name)
        }
    }

    /// Whether `other` really claims `relative` as `kind` (not only a path of the same hash).
    private mutating func confirms(_ relative: String, claimedBy other: InputFile, as kind: Kind) -> Bool {
        switch kind {
        case .input: return relativeInput(other) == relative
        case .output: return job.plannedOutputs(for: other).expected.contains(relative)
        }
    }

    /// The input's path relative to the output root, when it lies under it: a key of the
    /// same bucket for object storage; for files, by the identity (device, inode) of its
    /// directory's ancestors, so a symlinked or bind-mounted output root is seen through.
    private mutating func relativeInput(_ input: InputFile) -> String? {
        if Location.isRemote(job.outputRoot) || Location.isRemote(input.path) {
            let root = job.outputRoot.hasSuffix("/") ? job.outputRoot : job.outputRoot + "/"
            let path = Location.withoutQuery(input.path)
            return path.hasPrefix(root) ? String(path.dropFirst(root.count)) : nil
        }
        guard let rootIdentity else { return nil }
        let dir = Paths.directory(of: input.path).isEmpty ? "." : Paths.directory(of: input.path)
        let name = String(Paths.lastComponent(input.path))
        let relativeDir: String?
        if let known = directories[dir] {
            relativeDir = known
        } else {
            relativeDir = OutputClaims.relative(dir, to: rootIdentity)
            directories[dir] = relativeDir
        }
        guard let relativeDir else { return nil }
        return relativeDir.isEmpty ? name : relativeDir + "/" + name
    }

    /// `dir`'s path below the directory of identity `root`, or nil when it is not below it.
    static func relative(_ dir: String, to root: [UInt64]) -> String? {
        var current = Paths.realPath(dir) ?? dir
        var below: [String] = []
        while true {
            if identity(current) == root { return below.reversed().joined(separator: "/") }
            guard current != "/", !current.isEmpty, current != "." else { return nil }
            below.append((current as NSString).lastPathComponent)
            current = Paths.directory(of: current)
        }
    }

    /// Device and inode of an existing path.
    static func identity(_ path: String) -> [UInt64]? {
        var st = stat()
        guard Paths.withCString(path, { stat($0, &st) }) == 0 else { return nil }
        return [UInt64(st.st_dev), UInt64(st.st_ino)]
    }
}

extension OutputClaims {
    /// Checks every input of an in-process run (`render`, `strip`): throws when an output
    /// would replace an input; returns the collision of each input (by index) that has one.
    public static func check(_ job: ExecutableJob, inputs: [InputFile]) throws -> [Int: JobError] {
        var claims = OutputClaims(job: job) { task in inputs.indices.contains(Int(task)) ? inputs[Int(task)] : nil }
        for (i, input) in inputs.enumerated() { try claims.add(input, task: UInt64(i)) }
        if claims.needsRecheck {
            for (i, input) in inputs.enumerated() { try claims.recheck(input, task: UInt64(i)) }
        }
        return Dictionary(uniqueKeysWithValues: claims.collisions.map { (Int($0.key), $0.value) })
    }
}
