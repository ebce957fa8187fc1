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
        // The parts' packs (the coordinator runs this part after all of them succeeded).
        var packs: [MappedFile] = []
        var where_: [TilePack.Tile: (pack: Int, bytes: Range<Int>)] = [:]
        var tileBytes = 0
        for file in ((try? FileManager.default.contentsOfDirectory(atPath: tiles)) ?? []).sorted() where file.hasSuffix(".pack") {
            let mapped = try FileIO.map(tiles + "/" + file, limit: 1 << 40)
            let index: [(TilePack.Tile, Range<Int>)]
            do { index = try TilePack.index(mapped.bytes) } catch let e as ImagingError {
                throw JobError(.writeFailed, "\(e.reason): the pyramid's parts must run again", file: tiles + "/" + file)
            }
            for (tile, range) in index {
                where_[tile] = (packs.count, range)
                tileBytes += range.count
            }
            packs.append(mapped)
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
            try PyramidTIFFWriter.write(fd: theirs, geometry: geometry, channels: info.channels == 1 ? 1 : 3,
                                        bigTIFF: bigTIFF, subifd: settings.subifd) { k, c, r in
                let at = where_[TilePack.Tile(k: k, column: c, row: r)]!
                return Array(UnsafeRawBufferPointer(rebasing: packs[at.pack].bytes[at.bytes]))
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
