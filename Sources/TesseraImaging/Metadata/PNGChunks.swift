import TesseraModel
/// The chunks of a PNG file, parsed without decoding.
struct PNGChunks {
    struct Chunk {
        var type: String
        /// The whole chunk: length, type, data, CRC.
        var range: Range<Int>
        var data: Range<Int>
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    let chunks: [Chunk]

    init(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count >= 8, (0..<8).allSatisfy({ bytes[$0] == PNGChunks.signature[$0] }) else {
            throw ImagingError(.corrupt, "not a PNG file (bad signature)")
        }
        var pos = 8
        var chunks: [Chunk] = []
        var sawEnd = false
        while pos < bytes.count {
            guard pos + 8 <= bytes.count else { throw ImagingError(.truncated, "truncated PNG (chunk header cut off)") }
            let length = Int(bytes[pos]) << 24 | Int(bytes[pos + 1]) << 16 | Int(bytes[pos + 2]) << 8 | Int(bytes[pos + 3])
            guard length <= Int(Int32.max) else { throw ImagingError(.corrupt, "corrupt PNG (chunk length \(length))") }
            let typeBytes = (pos + 4..<pos + 8).map { bytes[$0] }
            guard typeBytes.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
                throw ImagingError(.corrupt, "corrupt PNG (invalid chunk type at byte \(pos + 4))")
            }
            let type = String(decoding: typeBytes, as: UTF8.self)
            let end = pos + 12 + length
            guard end <= bytes.count else {
                throw ImagingError(.truncated, "truncated PNG (\(type) chunk runs past the end)")
            }
            chunks.append(Chunk(type: type, range: pos..<end, data: (pos + 8)..<(pos + 8 + length)))
            pos = end
            if type == "IEND" {
                sawEnd = true
                break
            }
        }
        guard sawEnd else { throw ImagingError(.truncated, "truncated PNG (no IEND chunk)") }
        self.chunks = chunks
    }

    /// A chunk with its CRC (CRC-32 of type and data, as PNG specifies).
    static func make(type: String, data: [UInt8]) -> [UInt8] {
        let n = UInt32(data.count)
        var out: [UInt8] = [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
        let typed = Array(type.utf8) + data
        out += typed
        let c = crc32(typed)
        out += [UInt8(c >> 24), UInt8((c >> 16) & 0xFF), UInt8((c >> 8) & 0xFF), UInt8(c & 0xFF)]
        return out
    }

    private static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
