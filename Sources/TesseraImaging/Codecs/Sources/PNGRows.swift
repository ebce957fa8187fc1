import CJPEG
import Foundation
import TesseraShim
import TesseraModel

/// A PNG's rows (8-bit gray, RGB or RGBA, no gamma change: pixel values pass through as
/// `vips dzsave` passes them). Seeking reads and drops rows (deflate has no index);
/// interlaced files are decoded whole, which the planner allows only within the budget.
final class PNGRowSource: RowSource {
    private let decoder: PNGDecoder
    let width: Int
    let height: Int
    let channels: Int
    private(set) var position = 0
    private var whole: UnsafeMutablePointer<UInt8>?
    private(set) var describe = TileDecodeInfo()

    init(bytes: UnsafeRawBufferPointer, limits: Limits) throws {
        decoder = try PNGDecoder(bytes: bytes, limits: limits)
        width = decoder.header.width
        height = decoder.header.height
        let started = try decoder.start(correctGamma: false)
        channels = started.channels
        if started.wholeImage {
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: width * height * channels)
            whole = p
            try decoder.readImage(into: p, stride: width * channels)
        }
    }

    deinit { whole?.deallocate() }

    func seek(to y: Int) throws {
        precondition(y >= position, "row sources only move forward")
        if y > position, whole == nil {
            describe.seek = .readThrough
            let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: width * channels)
            defer { scratch.deallocate() }
            for _ in position..<y { try decoder.read(into: scratch, stride: 0, rows: 1) }
        }
        position = y
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) throws {
        precondition(position + rows <= height)
        if let whole {
            let rowBytes = width * channels
            for i in 0..<rows { (buffer + i * stride).update(from: whole + (position + i) * rowBytes, count: rowBytes) }
        } else {
            try decoder.read(into: buffer, stride: stride, rows: rows)
        }
        position += rows
    }
}

