import Foundation
import TesseraTasks

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
