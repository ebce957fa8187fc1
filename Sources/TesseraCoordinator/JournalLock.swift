import Foundation
import TesseraTasks

/// One holder per journal: an exclusive `flock(2)` on `JOURNAL.lock`, held for the
/// journal's life and released by the kernel when the holder exits or dies, however it
/// dies. A second coordinator or `tessera run` on the same journal is refused at once,
/// naming the holder (its command, pid, host and since when), instead of both dispatching
/// the same jobs. (A standby coordinator waits on the same lock: issue 56.)
///
/// The lock file holds one line about the holder, rewritten by each new holder; it is only
/// read to name the holder in a refusal. `flock` locks the open file, not the path, and is
/// independent of SQLite's own `fcntl` locks on the journal.
package final class JournalLock {
    let path: String
    private var fd: Int32

    /// Takes the lock of the journal at `journal`, or throws `JournalBusy` naming its holder.
    /// With `wait`, blocks until the holder lets go instead (checking `stop` every 100 ms).
    package init(journal: String, wait: Bool = false, stop: () -> Bool = { false }) throws {
        path = journal + ".lock"
        fd = Paths.withCString(path) { open($0, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        guard fd >= 0 else {
            throw JournalBusy(journal: journal, holder: nil, reason: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let failure = errno
            guard failure == EWOULDBLOCK || failure == EINTR else {
                close(fd)
                throw JournalBusy(journal: journal, holder: nil, reason: "cannot lock \(path): \(String(cString: strerror(failure)))")
            }
            guard wait, !stop() else {
                let holder = Self.holder(fd)
                close(fd)
                throw JournalBusy(journal: journal, holder: holder, reason: nil)
            }
            usleep(100_000)
        }
        // Who holds it now, for the next one refused.
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count)
        let command = CommandLine.arguments.dropFirst().first.map { "tessera " + $0 } ?? "tessera"
        let line = "\(command) pid \(getpid()) on \(String(cString: host)) since \(Self.timestamp())\n"
        _ = ftruncate(fd, 0)
        _ = Array(line.utf8).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// Lets go (the process exiting does the same).
    package func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }

    private static func holder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    private static func timestamp() -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: Date())
    }
}

/// Another process holds the journal (or its lock cannot be taken).
public struct JournalBusy: Error, CustomStringConvertible {
    public let journal: String
    /// `tessera run pid 1234 on host since 2026-11-28T06:00:00Z`, when it could be read.
    public let holder: String?
    public let reason: String?

    public var description: String {
        if let reason { return "\(Paths.display(journal)): \(reason)" }
        return "\(Paths.display(journal)) is in use by \(holder ?? "another process")"
            + ": one coordinator or run per journal (stop that one, or give this one another --journal)"
    }
}
