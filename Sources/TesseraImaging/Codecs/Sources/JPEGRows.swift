import CJPEG
import Foundation
import TesseraShim
import TesseraModel

/// A JPEG at scale `scaleEighths`/8 through libjpeg-turbo's scaled IDCT. When the task
/// starts below the top of a baseline file with restart markers, decoding begins at the
/// last suitable restart marker above it: a second decoder reads the original header
/// (frame height patched) followed by the entropy data after that marker, so the rows
/// above are never even entropy-decoded. Otherwise `jpeg_skip_scanlines` skips them.
final class JPEGRowSource: RowSource {
    private var decoder: JPEGDecoder
    /// The patched header a restart-marker start reads (kept as long as its decoder).
    private var patchedHeader: HeaderCopy?
    let width: Int
    let height: Int
    let channels: Int
    /// Rows of the full output above the decoder's first row (restart-marker start).
    private let base: Int
    private(set) var position: Int
    private(set) var describe = TileDecodeInfo()
    /// CMYK sources: rows decode into `scratch` (4 bytes a pixel) and convert to RGB.
    private var cmyk: CMYKConverter?
    private var scratch: UnsafeMutablePointer<UInt8>?
    private static let scratchRows = 16

    init(bytes: UnsafeRawBufferPointer, scaleEighths: Int, startRow: Int, limits: Limits, strict: Bool) throws {
        var d = try JPEGDecoder(bytes: bytes, limits: limits, strict: strict)
        let h = d.header
        let layout: JPEGDecoder.OutputLayout
        switch h.colorSpace {
        case JCS_GRAYSCALE: layout = .gray
        case JCS_CMYK, JCS_YCCK:
            layout = .cmyk
            cmyk = CMYKConverter(icc: try d.iccProfile(), adobeInverted: h.adobeTransform != nil)
        case JCS_YCbCr, JCS_RGB:
            layout = .rgb
        default:
            throw ImagingError(.unsupportedFeature, "JPEG with \(h.components) components in colour space \(h.colorSpace.rawValue)")
        }
        let fullHeight = (h.height * scaleEighths + 7) / 8
        var base = 0
        describe.scaleEighths = scaleEighths
        if startRow > 0, let start = JPEGRowSource.restartStart(
            bytes: bytes, header: h, entropyOffset: d.entropyOffset, scaleEighths: scaleEighths, startRow: startRow) {
            let copy = HeaderCopy(start.header)
            // The second decoder must see the frame we meant (same width, the patched height);
            // anything else (a header we misread) falls back to skipping scanlines.
            if let restarted = try? JPEGDecoder(bytes: copy.bytes, body: start.body, limits: limits, strict: strict),
               restarted.header.width == h.width, restarted.header.height == start.height {
                d = restarted
                patchedHeader = copy
                let mcuHeight = 8 * (h.components == 1 ? 1 : h.maxSampling.v)
                base = start.mcuRows * mcuHeight * scaleEighths / 8
                describe.seek = .restartMarker
            }
        }
        decoder = d
        let size = try decoder.start(scaleEighths: scaleEighths, layout: layout)
        guard size.height + base == fullHeight else {
            throw ImagingError(.corrupt, "corrupt JPEG (decoding from a restart marker gives \(size.height) + \(base) rows, not \(fullHeight))")
        }
        width = size.width
        height = fullHeight
        channels = cmyk == nil ? layout.channels : 3
        if cmyk != nil { scratch = .allocate(capacity: size.width * 4 * JPEGRowSource.scratchRows) }
        self.base = base
        position = base
        if startRow > base {
            if describe.seek == .none { describe.seek = .skipScanlines }
            try seek(to: startRow)
        }
    }

    deinit {
        try? decoder.finish()
        scratch?.deallocate()
    }

    func seek(to y: Int) throws {
        precondition(y >= position, "row sources only move forward")
        var left = y - position
        while left > 0 {
            let n = try decoder.skip(rows: left)
            guard n > 0 else { throw ImagingError(.truncated, "JPEG ended while skipping to row \(y)") }
            left -= n
        }
        position = y
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, stride: Int, rows: Int) throws {
        var done = 0
        while done < rows {
            if let cmyk, let scratch {
                let n = try decoder.read(into: scratch, stride: width * 4, maxRows: min(rows - done, JPEGRowSource.scratchRows))
                guard n > 0 else { throw ImagingError(.truncated, "JPEG ended at row \(position + done) of \(height)") }
                for r in 0..<n { cmyk.convert(scratch + r * width * 4, buffer + (done + r) * stride, count: width) }
                done += n
                continue
            }
            let n = try decoder.read(into: buffer + done * stride, stride: stride, maxRows: rows - done)
            guard n > 0 else { throw ImagingError(.truncated, "JPEG ended at row \(position + done) of \(height)") }
            done += n
        }
        position += rows
    }

    /// The header with a smaller frame height and the entropy data after the restart
    /// marker that starts MCU row R, the last row at or above `startRow` where decoding
    /// can begin: R·(MCUs per row) must be a whole number j of restart intervals, and j a
    /// multiple of 8 so that the next marker the decoder meets is the RST0 it expects.
    static func restartStart(bytes: UnsafeRawBufferPointer, header h: JPEGHeader, entropyOffset: Int?,
                             scaleEighths: Int, startRow: Int)
        -> (header: [UInt8], body: UnsafeRawBufferPointer, mcuRows: Int, height: Int)? {
        guard !h.progressive, !h.arithmetic, h.restartInterval > 0, let entropy = entropyOffset,
              h.componentsInFirstScan == h.components, let heightField = frameHeightOffset(bytes),
              heightField + 1 < entropy, entropy <= bytes.count else { return nil }
        let mcuWidth = 8 * (h.components == 1 ? 1 : h.maxSampling.h)
        let mcuHeight = 8 * (h.components == 1 ? 1 : h.maxSampling.v)
        let perRow = (h.width + mcuWidth - 1) / mcuWidth
        let outMCUHeight = mcuHeight * scaleEighths / 8
        guard outMCUHeight > 0 else { return nil }
        // At full size, smooth chroma upsampling of 4:2:0 and 4:4:0 reads the chroma row above:
        // start at least one row higher than needed, so that the first kept row has it.
        let needsRowAbove = scaleEighths == 8 && h.components > 1 && h.maxSampling.v > 1
        var r = min((needsRowAbove ? startRow - 1 : startRow) / outMCUHeight, (h.height - 1) / mcuHeight)
        while r > 0 {
            let mcus = r * perRow
            if mcus % h.restartInterval == 0 && (mcus / h.restartInterval) % 8 == 0 { break }
            r -= 1
        }
        guard r > 0, let base = bytes.baseAddress else { return nil }
        let j = r * perRow / h.restartInterval
        let offset = ts_jpeg_nth_restart(base.assumingMemoryBound(to: UInt8.self), bytes.count, entropy, j)
        guard offset > 0 else { return nil }
        var header = Array(bytes[0..<entropy])
        let newHeight = h.height - r * mcuHeight
        header[heightField] = UInt8(newHeight >> 8)
        header[heightField + 1] = UInt8(newHeight & 0xFF)
        return (header, UnsafeRawBufferPointer(rebasing: bytes[offset...]), r, newHeight)
    }

    /// The MCU rows between the starts `restartStart` can use (nil: no restart markers).
    static func restartStep(_ h: JPEGHeader) -> Int? {
        guard h.restartInterval > 0 else { return nil }
        let mcuWidth = 8 * (h.components == 1 ? 1 : h.maxSampling.h)
        let perRow = (h.width + mcuWidth - 1) / mcuWidth
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let period = 8 * h.restartInterval
        return period / gcd(perRow, period)
    }

    /// The offset of the frame height in a baseline or extended sequential Huffman SOF.
    static func frameHeightOffset(_ b: UnsafeRawBufferPointer) -> Int? {
        var pos = 2
        while pos + 4 <= b.count {
            guard b[pos] == 0xFF else { return nil }
            let marker = b[pos + 1]
            if marker == 0xFF { pos += 1; continue }
            if marker == 0xDA || marker == 0xD9 { return nil }
            // Markers without a length (TEM, RSTn), as libjpeg reads them.
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { pos += 2; continue }
            let length = Int(b[pos + 2]) << 8 | Int(b[pos + 3])
            if marker == 0xC0 || marker == 0xC1 { return pos + 5 < b.count ? pos + 5 : nil }
            if (0xC2...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC { return nil }
            pos += 2 + length
        }
        return nil
    }
}

/// A copy of a JPEG header that a decoder reads (freed with the last reference, also when
/// the decoder that was to read it could not be made).
final class HeaderCopy {
    private let storage: UnsafeMutableRawBufferPointer
    init(_ header: [UInt8]) {
        storage = .allocate(byteCount: max(1, header.count), alignment: 1)
        storage.copyBytes(from: header)
        count = header.count
    }
    private let count: Int
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[0..<count]) }
    deinit { storage.deallocate() }
}

