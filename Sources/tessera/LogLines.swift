import Foundation
import Logging
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

    func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        var all = metadata
        if let explicit { all.merge(explicit) { $1 } }
        var text = message.description
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
        StandardError.writeLine(out)
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

/// Whole lines to stderr: one `write(2)` per line (retried on a short write), under one
/// lock shared by every writer of the process (logs, warnings, `error:` lines).
enum StandardError {
    private static let lock = NSLock()

    static func writeLine(_ line: String) {
        var bytes = Array(line.utf8)
        if bytes.last != 10 { bytes.append(10) }
        lock.lock()
        defer { lock.unlock() }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}
