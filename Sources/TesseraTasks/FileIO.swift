import Foundation

/// Whole-file reads and atomic writes (temporary name in the same directory, then
/// `rename`), so a crash or an error never leaves a partial output.
public enum FileIO {
    /// Opens an input for reading without ever blocking in `open` (O_NONBLOCK: a FIFO or a
    /// device would wait for a writer forever) and only if it is a regular file outside
    /// /proc and /sys; returns the descriptor and the size.
    static func openInput(_ path: String, limit: Int) throws -> (fd: Int32, size: Int, identity: FileIdentity) {
        let real = Paths.withCString(path, { realpath($0, nil) }).map { p -> String in
            defer { free(p) }
            return Paths.fromBytes(UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p)))
        } ?? path
        for pseudo in ["/proc", "/sys"] where real == pseudo || real.hasPrefix(pseudo + "/") {
            throw JobError(.notARegularFile, "\(pseudo) files are not inputs", file: path)
        }
        let fd = Paths.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        guard fd >= 0 else {
            let code = errno
            throw JobError(code == ENOENT || code == ENOTDIR || code == EACCES ? .inputNotFound : .readFailed,
                           String(cString: strerror(code)), file: path)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw JobError(.readFailed, message, file: path)
        }
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG else {
            close(fd)
            let what = [S_IFIFO: "a FIFO", S_IFCHR: "a character device", S_IFBLK: "a block device", S_IFSOCK: "a socket",
                        S_IFDIR: "a directory"][kind] ?? "not a regular file"
            throw JobError(.notARegularFile, "\(what), not a regular file", file: path)
        }
        let size = Int(st.st_size)
        guard size <= limit else {
            close(fd)
            throw JobError(.inputTooLarge, "file is \(size) bytes, over the input limit of \(limit)", file: path)
        }
        return (fd, size, FileIdentity(st))
    }

    /// Reads a file, refusing one larger than `limit` (or not a regular file) before reading it.
    public static func read(_ path: String, limit: Int) throws -> [UInt8] {
        let (fd, size, _) = try openInput(path, limit: limit)
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        try bytes.withUnsafeMutableBytes { buf in
            while done < size {
                let n = Glibc.read(fd, buf.baseAddress! + done, size - done)
                if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
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
        let (fd, size, identity) = try openInput(path, limit: limit)
        defer { close(fd) }
        guard size > 0 else { return MappedFile(base: nil, count: 0, identity: identity) }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else {
            // No address space left for the file (an address-space limit): memory, not I/O.
            if errno == ENOMEM {
                throw JobError(.outOfMemory, "cannot map the \(size >> 20) MB file: no address space left (\(String(cString: strerror(errno))))", file: path)
            }
            throw JobError(.readFailed, String(cString: strerror(errno)), file: path)
        }
        return MappedFile(base: p, count: size, identity: identity)
    }

    /// `mkdir -p` with errno's reason in the error (naming `file`).
    public static func makeDirectories(_ path: String, file: String) throws {
        var st = stat()
        if Paths.withCString(path, { stat($0, &st) }) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw JobError(.writeFailed, "\(path) is not a directory", file: file) }
            return
        }
        let parent = Paths.directory(of: path)
        if !parent.isEmpty && parent != path { try makeDirectories(parent, file: file) }
        if Paths.withCString(path, { mkdir($0, 0o777) }) != 0 && errno != EEXIST {
            throw JobError(.writeFailed, "cannot create directory \(path): \(String(cString: strerror(errno)))", file: file)
        }
    }

    /// Writes all of `buf` to `fd` (a failure names `file`).
    public static func writeAll(_ fd: Int32, _ buf: UnsafeRawBufferPointer, file: String) throws {
        var done = 0
        while done < buf.count {
            let n = write(fd, buf.baseAddress! + done, buf.count - done)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: file) }
            done += n
        }
    }

    /// Writes `bytes` to `path` atomically, creating parent directories.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, directoryExists: Bool = false) throws {
        try bytes.withUnsafeBytes { try writeAtomically($0, to: path, directoryExists: directoryExists) }
    }

    /// The same, from memory that is not an array (a download, a mapping).
    public static func writeAtomically(_ buf: UnsafeRawBufferPointer, to path: String, directoryExists: Bool = false) throws {
        let dir = Paths.directory(of: path)
        if !dir.isEmpty && !directoryExists { try makeDirectories(dir, file: path) }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let tmp = (dir.isEmpty ? "" : dir + "/") + ".\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = Paths.withCString(tmp) { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: path) }
        var ok = false
        defer {
            close(fd)
            if !ok { Paths.withCString(tmp) { _ = unlink($0) } }
        }
        try writeAll(fd, buf, file: path)
        guard Paths.withCString(tmp, { t in Paths.withCString(path) { rename(t, $0) } }) == 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: path) }
        ok = true
    }
}

/// Which file, and which version of it: device, inode, size, and the modification and change
/// times (the change time cannot be set back, so a rewrite that keeps the mtime still shows).
public struct FileIdentity: Hashable, Sendable {
    public var device: UInt64, inode: UInt64, size: Int64
    public var modified: Int64, changed: Int64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec)
        changed = Int64(st.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_ctim.tv_nsec)
    }
}

/// A read-only memory map of a whole file, unmapped when released.
public final class MappedFile: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer?
    public let count: Int
    /// The file mapped, as it was when opened.
    public let identity: FileIdentity

    init(base: UnsafeMutableRawPointer?, count: Int, identity: FileIdentity) {
        self.base = base
        self.count = count
        self.identity = identity
        if let base, count > 0 { madvise(base, count, MADV_SEQUENTIAL) }
    }

    deinit { if let base, count > 0 { munmap(base, count) } }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Drops the whole pages before `offset` from the process (they read back from the file
    /// if touched again; the page cache keeps them): what was read once stops counting.
    public func release(before offset: Int) {
        guard let base, offset > 0 else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let length = min(offset, count) / page * page
        if length > 0 { madvise(base, length, MADV_DONTNEED) }
    }
}
