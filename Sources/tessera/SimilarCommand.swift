import ArgumentParser
import Foundation
import TesseraImaging
import TesseraModel
import TesseraTasks

/// `tessera similar`: near-duplicates by perceptual hash, from a job's records (their
/// `fingerprints`, no image read again) or from images (each decoded once, small).
struct Similar: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "similar",
        abstract: "Group near-duplicate photos by perceptual hash (pHash), from records with fingerprints or from images.",
        discussion: """
            Records (JSON lines from `run --report FILE` or `results ID`, with `options: {fingerprints: true}`) \
            are read as they are; image files and folders are decoded once each, at the smallest scale that \
            gives the hash. Two photos are near-duplicates when their pHashes differ in at most --threshold \
            of 64 bits; groups are connected (A near B, B near C: one group). Without --json, a group per \
            paragraph; with --json, each group as one JSON array of paths per line.
            """)

    @Argument(help: "Record files (.jsonl) or images and folders of images.", completion: .file())
    var inputs: [String]

    @Option(help: "Bits of 64 two pHashes may differ by and still be near-duplicates (0...32).")
    var threshold = NearDuplicates.defaultThreshold

    @Flag(help: "Each group as one JSON array of paths per line.")
    var json = false

    @Option(name: [.customShort("t"), .long], help: "Threads decoding images (records need none).")
    var threads = ProcessInfo.processInfo.activeProcessorCount

    func validate() throws {
        guard !inputs.isEmpty else { throw ValidationError("give record files (.jsonl), images or folders") }
        guard (0...32).contains(threshold) else { throw ValidationError("--threshold must be 0...32, got \(threshold)") }
        guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
    }

    func run() throws {
        var names: [String] = [], hashes: [UInt64] = []
        var images: [String] = []
        var failed = 0
        for input in inputs {
            if input.hasSuffix(".jsonl") {
                let bytes: [UInt8]
                do { bytes = try FileIO.read(input, limit: 1 << 34) } catch {
                    warn("error: \(error)")
                    throw Exit.usage
                }
                var without = 0
                for (n, line) in bytes.split(separator: UInt8(ascii: "\n")).enumerated() where !line.isEmpty {
                    struct Line: Decodable {
                        var type: String?
                        var input: String?
                        var fingerprints: Fingerprints?
                    }
                    guard let r = try? JSONDecoder().decode(Line.self, from: Data(line)) else {
                        warn("error: \(Paths.display(input)):\(n + 1): not a JSON line [invalid-record]")
                        throw Exit.usage
                    }
                    guard r.type == "record", let name = r.input else { continue }
                    guard let p = r.fingerprints?.phash, let h = UInt64(p, radix: 16) else {
                        without += 1
                        continue
                    }
                    names.append(name)
                    hashes.append(h)
                }
                if without > 0 {
                    warn("warning: \(Paths.display(input)): \(counted(without, "record")) without fingerprints (the job needs options: {fingerprints: true})")
                }
            } else {
                let skipped = SkippedFiles()
                images += try discoverInputs([input], outputRoot: nil, skipped: skipped).map(\.path)
            }
        }
        if !images.isEmpty {
            // Ctrl-C: no new image is decoded, the command says how far it got and exits 130
            // (a grouping of part of the photos would read as the answer).
            let stop = FileByFileStop()
            let found = Self.fingerprints(of: images, threads: threads, stop: { stop.signal != nil })
            var done = 0
            for (path, result) in zip(images, found) {
                switch result {
                case .success(let h):
                    names.append(path)
                    hashes.append(h)
                    done += 1
                case .failure(let e):
                    if stop.signal != nil, (e as? ImagingError)?.code.rawValue == "not-decoded" { continue }
                    done += 1
                    failed += 1
                    warn("error: \(LogText.field(path)): \(e)")
                }
            }
            try stop.exitIfStopped(done: done, of: images.count, json: json)
        }
        let groups = NearDuplicates.groups(hashes, threshold: threshold)
        for (k, group) in groups.enumerated() {
            if json {
                printJSONLine(group.map { names[$0] })
            } else {
                var widest = 0
                for a in group { for b in group where b > a { widest = max(widest, (hashes[a] ^ hashes[b]).nonzeroBitCount) } }
                print("group \(k + 1): \(group.count) photos, at most \(widest) bits apart")
                for i in group { print("  " + names[i]) }
            }
        }
        if !json {
            warn("\(counted(hashes.count, "photo")), \(counted(groups.count, "group")) of near-duplicates (threshold \(threshold) bits)")
        }
        if failed > 0 { throw Exit.someFailed }
    }

    /// Each image's pHash: decoded at the smallest scale that gives 256 px, as a render's
    /// `fingerprints` are (the same bits for the same file).
    static func fingerprints(of paths: [String], threads: Int, stop: @escaping @Sendable () -> Bool) -> [Result<UInt64, Error>] {
        let results = Results(count: paths.count)
        let recipe = Recipe(name: "similar", operations: [.resize(Resize(width: 256, height: 256, mode: .fit))],
                            output: OutputSettings(format: .png))
        parallelForEach(paths.count, threads: threads, stop: stop) { i in
            results.set(i, Result<UInt64, Error> {
                let bytes = try FileIO.read(paths[i], limit: Limits.default.maxInputBytes)
                let image = try Renderer.decode(bytes, recipe: recipe)
                let small = Describe.reduced(image)
                let f = Describe.fingerprints(width: small.width, height: small.height, rgba: small.rgba)
                guard let h = UInt64(f.phash, radix: 16) else { throw ImagingError(ImagingError.Code(rawValue: "internal"), "no pHash") }
                return h
            })
        }
        return results.values
    }

    /// What the decoding threads found, by index (`not-decoded` where a stop came first).
    final class Results: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var values: [Result<UInt64, Error>]
        init(count: Int) { values = Array(repeating: .failure(ImagingError(ImagingError.Code(rawValue: "not-decoded"), "not decoded")), count: count) }
        func set(_ i: Int, _ r: Result<UInt64, Error>) {
            lock.lock()
            values[i] = r
            lock.unlock()
        }
    }
}
