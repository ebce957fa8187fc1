import TesseraModel
import TesseraShim

/// Writes a pyramidal TIFF from the JPEG tiles of a `layout: tiff` pyramid, as they are
/// (no re-encoding): one directory per level, full size first, each reduced level after it
/// as a page or, with `subifd`, as a SubIFD of the first. Bytes in, bytes out: the caller
/// opens the file and reads the tiles.
public enum PyramidTIFFWriter {
    /// Bytes of directories and tags on top of the tiles (generous: 16 bytes of offsets and
    /// counts a tile in BigTIFF, a few hundred per directory).
    public static func overhead(_ geometry: PyramidGeometry) -> Int {
        (0..<geometry.levelCount).reduce(4096) { $0 + 512 + 16 * geometry.columns($1) * geometry.rows($1) }
    }

    /// Whether a file of `tileBytes` of tiles needs BigTIFF's 64-bit offsets.
    public static func needsBigTIFF(tileBytes: Int, geometry: PyramidGeometry) -> Bool {
        tileBytes + overhead(geometry) >= Int(UInt32.max) - (1 << 20)
    }

    /// Writes every level of `geometry` to `fd` (closed when done, whatever happens) with the
    /// tile `tile(k, column, row)` returns; throws `write-failed`-style errors with libtiff's
    /// reason.
    public static func write(fd: Int32, geometry: PyramidGeometry, channels: Int, bigTIFF: Bool, subifd: Bool,
                             tile: (_ k: Int, _ column: Int, _ row: Int) throws -> [UInt8]) throws {
        guard let w = ts_tiff_writer_open(fd, bigTIFF ? 1 : 0) else {
            throw ImagingError(.outOfMemory, "cannot start a TIFF writer")
        }
        var closed = false
        defer { if !closed { _ = ts_tiff_writer_close(w) } }
        func check(_ rc: Int32, _ what: String) throws {
            guard rc == 0 else {
                throw ImagingError(.encodeFailed, "writing the pyramidal TIFF (\(what)): \(String(cString: ts_tiff_writer_message(w)))")
            }
        }
        let levels = geometry.levelCount
        for k in 0..<levels {
            let s = geometry.levelSize(k)
            try check(ts_tiff_writer_level(w, UInt32(s.width), UInt32(s.height), UInt32(geometry.tileSize), Int32(channels),
                                           k > 0 ? 1 : 0, k == 0 && subifd ? Int32(levels - 1) : 0), "level \(k)")
            let columns = geometry.columns(k)
            for r in 0..<geometry.rows(k) {
                for c in 0..<columns {
                    let bytes = try tile(k, c, r)
                    try bytes.withUnsafeBufferPointer {
                        try check(ts_tiff_writer_tile(w, UInt32(r * columns + c), $0.baseAddress, $0.count), "level \(k) tile \(c),\(r)")
                    }
                }
            }
            try check(ts_tiff_writer_end_level(w), "level \(k)")
        }
        closed = true
        try check(ts_tiff_writer_close(w), "closing")
    }
}
