import TesseraModel

/// Where a pyramid's stacks leave the rows of the tail's first level that their stripes make
/// (each stack has them for free: one more halving), and where the tail finds them, so that
/// the tail does not decode the whole source again. The caller decides where they live (a
/// folder under the output root); a stripe that is missing or does not fit makes the tail
/// decode the source as before.
public struct StripeStore {
    public var save: (_ part: PyramidPart, _ bytes: [UInt8]) throws -> Void
    public var load: (_ part: PyramidPart) -> [UInt8]?
    public var remove: () -> Void

    public init(save: @escaping (PyramidPart, [UInt8]) throws -> Void, load: @escaping (PyramidPart) -> [UInt8]?,
                remove: @escaping () -> Void) {
        self.save = save
        self.load = load
        self.remove = remove
    }

    private static let magic: [UInt8] = Array("TSTRIPE1".utf8)

    /// What a stripe starts with: its first row, row count, width and channels.
    static func header(rows: Range<Int>, width: Int, channels: Int) -> [UInt8] {
        var h = magic
        for v in [rows.lowerBound, rows.count, width, channels] {
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { h.append(contentsOf: $0) }
        }
        return h
    }

    /// Level `k` put together from the stripes of every stack the plan makes of this source
    /// (those of `k` levels), or nil when one is missing or not what the plan says.
    func level(_ k: Int, geometry: PyramidGeometry, info: TileSourceInfo, settings: TileSettings,
               layout: PixelLayout) throws -> PixelBuffer? {
        let stacks = geometry.plan(info: info, settings: settings).filter {
            if case .stack(k, _) = $0 { return true } else { return false }
        }
        guard !stacks.isEmpty else { return nil }
        let size = geometry.levelSize(k), rowBytes = size.width * layout.channels
        var covered = 0
        var parts: [(Range<Int>, [UInt8])] = []
        for part in stacks {
            guard let rows = part.stripeRows(in: geometry), let bytes = load(part),
                  bytes.count == StripeStore.magic.count + 16 + rows.count * rowBytes,
                  Array(bytes.prefix(StripeStore.magic.count + 16)) == StripeStore.header(rows: rows, width: size.width,
                                                                                           channels: layout.channels)
            else { return nil }
            covered += rows.count
            parts.append((rows, bytes))
        }
        guard covered == size.height else { return nil }
        let level = try PixelBuffer.make(width: size.width, height: size.height, layout: layout)
        for (rows, bytes) in parts {
            bytes.withUnsafeBytes { raw in
                (level.base + rows.lowerBound * level.stride).update(
                    from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + StripeStore.magic.count + 16,
                    count: rows.count * rowBytes)
            }
        }
        return level
    }
}
