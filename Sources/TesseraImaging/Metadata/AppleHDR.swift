import Foundation
import TesseraModel

/// iPhone HEICs' HDR gain maps (iOS 14.1 and later): an 8-bit auxiliary image of type
/// `urn:com:apple:photo:2020:aux:hdrgainmap`, ¼ of the image's size, whose values are a
/// linear gain coded with the Rec. 709 transfer function, and a headroom computed from
/// the Apple maker note's tags 33 and 48 (Apple's "Applying Apple HDR effect to your photos"):
///
///     HDR = SDR × (1 + (headroom − 1) × gain)
///
/// Written out as ISO 21496-1 (an Ultra HDR JPEG): min boost 1, max boost = the headroom,
/// gamma 1, offsets 0, capacity 0...log2(headroom), each map value recoded so that
/// 2^(stops × v′) = 1 + (headroom − 1) × gain(v) — the same rendition, in the standard's terms.
enum AppleHDR {
    /// The headroom, in stops, from maker-note tags 33 and 48 (Apple's piecewise formula).
    static func headroomStops(maker33: Double, maker48: Double) -> Double {
        let stops: Double
        if maker33 < 1 {
            stops = maker48 <= 0.01 ? -20 * maker48 + 1.8 : -0.101 * maker48 + 1.601
        } else {
            stops = maker48 <= 0.01 ? -70 * maker48 + 3 : -0.303 * maker48 + 2.303
        }
        return max(stops, 0)
    }

    /// The ISO 21496-1 metadata standing for an Apple map of `stops` headroom.
    static func metadata(stops: Double) -> GainMapMetadata {
        GainMapMetadata(minLog2: [0], maxLog2: [stops], gamma: [1], offsetSDR: [0], offsetHDR: [0],
                        capacityMinLog2: 0, capacityMaxLog2: stops)
    }

    /// Apple map value → ISO map value for `stops` of headroom.
    static func recode(stops: Double) -> [UInt8] {
        let h = exp2(stops)
        return (0..<256).map { i in
            let v = Double(i) / 255
            let gain = v < 0.081 ? v / 4.5 : pow((v + 0.099) / 1.099, 1 / 0.45)  // Rec. 709, inverted
            let iso = log2(1 + (h - 1) * gain) / stops
            return UInt8(max(0, min(255, (iso * 255).rounded())))
        }
    }

    /// Maker-note tags 33 and 48 of an EXIF payload whose Make is Apple, if both are there.
    static func makerValues(exif: [UInt8]) -> (Double, Double)? {
        guard let note = Exif.makerNote(exif) else { return nil }
        // "Apple iOS\0", a version (2 bytes), "MM", then a big-endian IFD; offsets from the note's start.
        let signature = Array("Apple iOS\0".utf8)
        guard note.count >= 16, Array(note[0..<10]) == signature, note[12] == 0x4D, note[13] == 0x4D else { return nil }
        func u16(_ at: Int) -> Int? { at >= 0 && at + 2 <= note.count ? Int(note[at]) << 8 | Int(note[at + 1]) : nil }
        func u32(_ at: Int) -> UInt32? {
            guard let hi = u16(at), let lo = u16(at + 2) else { return nil }
            return UInt32(hi << 16 | lo)
        }
        guard let count = u16(14), count <= 256 else { return nil }
        var values: [Int: Double] = [:]
        for i in 0..<count {
            let e = 16 + i * 12
            guard let tag = u16(e), let type = u16(e + 2), let n = u32(e + 4), let field = u32(e + 8),
                  tag == 33 || tag == 48, n >= 1 else { continue }
            switch type {
            case 5, 10:  // RATIONAL, SRATIONAL: at an offset
                guard let num = u32(Int(field)), let den = u32(Int(field) + 4), den != 0 else { continue }
                values[tag] = type == 10 ? Double(Int32(bitPattern: num)) / Double(Int32(bitPattern: den)) : Double(num) / Double(den)
            case 11:  // FLOAT, in the field
                values[tag] = Double(Float(bitPattern: field))
            case 12:  // DOUBLE: at an offset
                guard let hi = u32(Int(field)), let lo = u32(Int(field) + 4) else { continue }
                values[tag] = Double(bitPattern: UInt64(hi) << 32 | UInt64(lo))
            default: continue
            }
        }
        guard let a = values[33], let b = values[48], a.isFinite, b.isFinite else { return nil }
        return (a, b)
    }

    /// A HEIF's Apple gain map, checked: nil without one, `.unusable` with the reason when
    /// it cannot be used (no headroom in the maker note, no headroom at all, wrong shape).
    static func locate(map: (id: UInt32, size: Size), exif: [UInt8]?, imageSize image: Size) -> UltraHDR.Found? {
        var info = GainMapInfo(kind: "apple", width: map.size.width, height: map.size.height, bytes: 0, headroom: 0,
                               metadata: ["apple"])
        func unusable(_ reason: String) -> UltraHDR.Found {
            info.problem = reason
            return .unusable(info)
        }
        guard let exif, let (m33, m48) = makerValues(exif: exif) else {
            return unusable("Apple's gain map without its headroom (maker-note tags 33 and 48)")
        }
        let stops = headroomStops(maker33: m33, maker48: m48)
        guard stops.isFinite, stops <= 16 else { return unusable("Apple's maker note gives a headroom of \(stops) stops (tags 33 = \(m33), 48 = \(m48))") }
        info.headroom = (stops * 1000).rounded() / 1000
        guard stops > 0.01 else { return unusable("Apple's maker note gives no headroom (tags 33 = \(m33), 48 = \(m48))") }
        if let problem = metadata(stops: stops).problem() { return unusable(problem) }
        let w = map.size.width, h = map.size.height
        guard w >= 1, h >= 1, w <= image.width, h <= image.height else {
            return unusable("the gain map (\(w)x\(h)) does not fit the image (\(image.width)x\(image.height))")
        }
        let kx = Double(image.width) / Double(w), ky = Double(image.height) / Double(h)
        guard abs(kx - ky) <= max(kx, ky) / Double(min(w, h)) + 0.01 else {
            return unusable("the gain map (\(w)x\(h)) does not have the image's aspect (\(image.width)x\(image.height)): turned against it?")
        }
        var source = GainMapSource(range: 0..<0, metadata: metadata(stops: stops), info: info)
        source.heifAuxiliary = (map.id, recode(stops: stops))
        return .usable(source)
    }
}
