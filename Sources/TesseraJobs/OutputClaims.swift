import Foundation
import TesseraImaging
import TesseraTasks

/// Planning's guard on outputs, before anything is decoded: no output may replace one of
/// the job's inputs (`render DIR -o DIR` would overwrite the originals), and no two inputs
/// may write one file (`x.jpg` and `x.png` rendered to WebP are both `x.webp`).
///
/// Each planned output, and each input lying under the output root, is one entry keyed by
/// the 64-bit hash of its path relative to the root (XXH64), with the task that claims it:
/// about 32 bytes an entry, so a million inputs with one output each hold ~32 MB while the
/// job is planned, and nothing after. A hash match is confirmed on the paths themselves
/// (the earlier task's input is looked up) before anything is refused or failed.
public struct OutputClaims {
    /// The same file claimed twice: an input and an output (refused), or two tasks' outputs.
    enum Kind: UInt8, Comparable {
        /// What an `original`/`auto` output may still turn into.
        case possibleOutput
        /// What the output is planned to be.
        case expectedOutput
        /// An input of the job, under the output root.
        case input
        static func < (a: Kind, b: Kind) -> Bool { a.rawValue < b.rawValue }
    }

    struct Claim {
        var task: UInt64
        var kind: Kind
    }

    let job: ExecutableJob
    /// The earlier input of a task (from the planner's batch or the journal).
    let input: (UInt64) -> InputFile?
    private var claims: [UInt64: Claim] = [:]
    /// An input directory → its path relative to the output root ("" for the root itself),
    /// or nil when it is not under it.
    private var directories: [String: String?] = [:]
    private let rootIdentity: [UInt64]?
    /// Tasks whose outputs collide with another task's, with the error each fails with.
    public private(set) var collisions: [UInt64: JobError] = [:]

    /// - Parameter input: the input of an earlier task, to confirm a hash match and name it.
    public init(job: ExecutableJob, input: @escaping (UInt64) -> InputFile?) {
        self.job = job
        self.input = input
        rootIdentity = Location.isRemote(job.outputRoot) ? nil : OutputClaims.identity(job.outputRoot)
    }

    /// Whether this job makes files at all (a no-op job does not).
    public var isActive: Bool { job.kind != .noop }

    /// Claims `input`'s outputs (and the input itself when it lies under the output root) for
    /// `task`. Throws `output-replaces-input` when an output would replace an input of the
    /// job; records a collision when another task plans the same output file.
    public mutating func add(_ input: InputFile, task: UInt64) throws {
        guard isActive else { return }
        let planned = job.plannedOutputs(for: input)
        if input.part == nil || input.part == .descriptor, let own = relativeInput(input) {
            try claim(own, task: task, kind: .input, input: input)
        }
        for rel in planned.expected { try claim(rel, task: task, kind: .expectedOutput, input: input) }
        for rel in Set(planned.possible).subtracting(planned.expected) {
            try claim(rel, task: task, kind: .possibleOutput, input: input)
        }
    }

    private mutating func claim(_ relative: String, task: UInt64, kind: Kind, input: InputFile) throws {
        var key = relative
        let hash = key.withUTF8 { XXH64.hash(UnsafeRawBufferPointer($0)) }
        guard let earlier = claims[hash] else {
            claims[hash] = Claim(task: task, kind: kind)
            return
        }
        // Confirm on the paths: the earlier task's own claim of this exact file.
        let other = earlier.task == task ? input : self.input(earlier.task)
        guard let other, confirms(relative, claimedBy: other, as: earlier.kind) else { return }
        if kind == .input || earlier.kind == .input {
            // The input, and the input whose output would replace it.
            let (original, writer) = kind == .input ? (input, other) : (other, input)
            let output = Paths.display(Location.join(job.outputRoot, relative))
            throw JobError(.outputReplacesInput,
                           (writer == original ? "its own output \(output) would replace it" : "the output \(output) of \(Paths.display(writer.name)) would replace it")
                           + "; write the outputs to another folder (-o), or name them apart with a template"
                           + " (--template '{dir}/{stem}-thumb.{ext}', or `path:` in a job file)",
                           file: original.name)
        }
        if kind == .expectedOutput && earlier.kind == .expectedOutput && earlier.task != task {
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
        if kind > earlier.kind { claims[hash] = Claim(task: task, kind: kind) }
    }

    /// Whether `other` really claims `relative` as `kind` (not only a path of the same hash).
    private mutating func confirms(_ relative: String, claimedBy other: InputFile, as kind: Kind) -> Bool {
        switch kind {
        case .input: return relativeInput(other) == relative
        case .expectedOutput: return job.plannedOutputs(for: other).expected.contains(relative)
        case .possibleOutput: return job.plannedOutputs(for: other).possible.contains(relative)
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
        let name = (input.path as NSString).lastPathComponent
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
        return Dictionary(uniqueKeysWithValues: claims.collisions.map { (Int($0.key), $0.value) })
    }
}
