import Foundation

/// Peak resident memory per task, from the kernel's high-water mark.
///
/// Before a task starts with no other task running, the mark is reset by writing
/// "5" to `/proc/self/clear_refs`; after it ends, `VmHWM` in `/proc/self/status` is
/// the process' peak since then. With one task at a time that is the task's peak
/// (plus the worker's own baseline, a few MB); with several at once it is the
/// process peak while the task ran, an upper bound, reported as such.
enum ResourceAccounting {
    static func resetPeak() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }

    /// `VmHWM` in bytes (0 when unavailable).
    static func peakResident() -> UInt64 {
        statusField("VmHWM:")
    }

    static func currentResident() -> UInt64 {
        statusField("VmRSS:")
    }

    private static func statusField(_ name: String) -> UInt64 {
        // procfs files report size 0, so read them with read(2) rather than Foundation.
        let fd = open("/proc/self/status", O_RDONLY)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8192)
        var length = 0
        while length < buffer.count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + length, $0.count - length) }
            if n <= 0 { break }
            length += n
        }
        let text = String(decoding: buffer[..<length], as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            let kb = line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { UInt64($0) } ?? 0
            return kb * 1024
        }
        return 0
    }
}
