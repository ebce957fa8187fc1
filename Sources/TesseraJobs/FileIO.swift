import Foundation

/// Whole-file reads and atomic writes (temporary name in the same directory, then
/// `rename`), so a crash or an error never leaves a partial output.
public enum FileIO {
    /// Reads a file, refusing one larger than `limit` before reading it.
    public static func read(_ path: String, limit: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw JobError(code == ENOENT || code == ENOTDIR || code == EACCES ? .inputNotFound : .readFailed,
                           String(cString: strerror(code)), file: path)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw JobError(.readFailed, String(cString: strerror(errno)), file: path) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw JobError(.inputNotFound, "not a regular file", file: path) }
        let size = Int(st.st_size)
        guard size <= limit else {
            throw JobError(.inputTooLarge, "file is \(size) bytes, over the input limit of \(limit)", file: path)
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        try bytes.withUnsafeMutableBytes { buf in
            while done < size {
                let n = Glibc.read(fd, buf.baseAddress! + done, size - done)
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw JobError(.readFailed, String(cString: strerror(errno)), file: path) }
                if n == 0 { break }
                done += n
            }
        }
        if done < size { bytes.removeLast(size - done) }  // the file shrank while we read it
        return bytes
    }

    /// Maps a file read-only (no copy; pages come from the page cache as they are
    /// touched). Refuses non-regular files and files over `limit` before mapping.
    /// A file truncated by another process while mapped would fault: inputs are
    /// expected not to change while a job runs (as for every image tool).
    public static func map(_ path: String, limit: Int) throws -> MappedFile {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw JobError(code == ENOENT || code == ENOTDIR || code == EACCES ? .inputNotFound : .readFailed,
                           String(cString: strerror(code)), file: path)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw JobError(.readFailed, String(cString: strerror(errno)), file: path) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw JobError(.inputNotFound, "not a regular file", file: path) }
        let size = Int(st.st_size)
        guard size <= limit else {
            throw JobError(.inputTooLarge, "file is \(size) bytes, over the input limit of \(limit)", file: path)
        }
        guard size > 0 else { return MappedFile(base: nil, count: 0) }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else {
            throw JobError(.readFailed, String(cString: strerror(errno)), file: path)
        }
        return MappedFile(base: p, count: size)
    }

    /// `mkdir -p` with errno's reason in the error (naming `file`).
    public static func makeDirectories(_ path: String, file: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw JobError(.writeFailed, "\(path) is not a directory", file: file) }
            return
        }
        let parent = Paths.directory(of: path)
        if !parent.isEmpty && parent != path { try makeDirectories(parent, file: file) }
        if mkdir(path, 0o777) != 0 && errno != EEXIST {
            throw JobError(.writeFailed, "cannot create directory \(path): \(String(cString: strerror(errno)))", file: file)
        }
    }

    /// Writes `bytes` to `path` atomically, creating parent directories.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, directoryExists: Bool = false) throws {
        let dir = Paths.directory(of: path)
        if !dir.isEmpty && !directoryExists {
            do { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) } catch {
                throw JobError(.writeFailed, "cannot create directory \(dir): \(error.localizedDescription)", file: path)
            }
        }
        let name = (path as NSString).lastPathComponent
        let tmp = (dir.isEmpty ? "" : dir + "/") + ".\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: path) }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(tmp) }
        }
        var done = 0
        try bytes.withUnsafeBytes { buf in
            while done < buf.count {
                let n = write(fd, buf.baseAddress! + done, buf.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: path) }
                done += n
            }
        }
        guard rename(tmp, path) == 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: path) }
        ok = true
    }
}

/// A read-only memory map of a whole file, unmapped when released.
public final class MappedFile: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer?
    public let count: Int

    init(base: UnsafeMutableRawPointer?, count: Int) {
        self.base = base
        self.count = count
        if let base, count > 0 { madvise(base, count, MADV_SEQUENTIAL) }
    }

    deinit { if let base, count > 0 { munmap(base, count) } }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}
