import Foundation
@testable import TesseraImaging

/// Builds a HEIF file with an auxiliary image, which libheif 1.15's API cannot write: the
/// items of two single-image files libheif wrote (the image, with its Exif item; the
/// auxiliary image) are put in one `meta` box — their `infe`, `iloc` extents, properties
/// and associations — with an `auxC` property naming the auxiliary type and an `auxl`
/// reference from it to the primary item. Test support only: it reads what libheif writes
/// (iloc v0–2, ipma v0/1, infe v2), nothing more.
enum HEIFAssembly {
    struct Box {
        var type: String
        var payload: [UInt8]  // after the header (for full boxes: version and flags included)
        var bytes: [UInt8] { u32(payload.count + 8) + Array(type.utf8) + payload }
    }

    static func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func u32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    static func boxes(_ b: ArraySlice<UInt8>) -> [Box] {
        var out: [Box] = [], at = b.startIndex
        while at + 8 <= b.endIndex {
            let size = Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
            guard size >= 8, at + size <= b.endIndex else { break }
            out.append(Box(type: String(decoding: b[(at + 4)..<(at + 8)], as: UTF8.self), payload: Array(b[(at + 8)..<(at + size)])))
            at += size
        }
        return out
    }

    struct Reader {
        let b: [UInt8]
        var at = 0
        mutating func n(_ bytes: Int) -> Int {
            var v = 0
            for _ in 0..<bytes { v = v << 8 | Int(b[at]); at += 1 }
            return v
        }
    }

    /// One file's items: id, type box (infe), extents (absolute offset, length), property
    /// boxes associated (with essential flags), references from it.
    struct Item {
        var id: Int
        var infe: Box
        var extents: [(offset: Int, length: Int)]
        var properties: [(box: Box, essential: Bool)]
        var references: [(type: String, to: [Int])]
    }

    static func items(_ file: [UInt8]) -> (ftyp: Box, hdlr: Box, primary: Int, items: [Item]) {
        let top = boxes(file[...])
        let ftyp = top.first { $0.type == "ftyp" }!
        let meta = boxes(top.first { $0.type == "meta" }!.payload.dropFirst(4))
        let hdlr = meta.first { $0.type == "hdlr" }!
        var r = Reader(b: meta.first { $0.type == "pitm" }!.payload)
        r.at = 4
        let primary = r.n(2)
        var items: [Int: Item] = [:]
        // iinf: version, count, infe boxes (v2: version/flags, id u16, protection u16, type).
        let iinf = meta.first { $0.type == "iinf" }!.payload
        for infe in boxes(iinf.dropFirst(iinf[0] == 0 ? 6 : 8)) where infe.type == "infe" {
            let id = Int(infe.payload[4]) << 8 | Int(infe.payload[5])
            items[id] = Item(id: id, infe: infe, extents: [], properties: [], references: [])
        }
        // iloc.
        r = Reader(b: meta.first { $0.type == "iloc" }!.payload)
        let version = r.n(1)
        r.at = 4
        let sizes = r.n(1), more = r.n(1)
        let offsetSize = sizes >> 4, lengthSize = sizes & 15, baseSize = more >> 4, indexSize = version >= 1 ? more & 15 : 0
        let count = version < 2 ? r.n(2) : r.n(4)
        for _ in 0..<count {
            let id = version < 2 ? r.n(2) : r.n(4)
            if version >= 1 { _ = r.n(2) }  // construction method: 0 (file offsets)
            _ = r.n(2)  // data reference index
            let base = r.n(baseSize)
            let extents = r.n(2)
            for _ in 0..<extents {
                if indexSize > 0 { _ = r.n(indexSize) }
                let offset = r.n(offsetSize), length = r.n(lengthSize)
                items[id]?.extents.append((base + offset, length))
            }
        }
        // iprp: ipco's properties, ipma's associations.
        let iprp = boxes(meta.first { $0.type == "iprp" }!.payload[...])
        let properties = boxes(iprp.first { $0.type == "ipco" }!.payload[...])
        r = Reader(b: iprp.first { $0.type == "ipma" }!.payload)
        let ipmaVersion = r.n(1), flags = r.n(3)
        for _ in 0..<r.n(4) {
            let id = ipmaVersion < 1 ? r.n(2) : r.n(4)
            for _ in 0..<r.n(1) {
                let v = flags & 1 != 0 ? r.n(2) : r.n(1)
                let essential = v >> (flags & 1 != 0 ? 15 : 7) != 0
                let index = v & (flags & 1 != 0 ? 0x7FFF : 0x7F)
                if index > 0 { items[id]?.properties.append((properties[index - 1], essential)) }
            }
        }
        // iref (v0): references by type.
        if let iref = meta.first(where: { $0.type == "iref" }) {
            for ref in boxes(iref.payload.dropFirst(4)) {
                var rr = Reader(b: ref.payload)
                let from = rr.n(2)
                let to = (0..<rr.n(2)).map { _ in rr.n(2) }
                items[from]?.references.append((ref.type, to))
            }
        }
        return (ftyp, hdlr, primary, items.values.sorted { $0.id < $1.id })
    }

    /// `image` (a file with its primary and any metadata items) with `auxiliary`'s primary
    /// added as an auxiliary image of type `type`.
    static func addAuxiliary(to image: [UInt8], _ auxiliary: [UInt8], type: String) -> [UInt8] {
        let a = items(image), b = items(auxiliary)
        var all = a.items
        var aux = b.items.first { $0.id == b.primary }!
        let auxID = (all.map(\.id).max() ?? 0) + 1
        aux.id = auxID
        aux.infe.payload.replaceSubrange(4..<6, with: u16(auxID))
        aux.properties.append((Box(type: "auxC", payload: [0, 0, 0, 0] + Array(type.utf8) + [0]), true))
        aux.references = [("auxl", [a.primary])]
        let sources = [image] + Array(repeating: auxiliary, count: 1)
        all.append(aux)
        // The data, in one mdat, in item order.
        var data: [UInt8] = []
        var placed: [(id: Int, extents: [(Int, Int)])] = []
        for (k, item) in all.enumerated() {
            let src = k < a.items.count ? sources[0] : sources[1]
            var extents: [(Int, Int)] = []
            for e in item.extents {
                extents.append((data.count, e.length))
                data += src[e.offset..<(e.offset + e.length)]
            }
            placed.append((item.id, extents))
        }
        // Properties: every distinct one once.
        var ipco: [Box] = []
        func index(_ p: Box) -> Int {
            if let i = ipco.firstIndex(where: { $0.type == p.type && $0.payload == p.payload }) { return i + 1 }
            ipco.append(p)
            return ipco.count
        }
        var ipma = [UInt8]()
        for item in all {
            ipma += u16(item.id) + [UInt8(item.properties.count)]
            for (p, essential) in item.properties { ipma.append(UInt8(index(p)) | (essential ? 0x80 : 0)) }
        }
        ipma = [0, 0, 0, 0] + u32(all.count) + ipma
        let iprp = Box(type: "iprp", payload: Box(type: "ipco", payload: ipco.flatMap(\.bytes)).bytes + Box(type: "ipma", payload: ipma).bytes)
        let iinf = Box(type: "iinf", payload: [0, 0, 0, 0] + u16(all.count) + all.flatMap(\.infe.bytes))
        var irefs: [UInt8] = []
        for item in all { for (t, to) in item.references { irefs += Box(type: t, payload: u16(item.id) + u16(to.count) + to.flatMap(u16)).bytes } }
        let iref = Box(type: "iref", payload: [0, 0, 0, 0] + irefs)
        let pitm = Box(type: "pitm", payload: [0, 0, 0, 0] + u16(a.primary))
        // iloc v1, 4-byte offsets and lengths, offsets from the file's start: two passes (the
        // meta box's size decides where mdat's data starts).
        func iloc(_ dataStart: Int) -> Box {
            var p: [UInt8] = [1, 0, 0, 0, 0x44, 0x00] + u16(placed.count)
            for item in placed {
                p += u16(item.id) + u16(0) + u16(0) + u16(item.extents.count)
                for (o, l) in item.extents { p += u32(dataStart + o) + u32(l) }
            }
            return Box(type: "iloc", payload: p)
        }
        func meta(_ dataStart: Int) -> Box {
            Box(type: "meta", payload: [0, 0, 0, 0] + a.hdlr.bytes + pitm.bytes + iloc(dataStart).bytes + iinf.bytes + iref.bytes + iprp.bytes)
        }
        let head = a.ftyp.bytes.count + meta(0).bytes.count + 8
        return a.ftyp.bytes + meta(head).bytes + Box(type: "mdat", payload: data).bytes
    }
}
