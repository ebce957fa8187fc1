import ArgumentParser
import Foundation
import TesseraImaging
import TesseraJobs

/// Options every command that reads images shares.
struct LimitOptions: ParsableArguments {
    @Option(help: "Largest image accepted, in megapixels (checked from the header).")
    var maxMegapixels: Double = 100

    @Option(help: "Largest input file accepted, in megabytes.")
    var maxInputMB: Int = 512

    var limits: Limits {
        var l = Limits()
        l.maxPixels = Int(maxMegapixels * 1_000_000)
        l.maxInputBytes = maxInputMB << 20
        return l
    }
}

/// Loads presets: built-ins plus preset files.
func loadCatalog(_ files: [String]) throws -> PresetCatalog {
    var catalog = PresetCatalog.builtIn
    for f in files {
        let data = try readFile(f)
        try catalog.load(json: data, source: f)
    }
    return catalog
}

func readFile(_ path: String) throws -> Data {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ValidationError("cannot read \(path)")
    }
    return data
}

/// Prints to standard error.
func warn(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}

/// One JSON line on standard output.
func printJSONLine<T: Encodable>(_ value: T) {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    if let d = try? e.encode(value), let s = String(data: d, encoding: .utf8) { print(s) }
}

func formatBytes(_ n: Int) -> String {
    let d = Double(n)
    if d >= 1_000_000 { return String(format: "%.1f MB", d / 1_000_000) }
    if d >= 1_000 { return String(format: "%.1f kB", d / 1_000) }
    return "\(n) B"
}

func ms(_ v: Double) -> String { String(format: "%.1f", v) }

/// Runs `body` for indices 0..<count on `threads` threads, in order of index per thread.
func parallelForEach(_ count: Int, threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
    guard threads > 1, count > 1 else {
        for i in 0..<count { body(i) }
        return
    }
    let next = ManagedAtomicCounter()
    DispatchQueue.concurrentPerform(iterations: min(threads, count)) { _ in
        while true {
            let i = next.increment()
            if i >= count { break }
            body(i)
        }
    }
}

/// A counter shared by worker threads.
final class ManagedAtomicCounter: @unchecked Sendable {
    private var value = 0
    private let lock = NSLock()
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value - 1
    }
}
