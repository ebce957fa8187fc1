/// A malformed or unknown message: its frames do not follow docs/PROTOCOL.md.
public struct WireError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "malformed message: \(reason)" }
}

/// Little-endian binary writer for the hot messages (`tasks`, `results`).
public struct BinaryWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    public mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    public mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    public mutating func f32(_ v: Float) { u32(v.bitPattern) }
    /// UTF-8, prefixed with its length as u32.
    public mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
    /// Raw bytes, prefixed with their length as u32.
    public mutating func blob(_ b: [UInt8]) {
        u32(UInt32(b.count))
        bytes.append(contentsOf: b)
    }
}

/// Reads what `BinaryWriter` wrote; throws `WireError` on truncation instead of trapping.
public struct BinaryReader {
    private let bytes: [UInt8]
    private var position = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var isAtEnd: Bool { position == bytes.count }

    private mutating func take(_ n: Int) throws -> ArraySlice<UInt8> {
        guard n >= 0, bytes.count - position >= n else {
            throw WireError("needed \(n) bytes at offset \(position) of \(bytes.count)")
        }
        defer { position += n }
        return bytes[position..<(position + n)]
    }

    private mutating func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
        let s = try take(MemoryLayout<T>.size)
        var v: T = 0
        for (i, b) in s.enumerated() { v |= T(b) << (8 * i) }
        return v
    }

    public mutating func u8() throws -> UInt8 { try integer(UInt8.self) }
    public mutating func u16() throws -> UInt16 { try integer(UInt16.self) }
    public mutating func u32() throws -> UInt32 { try integer(UInt32.self) }
    public mutating func u64() throws -> UInt64 { try integer(UInt64.self) }
    public mutating func f32() throws -> Float { Float(bitPattern: try u32()) }
    public mutating func string() throws -> String {
        let n = Int(try u32())
        return String(decoding: try take(n), as: UTF8.self)
    }
    public mutating func blob() throws -> [UInt8] {
        let n = Int(try u32())
        return Array(try take(n))
    }
}
