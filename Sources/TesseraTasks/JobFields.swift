import Foundation

/// The fields each part of a job may have, and the one message for a field it may not:
/// job files (YAML, `JobFile`) and JSON jobs (scripts, the wire, the journal) are checked
/// against the same lists and refuse an unknown field with the same words.
public enum JobFields {
    public static let job = ["name", "kind", "priority", "inputs", "output", "outputs", "presets", "strip", "tiles", "options", "storage"]
    public static let input = ["path", "glob", "recursive", "manifest"]
    public static let output = ["preset", "recipe", "name", "path", "formats", "cacheControl", "scales", "animated", "gainMap"]
    public static let strip = ["keepICC", "keepCopyright", "orientation", "keepGainMap"]
    public static let tiles = ["layout", "tileSize", "overlap", "format", "quality", "background", "baseURI", "viewer", "memoryBudgetMB", "subifd"]
    public static let options = ["maxMegapixels", "maxInputMB", "strict", "maxAttempts", "heifThumbnails", "page", "frame",
                                 "timeout", "inline", "incremental", "fast", "at", "frames", "fps", "maxFrames", "maxDuration", "hdr", "overwrite", "verify", "raw",
                                 "placeholders", "fingerprints"]
    public static let storage = StorageSettings.fields

    /// `unknown field (did you mean "tileSize"?); expected one of …`
    public static func unknown(_ name: String, allowed: [String]) -> String {
        let hint = allowed.min { distance($0, name) < distance($1, name) }
            .flatMap { distance($0, name) <= 3 ? " (did you mean \"\($0)\"?)" : nil } ?? ""
        return "unknown field\(hint); expected one of \(allowed.joined(separator: ", "))"
    }

    /// A field's dotted path, as job-file errors name it: `outputs[1].recipe` (within a
    /// message, from the job: the message's own `job` key left out).
    public static func path(_ keys: [CodingKey]) -> String {
        var out = ""
        let start = keys.firstIndex { $0.stringValue == "job" }.map { $0 + 1 } ?? 0
        for k in keys[start...] {
            if let i = k.intValue, k.stringValue.hasPrefix("Index") || k.stringValue == String(i) {
                out += "[\(i)]"
            } else {
                out += out.isEmpty ? k.stringValue : "." + k.stringValue
            }
        }
        return out
    }

    /// Refuses a JSON object with a field not in `allowed` (a value that is not an object is
    /// left to the type's own decoding).
    public static func check(_ decoder: Decoder, allowed: [String]) throws {
        guard let c = try? decoder.container(keyedBy: AnyKey.self) else { return }
        // Of several, the first by name: a job file names the same one.
        if let key = c.allKeys.filter({ !allowed.contains($0.stringValue) }).min(by: { $0.stringValue < $1.stringValue }) {
            let field = path(decoder.codingPath + [key])
            throw JobError(.invalidJob, "\(field): \(unknown(key.stringValue, allowed: allowed))")
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Edit distance, for "did you mean".
    public static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased()), b = Array(b.lowercased())
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var prev = row[0]
            row[0] = i
            for j in 1...b.count {
                let cur = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1))
                prev = cur
            }
        }
        return row[b.count]
    }
}
