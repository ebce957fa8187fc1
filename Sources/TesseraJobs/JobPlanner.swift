import Foundation
import TesseraStorage
import TesseraTasks

/// Expands a job's inputs into files: one task per file, all of a file's outputs
/// in that task so it is decoded once. Fast enough for 100,000-file jobs: a
/// `readdir` walk using `d_type` (no `stat` per file), `fnmatch` for globs.
public enum JobPlanner {
    /// The job's inputs in order, each file once.
    public static func inputs(of job: JobSpec) throws -> [InputFile] {
        var files: [InputFile] = []
        var seen = Set<String>()
        try forEachInput(of: job) { f in
            if seen.insert(f.path).inserted { files.append(f) }
        }
        return files
    }

    /// Calls `body` with each input in order, without deduplicating (the coordinator's
    /// journal deduplicates a job's tasks as it streams them in): a manifest of a million
    /// lines is read line by line, never held as a million values.
    public static func forEachInput(of job: JobSpec, stores: RemoteStores = RemoteStores(), sources: SourcePolicy? = nil,
                                    skipped: SkippedFiles? = nil, _ body: (InputFile) throws -> Void) throws {
        let storage = stores.storage(job.storage, sources: sources)
        for source in job.inputs {
            switch source {
            case .path(let path, let patterns, let recursive) where Location.isRemote(path):
                try expandRemote(path, patterns: patterns, recursive: recursive, storage: storage, body)
            case .path(let path, let patterns, let recursive):
                for f in try expand(path, patterns: patterns, recursive: recursive, outputRoot: job.output, skipped: skipped) { try body(f) }
            case .manifest(let manifest):
                // Read like an input (never blocking on a FIFO), or fetched; lines are byte strings.
                let remote = Location.isRemote(manifest)
                let bytes: [UInt8]
                if remote {
                    let fetched = try storage.fetch(manifest, limit: 1 << 30)
                    bytes = Array(fetched.bytes.bytes)
                } else {
                    bytes = try FileIO.read(manifest, limit: 1 << 30)
                }
                let dir = Paths.directory(of: remote ? Location.withoutQuery(manifest) : manifest), under = dir + "/"
                try bytes.withUnsafeBufferPointer { all in
                    var start = 0
                    while start < all.count {
                        var end = start
                        while end < all.count && all[end] != 10 && all[end] != 13 { end += 1 }
                        defer { start = end + 1 }
                        // Blanks around the entry: ASCII ones here, others by Foundation.
                        var a = start, z = end
                        while a < z && (all[a] == 32 || all[a] == 9) { a += 1 }
                        while z > a && (all[z - 1] == 32 || all[z - 1] == 9) { z -= 1 }
                        if a == z || all[a] == UInt8(ascii: "#") { continue }
                        var entry = Paths.fromBytes(UnsafeBufferPointer(rebasing: all[a..<z]))
                        if all[a] >= 0x80 || all[z - 1] >= 0x80 {
                            entry = entry.trimmingCharacters(in: .whitespaces)
                            if entry.isEmpty || entry.hasPrefix("#") { continue }
                        }
                        // A URL is taken as written; a path is relative to the manifest (file or URL).
                        if Location.isRemote(entry) {
                            let naming = Location.namingPath(entry)
                            let root = naming.hasPrefix(under) ? dir : Paths.directory(of: naming)
                            try body(InputFile(path: entry, root: root))
                            continue
                        }
                        let full = remote ? under + entry.drop { $0 == "/" } : Paths.normalize(entry.hasPrefix("/") ? entry : under + entry)
                        // Manifest entries keep their own names (a symlink is not replaced by its
                        // target) and their directory relative to the manifest for {dir}.
                        let root = full.hasPrefix(under) ? dir : Paths.directory(of: full)
                        try body(InputFile(path: full, root: root))
                    }
                }
            }
        }
    }

    /// A URL as inputs: an `s3://` prefix (ending in "/", or a bucket) listed page by page
    /// with each object's ETag; an `s3://` key (HEAD for its ETag; a key that is no object
    /// is taken as a prefix, like a directory); an HTTP(S) URL as it is.
    static func expandRemote(_ url: String, patterns: [String], recursive: Bool, storage: RemoteStorage,
                             _ body: (InputFile) throws -> Void) throws {
        guard case .s3(let bucket, let key) = Location(url) else {
            return try body(InputFile(path: url, root: Paths.directory(of: Location.namingPath(url))))
        }
        if !key.isEmpty && !key.hasSuffix("/") {
            if let object = try storage.head(url) {
                return try body(InputFile(path: url, root: Paths.directory(of: url), etag: object.etag.isEmpty ? nil : object.etag))
            }
            var found = false
            try listPrefix("s3://\(bucket)/\(key)/", patterns: patterns, recursive: recursive, storage: storage) {
                found = true
                try body($0)
            }
            guard found else { throw JobError(.notFound, "no such object, and no objects under it", file: url) }
            return
        }
        try listPrefix(url, patterns: patterns, recursive: recursive, storage: storage, body)
    }

    /// The objects under a prefix that match `patterns` (or have an image extension), in key
    /// order; `{dir}` of each is its key relative to the prefix.
    static func listPrefix(_ prefix: String, patterns: [String], recursive: Bool, storage: RemoteStorage,
                           _ body: (InputFile) throws -> Void) throws {
        guard case .s3(let bucket, let keyPrefix) = Location(prefix) else { return }
        var root = "s3://" + bucket + (keyPrefix.isEmpty ? "" : "/" + keyPrefix)
        while root.hasSuffix("/") { root.removeLast() }
        try storage.list(prefix, recursive: recursive) { object in
            let relative = String(object.key.dropFirst(keyPrefix.count))
            let name = relative.split(separator: "/").last.map(String.init) ?? relative
            guard !relative.isEmpty, !relative.hasSuffix("/"), !name.hasPrefix("."),
                  matches(name: name, relative: relative, patterns: patterns) else { return }
            try body(InputFile(path: "s3://\(bucket)/\(object.key)", root: root, etag: object.etag.isEmpty ? nil : object.etag))
        }
    }

    /// A file, or the image files of a directory (every file matching `patterns`, or with an
    /// image extension when there are none), sorted: the one walker of render, strip, tiles
    /// and jobs.
    ///
    /// The walk never enters `outputRoot` (a folder of thumbnails inside the photos is not
    /// read back as photos on the next run) nor hidden folders such as `.tessera`.
    /// Without patterns, the files passed over for their extension are counted in `skipped`.
    public static func expand(_ path: String, patterns: [String] = [], recursive: Bool = true,
                              outputRoot: String? = nil, skipped: SkippedFiles? = nil) throws -> [InputFile] {
        var st = stat()
        guard Paths.withCString(path, { stat($0, &st) }) == 0 else {
            throw JobError(.inputNotFound, "no such file or directory", file: path)
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return [InputFile(path: path, root: Paths.directory(of: path))] }
        var found: [String] = []
        var visited: Set<[UInt64]> = [[UInt64(st.st_dev), UInt64(st.st_ino)]]
        // Entered once each: the output root counts as entered already.
        if let outputRoot, !Location.isRemote(outputRoot), let out = OutputClaims.identity(outputRoot) { visited.insert(out) }
        walk(path, relative: "", patterns: patterns, recursive: recursive, visited: &visited, into: &found,
             skipped: patterns.isEmpty ? skipped.map { s in { s.add(path + "/" + $0) } } : nil)
        return found.sorted().map { InputFile(path: path + "/" + $0, root: path) }
    }

    /// Appends paths (relative to `base`) of image files below `base`.
    /// Directories are entered once each (by device and inode), so symlink loops end.
    static func walk(_ base: String, relative: String, patterns: [String], recursive: Bool,
                     visited: inout Set<[UInt64]>, into found: inout [String], skipped: ((String) -> Void)? = nil) {
        let dirPath = relative.isEmpty ? base : base + "/" + relative
        guard let dir = Paths.withCString(dirPath, { opendir($0) }) else { return }
        defer { closedir(dir) }
        var subdirectories: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Paths.fromBytes(raw.prefix { $0 != 0 }) }
            if name.hasPrefix(".") { continue }  // ., .., hidden files and directories
            let rel = relative.isEmpty ? name : relative + "/" + name
            var type = entry.pointee.d_type
            if type == UInt8(DT_UNKNOWN) || type == UInt8(DT_LNK) || (type == UInt8(DT_DIR) && recursive) {
                var st = stat()
                guard Paths.withCString(dirPath + "/" + name, { stat($0, &st) }) == 0 else { continue }
                let isDir = (st.st_mode & S_IFMT) == S_IFDIR
                if isDir && recursive && !visited.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted { continue }
                type = isDir ? UInt8(DT_DIR) : (st.st_mode & S_IFMT) == S_IFREG ? UInt8(DT_REG) : UInt8(DT_UNKNOWN)
            }
            if type == UInt8(DT_DIR) {
                if recursive { subdirectories.append(rel) }
            } else if type == UInt8(DT_REG) && matches(name: name, relative: rel, patterns: patterns) {
                found.append(rel)
            } else if type == UInt8(DT_REG) {
                skipped?(rel)
            }
        }
        for sub in subdirectories {
            walk(base, relative: sub, patterns: patterns, recursive: recursive, visited: &visited, into: &found, skipped: skipped)
        }
    }

    /// Without patterns: the image extensions. With patterns: any that matches the
    /// file name, or the relative path when the pattern has a "/".
    static func matches(name: String, relative: String, patterns: [String]) -> Bool {
        if patterns.isEmpty {
            guard let dot = name.lastIndex(of: ".") else { return false }
            return InputDiscovery.imageExtensions.contains(name[name.index(after: dot)...].lowercased())
        }
        for p in patterns {
            let subject = p.contains("/") ? relative : name
            if fnmatch(p, subject, p.contains("/") ? FNM_PATHNAME : 0) == 0 { return true }
        }
        return false
    }
}
