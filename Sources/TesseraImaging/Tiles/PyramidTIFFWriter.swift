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
    public static func write(fd: Int32, geometry: PyramidGeometry, channels: Int, deflate: Bool = false, bigTIFF: Bool,
                             subifd: Bool, tile: (_ k: Int, _ column: Int, _ row: Int) throws -> [UInt8]) throws {
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
            // The level's tables, from its first tile (every tile of a pyramid is encoded alike).
            let tables = deflate ? [] : split(try tile(k, 0, 0))?.tables ?? []
            try check(tables.withUnsafeBufferPointer {
                ts_tiff_writer_level(w, UInt32(s.width), UInt32(s.height), UInt32(geometry.tileSize), Int32(channels),
                                     deflate ? 1 : 0, k > 0 ? 1 : 0, k == 0 && subifd ? Int32(levels - 1) : 0,
                                     $0.baseAddress, UInt32($0.count))
            }, "level \(k)")
            let columns = geometry.columns(k)
            for r in 0..<geometry.rows(k) {
                for c in 0..<columns {
                    let whole = try tile(k, c, r)
                    // Without the tables the level holds; a tile whose tables differ keeps its own.
                    let parts = deflate ? nil : split(whole)
                    let bytes = parts.map { $0.tables == tables } == true ? parts!.body : whole
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

    /// A JPEG stream as an abbreviated table specification (SOI, its DQT and DHT segments, EOI:
    /// a TIFF's JPEGTables) and the abbreviated image stream without them (and without APPn
    /// and COM segments); nil for anything but a well-formed header before its first SOS.
    static func split(_ jpeg: [UInt8]) -> (tables: [UInt8], body: [UInt8])? {
        guard jpeg.count > 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else { return nil }
        var tables: [UInt8] = [0xFF, 0xD8], body: [UInt8] = [0xFF, 0xD8]
        var pos = 2
        while pos + 4 <= jpeg.count {
            guard jpeg[pos] == 0xFF else { return nil }
            let marker = jpeg[pos + 1]
            if marker == 0xDA {
                body.append(contentsOf: jpeg[pos...])
                tables += [0xFF, 0xD9]
                return (tables, body)
            }
            let length = Int(jpeg[pos + 2]) << 8 | Int(jpeg[pos + 3])
            guard length >= 2, pos + 2 + length <= jpeg.count else { return nil }
            let segment = jpeg[pos..<(pos + 2 + length)]
            switch marker {
            case 0xDB, 0xC4: tables.append(contentsOf: segment)
            case 0xE0...0xEF, 0xFE: break
            default: body.append(contentsOf: segment)
            }
            pos += 2 + length
        }
        return nil
    }
}
