import CJPEG

/// Decodes a progressive JPEG at 1/8 scale, producing exactly what libjpeg-turbo
/// produces at that scale, without decoding what that output does not depend on.
///
/// At 1/8 scale libjpeg gives each component a reduced IDCT: 1×1 (the DC coefficient)
/// for components at full sampling, 2×2 for components subsampled 2× in both
/// directions (4:2:0 chroma), and it replicates (no "fancy" upsampling at this scale)
/// what is still smaller. So the luma AC scans — most of a progressive file and all of
/// libjpeg's whole-image coefficient buffer (72 MB for 24 MP) — do not change the
/// result. This decoder reads every DC scan, the AC scans of 2×2 components only (with
/// full coefficients for those), skips the rest without decoding them, and runs ports of
/// `jpeg_idct_1x1`, `jpeg_idct_2x2`, the replicating upsampler and the YCbCr tables of
/// jdcolor.c. Tests check the output equals libjpeg's byte for byte. Anything it does not
/// expect throws, and the caller falls back to libjpeg (whose errors are then reported).
enum ProgressiveDC {
    struct Unsupported: Error {
        let reason: String
    }

    private final class Component {
        let id: UInt8
        let h: Int
        let v: Int
        let quantTable: Int
        /// libjpeg's DCT scaled size at 1/8: 1 (DC only) or 2 (2×2 IDCT, all coefficients kept).
        var scaled = 1
        /// Dequantisation table in natural order, latched at the component's first scan.
        var quant = [Int32](repeating: 0, count: 64)
        var latched = false
        /// Coefficients per block (1 or 64) over the MCU-padded block grid.
        var coefficients = UnsafeMutablePointer<Int16>.allocate(capacity: 1)
        var perBlock = 1
        var blocks = 0
        var stride = 0

        init(id: UInt8, h: Int, v: Int, quantTable: Int) {
            self.id = id
            self.h = h
            self.v = v
            self.quantTable = quantTable
        }

        func allocate(blocksX: Int, blocksY: Int) {
            coefficients.deallocate()
            perBlock = scaled == 2 ? 64 : 1
            blocks = blocksX * blocksY
            stride = blocksX
            coefficients = .allocate(capacity: blocks * perBlock)
            coefficients.initialize(repeating: 0, count: blocks * perBlock)
        }

        deinit { coefficients.deallocate() }
    }

    /// Whether a file qualifies (8-bit progressive Huffman, gray or 3-component).
    static func applies(to h: JPEGHeader) -> Bool {
        h.progressive && !h.arithmetic && h.precision == 8 && (h.components == 1 || h.components == 3)
            && (h.colorSpace == JCS_YCbCr || h.colorSpace == JCS_RGB || h.colorSpace == JCS_GRAYSCALE)
    }

    /// libjpeg's zigzag -> natural order.
    static let natural: [Int] = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48,
                                 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15,
                                 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63]

    /// - Parameter exact: false (fast mode) keeps only DC for every component and
    ///   interpolates subsampled chroma: faster, not libjpeg's pixels.
    static func decode(_ bytes: UnsafeRawBufferPointer, header: JPEGHeader, exact: Bool = true) throws -> PixelBuffer {
        let parsed = try JPEGSegments(bytes)
        var quant = [[Int32]?](repeating: nil, count: 4)
        var dcTables = [HuffmanTable?](repeating: nil, count: 4)
        var acTables = [HuffmanTable?](repeating: nil, count: 4)
        var components: [Component] = []
        var width = 0, height = 0, hmax = 1, vmax = 1, mcusX = 0, mcusY = 0
        var restartInterval = 0
        let base = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        for s in parsed.segments {
            let p = s.payload
            switch s.marker {
            case 0xDB:  // DQT, stored in natural order as libjpeg does
                var i = p.lowerBound
                while i < p.upperBound {
                    let pq = Int(bytes[i] >> 4), tq = Int(bytes[i] & 15)
                    guard tq < 4, pq <= 1, i + 1 + 64 * (pq + 1) <= p.upperBound else { throw Unsupported(reason: "DQT") }
                    var table = [Int32](repeating: 0, count: 64)
                    for k in 0..<64 {
                        let o = i + 1 + k * (pq + 1)
                        table[natural[k]] = pq == 0 ? Int32(bytes[o]) : Int32(bytes[o]) << 8 | Int32(bytes[o + 1])
                    }
                    quant[tq] = table
                    i += 1 + 64 * (pq + 1)
                }
            case 0xC4:  // DHT
                var i = p.lowerBound
                while i < p.upperBound {
                    guard i + 17 <= p.upperBound else { throw Unsupported(reason: "DHT") }
                    let tc = Int(bytes[i] >> 4), th = Int(bytes[i] & 15)
                    let counts = (0..<16).map { Int(bytes[i + 1 + $0]) }
                    let n = counts.reduce(0, +)
                    guard th < 4, tc <= 1, i + 17 + n <= p.upperBound else { throw Unsupported(reason: "DHT") }
                    let table = try HuffmanTable(counts: counts, symbols: Array(bytes[(i + 17)..<(i + 17 + n)]))
                    if tc == 0 { dcTables[th] = table } else { acTables[th] = table }
                    i += 17 + n
                }
            case 0xC2:  // SOF2
                guard p.count >= 6 else { throw Unsupported(reason: "SOF") }
                height = Int(bytes[p.lowerBound + 1]) << 8 | Int(bytes[p.lowerBound + 2])
                width = Int(bytes[p.lowerBound + 3]) << 8 | Int(bytes[p.lowerBound + 4])
                let n = Int(bytes[p.lowerBound + 5])
                guard n == header.components, p.count >= 6 + 3 * n, width > 0, height > 0 else {
                    throw Unsupported(reason: "SOF")
                }
                // The frame libjpeg read (and the limits were checked against), and only one:
                // a second SOF2 declaring 60000x60000 made this allocate 2 GB (found by fuzzing).
                guard components.isEmpty, width == header.width, height == header.height else {
                    throw Unsupported(reason: "a frame other than the one in the header")
                }
                for c in 0..<n {
                    let o = p.lowerBound + 6 + 3 * c
                    let hv = bytes[o + 1]
                    components.append(Component(id: bytes[o], h: Int(hv >> 4), v: Int(hv & 15), quantTable: Int(bytes[o + 2])))
                }
                guard components.allSatisfy({ (1...4).contains($0.h) && (1...4).contains($0.v) && $0.quantTable < 4 }) else {
                    throw Unsupported(reason: "sampling factors")
                }
                hmax = components.map(\.h).max()!
                vmax = components.map(\.v).max()!
                mcusX = (width + 8 * hmax - 1) / (8 * hmax)
                mcusY = (height + 8 * vmax - 1) / (8 * vmax)
                guard mcusX * mcusY * hmax * vmax <= 1 << 26 else { throw Unsupported(reason: "too many blocks") }
                for c in components {
                    // jdmaster.c: double the scaled size while the component stays at or below full resolution.
                    var ssize = 1
                    while ssize < 8 && (hmax % (c.h * ssize * 2)) == 0 && (vmax % (c.v * ssize * 2)) == 0 { ssize *= 2 }
                    guard ssize <= 2 else { throw Unsupported(reason: "component scaled \(ssize)x") }
                    c.scaled = exact ? ssize : 1
                    c.allocate(blocksX: mcusX * c.h, blocksY: mcusY * c.v)
                }
            case 0xDD:  // DRI
                guard p.count >= 2 else { throw Unsupported(reason: "DRI") }
                restartInterval = Int(bytes[p.lowerBound]) << 8 | Int(bytes[p.lowerBound + 1])
            case 0xDA:  // SOS
                guard !components.isEmpty, let data = s.scanData, p.count >= 4 else { throw Unsupported(reason: "SOS before SOF") }
                let ns = Int(bytes[p.lowerBound])
                guard ns >= 1, p.count >= 4 + 2 * ns else { throw Unsupported(reason: "SOS") }
                var scan: [(c: Component, dc: Int, ac: Int)] = []
                for k in 0..<ns {
                    let cs = bytes[p.lowerBound + 1 + 2 * k], t = bytes[p.lowerBound + 2 + 2 * k]
                    guard let c = components.first(where: { $0.id == cs }) else { throw Unsupported(reason: "SOS component") }
                    // Table selectors are 0...3 (a damaged one indexed past the tables; found by fuzzing).
                    guard t >> 4 < 4, t & 15 < 4 else { throw Unsupported(reason: "SOS table selector") }
                    scan.append((c, Int(t >> 4), Int(t & 15)))
                }
                let o = p.lowerBound + 1 + 2 * ns
                let ss = Int(bytes[o]), se = Int(bytes[o + 1]), ah = Int(bytes[o + 2] >> 4), al = Int(bytes[o + 2] & 15)
                guard al < 14, ss <= se, se < 64 else { throw Unsupported(reason: "scan parameters") }
                for (c, _, _) in scan where !c.latched {  // jdinput.c latches quantisation tables at the first scan
                    guard let q = quant[c.quantTable] else { throw Unsupported(reason: "missing DQT") }
                    c.quant = q
                    c.latched = true
                }
                var reader = BitReader(base: base, position: data.lowerBound, end: data.upperBound)
                if ss == 0 {
                    guard se == 0 else { throw Unsupported(reason: "DC scan with Se \(se)") }
                    let tables = try scan.map { t -> HuffmanTable.View? in
                        if ah > 0 { return nil }
                        guard let table = dcTables[t.dc] else { throw Unsupported(reason: "missing DC table") }
                        return table.view
                    }
                    try decodeDC(&reader, scan: scan.map(\.c), tables: tables, refine: ah > 0, al: al, mcusX: mcusX,
                                 mcusY: mcusY, hmax: hmax, vmax: vmax, width: width, height: height,
                                 restartInterval: restartInterval)
                } else {
                    guard ns == 1 else { throw Unsupported(reason: "interleaved AC scan") }
                    let c = scan[0].c
                    guard c.scaled == 2 else { continue }  // this output does not depend on it: not decoded
                    guard let table = acTables[scan[0].ac] else { throw Unsupported(reason: "missing AC table") }
                    try decodeAC(&reader, c, table: table.view, ss: ss, se: se, ah: ah, al: al, hmax: hmax, vmax: vmax,
                                 width: width, height: height, restartInterval: restartInterval)
                }
                guard !reader.ranPastData else { throw Unsupported(reason: "scan ends early (damaged data)") }
            default:
                continue
            }
        }
        guard !components.isEmpty, components.allSatisfy(\.latched) else { throw Unsupported(reason: "no scans") }
        return try image(components, width: width, height: height, hmax: hmax, vmax: vmax, header: header,
                         interpolate: !exact)
    }

    // MARK: Scans (ports of jdphuff.c)

    /// Steps over RSTn when an interval ends; `reset` clears predictors and EOB runs.
    private struct Restarts {
        let interval: Int
        var left: Int
        var next = 0
        init(_ interval: Int) {
            self.interval = interval
            left = interval
        }
        @inline(__always)
        mutating func due(_ reader: inout BitReader) throws -> Bool {
            guard interval > 0 else { return false }
            defer { left -= 1 }
            guard left == 0 else { return false }
            try reader.restart(expecting: next)
            next = (next + 1) & 7
            left = interval
            return true
        }
    }

    private static func decodeDC(_ reader: inout BitReader, scan: [Component], tables: [HuffmanTable.View?],
                                 refine: Bool, al: Int, mcusX: Int, mcusY: Int, hmax: Int, vmax: Int, width: Int,
                                 height: Int, restartInterval: Int) throws {
        var restarts = Restarts(restartInterval)
        let bit = Int16(1 << al)
        if scan.count == 1 {
            // Non-interleaved: the component's own block grid, one block per "MCU".
            let c = scan[0]
            let blocksX = ((width * c.h + hmax - 1) / hmax + 7) / 8
            let blocksY = ((height * c.v + vmax - 1) / vmax + 7) / 8
            let (coefficients, stride, per) = (c.coefficients, c.stride, c.perBlock)
            var pred: Int32 = 0
            for by in 0..<blocksY {
                for bx in 0..<blocksX {
                    if try restarts.due(&reader) { pred = 0 }
                    let p = coefficients + (by * stride + bx) * per
                    if refine {
                        if reader.bit() != 0 { p.pointee |= bit }
                    } else {
                        let s = try tables[0]!.decode(&reader)
                        pred &+= Int32(reader.extend(Int(s)))
                        p.pointee = Int16(truncatingIfNeeded: pred << al)
                    }
                }
            }
            return
        }
        // Interleaved: MCU order; plain values in the loop (no captured state).
        let count = scan.count
        let ptrs = scan.map(\.coefficients), hs = scan.map(\.h), vs = scan.map(\.v)
        let strides = scan.map(\.stride), pers = scan.map(\.perBlock)
        var preds = [Int32](repeating: 0, count: count)
        for my in 0..<mcusY {
            for mx in 0..<mcusX {
                if try restarts.due(&reader) { for k in 0..<count { preds[k] = 0 } }
                for k in 0..<count {
                    let h = hs[k], v = vs[k], stride = strides[k], per = pers[k], base = ptrs[k]
                    for y in 0..<v {
                        for x in 0..<h {
                            let p = base + ((my * v + y) * stride + mx * h + x) * per
                            if refine {
                                if reader.bit() != 0 { p.pointee |= bit }
                            } else {
                                let s = try tables[k]!.decode(&reader)
                                preds[k] &+= Int32(reader.extend(Int(s)))
                                p.pointee = Int16(truncatingIfNeeded: preds[k] << al)
                            }
                        }
                    }
                }
            }
        }
    }

    /// AC first (`ah == 0`) and refinement scans of one component, as decode_mcu_AC_first/_refine.
    private static func decodeAC(_ reader: inout BitReader, _ c: Component, table: HuffmanTable.View, ss: Int, se: Int,
                                 ah: Int, al: Int, hmax: Int, vmax: Int, width: Int, height: Int,
                                 restartInterval: Int) throws {
        var restarts = Restarts(restartInterval)
        let blocksX = ((width * c.h + hmax - 1) / hmax + 7) / 8
        let blocksY = ((height * c.v + vmax - 1) / vmax + 7) / 8
        var eobrun = 0
        let p1 = Int16(1 << al), m1 = Int16(truncatingIfNeeded: -1 << al)
        try natural.withUnsafeBufferPointer { natural in
            for by in 0..<blocksY {
                for bx in 0..<blocksX {
                    if try restarts.due(&reader) { eobrun = 0 }
                    let block = c.coefficients + (by * c.stride + bx) * 64
                    if ah == 0 {
                        if eobrun > 0 {
                            eobrun -= 1
                            continue
                        }
                        var k = ss
                        while k <= se {
                            let rs = Int(try table.decode(&reader))
                            let r = rs >> 4, s = rs & 15
                            if s != 0 {
                                k += r
                                guard k <= 63 else { throw Unsupported(reason: "AC run past the block") }
                                block[natural[k]] = Int16(truncatingIfNeeded: reader.extend(s) << al)
                            } else if r == 15 {
                                k += 15
                            } else {
                                eobrun = (1 << r) + reader.bits(r) - 1
                                break
                            }
                            k += 1
                        }
                        continue
                    }
                    // Refinement: a correction bit for every already-nonzero coefficient passed.
                    var k = ss
                    if eobrun == 0 {
                        while k <= se {
                            let rs = Int(try table.decode(&reader))
                            var r = rs >> 4
                            var s: Int16 = 0
                            if rs & 15 != 0 {
                                s = reader.bit() != 0 ? p1 : m1
                            } else if r != 15 {
                                eobrun = (1 << r) + reader.bits(r)
                                break
                            }
                            repeat {
                                let p = block + natural[k]
                                if p.pointee != 0 {
                                    if reader.bit() != 0 && (p.pointee & p1) == 0 { p.pointee &+= p.pointee >= 0 ? p1 : m1 }
                                } else {
                                    r -= 1
                                    if r < 0 { break }
                                }
                                k += 1
                            } while k <= se
                            if s != 0 {
                                guard k <= 63 else { throw Unsupported(reason: "AC run past the block") }
                                block[natural[k]] = s
                            }
                            k += 1
                        }
                    }
                    if eobrun > 0 {
                        while k <= se {
                            let p = block + natural[k]
                            if p.pointee != 0, reader.bit() != 0, (p.pointee & p1) == 0 {
                                p.pointee &+= p.pointee >= 0 ? p1 : m1
                            }
                            k += 1
                        }
                        eobrun -= 1
                    }
                }
            }
        }
    }

    // MARK: Pixels (ports of jidctred.c, jdsample.c, jdcolor.c)

    /// libjpeg's post-IDCT range limit: `idct_range_limit[x & 1023]`.
    @inline(__always)
    static func rangeLimit(_ x: Int) -> UInt8 {
        let m = x & 1023
        return m < 128 ? UInt8(m + 128) : m < 512 ? 255 : m < 896 ? 0 : UInt8(m - 896)
    }

    @inline(__always)
    static func descale(_ x: Int, _ n: Int) -> Int { (x + (1 << (n - 1))) >> n }

    /// `jpeg_idct_2x2` (CONST_BITS 13, PASS1_BITS 2): pass 1 over columns 0, 1, 3, 5, 7.
    @inline(__always)
    static func idct2x2(_ b: UnsafePointer<Int16>, _ q: UnsafePointer<Int32>) -> (UInt8, UInt8, UInt8, UInt8) {
        @inline(__always) func column(_ col: Int) -> (Int, Int) {
            @inline(__always) func z(_ row: Int) -> Int { Int(b[row * 8 + col]) * Int(q[row * 8 + col]) }
            if b[8 + col] == 0 && b[24 + col] == 0 && b[40 + col] == 0 && b[56 + col] == 0 {
                let dc = z(0) << 2
                return (dc, dc)
            }
            let tmp10 = z(0) << 15
            let tmp0 = z(7) * -5906 + z(5) * 6967 + z(3) * -10426 + z(1) * 29692
            return (descale(tmp10 + tmp0, 13), descale(tmp10 - tmp0, 13))
        }
        let c0 = column(0), c1 = column(1), c3 = column(3), c5 = column(5), c7 = column(7)
        @inline(__always) func row(_ w0: Int, _ w1: Int, _ w3: Int, _ w5: Int, _ w7: Int) -> (UInt8, UInt8) {
            if w1 == 0 && w3 == 0 && w5 == 0 && w7 == 0 {
                let v = rangeLimit(descale(w0, 5))
                return (v, v)
            }
            let tmp10 = w0 << 15
            let tmp0 = w7 * -5906 + w5 * 6967 + w3 * -10426 + w1 * 29692
            return (rangeLimit(descale(tmp10 + tmp0, 20)), rangeLimit(descale(tmp10 - tmp0, 20)))
        }
        let top = row(c0.0, c1.0, c3.0, c5.0, c7.0), bottom = row(c0.1, c1.1, c3.1, c5.1, c7.1)
        return (top.0, top.1, bottom.0, bottom.1)
    }

    private static func image(_ comps: [Component], width: Int, height: Int, hmax: Int, vmax: Int,
                              header: JPEGHeader, interpolate: Bool) throws -> PixelBuffer {
        let ow = (width + 7) / 8, oh = (height + 7) / 8
        // Each component's samples after its reduced IDCT, replicated up to the output grid.
        var planes: [[UInt8]] = []
        var strides: [Int] = []
        for c in comps {
            let sw = c.stride * c.scaled, sh = (c.blocks / c.stride) * c.scaled
            var samples = [UInt8](repeating: 0, count: sw * sh)
            try samples.withUnsafeMutableBufferPointer { out in
                try c.quant.withUnsafeBufferPointer { q in
                    guard q[0] > 0 else { throw Unsupported(reason: "zero quantiser") }
                    for by in 0..<(c.blocks / c.stride) {
                        for bx in 0..<c.stride {
                            let block = c.coefficients + (by * c.stride + bx) * c.perBlock
                            if c.scaled == 1 {
                                out[by * sw + bx] = rangeLimit((Int(block[0]) * Int(q[0]) + 4) >> 3)
                            } else {
                                let (a, b, d, e) = idct2x2(block, q.baseAddress!)
                                let o = (2 * by) * sw + 2 * bx
                                out[o] = a; out[o + 1] = b; out[o + sw] = d; out[o + sw + 1] = e
                            }
                        }
                    }
                }
            }
            let fx = hmax / (c.h * c.scaled), fy = vmax / (c.v * c.scaled)
            guard fx >= 1, fy >= 1, hmax % (c.h * c.scaled) == 0, vmax % (c.v * c.scaled) == 0 else {
                throw Unsupported(reason: "upsampling ratio")
            }
            if fx == 1 && fy == 1 {
                planes.append(samples)
                strides.append(sw)
                continue
            }
            var up = [UInt8](repeating: 0, count: ow * oh)
            if interpolate {
                // Fast mode: centred linear interpolation (sharper than replication).
                let used = (sw: min(sw, (ow + fx - 1) / fx), sh: min(sh, (oh + fy - 1) / fy))
                for y in 0..<oh {
                    let syf = max(0, (Double(y) + 0.5) / Double(fy) - 0.5)
                    let y0 = min(Int(syf), used.sh - 1), y1 = min(y0 + 1, used.sh - 1)
                    let wy = syf - Double(y0)
                    for x in 0..<ow {
                        let sxf = max(0, (Double(x) + 0.5) / Double(fx) - 0.5)
                        let x0 = min(Int(sxf), used.sw - 1), x1 = min(x0 + 1, used.sw - 1)
                        let wx = sxf - Double(x0)
                        let top = Double(samples[y0 * sw + x0]) * (1 - wx) + Double(samples[y0 * sw + x1]) * wx
                        let bottom = Double(samples[y1 * sw + x0]) * (1 - wx) + Double(samples[y1 * sw + x1]) * wx
                        up[y * ow + x] = UInt8(clamping: Int((top * (1 - wy) + bottom * wy).rounded()))
                    }
                }
            } else {
                // libjpeg at this scale: replication (no fancy upsampling).
                for y in 0..<oh {
                    let sy = min(y / fy, sh - 1)
                    for x in 0..<ow { up[y * ow + x] = samples[sy * sw + min(x / fx, sw - 1)] }
                }
            }
            planes.append(up)
            strides.append(ow)
        }
        if comps.count == 1 {
            let out = PixelBuffer(width: ow, height: oh, layout: .gray)
            for y in 0..<oh {
                planes[0].withUnsafeBufferPointer { p in
                    out.row(y).update(from: p.baseAddress! + y * strides[0], count: ow)
                }
            }
            return out
        }
        let out = PixelBuffer(width: ow, height: oh, layout: .rgb)
        let ycc = header.colorSpace == JCS_YCbCr
        let (crR, cbB, crG, cbG) = (YCC.crR, YCC.cbB, YCC.crG, YCC.cbG)
        planes[0].withUnsafeBufferPointer { p0 in
            planes[1].withUnsafeBufferPointer { p1 in
                planes[2].withUnsafeBufferPointer { p2 in
                    crR.withUnsafeBufferPointer { crR in
                        cbB.withUnsafeBufferPointer { cbB in
                            crG.withUnsafeBufferPointer { crG in
                                cbG.withUnsafeBufferPointer { cbG in
                                    for y in 0..<oh {
                                        let d = out.row(y)
                                        let r0 = p0.baseAddress! + y * strides[0], r1 = p1.baseAddress! + y * strides[1],
                                            r2 = p2.baseAddress! + y * strides[2]
                                        for x in 0..<ow {
                                            let a = Int(r0[x]), b = Int(r1[x]), c = Int(r2[x])
                                            if ycc {
                                                d[3 * x] = UInt8(clamping: a + crR[c])
                                                d[3 * x + 1] = UInt8(clamping: a + ((cbG[b] + crG[c]) >> 16))
                                                d[3 * x + 2] = UInt8(clamping: a + cbB[b])
                                            } else {
                                                d[3 * x] = UInt8(a); d[3 * x + 1] = UInt8(b); d[3 * x + 2] = UInt8(c)
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return out
    }


    /// libjpeg's YCbCr -> RGB tables (jdcolor.c, 16-bit fixed point).
    enum YCC {
        // Parenthesised: in Swift `>>` binds tighter than `+`.
        static let crR: [Int] = (0..<256).map { (Int((1.40200 * 65536 + 0.5).rounded(.down)) * ($0 - 128) + 32768) >> 16 }
        static let cbB: [Int] = (0..<256).map { (Int((1.77200 * 65536 + 0.5).rounded(.down)) * ($0 - 128) + 32768) >> 16 }
        static let crG: [Int] = (0..<256).map { -Int((0.71414 * 65536 + 0.5).rounded(.down)) * ($0 - 128) }
        static let cbG: [Int] = (0..<256).map { -Int((0.34414 * 65536 + 0.5).rounded(.down)) * ($0 - 128) + 32768 }
    }
}

/// Reads entropy-coded bits MSB first, removing stuffed zero bytes; stops at a
/// marker and supplies zeros past it (noting that it had to).
struct BitReader {
    let base: UnsafePointer<UInt8>
    var position: Int
    let end: Int
    private var buffer: UInt64 = 0
    /// Real (not padding) bits in `buffer`.
    private var count = 0
    private var atMarker = false
    /// Bits past the data were consumed: the scan is damaged or truncated.
    private(set) var ranPastData = false

    init(base: UnsafePointer<UInt8>, position: Int, end: Int) {
        self.base = base
        self.position = position
        self.end = end
    }

    @inline(__always)
    private mutating func fill() {
        while count <= 56 && !atMarker {
            guard position < end else {
                atMarker = true
                break
            }
            let b = base[position]
            if b == 0xFF {
                let next = position + 1 < end ? base[position + 1] : 0xD9
                guard next == 0x00 else {
                    atMarker = true
                    break
                }
                position += 2
            } else {
                position += 1
            }
            buffer |= UInt64(b) << UInt64(56 - count)
            count += 8
        }
    }

    /// The next `n` (1...16) bits, without consuming them.
    @inline(__always)
    mutating func peek(_ n: Int) -> Int {
        if count < n { fill() }
        return Int(truncatingIfNeeded: buffer >> UInt64(64 - n))
    }

    @inline(__always)
    mutating func skip(_ n: Int) {
        if n > count {
            ranPastData = true
            count = 0
        } else {
            count -= n
        }
        buffer = n >= 64 ? 0 : buffer << UInt64(n)
    }

    @inline(__always)
    mutating func bits(_ n: Int) -> Int {
        guard n > 0 else { return 0 }
        let v = peek(n)
        skip(n)
        return v
    }

    @inline(__always)
    mutating func bit() -> Int { bits(1) }

    /// JPEG's sign extension of an `s`-bit magnitude (DC differences: s <= 11, or 15 with 16-bit tables).
    @inline(__always)
    mutating func extend(_ s: Int) -> Int {
        guard s > 0 && s <= 16 else { return 0 }
        let v = bits(s)
        return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v
    }

    /// At a restart boundary: drop the padding bits and step over RSTn.
    mutating func restart(expecting n: Int) throws {
        fill()
        guard atMarker else { throw ProgressiveDC.Unsupported(reason: "data continues past a restart interval") }
        buffer = 0
        count = 0
        atMarker = false
        while position + 1 < end && base[position] == 0xFF && base[position + 1] == 0xFF { position += 1 }
        guard position + 1 < end, base[position] == 0xFF, base[position + 1] == UInt8(0xD0 + n) else {
            throw ProgressiveDC.Unsupported(reason: "expected RST\(n)")
        }
        position += 2
    }
}

/// A canonical Huffman table with a 9-bit lookup and the slow path of libjpeg's jdhuff.
/// Storage is owned here; the hot loop uses a `View` of plain pointers (no ARC traffic).
final class HuffmanTable {
    struct View {
        let lookup: UnsafePointer<UInt16>   // (length << 8) | symbol; 0 = a longer code
        let maxCode: UnsafePointer<Int32>   // by length, 18 entries
        let valueOffset: UnsafePointer<Int32>
        let symbols: UnsafePointer<UInt8>
        let symbolCount: Int

        @inline(__always)
        func decode(_ r: inout BitReader) throws -> UInt8 {
            let look = Int(lookup[r.peek(9)])
            if look != 0 {
                r.skip(look >> 8)
                return UInt8(truncatingIfNeeded: look)
            }
            var length = 10
            var code = r.peek(10)
            while length <= 16 && code > Int(maxCode[length]) {
                length += 1
                code = r.peek(length)
            }
            guard length <= 16 else { throw ProgressiveDC.Unsupported(reason: "bad Huffman code") }
            r.skip(length)
            let index = code + Int(valueOffset[length])
            guard index >= 0 && index < symbolCount else { throw ProgressiveDC.Unsupported(reason: "bad Huffman code") }
            return symbols[index]
        }
    }

    private let lookup = UnsafeMutablePointer<UInt16>.allocate(capacity: 512)
    private let maxCode = UnsafeMutablePointer<Int32>.allocate(capacity: 18)
    private let valueOffset = UnsafeMutablePointer<Int32>.allocate(capacity: 18)
    private let symbols: UnsafeMutablePointer<UInt8>
    private let symbolCount: Int

    init(counts: [Int], symbols values: [UInt8]) throws {
        symbolCount = values.count
        symbols = .allocate(capacity: max(1, values.count))
        symbols.initialize(from: values, count: values.count)
        lookup.initialize(repeating: 0, count: 512)
        maxCode.initialize(repeating: -1, count: 18)
        valueOffset.initialize(repeating: 0, count: 18)
        var code = 0, k = 0
        for length in 1...16 {
            let n = counts[length - 1]
            valueOffset[length] = Int32(k - code)
            for _ in 0..<n {
                guard code < (1 << length), k < values.count else {
                    throw ProgressiveDC.Unsupported(reason: "bad Huffman table")
                }
                if length <= 9 {
                    let shift = 9 - length
                    for fill in 0..<(1 << shift) {
                        lookup[(code << shift) | fill] = UInt16(length << 8) | UInt16(values[k])
                    }
                }
                code += 1
                k += 1
            }
            maxCode[length] = n > 0 ? Int32(code - 1) : -1
            code <<= 1
        }
        maxCode[17] = Int32.max
    }

    deinit {
        lookup.deallocate()
        maxCode.deallocate()
        valueOffset.deallocate()
        symbols.deallocate()
    }

    var view: View {
        View(lookup: lookup, maxCode: maxCode, valueOffset: valueOffset, symbols: symbols, symbolCount: symbolCount)
    }
}
