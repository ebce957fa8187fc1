import Foundation
import TesseraModel

/// A gain map found in a JPEG: where its JPEG lies in the file and what it says.
struct GainMapSource {
    /// The gain map's own JPEG, inside the file's bytes (empty for a HEIF's).
    var range: Range<Int>
    var metadata: GainMapMetadata
    var info: GainMapInfo
    /// A HEIF's map: its auxiliary item, and the table recoding its values to `metadata`'s.
    var heifAuxiliary: (id: UInt32, recode: [UInt8])? = nil
}

/// Ultra HDR JPEGs (Google's Ultra HDR v1, Adobe's gain map spec, ISO 21496-1): an SDR
/// primary image, then the gain map as a second JPEG that the primary's MPF segment
/// (CIPA DC-007) points to. The map's metadata is in its own XMP (`hdrgm:`) and/or an
/// APP2 segment with ISO 21496-1's binary form; the primary carries the container
/// directory (XMP) and an ISO version block. Reading checks every offset, length and
/// value before use; writing is what libultrahdr writes.
enum UltraHDR {
    static let isoSignature = Array("urn:iso:std:iso:ts:21496:-1\0".utf8)
    static let xmpSignature = Array("http://ns.adobe.com/xap/1.0/\0".utf8)
    static let hdrgmNamespace = "http://ns.adobe.com/hdr-gain-map/1.0/"

    enum Found {
        case usable(GainMapSource)
        /// A gain map that cannot be used (the image renders as SDR): its info says why.
        case unusable(GainMapInfo)
    }

    /// The gain map of a JPEG, nil when it has none. Never throws: a broken map is
    /// `.unusable` with the reason, and the primary image stays renderable.
    static func locate(_ bytes: UnsafeRawBufferPointer, limits: Limits) -> Found? {
        let header = headerSegments(bytes)
        var primaryXMP: String?
        var mpf: JPEGSegments.Segment?
        var primaryISO = false
        for s in header {
            switch JPEGSegments.kind(of: s, in: bytes) {
            case .xmp where primaryXMP == nil:
                primaryXMP = string(bytes, s.payload.dropFirst(xmpSignature.count))
            case .mpf where mpf == nil: mpf = s
            case .otherApp(2) where starts(bytes, s.payload, isoSignature): primaryISO = true
            default: break
            }
        }
        let directoryNamesMap = primaryXMP.map { $0.contains("GainMap") && $0.contains(hdrgmNamespace) } ?? false
        guard mpf != nil || directoryNamesMap || primaryISO else { return nil }

        // Candidates: MPF's secondary images; without MPF, a JPEG right after the primary's EOI.
        var candidates: [Range<Int>] = []
        var mpfProblem: String?
        if let mpf {
            switch mpfImages(bytes, mpf) {
            case .success(let ranges): candidates = ranges
            case .failure(let p): mpfProblem = p.reason
            }
        }
        if candidates.isEmpty, directoryNamesMap || primaryISO, let segments = try? JPEGSegments(bytes), !segments.trailingBytes.isEmpty {
            let t = segments.trailingBytes
            if let start = (t.lowerBound..<min(t.upperBound, t.lowerBound + 64)).first(where: {
                $0 + 1 < bytes.count && bytes[$0] == 0xFF && bytes[$0 + 1] == 0xD8 }) {
                candidates = [start..<t.upperBound]
            }
        }
        for range in candidates {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[range])
            let mapSegments = headerSegments(slice)
            var xmpMeta: GainMapMetadata?, isoMeta: GainMapMetadata?
            var metaProblem: String?
            var names: [String] = []
            for s in mapSegments {
                let kind = JPEGSegments.kind(of: s, in: slice)
                if kind == .xmp, xmpMeta == nil, let text = string(slice, s.payload.dropFirst(xmpSignature.count)) {
                    switch hdrgm(text) {
                    case .some(.success(let m)): xmpMeta = m; names.append("hdrgm")
                    case .some(.failure(let p)): metaProblem = p.reason; names.append("hdrgm")
                    case .none: break
                    }
                } else if kind == .otherApp(2), isoMeta == nil, starts(slice, s.payload, isoSignature) {
                    let body = s.payload.dropFirst(isoSignature.count)
                    switch iso21496(slice, body) {
                    case .success(let m): isoMeta = m; names.append("iso21496")
                    case .failure(let p): metaProblem = p.reason; names.append("iso21496")
                    }
                }
            }
            guard !names.isEmpty else { continue }  // another MP image (a camera's preview), not a gain map
            let kind = xmpMeta == nil && isoMeta != nil ? "iso21496" : "ultrahdr"
            // ISO 21496-1 first (as libultrahdr reads), then XMP.
            guard let metadata = isoMeta ?? xmpMeta else {
                return .unusable(GainMapInfo(kind: kind, width: 0, height: 0, bytes: range.count, headroom: 0, metadata: names,
                                             problem: metaProblem ?? "no usable gain map metadata"))
            }
            let stops = metadata.headroomStops
            var info = GainMapInfo(kind: kind, width: 0, height: 0, bytes: range.count,
                                   headroom: stops.isFinite && abs(stops) <= 1000 ? (stops * 1000).rounded() / 1000 : 0, metadata: names)
            func unusable(_ reason: String) -> Found {
                info.problem = reason
                return .unusable(info)
            }
            if let problem = metadata.problem() { return unusable(problem) }
            if metadata.baseIsHDR { return unusable("the base image is the HDR rendition (BaseRenditionIsHDR): not supported") }
            guard let frame = mapSegments.first(where: isFrame), frame.payload.count >= 6 else { return unusable("the gain map's JPEG has no frame header") }
            let p = frame.payload.lowerBound
            let h = Int(slice[p + 1]) << 8 | Int(slice[p + 2]), w = Int(slice[p + 3]) << 8 | Int(slice[p + 4])
            let components = Int(slice[p + 5])
            info.width = w
            info.height = h
            guard let main = header.first(where: isFrame), main.payload.count >= 5 else { return unusable("the primary image has no frame header") }
            let q = main.payload.lowerBound
            let mh = Int(bytes[q + 1]) << 8 | Int(bytes[q + 2]), mw = Int(bytes[q + 3]) << 8 | Int(bytes[q + 4])
            guard w >= 1, h >= 1 else { return unusable("the gain map is \(w)x\(h)") }
            guard components == 1 || components == 3 else { return unusable("the gain map has \(components) components (1 or 3)") }
            guard w <= mw, h <= mh else { return unusable("the gain map (\(w)x\(h)) is larger than the image (\(mw)x\(mh))") }
            // Same aspect, within a map pixel each way (maps are the image scaled by 1/k, rounded).
            let kx = Double(mw) / Double(w), ky = Double(mh) / Double(h)
            guard abs(kx - ky) <= max(kx, ky) / Double(min(w, h)) + 0.01 else {
                return unusable("the gain map (\(w)x\(h)) does not have the image's aspect (\(mw)x\(mh))")
            }
            do { try limits.checkDimensions(Size(width: w, height: h)) } catch let e as ImagingError { return unusable(e.reason) } catch {}
            return .usable(GainMapSource(range: range, metadata: metadata, info: info))
        }
        if let mpfProblem, directoryNamesMap || primaryISO {
            return .unusable(GainMapInfo(kind: "ultrahdr", width: 0, height: 0, bytes: 0, headroom: 0, metadata: [], problem: mpfProblem))
        }
        if directoryNamesMap || primaryISO {
            return .unusable(GainMapInfo(kind: "ultrahdr", width: 0, height: 0, bytes: 0, headroom: 0, metadata: [],
                                         problem: "the image names a gain map that is not in the file"))
        }
        return nil
    }

    /// The segments before the first scan (the metadata), without reading the scan data;
    /// empty when the header is damaged.
    static func headerSegments(_ bytes: UnsafeRawBufferPointer) -> [JPEGSegments.Segment] {
        let n = bytes.count
        guard n >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return [] }
        var out: [JPEGSegments.Segment] = []
        var pos = 2
        while pos + 4 <= n, bytes[pos] == 0xFF, out.count < 1000 {
            let marker = bytes[pos + 1]
            if marker == 0xFF { pos += 1; continue }
            if marker == 0xDA || marker == 0xD9 { break }
            let length = Int(bytes[pos + 2]) << 8 | Int(bytes[pos + 3])
            guard length >= 2, pos + 2 + length <= n else { break }
            out.append(JPEGSegments.Segment(marker: marker, range: pos..<(pos + 2 + length), payload: (pos + 4)..<(pos + 2 + length),
                                            scanData: nil))
            pos += 2 + length
        }
        return out
    }

    static func isFrame(_ s: JPEGSegments.Segment) -> Bool {
        (0xC0...0xCF).contains(s.marker) && ![0xC4, 0xC8, 0xCC].contains(s.marker)
    }

    // MARK: MPF

    /// The byte ranges of an MPF segment's images after the first, each checked to lie in
    /// the file after the MPF segment and to start with SOI.
    static func mpfImages(_ bytes: UnsafeRawBufferPointer, _ s: JPEGSegments.Segment) -> Result<[Range<Int>], Problem> {
        let base = s.payload.lowerBound + 4  // after "MPF\0": the TIFF header, offsets' origin
        let end = s.payload.upperBound
        guard base + 8 <= end else { return .failure(Problem("the MPF segment is too short")) }
        let little: Bool
        switch (bytes[base], bytes[base + 1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return .failure(Problem("the MPF segment has no byte-order mark"))
        }
        func u16(_ at: Int) -> Int? {
            guard at >= base, at + 2 <= end else { return nil }
            let a = Int(bytes[at]), b = Int(bytes[at + 1])
            return little ? a | b << 8 : a << 8 | b
        }
        func u32(_ at: Int) -> Int? {
            guard let hi = u16(little ? at + 2 : at), let lo = u16(little ? at : at + 2) else { return nil }
            return hi << 16 | lo
        }
        guard let ifd = u32(base + 4), let count = u16(base + ifd), count <= 64 else {
            return .failure(Problem("the MPF index points outside its segment"))
        }
        var images: Int?, entries: (offset: Int, length: Int)?
        for i in 0..<count {
            let e = base + ifd + 2 + i * 12
            guard let tag = u16(e), let n = u32(e + 4), let value = u32(e + 8) else {
                return .failure(Problem("the MPF index runs past its segment"))
            }
            if tag == 0xB001 { images = value }
            if tag == 0xB002 { entries = (value, n) }
        }
        guard let images, let entries, images >= 1, images <= 64, entries.length >= images * 16,
              let _ = u32(base + entries.offset + images * 16 - 4) else {
            return .failure(Problem("the MPF index has no usable image list"))
        }
        var ranges: [Range<Int>] = []
        for i in 1..<max(images, 1) {
            let e = base + entries.offset + i * 16
            guard let size = u32(e + 4), let offset = u32(e + 8) else { continue }
            let start = base + offset
            guard offset > 0, size >= 4, start > end, start.addingReportingOverflow(size).partialValue <= bytes.count else {
                return .failure(Problem("MPF image \(i + 1) (offset \(offset), \(size) bytes) lies outside the file's \(bytes.count) bytes"))
            }
            guard bytes[start] == 0xFF, bytes[start + 1] == 0xD8 else {
                return .failure(Problem("MPF image \(i + 1) at offset \(offset) is not a JPEG"))
            }
            ranges.append(start..<(start + size))
        }
        return .success(ranges)
    }

    struct Problem: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    // MARK: Metadata

    /// Adobe's `hdrgm:` XMP (attributes, elements, or `rdf:Seq` per channel); nil when the
    /// XMP has no `hdrgm` values.
    static func hdrgm(_ xmp: String) -> Result<GainMapMetadata, Problem>? {
        guard let prefix = namespacePrefix(xmp, hdrgmNamespace) else { return nil }
        func values(_ name: String) -> [String]? {
            let key = prefix + ":" + name
            // The key itself, not the tail of a longer prefix (`gm:` inside `hdrgm:`).
            var search = xmp.startIndex..<xmp.endIndex
            var found: Range<String.Index>?
            while let hit = xmp.range(of: key, range: search) {
                let before = hit.lowerBound > xmp.startIndex ? xmp[xmp.index(before: hit.lowerBound)] : " "
                if !(before.isLetter || before.isNumber || before == "_" || before == "-" || before == ".") { found = hit; break }
                search = hit.upperBound..<xmp.endIndex
            }
            guard let r = found else { return nil }
            var rest = xmp[r.upperBound...]
            if rest.first == "=" {  // attribute
                rest = rest.dropFirst()
                guard let q = rest.first, q == "\"" || q == "'" else { return nil }
                rest = rest.dropFirst()
                guard let close = rest.firstIndex(of: q) else { return nil }
                return [String(rest[..<close])]
            }
            guard rest.first == ">" else { return nil }  // element
            guard let end = rest.range(of: "</" + key) else { return nil }
            let body = rest[rest.index(after: rest.startIndex)..<end.lowerBound]
            if body.contains("<rdf:li") {
                var out: [String] = []
                var s = body[...]
                while let open = s.range(of: "<rdf:li"), let gt = s[open.upperBound...].firstIndex(of: ">"),
                      let close = s[gt...].range(of: "</rdf:li>") {
                    out.append(String(s[s.index(after: gt)..<close.lowerBound]))
                    s = s[close.upperBound...]
                    if out.count > 3 { break }
                }
                return out
            }
            return [String(body)]
        }
        func numbers(_ name: String, default d: Double?) -> Result<[Double], Problem> {
            guard let v = values(name) else {
                guard let d else { return .failure(Problem("hdrgm:\(name) is missing")) }
                return .success([d])
            }
            let parsed = v.map { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            guard (parsed.count == 1 || parsed.count == 3), parsed.allSatisfy({ $0 != nil }) else {
                return .failure(Problem("hdrgm:\(name) is not 1 or 3 numbers (\(v.joined(separator: ", ").prefix(60)))"))
            }
            return .success(parsed.map { $0! })
        }
        do {
            let min = try numbers("GainMapMin", default: 0).get()
            let max = try numbers("GainMapMax", default: nil).get()
            let gamma = try numbers("Gamma", default: 1).get()
            let offSDR = try numbers("OffsetSDR", default: 1.0 / 64).get()
            let offHDR = try numbers("OffsetHDR", default: 1.0 / 64).get()
            let capMin = try numbers("HDRCapacityMin", default: 0).get()
            let capMax = try numbers("HDRCapacityMax", default: nil).get()
            guard capMin.count == 1, capMax.count == 1 else { return .failure(Problem("hdrgm:HDRCapacity has several values")) }
            let baseHDR = values("BaseRenditionIsHDR")?.first?.lowercased() == "true"
            return .success(GainMapMetadata(minLog2: min, maxLog2: max, gamma: gamma, offsetSDR: offSDR, offsetHDR: offHDR,
                                            capacityMinLog2: capMin[0], capacityMaxLog2: capMax[0], baseIsHDR: baseHDR))
        } catch {
            return .failure(error)
        }
    }

    /// The prefix an XMP packet binds to `namespace` (`xmlns:hdrgm="…"`).
    static func namespacePrefix(_ xmp: String, _ namespace: String) -> String? {
        for quote in ["\"", "'"] {
            guard let r = xmp.range(of: "=" + quote + namespace + quote) else { continue }
            let before = xmp[..<r.lowerBound]
            guard let colon = before.lastIndex(of: ":") else { continue }
            let prefix = before[before.index(after: colon)...]
            guard before[..<colon].hasSuffix("xmlns"), !prefix.isEmpty, prefix.count < 32 else { continue }
            return String(prefix)
        }
        return nil
    }

    /// ISO 21496-1's binary metadata (the part after the APP2 signature). A block with only
    /// the version (the primary image's) is not metadata.
    static func iso21496(_ bytes: UnsafeRawBufferPointer, _ body: Range<Int>) -> Result<GainMapMetadata, Problem> {
        var pos = body.lowerBound
        func u8() throws -> Int {
            guard pos < body.upperBound else { throw Problem("the ISO 21496-1 metadata is cut off") }
            defer { pos += 1 }
            return Int(bytes[pos])
        }
        func u16() throws -> Int { try u8() << 8 | u8() }
        func u32() throws -> UInt32 { UInt32(try u16() << 16 | u16()) }
        func s32() throws -> Int32 { Int32(bitPattern: try u32()) }
        do {
            let minimumVersion = try u16()
            _ = try u16()
            guard minimumVersion == 0 else { throw Problem("ISO 21496-1 metadata version \(minimumVersion) is not supported") }
            let flags = try u8()
            let channels = flags & 0x80 != 0 ? 3 : 1
            let common = flags & 0x08 != 0
            func fraction(_ n: Double, _ d: UInt32, _ name: String) throws -> Double {
                guard d != 0 else { throw Problem("ISO 21496-1 \(name) has a zero denominator") }
                return n / Double(d)
            }
            var c: UInt32 = 1
            if common { c = try u32() }
            let baseHeadroom = try fraction(Double(try u32()), common ? c : try u32(), "base headroom")
            let altHeadroom = try fraction(Double(try u32()), common ? c : try u32(), "alternate headroom")
            var mins: [Double] = [], maxs: [Double] = [], gammas: [Double] = [], bases: [Double] = [], alts: [Double] = []
            for _ in 0..<channels {
                mins.append(try fraction(Double(try s32()), common ? c : try u32(), "gain map min"))
                maxs.append(try fraction(Double(try s32()), common ? c : try u32(), "gain map max"))
                gammas.append(try fraction(Double(try u32()), common ? c : try u32(), "gamma"))
                bases.append(try fraction(Double(try s32()), common ? c : try u32(), "base offset"))
                alts.append(try fraction(Double(try s32()), common ? c : try u32(), "alternate offset"))
            }
            let backward = flags & 0x04 != 0
            // Backward: the base is HDR (headroom = base's) and the map goes down to SDR.
            return .success(GainMapMetadata(minLog2: mins, maxLog2: maxs, gamma: gammas,
                                            offsetSDR: backward ? alts : bases, offsetHDR: backward ? bases : alts,
                                            capacityMinLog2: backward ? altHeadroom : baseHeadroom,
                                            capacityMaxLog2: backward ? baseHeadroom : altHeadroom,
                                            baseIsHDR: backward, useBaseColorSpace: flags & 0x40 != 0))
        } catch let e as Problem {
            return .failure(e)
        } catch {
            return .failure(Problem("\(error)"))
        }
    }

    // MARK: Writing

    /// ISO 21496-1's binary form of `m` (common denominator 1,000,000).
    static func isoMetadata(_ m: GainMapMetadata) -> [UInt8] {
        var out: [UInt8] = [0, 0, 0, 0]
        let single = m.isSingleChannel
        out.append((single ? 0 : 0x80) | (m.useBaseColorSpace ? 0x40 : 0) | 0x08)
        let d = 1_000_000.0
        func put(_ v: UInt32) { out += [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func signed(_ v: Double) { put(UInt32(bitPattern: Int32(max(-2_147_483_648, min(2_147_483_647, (v * d).rounded()))))) }
        func unsigned(_ v: Double) { put(UInt32(max(0, min(4_294_967_295, (v * d).rounded())))) }
        put(UInt32(d))
        // Capacities at least 1/1000 stop apart once rounded, as `problem()` asks of what is read.
        let capMin = UInt32(max(0, min(4_294_967_295, (m.capacityMinLog2 * d).rounded())))
        let roundedMax = UInt32(max(0, min(4_294_967_295, (m.capacityMaxLog2 * d).rounded())))
        let capMax = m.capacityMaxLog2 - m.capacityMinLog2 >= 0.001 - 1e-9 ? max(roundedMax, capMin &+ 1000) : roundedMax
        put(capMin)
        put(capMax)
        for c in 0..<(single ? 1 : 3) {
            signed(m.minLog2[c]); signed(m.maxLog2[c]); unsigned(m.gamma[c]); signed(m.offsetSDR[c]); signed(m.offsetHDR[c])
        }
        return out
    }

    /// The gain map's XMP (`hdrgm:` values, log2 as the spec writes them), compact: at a
    /// thumbnail's size every byte of metadata is a visible share of the file.
    static func mapXMP(_ m: GainMapMetadata) -> String {
        let lists = [("GainMapMin", m.minLog2), ("GainMapMax", m.maxLog2), ("Gamma", m.gamma),
                     ("OffsetSDR", m.offsetSDR), ("OffsetHDR", m.offsetHDR)]
        let defaults = ["GainMapMin": 0.0, "Gamma": 1, "OffsetSDR": 1.0 / 64, "OffsetHDR": 1.0 / 64]
        var attributes = "", elements = ""
        for (name, v) in lists {
            if v[0] == v[1] && v[0] == v[2] {
                if let d = defaults[name], abs(v[0] - d) < 1e-7 { continue }  // the spec's default: left out
                attributes += " hdrgm:\(name)=\"\(number(v[0]))\""
            } else {
                elements += "<hdrgm:\(name)><rdf:Seq>" + v.map { "<rdf:li>\(number($0))</rdf:li>" }.joined() + "</rdf:Seq></hdrgm:\(name)>"
            }
        }
        let description = "<rdf:Description xmlns:hdrgm=\"\(hdrgmNamespace)\" hdrgm:Version=\"1.0\"\(attributes)"
            + (m.capacityMinLog2 == 0 ? "" : " hdrgm:HDRCapacityMin=\"\(number(m.capacityMinLog2))\"")
            + " hdrgm:HDRCapacityMax=\"\(number(m.capacityMaxLog2))\""
            + (m.baseIsHDR ? " hdrgm:BaseRenditionIsHDR=\"True\"" : "")
            + (elements.isEmpty ? "/>" : ">" + elements + "</rdf:Description>")
        return xmpPacket(description)
    }

    static func xmpPacket(_ description: String) -> String {
        "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">"
            + description + "</rdf:RDF></x:xmpmeta>"
    }

    static func number(_ v: Double) -> String {
        let s = String(format: "%.6f", v)
        var t = Substring(s)
        while t.hasSuffix("0") { t = t.dropLast() }
        if t.hasSuffix(".") { t = t.dropLast() }
        return t == "-0" ? "0" : String(t)
    }

    static func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count + 2
        precondition(n <= 0xFFFF, "a JPEG segment holds at most 65,533 bytes")
        return [0xFF, marker, UInt8(n >> 8), UInt8(n & 0xFF)] + payload
    }

    /// Where new APP segments go: after SOI and the JFIF/EXIF segments that must come first.
    static func insertionPoint(_ jpeg: [UInt8]) -> Int {
        var pos = 2
        while pos + 4 <= jpeg.count, jpeg[pos] == 0xFF, jpeg[pos + 1] == 0xE0 || jpeg[pos + 1] == 0xE1 {
            let n = Int(jpeg[pos + 2]) << 8 | Int(jpeg[pos + 3])
            if jpeg[pos + 1] == 0xE1 && !jpeg[(pos + 4)...].starts(with: Array("Exif\0".utf8)) { break }
            pos += 2 + n
        }
        return min(pos, jpeg.count)
    }

    /// An Ultra HDR JPEG from an SDR JPEG and a gain map JPEG (both plain, as the encoder
    /// wrote them): the map gets its `hdrgm` XMP and ISO 21496-1 metadata, the primary the
    /// ISO version block and an MPF index of both images.
    static func assemble(primary: [UInt8], map: [UInt8], metadata m: GainMapMetadata) -> [UInt8] {
        var mapFile = map
        if map.count > 4, map[2] == 0xFF, map[3] == 0xE0 {  // the map's JFIF header says nothing a reader uses
            let n = Int(map[4]) << 8 | Int(map[5])
            mapFile.removeSubrange(2..<(4 + n))
        }
        let mapAt = insertionPoint(mapFile)
        let mapSegments = segment(0xE1, xmpSignature + Array(mapXMP(m).utf8)) + segment(0xE2, isoSignature + isoMetadata(m))
        mapFile.insert(contentsOf: mapSegments, at: mapAt)

        // No container XMP on the primary, as libultrahdr writes: readers find the map by MPF
        // and the ISO block says the file has one (a thumbnail's bytes are better spent on pixels).
        let xmp: [UInt8] = []
        let iso = segment(0xE2, isoSignature + [0, 0, 0, 0])
        let at = insertionPoint(primary)
        let mpfLength = 4 + 8 + 2 + 3 * 12 + 4 + 2 * 16  // "MPF\0", TIFF header, count, entries, next IFD, MP entries
        let mpfOrigin = at + xmp.count + iso.count + 4 + 4  // the TIFF header inside the MPF segment
        let primaryLength = primary.count + xmp.count + iso.count + 4 + mpfLength
        var mpf: [UInt8] = Array("MPF\0".utf8) + [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8, 0, 3]
        func u32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        mpf += [0xB0, 0x00, 0x00, 0x07] + u32(4) + Array("0100".utf8)
        mpf += [0xB0, 0x01, 0x00, 0x04] + u32(1) + u32(2)
        mpf += [0xB0, 0x02, 0x00, 0x07] + u32(32) + u32(8 + 2 + 36 + 4)
        mpf += u32(0)
        mpf += u32(0x030000) + u32(primaryLength) + u32(0) + [0, 0, 0, 0]
        mpf += u32(0) + u32(mapFile.count) + u32(primaryLength - mpfOrigin) + [0, 0, 0, 0]
        assert(mpf.count == mpfLength)
        var out = [UInt8]()
        out.reserveCapacity(primaryLength + mapFile.count)
        out += primary[..<at]
        out += xmp
        out += iso
        out += segment(0xE2, mpf)
        out += primary[at...]
        out += mapFile
        return out
    }

    // MARK: Helpers

    static func starts(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ sig: [UInt8]) -> Bool {
        guard range.count >= sig.count else { return false }
        for (i, b) in sig.enumerated() where bytes[range.lowerBound + i] != b { return false }
        return true
    }

    static func string(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String? {
        guard !range.isEmpty else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}
