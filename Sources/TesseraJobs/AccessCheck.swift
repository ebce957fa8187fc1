import Foundation
import TesseraModel
import TesseraTasks

/// Planning's guard on what a confined job reaches (docs/API.md, "Security"): every input,
/// manifest, overlay, the output root and every planned output must lie in the roots the
/// submitter may read or write — judged on the path with its symbolic links resolved, so a
/// link inside a root that points out of it is outside — and, with `overwrite` off, no
/// output may replace an existing file that Tessera did not write there before.
///
/// A refusal names the path and the rule; it reads the same whether or not the path exists
/// (nothing outside the roots is walked, listed or opened), so a submitter learns nothing
/// about the rest of the host from it.
public final class AccessCheck {
    /// nil: paths are not confined to roots (an admin, or a local submitter).
    public let roots: AccessRoots?
    /// When set, every local path is refused with this message (a client of a coordinator
    /// that was given no roots).
    public let refuseLocal: String?
    public let overwrite: Bool
    /// Whether Tessera wrote the file at this path before (the journal's record of outputs).
    private let wroteBefore: (String) -> Bool
    /// Local directories already resolved (planning checks a million files, most in a few folders).
    private var resolvedDirectories: [String: String] = [:]
    private var writableDirectories: Set<String> = []

    public init(roots: AccessRoots?, refuseLocal: String? = nil, overwrite: Bool = false,
                wroteBefore: @escaping (String) -> Bool = { _ in false }) {
        self.roots = roots
        self.refuseLocal = refuseLocal
        self.overwrite = overwrite
        self.wroteBefore = wroteBefore
    }

    /// Whether this check refuses anything at all.
    public var isActive: Bool { roots != nil || refuseLocal != nil || !overwrite }

    /// `path` with its symbolic links resolved as far as it exists, the rest appended as
    /// written (lexically normalised first: no `.` or `..` remain).
    public static func resolve(_ path: String) -> String {
        var existing = Paths.normalize(path)
        var rest: [Substring] = []
        while true {
            if let real = Paths.realPath(existing) {
                return rest.reversed().reduce(real) { $0 == "/" ? "/" + $1 : $0 + "/" + $1 }
            }
            guard existing != "/", !existing.isEmpty, existing != "." else { return Paths.normalize(path) }
            rest.append(Paths.lastComponent(existing))
            existing = Paths.directory(of: existing)
            if existing.isEmpty { existing = "." }
        }
    }

    // MARK: The job as written

    /// The output root, every input and manifest as the job names them, and every overlay.
    public func check(_ spec: JobSpec) throws {
        try checkWrite(spec.output, what: "the output root")
        for source in spec.inputs {
            switch source {
            case .path(let p, _, _): try checkRead(p, what: "the input")
            case .manifest(let m): try checkRead(m, what: "the manifest")
            }
        }
        for output in spec.outputs {
            for case .overlay(let o) in output.recipe.operations { try checkRead(o.path, what: "the overlay of \(output.name)") }
        }
    }

    /// One input as planning found it (a file of a walked folder, a manifest entry, an object).
    public func check(_ input: InputFile) throws {
        switch Location(input.path) {
        case .http: return
        case .s3: try checkRead(input.path, what: "the input")
        case .local(let path):
            try refuseLocalPath(path)
            guard let roots else { return }
            let resolved = resolveFile(path)
            guard roots.read.contains(where: { AccessRoots.root($0, contains: resolved, resolve: Self.resolve) }) else {
                throw outside(path, resolved: resolved, roots: roots.read, verb: "read")
            }
        }
    }

    /// The files `input`'s outputs are planned to be: inside the writable roots, and not
    /// replacing a file Tessera did not write (unless the job says `overwrite`).
    public func checkOutputs(of input: InputFile, in job: ExecutableJob) throws {
        guard case .local(let root) = Location(job.outputRoot) else { return }
        let planned = job.plannedOutputs(for: input, alternatives: true)
        for relative in planned.expected + planned.possible {
            let path = Location.join(root, relative)
            let dir = Paths.directory(of: path)
            if let roots, !writableDirectories.contains(dir) {
                let resolved = Self.resolve(dir)
                guard roots.write.contains(where: { AccessRoots.root($0, contains: resolved, resolve: Self.resolve) }) else {
                    throw outside(path, resolved: resolved, roots: roots.write, verb: "write")
                }
                writableDirectories.insert(dir)
            }
            guard !overwrite else { continue }
            var st = stat()
            guard Paths.withCString(path, { lstat($0, &st) }) == 0 else { continue }
            guard !wroteBefore(path) else { continue }
            throw JobError(.outputExists, "\(Paths.display(input.name))'s output would replace this file, which Tessera did not write;"
                           + " choose another output folder or template, or set options.overwrite: true to replace it",
                           file: path)
        }
    }

    // MARK: Rules

    private func refuseLocalPath(_ path: String) throws {
        if let refuseLocal { throw JobError(.forbidden, refuseLocal, file: path) }
    }

    private func checkRead(_ location: String, what: String) throws {
        try check(location, what: what, verb: "read", allowed: roots?.read)
    }

    private func checkWrite(_ location: String, what: String) throws {
        try check(location, what: what, verb: "write", allowed: roots?.write)
    }

    private func check(_ location: String, what: String, verb: String, allowed: [String]?) throws {
        switch Location(location) {
        case .http: return
        case .local: try refuseLocalPath(location)
        case .s3: break
        }
        guard let allowed else { return }
        guard allowed.contains(where: { AccessRoots.root($0, contains: location, resolve: Self.resolve) }) else {
            throw outside(location, resolved: Location.isRemote(location) ? location : Self.resolve(location), roots: allowed, verb: verb)
        }
    }

    private func outside(_ path: String, resolved: String, roots: [String], verb: String) -> JobError {
        let through = !Location.isRemote(path) && Paths.normalize(path) != resolved ? " (through a symbolic link, to \(Paths.display(resolved)))" : ""
        let rule = roots.isEmpty ? "this submitter may \(verb) nowhere"
            : "outside what this submitter may \(verb): " + roots.map { Paths.display($0) }.joined(separator: ", ")
        return JobError(.forbidden, rule + through, file: path)
    }

    /// A local file's path with links resolved: its directory once per directory, the file
    /// itself only when it is a link.
    private func resolveFile(_ path: String) -> String {
        let dir = Paths.directory(of: path), name = String(Paths.lastComponent(path))
        var st = stat()
        if Paths.withCString(path, { lstat($0, &st) }) == 0, (st.st_mode & S_IFMT) == S_IFLNK {
            return Self.resolve(path)
        }
        let resolvedDir: String
        if let known = resolvedDirectories[dir] {
            resolvedDir = known
        } else {
            resolvedDir = Self.resolve(dir.isEmpty ? "." : dir)
            if resolvedDirectories.count > 100_000 { resolvedDirectories.removeAll() }
            resolvedDirectories[dir] = resolvedDir
        }
        return resolvedDir == "/" ? "/" + name : resolvedDir + "/" + name
    }
}
