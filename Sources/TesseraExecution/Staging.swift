import Foundation
import TesseraTasks

/// A pool attempt's right to publish: outputs are staged, the coordinator is asked, and
/// only a current attempt renames them into place (docs/decisions/011-fenced-attempts.md).
public struct Fence: Sendable {
    public var task: UInt64
    public var attempt: UInt32
    /// Asks the coordinator whether this attempt may publish (blocks; false when it may
    /// not, or when no answer came in time).
    public var commit: @Sendable () -> Bool
    /// Whether a task with a few staged files may end before the answer: its outcome then
    /// carries a `PendingCommit` for the caller to finish when the answer comes (a worker
    /// runs its next task meanwhile). Tiles and object-storage outputs always wait.
    public var deferred: Bool

    public init(task: UInt64, attempt: UInt32, deferred: Bool = false, commit: @escaping @Sendable () -> Bool) {
        self.task = task
        self.attempt = attempt
        self.deferred = deferred
        self.commit = commit
    }
}

/// The staged files of one attempt of a task with a few outputs (a thumbnail, recompress,
/// strip or transcode task): `ROOT/.tessera/staging/TASK.ATTEMPT.N`, the task's N-th file, in one
/// directory every task shares, so that a task creates and removes no directory (a directory
/// per task made the file system's inode allocator a tenth of a pool worker's time on ext4).
///
/// On creation, what earlier attempts of the task left (a worker killed mid-task) is removed.
/// Staged files are written in place, not through a temporary: only `publish()` makes them
/// visible (a rename each), and it runs after the whole file is written; a killed attempt's
/// partial file is removed by the next attempt. `discard()` removes this attempt's files.
final class FileStaging {
    let root: String
    let directory: String
    private let prefix: String
    private var staged: [(path: String, relative: String)] = []

    init(root: String, fence: Fence) throws {
        self.root = root
        directory = root + "/.tessera/staging"
        let task = "\(fence.task).", mine = task + "\(fence.attempt)."
        try FileIO.makeDirectories(directory, file: root)
        // Only tasks in flight have files here: listing it is cheap.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        where name.hasPrefix(task) && !name.hasPrefix(mine) {
            Paths.withCString(directory + "/" + name) { _ = unlink($0) }
        }
        prefix = mine
    }

    /// Writes `bytes`, to be published as `relative` under the root.
    func stage(_ relative: String, _ bytes: [UInt8]) throws {
        let path = directory + "/" + prefix + "\(staged.count)"
        let fd = Paths.withCString(path) { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw JobError(.writeFailed, "staging: \(String(cString: strerror(errno)))", file: path) }
        staged.append((path, relative))
        defer { close(fd) }
        try bytes.withUnsafeBytes { try FileIO.writeAll(fd, $0, file: path) }
    }

    /// Renames every staged file into place under the root (all, or none left behind in
    /// place: a failure removes what this call already published, and what is still staged).
    func publish() throws {
        do {
            _ = try renameAllOrNone(staged.count) { i in
                let target = try OutputNaming.confine(staged[i].relative, under: root)
                try FileIO.makeDirectories(Paths.directory(of: target), file: target)
                return (staged[i].path, target)
            }
        } catch {
            discard()
            throw error
        }
        staged = []
    }

    /// Removes this attempt's staged files.
    func discard() {
        for (path, _) in staged { Paths.withCString(path) { _ = unlink($0) } }
        staged = []
    }
}

/// The staging area of one attempt of a tiles part: `ROOT/.tessera/staging/TASK/ATTEMPT/RELATIVE`.
///
/// On creation, what earlier attempts of the task left (a worker killed mid-task) is
/// removed — or, with `adopt`, moved into this attempt's area first (tile parts keep the
/// tiles an earlier attempt made). Files are written whole (temporary name, rename), so
/// anything visible in a staging area is complete. `publish()` renames every file to its
/// place under the root; `discard()` removes the area.
final class Staging {
    let root: String
    let taskDirectory: String
    let directory: String
    private(set) var files: [String] = []
    private var made: Set<String> = []

    init(root: String, fence: Fence, adopt: Bool = false) throws {
        self.root = root
        taskDirectory = root + "/.tessera/staging/\(fence.task)"
        directory = taskDirectory + "/\(fence.attempt)"
        try FileIO.makeDirectories(directory, file: root)
        made.insert(directory)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: taskDirectory)) ?? [] where name != "\(fence.attempt)" {
            let old = taskDirectory + "/" + name
            if adopt { self.adopt(from: old) }
            try? FileManager.default.removeItem(atPath: old)
        }
    }

    /// Moves the complete files of an earlier attempt's area into this one.
    private func adopt(from old: String) {
        guard let walker = FileManager.default.enumerator(atPath: old) else { return }
        while let relative = walker.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            guard !name.hasPrefix(".") else { continue }  // half-written temporaries
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: old + "/" + relative, isDirectory: &isDir), !isDir.boolValue else { continue }
            let target = directory + "/" + relative
            if (try? ensureDirectory(Paths.directory(of: target))) != nil,
               Paths.withCString(old + "/" + relative, { o in Paths.withCString(target) { rename(o, $0) } }) == 0 {
                files.append(relative)
            }
        }
    }

    /// Whether this attempt's area holds `relative` (written by it or adopted).
    func contains(_ relative: String) -> Bool { Paths.exists(directory + "/" + relative) }

    /// Writes `bytes` as `relative` in the staging area.
    func stage(_ relative: String, _ bytes: [UInt8]) throws {
        let path = directory + "/" + relative
        try ensureDirectory(Paths.directory(of: path))
        try FileIO.writeAtomically(bytes, to: path, directoryExists: true)
        files.append(relative)
    }

    /// Renames every staged file into place under the root (all, or none left behind in
    /// place: a failure removes what this call already published, and the staging area
    /// with what it still held); returns the paths.
    @discardableResult
    func publish() throws -> [String] {
        // Directories already found to stay inside the root (a pyramid's tiles share a few).
        var confined: Set<Substring> = []
        let published: [String]
        do {
            published = try renameAllOrNone(files.count) { i in
                let relative = files[i]
                let slash = relative.lastIndex(of: "/")
                let dir = slash.map { relative[..<$0] } ?? ""
                let target: String
                if confined.contains(dir) {
                    target = root + "/" + (try OutputNaming.normalise(relative))
                } else {
                    target = try OutputNaming.confine(relative, under: root)
                    confined.insert(dir)
                }
                try ensureDirectory(Paths.directory(of: target))
                return (directory + "/" + relative, target)
            }
        } catch {
            discard()
            throw error
        }
        discard()
        return published
    }

    /// Removes the staging area (and the task's directory when nothing else is in it).
    func discard() {
        try? FileManager.default.removeItem(atPath: directory)
        rmdir(taskDirectory)
        files = []
    }

    private func ensureDirectory(_ dir: String) throws {
        guard !made.contains(dir) else { return }
        try FileIO.makeDirectories(dir, file: dir)
        made.insert(dir)
    }
}

/// Renames `count` staged files into place, all or none: `move(i)` names the i-th and its
/// target (whose directory it makes); on a failure the files this call already renamed are
/// removed and the error is thrown. Returns the targets.
private func renameAllOrNone(_ count: Int, _ move: (Int) throws -> (from: String, to: String)) throws -> [String] {
    var published: [String] = []
    do {
        for i in 0..<count {
            let (from, to) = try move(i)
            guard Paths.withCString(from, { s in Paths.withCString(to) { rename(s, $0) } }) == 0 else {
                throw JobError(.writeFailed, "publishing: \(String(cString: strerror(errno)))", file: to)
            }
            published.append(to)
        }
    } catch {
        for p in published { Paths.withCString(p) { _ = unlink($0) } }
        throw error
    }
    return published
}
