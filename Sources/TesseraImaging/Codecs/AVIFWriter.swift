import TesseraShim
import TesseraModel

/// A 10-bit AVIF written here: the AV1 still picture from libaom (`ts_av1_encode_still`) in
/// the smallest file MIAF allows — `ftyp`; `meta` with `hdlr` (pict), `pitm`, `iloc`, `iinf`
/// (one `av01` item) and `iprp` (`ispe`, `pixi`, `av1C` with the sequence header, `colr` nclx);
/// `mdat` with the picture's OBUs, its temporal delimiter left out. For HDR outputs only: every
/// other AVIF is libheif's.
enum AVIFWriter {
    static func encode(y: [UInt16], cb: [UInt16], cr: [UInt16], width: Int, height: Int, subsampled: Bool,
                       quality: Int, speed: Int, nclx: (primaries: UInt16, transfer: UInt16, matrix: UInt16)) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let rc = y.withUnsafeBufferPointer { yp in
            cb.withUnsafeBufferPointer { cbp in
                cr.withUnsafeBufferPointer { crp in
                    ts_av1_encode_still(yp.baseAddress, cbp.baseAddress, crp.baseAddress, Int32(width), Int32(height),
                                        subsampled ? 1 : 0, Int32(quality), Int32(speed), Int32(nclx.primaries),
                                        Int32(nclx.transfer), Int32(nclx.matrix), &out, &length, &message, message.count)
                }
            }
        }
        guard rc == 0, let out else {
            let m = String(cString: message)
            throw ImagingError(m.contains("out of memory") ? .outOfMemory : .encodeFailed, "AVIF encoding failed: \(m)")
        }
        defer { ts_free(out) }
        let obus = Array(UnsafeBufferPointer(start: out, count: length))
        return try container(obus, width: width, height: height, subsampled: subsampled, nclx: nclx)
    }

    /// The OBUs of a temporal unit: (type, the OBU's bytes).
    static func units(_ data: [UInt8]) throws -> [(type: Int, bytes: ArraySlice<UInt8>)] {
        var out: [(Int, ArraySlice<UInt8>)] = []
        var at = 0
        while at < data.count {
            let header = data[at]
            let type = Int(header >> 3 & 0x0F), hasExtension = header & 0x04 != 0, hasSize = header & 0x02 != 0
            var p = at + 1 + (hasExtension ? 1 : 0)
            guard hasSize else { out.append((type, data[at...])); break }
            var size = 0
            for k in 0..<8 {
                guard p < data.count else { throw ImagingError(.encodeFailed, "AV1: an OBU size runs past the data") }
                let b = data[p]
                p += 1
                size |= Int(b & 0x7F) << (7 * k)
                if b & 0x80 == 0 { break }
            }
            guard p + size <= data.count else { throw ImagingError(.encodeFailed, "AV1: an OBU runs past the data") }
            out.append((type, data[at..<(p + size)]))
            at = p + size
        }
        return out
    }

    static func container(_ obus: [UInt8], width: Int, height: Int, subsampled: Bool,
                          nclx: (primaries: UInt16, transfer: UInt16, matrix: UInt16)) throws -> [UInt8] {
        let all = try units(obus)
        guard let sequence = all.first(where: { $0.type == 1 }) else { throw ImagingError(.encodeFailed, "AV1: no sequence header") }
        let picture = all.filter { $0.type != 2 }.flatMap { Array($0.bytes) }  // no temporal delimiter
        // av1C from the sequence header's first bits: seq_profile (3), still_picture (1),
        // reduced_still_picture_header (1), then (reduced) seq_level_idx[0] (5).
        let seqHeader = Array(sequence.bytes)
        var payload = 1
        if seqHeader[0] & 0x04 != 0 { payload += 1 }
        while payload < seqHeader.count && seqHeader[payload] & 0x80 != 0 { payload += 1 }
        payload += 1
        guard payload + 1 < seqHeader.count else { throw ImagingError(.encodeFailed, "AV1: a short sequence header") }
        let bits = UInt16(seqHeader[payload]) << 8 | UInt16(seqHeader[payload + 1])
        let profile = UInt8(bits >> 13)
        let reduced = bits >> 11 & 1 == 1
        let level: UInt8 = reduced ? UInt8(bits >> 6 & 0x1F) : (width * height <= 8_912_896 ? 13 : 31)
        let av1C: [UInt8] = [0x81, profile << 5 | level,
                             0 << 7 | 1 << 6 | 0 << 5 | 0 << 4 | (subsampled ? 1 : 0) << 3 | (subsampled ? 1 : 0) << 2 | 0,
                             0] + seqHeader

        func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func u32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { u32(payload.count + 8) + Array(type.utf8) + payload }
        func full(_ type: String, _ payload: [UInt8]) -> [UInt8] { box(type, [0, 0, 0, 0] + payload) }

        let ftyp = box("ftyp", Array("avif".utf8) + u32(0) + Array("avifmif1miaf".utf8))
        let hdlr = full("hdlr", u32(0) + Array("pict".utf8) + u32(0) + u32(0) + u32(0) + [0])
        let pitm = full("pitm", u16(1))
        let iinf = full("iinf", u16(1) + box("infe", [2, 0, 0, 0] + u16(1) + u16(0) + Array("av01".utf8) + [0]))
        let colr = box("colr", Array("nclx".utf8) + u16(Int(nclx.primaries)) + u16(Int(nclx.transfer)) + u16(Int(nclx.matrix)) + [0x80])
        let ipco = box("ipco", full("ispe", u32(width) + u32(height)) + full("pixi", [3, 10, 10, 10]) + box("av1C", av1C) + colr)
        let ipma = full("ipma", u32(1) + u16(1) + [4, 0x01, 0x02, 0x83, 0x04])  // av1C essential
        let iprp = box("iprp", ipco + ipma)
        func iloc(_ offset: Int) -> [UInt8] { full("iloc", [0x44, 0x00] + u16(1) + u16(1) + u16(0) + u16(1) + u32(offset) + u32(picture.count)) }
        func meta(_ offset: Int) -> [UInt8] { full("meta", hdlr + pitm + iloc(offset) + iinf + iprp) }
        let offset = ftyp.count + meta(0).count + 8
        return ftyp + meta(offset) + box("mdat", picture)
    }
}
