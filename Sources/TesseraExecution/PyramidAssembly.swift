import Foundation
import TesseraImaging
import TesseraModel
import TesseraTasks

extension TaskExecutor {
    /// The last part of a `layout: tiff` pyramid: the tiles the other parts made
    /// (`NAME.tif.tiles/PART.pack`, a pack of tiles a part) go into `NAME.tif` as they are, written under a temporary name,
    /// renamed when whole (after the coordinator's commit when fenced); then the tiles are
    /// removed. The file is assembled where the tiles are: a worker that writes the output
    /// folder itself.
    static func assemblePyramidTIFF(_ job: ExecutableJob, settings: TileSettings, info: TileSourceInfo, name: String,
                                    returnInline: Bool, fence: Fence?, task: inout Run) throws {
        guard !returnInline, !Location.isRemote(job.outputRoot) else {
            throw JobError(.invalidJob, "a pyramidal TIFF is assembled from its tiles in the output folder: "
                           + "the output must be a folder the workers write (not object storage, not sent back to the coordinator)")
        }
        let clock = Stopwatch()
        let geometry = PyramidGeometry(width: info.width, height: info.height, settings: settings)
        let target = try OutputNaming.confine(name + ".tif", under: job.outputRoot)
        let tiles = target + ".tiles"
        // The parts' packs (the coordinator runs this part after all of them succeeded), read
        // a tile at a time (not mapped: the file's pages stay out of this process's memory).
        var packs: [Int32] = []
        defer { for fd in packs { close(fd) } }
        var where_: [TilePack.Tile: (pack: Int, bytes: Range<Int>)] = [:]
        var tileBytes = 0
        func readAll(_ fd: Int32, _ count: Int, at offset: Int, _ path: String) throws -> [UInt8] {
            var out = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw JobError(.writeFailed, "reading a tile pack: \(n < 0 ? String(cString: strerror(errno)) : "cut short")", file: path) }
                done += n
            }
            return out
        }
        // The packs of this plan's parts only: a failed earlier run with another grid may have
        // left others.
        for part in geometry.plan(info: info, settings: settings) where part != .descriptor {
            let path = tiles + "/" + TilePack.fileName(part)
            let fd = Paths.withCString(path) { open($0, O_RDONLY | O_CLOEXEC) }
            guard fd >= 0 else {
                throw JobError(.writeFailed, "\(String(cString: strerror(errno))): the pyramid's parts must run again", file: path)
            }
            packs.append(fd)
            var st = stat()
            fstat(fd, &st)
            let size = Int(st.st_size)
            let head = try readAll(fd, min(size, TilePack.headerSize), at: 0, path)
            guard let count = head.withUnsafeBytes({ TilePack.count($0) }), TilePack.indexSize(count: count) <= size else {
                throw JobError(.writeFailed, "not a whole tile pack: the pyramid's parts must run again", file: path)
            }
            let index: [(TilePack.Tile, Range<Int>)]
            do {
                index = try readAll(fd, TilePack.indexSize(count: count), at: 0, path).withUnsafeBytes { try TilePack.index($0, fileSize: size) }
            } catch let e as ImagingError {
                throw JobError(.writeFailed, "\(e.reason): the pyramid's parts must run again", file: path)
            }
            for (tile, range) in index {
                guard where_.updateValue((packs.count - 1, range), forKey: tile) == nil else {
                    throw JobError(.writeFailed, "tile \(tile.column),\(tile.row) of level \(tile.k) is in two packs", file: path)
                }
                tileBytes += range.count
            }
        }
        for k in 0..<geometry.levelCount {
            for r in 0..<geometry.rows(k) {
                for c in 0..<geometry.columns(k) where where_[TilePack.Tile(k: k, column: c, row: r)] == nil {
                    throw JobError(.writeFailed, "tile \(c),\(r) of level \(k) is missing: the pyramid's parts must run again",
                                   file: tiles)
                }
            }
        }
        let bigTIFF = PyramidTIFFWriter.needsBigTIFF(tileBytes: tileBytes, geometry: geometry)
        let dir = Paths.directory(of: target)
        try FileIO.makeDirectories(dir, file: target)
        let tmp = dir + "/." + Paths.lastComponent(target) + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = Paths.withCString(tmp) { open($0, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }  // libtiff reads back to link directories
        guard fd >= 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: target) }
        var renamed = false
        defer { if !renamed { Paths.withCString(tmp) { _ = unlink($0) } } }
        // libtiff closes the descriptor it is given; ours is kept to check the file's size.
        let theirs = dup(fd)
        defer { close(fd) }
        guard theirs >= 0 else { throw JobError(.writeFailed, String(cString: strerror(errno)), file: target) }
        do {
            let deflate = settings.format == .png
            try PyramidTIFFWriter.write(fd: theirs, geometry: geometry, channels: deflate ? info.channels : info.channels == 1 ? 1 : 3,
                                        deflate: deflate, bigTIFF: bigTIFF, subifd: settings.subifd) { k, c, r in
                let at = where_[TilePack.Tile(k: k, column: c, row: r)]!
                return try readAll(packs[at.pack], at.bytes.count, at: at.bytes.lowerBound, tiles)
            }
        } catch let e as ImagingError {
            throw JobError(.writeFailed, e.reason, file: target)
        }
        var st = stat()
        fstat(fd, &st)
        guard commit(fence, task: &task) else { return }
        guard Paths.withCString(tmp, { t in Paths.withCString(target) { rename(t, $0) } }) == 0 else {
            throw JobError(.writeFailed, String(cString: strerror(errno)), file: target)
        }
        renamed = true
        try? FileManager.default.removeItem(atPath: tiles)
        task.record.outputs = [OutputRecord(name: "pyramid", path: target, format: .tiff, width: info.width, height: info.height,
                                            bytes: Int(st.st_size), quality: settings.quality)]
        var work = TileWork()
        work.part = .descriptor
        work.levels = Array(0..<geometry.levelCount)
        work.tilesWritten = geometry.tileCount
        work.bytes = Int(st.st_size)
        task.record.tiles = work
        task.record.timings.write = clock.milliseconds
    }
}
