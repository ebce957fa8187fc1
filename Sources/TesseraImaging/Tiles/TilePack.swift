import TesseraModel

/// The tiles of one part of a `layout: tiff` pyramid in one file (`NAME.tif.tiles/PART.pack`):
/// a part writes one file instead of a file a tile, and the part that assembles the TIFF maps
/// them. Little-endian: "TSPACK01", the tile count, per tile its level, column, row, offset
/// and size, then the tiles' bytes.
public enum TilePack {
    private static let magic: [UInt8] = Array("TSPACK01".utf8)
    private static let entry = 2 + 4 + 4 + 8 + 4

    public struct Tile: Hashable, Sendable {
        public var k: Int
        public var column: Int
        public var row: Int
        public init(k: Int, column: Int, row: Int) {
            self.k = k
            self.column = column
            self.row = row
        }
    }

    /// The file's name for a part (no characters a file system might refuse).
    public static func fileName(_ part: PyramidPart) -> String {
        part.description.replacingOccurrences(of: ":", with: "_").replacingOccurrences(of: "+", with: "-tail") + ".pack"
    }

    public static func encode(_ tiles: [(Tile, [UInt8])]) -> [UInt8] {
        var out = magic
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        put(UInt32(tiles.count))
        var offset = magic.count + 4 + tiles.count * entry
        for (t, bytes) in tiles {
            put(UInt16(t.k))
            put(UInt32(t.column))
            put(UInt32(t.row))
            put(UInt64(offset))
            put(UInt32(bytes.count))
            offset += bytes.count
        }
        out.reserveCapacity(offset)
        for (_, bytes) in tiles { out.append(contentsOf: bytes) }
        return out
    }

    /// Bytes of the header before the index, and of the index for `count` tiles.
    public static let headerSize = 12
    public static func indexSize(count: Int) -> Int { headerSize + count * entry }

    /// The tile count the first `headerSize` bytes of a pack declare (nil: not a pack).
    public static func count(_ header: UnsafeRawBufferPointer) -> Int? {
        guard header.count >= headerSize, Array(header[0..<magic.count]) == magic else { return nil }
        return (0..<4).reversed().reduce(0) { $0 << 8 | Int(header[magic.count + $1]) }
    }

    /// The tiles a pack holds and where their bytes are, from its start (`bytes`: the whole
    /// pack, or its header and index with `fileSize` the whole's size); throws `corrupt` for
    /// anything that is not a whole pack.
    public static func index(_ bytes: UnsafeRawBufferPointer, fileSize: Int? = nil) throws -> [(Tile, Range<Int>)] {
        func u(_ at: Int, _ n: Int) -> Int {
            var v = 0
            for i in (0..<n).reversed() { v = v << 8 | Int(bytes[at + i]) }
            return v
        }
        guard bytes.count >= magic.count + 4, Array(bytes[0..<magic.count]) == magic else {
            throw ImagingError(.corrupt, "not a tile pack")
        }
        let count = u(magic.count, 4)
        let total = fileSize ?? bytes.count
        guard count <= (bytes.count - magic.count - 4) / entry else { throw ImagingError(.corrupt, "tile pack cut short") }
        var tiles: [(Tile, Range<Int>)] = []
        tiles.reserveCapacity(count)
        for i in 0..<count {
            let at = magic.count + 4 + i * entry
            let offset = u(at + 10, 8), size = u(at + 18, 4)
            guard offset >= 0, offset <= total, size <= total - offset else { throw ImagingError(.corrupt, "tile pack cut short") }
            tiles.append((Tile(k: u(at, 2), column: u(at + 2, 4), row: u(at + 6, 4)), offset..<(offset + size)))
        }
        return tiles
    }
}
