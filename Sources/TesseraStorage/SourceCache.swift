import Foundation
import TesseraTasks

/// An on-disk cache of originals fetched from object storage or HTTP, bounded in bytes
/// and evicted least recently used first — the "remote → local cache" of the photo
/// pipelines Tessera grew from. Entries are keyed by the URL without its query string
/// (a presigned URL's signature changes; the object does not) and the object's ETag, so
/// a changed object is never served stale. Several workers on one host may share a
/// directory: entries are written whole (temporary name, rename) and a missing entry is
/// only a miss.
///
/// Layout: `DIR/URLHASH-ETAGHASH` holds the bytes; `DIR/URLHASH.etag` the ETag last
/// seen for the URL (to ask an HTTP server "changed since?" with `If-None-Match`).
public final class SourceCache: @unchecked Sendable {
    public let directory: String
    public let capacity: Int
    private let lock = NSLock()
    /// Bytes held, as this process last counted (other processes may add).
    private var held = 0

    public init(directory: String, capacity: Int) throws {
        self.directory = directory
        self.capacity = capacity
        try FileIO.makeDirectories(directory, file: directory)
        held = entries().reduce(0) { $0 + $1.size }
    }

    static func hex(_ v: UInt64) -> String { String(v, radix: 16) }

    static func urlKey(_ url: String) -> String {
        hex(XXH64.hash(Array(Location.withoutQuery(url).utf8)))
    }

    private func dataPath(_ url: String, etag: String) -> String {
        directory + "/" + SourceCache.urlKey(url) + "-" + SourceCache.hex(XXH64.hash(Array(etag.utf8)))
    }

    private func etagPath(_ url: String) -> String { directory + "/" + SourceCache.urlKey(url) + ".etag" }

    /// The cached bytes of `url` at version `etag`, mapped (and marked recently used).
    public func lookup(_ url: String, etag: String, limit: Int) -> MappedFile? {
        let path = dataPath(url, etag: etag)
        guard let mapped = try? FileIO.map(path, limit: limit) else { return nil }
        Paths.withCString(path) { _ = utimensat(AT_FDCWD, $0, nil, 0) }  // now: most recently used
        return mapped
    }

    /// The ETag last stored for `url`, to revalidate with.
    public func lastETag(_ url: String) -> String? {
        guard let bytes = try? FileIO.read(etagPath(url), limit: 4096), !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Stores `bytes` as `url` at `etag`, then evicts the least recently used entries
    /// beyond the capacity. Failures only mean the entry is not cached.
    public func store(_ url: String, etag: String, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= capacity / 2 else { return }  // one object must not empty the cache
        let previous = lastETag(url)
        do {
            try FileIO.writeAtomically(bytes, to: dataPath(url, etag: etag), directoryExists: true)
            try FileIO.writeAtomically(Array(etag.utf8), to: etagPath(url), directoryExists: true)
        } catch {
            return
        }
        if let previous, previous != etag { Paths.withCString(dataPath(url, etag: previous)) { _ = unlink($0) } }
        lock.lock()
        held += bytes.count
        let over = held > capacity
        lock.unlock()
        if over { evict() }
    }

    private func entries() -> [(path: String, size: Int, used: Double)] {
        guard let dir = Paths.withCString(directory, { opendir($0) }) else { return [] }
        defer { closedir(dir) }
        var out: [(String, Int, Double)] = []
        while let e = readdir(dir) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard !name.hasPrefix("."), !name.hasSuffix(".etag") else { continue }
            var st = stat()
            let path = directory + "/" + name
            guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            out.append((path, Int(st.st_size), Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9))
        }
        return out
    }

    /// Removes the least recently used entries until 90 % of the capacity is held
    /// (counting what every process sharing the directory wrote).
    private func evict() {
        lock.lock()
        defer { lock.unlock() }
        var all = entries()
        var total = all.reduce(0) { $0 + $1.size }
        all.sort { $0.used < $1.used }
        for e in all where total > capacity * 9 / 10 {
            if unlink(e.path) == 0 { total -= e.size }
        }
        held = total
    }

    /// Bytes the cache holds now.
    public var size: Int { entries().reduce(0) { $0 + $1.size } }
}
