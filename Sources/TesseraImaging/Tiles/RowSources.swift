import CJPEG
import Foundation
import TesseraShim
import TesseraModel

/// Rows of one pyramid level, top to bottom, never the whole image: what a band or the
/// tail of a pyramid reads.
protocol RowSource: AnyObject {
    var width: Int { get }
    var height: Int { get }
    /// 1 (gray), 3 (RGB) or 4 (RGBA).
    var channels: Int { get }
    /// The next row `read` returns.
    var position: Int { get }
    /// Moves forward to row `y` without producing the rows in between.
    func seek(to y: Int) throws
    /// Reads the next `rows` rows.
    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) throws
    /// What the source decodes, for reports.
    var describe: TileDecodeInfo { get }
}

/// A source shrunk by 2^n in each direction by box means (sizes rounded up; edge boxes
/// average the pixels they have), streaming 2^n source rows per row.
final class BoxShrinkSource: RowSource {
    private let source: RowSource
    private let shift: Int
    let width: Int
    let height: Int
    var channels: Int { source.channels }
    private(set) var position = 0
    private let rows: UnsafeMutablePointer<UInt8>
    private let sums: UnsafeMutablePointer<UInt32>

    init(_ source: RowSource, shift: Int) {
        self.source = source
        self.shift = shift
        let f = 1 << shift
        width = (source.width + f - 1) >> shift
        height = (source.height + f - 1) >> shift
        rows = .allocate(capacity: source.width * source.channels * f)
        sums = .allocate(capacity: width * source.channels)
    }

    deinit {
        rows.deallocate()
        sums.deallocate()
    }

    var describe: TileDecodeInfo {
        var d = source.describe
        d.boxShrink = 1 << shift
        return d
    }

    func seek(to y: Int) throws {
        precondition(y >= position, "row sources only move forward")
        try source.seek(to: min(source.height, y << shift))
        position = y
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows count: Int) throws {
        let ch = channels, sw = source.width, f = 1 << shift
        for i in 0..<count {
            let y = position + i
            let n = min(f, source.height - (y << shift))
            try source.read(into: rows, stride: sw * ch, rows: n)
            sums.initialize(repeating: 0, count: width * ch)
            for r in 0..<n {
                let row = rows + r * sw * ch
                var x = 0
                while x < sw {
                    let o = (x >> shift) * ch, p = x * ch
                    for c in 0..<ch { sums[o + c] += UInt32(row[p + c]) }
                    x += 1
                }
            }
            let out = buffer + i * stride
            for ox in 0..<width {
                let count = UInt32(min(f, sw - (ox << shift)) * n)
                for c in 0..<ch { out[ox * ch + c] = UInt8((sums[ox * ch + c] + count / 2) / count) }
            }
        }
        position += count
    }
}

/// WebP, HEIF and AVIF sources for pyramids: no streaming decoder exists for them, so
/// the image is decoded whole (upright, 8-bit, as renders get it) and served row by row.
final class DecodedRowSource: RowSource {
    private let decoder: SourceDecoder
    let width: Int
    let height: Int
    let channels: Int
    private(set) var position = 0
    private(set) var describe = TileDecodeInfo()

    init(bytes: UnsafeRawBufferPointer, limits: Limits, inputIsFileMap: Bool = false) throws {
        var options = RenderOptions()
        options.limits = limits
        options.inputIsFileMap = inputIsFileMap
        decoder = try SourceDecoder(bytes: bytes, options: options)
        try decoder.start(scaleEighths: 8, maxBatchRows: 16)
        width = decoder.decodedSize.width
        height = decoder.decodedSize.height
        channels = decoder.channels
    }

    func seek(to y: Int) throws {
        precondition(y >= position, "row sources only move forward")
        if y > position, decoder.skipsRows {
            // TIFF: the rows above are never read.
            describe.seek = .direct
            while position < y {
                let n = try decoder.skip(rows: y - position)
                guard n > 0 else { throw ImagingError(.truncated, "the image ended at row \(position) of \(height)") }
                position += n
            }
        } else if y > position {
            describe.seek = .readThrough
            let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: width * channels)
            defer { scratch.deallocate() }
            while position < y { position += try decoder.read(into: scratch, stride: 0, maxRows: 1) }
        }
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) throws {
        precondition(position + rows <= height)
        var done = 0
        while done < rows {
            let n = try decoder.read(into: buffer + done * stride, stride: stride, maxRows: rows - done)
            guard n > 0 else { throw ImagingError(.truncated, "the image ended at row \(position + done) of \(height)") }
            done += n
        }
        position += rows
    }
}
