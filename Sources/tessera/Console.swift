import Foundation
import Logging
import TesseraImaging
import TesseraModel

/// The `tessera` command's log handler: one whole line per message, written to stderr with
/// one `write(2)` under a process-wide lock (lines of several threads never splice), every
/// control character of the message and its metadata escaped (`LogText`: what a user sent
/// is data, never a line of its own), a message longer than 16 kB cut with its length
/// stated. `text` lines read like swift-log's stream handler; `json` lines are one JSON
/// object each (`time`, `level`, `label`, `message`, `metadata`).
struct LogLines: LogHandler {
    enum Format: String, CaseIterable { case text, json }

    let label: String
    let format: Format
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    static let maxMessage = 16 << 10

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let level = event.level
        var all = metadata
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        var text = event.message.description
        if text.utf8.count > Self.maxMessage {
            text = String(decoding: text.utf8.prefix(Self.maxMessage), as: UTF8.self) + "… (\(text.utf8.count) bytes)"
        }
        let time = Self.timestamp()
        let out: String
        switch format {
        case .text:
            let meta = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }
                .map { "\(LogText.escaped($0.key))=\(LogText.escaped("\($0.value)"))" }.joined(separator: " ")
            out = "\(time) \(level) \(label) :\(meta) \(LogText.escaped(text))\n"
        case .json:
            var object: [String: Any] = ["time": time, "level": level.rawValue, "label": label, "message": text]
            if !all.isEmpty { object["metadata"] = Dictionary(uniqueKeysWithValues: all.map { ($0.key, "\($0.value)") }) }
            // JSONSerialization escapes every control character; the line stays one line.
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
            out = String(decoding: data, as: UTF8.self) + "\n"
        }
        Console.err(out)
    }

    private static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [Int8](repeating: 0, count: 32)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The command's two streams, written whole: one `write(2)` per line (retried on a short
/// write), under one lock shared by every writer of the process (records, summaries, logs,
/// warnings, `error:` lines, the progress bar), so a line of stdout and one of stderr never
/// splice into each other when both go to one file (`render DIR > log 2>&1`), and nothing
/// is left in a buffer when a signal ends the process.
enum Console {
    private static let lock = NSLock()

    /// `text` to `fd`, whole.
    static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        // The real standard error, also while a C library's output is being caught (fd 2 then points elsewhere).
        let fd = fd == STDERR_FILENO ? LibraryOutput.stderr : fd
        lock.lock()
        defer { lock.unlock() }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return
            }
            offset += n
        }
    }

    /// Exits now with `status`, once no line is being written.
    static func exitNow(_ status: Int32) -> Never {
        lock.lock()
        _exit(status)
    }

    /// A line of standard output.
    static func out(_ line: String) { write(STDOUT_FILENO, line.hasSuffix("\n") ? line : line + "\n") }

    /// A line of standard error.
    static func err(_ line: String) { write(STDERR_FILENO, line.hasSuffix("\n") ? line : line + "\n") }
}

/// Every `print` of this command is a whole line of standard output (`Console`), never
/// held in a buffer.
func print(_ line: String) { Console.out(line) }
