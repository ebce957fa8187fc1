import Foundation
import TesseraImaging

/// Planning and running `tiles` jobs: each input becomes the parts of its pyramid.
public enum TilePlanner {
    /// One task per pyramid part, for every input. Inputs whose header cannot be read
    /// get one task anyway: it fails on a worker with the reason, without stopping the
    /// other inputs.
    public static func plan(_ job: JobSpec, inputs: [InputFile]) -> [InputFile] {
        let settings = job.tiles ?? TileSettings()
        var tasks: [InputFile] = []
        for input in inputs {
            do {
                let mapped = try FileIO.map(input.path, limit: job.options.maxInputMB << 20)
                let info = try withExtendedLifetime(mapped) {
                    try TileSourceInfo.probe(mapped.bytes, limits: limits(job.options))
                }
                let geometry = PyramidGeometry(width: info.width, height: info.height, settings: settings)
                let parts = geometry.plan(info: info, settings: settings)
                // Over the memory budget (a huge progressive JPEG): one task fails with the reason, not every part.
                if parts.contains(where: { geometry.memoryEstimate($0, info: info, settings: settings) > settings.memoryBudgetMB << 20 }) {
                    tasks.append(input.with(part: parts[0].description))
                    continue
                }
                for part in parts { tasks.append(input.with(part: part.description)) }
            } catch {
                tasks.append(input.with(part: PyramidPart(tailFrom: 0).description))
            }
        }
        return tasks
    }

    static func limits(_ options: JobOptions) -> Limits {
        var l = options.renderOptions.limits
        l.maxPixels = Int(min(options.maxMegapixels * 1_000_000, Double(Int.max / 2)))
        return l
    }

    /// The pyramid's name under the output root: the input's directory and stem.
    public static func pyramidName(_ input: InputFile) -> String {
        let dir = input.relativeDirectory
        return dir.isEmpty ? input.stem : dir + "/" + input.stem
    }
}

/// Writes a task's tiles: each atomically (temporary name, then rename), directories
/// made once per task, the pyramid's directory checked once against symlinks out of
/// the root. Remembers what it wrote, to remove it when the task fails for good.
final class TileWriter {
    let root: String
    private var made: Set<String> = []
    private(set) var written: [String] = []
    /// Tiles written at or after this time (by an earlier attempt of this job) are kept.
    let resumeAfter: Double?

    /// Fenced attempts write here and publish after the coordinator's commit.
    let staging: Staging?

    init(root: String, name: String, resumeAfter: Double?, staging: Staging? = nil) throws {
        self.root = root
        self.resumeAfter = resumeAfter
        self.staging = staging
        // The pyramid's own directory (and .dzi/.html next to it) must stay inside the root.
        _ = try OutputNaming.confine(name + ".probe", under: root)
    }

    func exists(_ relative: String) -> Bool {
        if let staging, staging.contains(relative) { return true }
        guard let after = resumeAfter else { return false }
        var st = stat()
        guard Paths.withCString(root + "/" + relative, { stat($0, &st) }) == 0, st.st_size > 0 else { return false }
        return Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9 >= after
    }

    func write(_ relative: String, _ bytes: [UInt8]) throws {
        guard !relative.hasPrefix("/"), !relative.split(separator: "/").contains("..") else {
            throw JobError(.unsafeOutputPath, "tile path \"\(relative)\" leaves the output root")
        }
        if let staging {
            try staging.stage(relative, bytes)
            return
        }
        let path = root + "/" + relative
        let dir = Paths.directory(of: path)
        if !made.contains(dir) {
            try FileIO.makeDirectories(dir, file: path)
            made.insert(dir)
        }
        try FileIO.writeAtomically(bytes, to: path, directoryExists: true)
        written.append(path)
    }

    func removeWritten() {
        for p in written { unlink(p) }
        written = []
        staging?.discard()
    }
}
