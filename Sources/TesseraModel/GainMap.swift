import Foundation

/// What happens to a source's gain map (the image that tells an HDR display how much
/// brighter each region of an SDR photo may be: Ultra HDR JPEGs, ISO 21496-1).
public enum GainMapMode: String, Codable, Sendable, CaseIterable {
    /// Resized with the image and written with it (an Ultra HDR JPEG) where the output can carry it.
    case keep
    /// Dropped: an SDR-only output.
    case drop
    /// The HDR rendition rendered (the SDR image × the map at the map's full headroom).
    case apply
}

/// What happens to an HDR source (PQ or HLG, 10 or 12 bits: HDR AVIF and HEIF).
public enum HDRMode: String, Codable, Sendable, CaseIterable {
    /// Tone-mapped to SDR (the default).
    case toneMap = "tone-map"
    /// Kept HDR: the tone-mapped SDR image plus the gain map that undoes the tone map —
    /// an Ultra HDR JPEG for JPEG outputs, the HDR rendition in PQ for AVIF outputs.
    case keep
}

/// A gain map's metadata, as ISO 21496-1 and Adobe's `hdrgm` XMP give it, in the
/// "forward" direction (the base image is SDR): per channel (R, G, B; one value repeated
/// for a single-channel map),
///
///     recovery = map^(1/gamma)                       (map in 0...1)
///     log2 gain = mix(minLog2, maxLog2, recovery) × weight
///     HDR = (SDR + offsetSDR) × 2^(log2 gain) − offsetHDR   (linear light)
///
/// where weight = clamp((log2 display headroom − capacityMin) / (capacityMax − capacityMin), 0, 1).
public struct GainMapMetadata: Sendable, Equatable, Codable {
    /// log2 of the smallest and largest content boost (`GainMapMin`/`GainMapMax`).
    public var minLog2: [Double]
    public var maxLog2: [Double]
    public var gamma: [Double]
    public var offsetSDR: [Double]
    public var offsetHDR: [Double]
    /// log2 of the display headroom at which the map starts to apply and applies fully
    /// (`HDRCapacityMin`/`HDRCapacityMax`; ISO 21496-1's base and alternate headroom).
    public var capacityMinLog2: Double
    public var capacityMaxLog2: Double
    /// The base image is the HDR rendition and the map goes down to SDR (`BaseRenditionIsHDR`).
    public var baseIsHDR: Bool = false
    /// ISO 21496-1: the map applies in the base image's colour space.
    public var useBaseColorSpace: Bool = true

    public init(minLog2: [Double], maxLog2: [Double], gamma: [Double] = [1, 1, 1],
                offsetSDR: [Double] = [1.0 / 64, 1.0 / 64, 1.0 / 64], offsetHDR: [Double] = [1.0 / 64, 1.0 / 64, 1.0 / 64],
                capacityMinLog2: Double = 0, capacityMaxLog2: Double, baseIsHDR: Bool = false, useBaseColorSpace: Bool = true) {
        func three(_ v: [Double]) -> [Double] { v.count == 1 ? [v[0], v[0], v[0]] : v }
        self.minLog2 = three(minLog2)
        self.maxLog2 = three(maxLog2)
        self.gamma = three(gamma)
        self.offsetSDR = three(offsetSDR)
        self.offsetHDR = three(offsetHDR)
        self.capacityMinLog2 = capacityMinLog2
        self.capacityMaxLog2 = capacityMaxLog2
        self.baseIsHDR = baseIsHDR
        self.useBaseColorSpace = useBaseColorSpace
    }

    /// Whether the three channels carry the same values (a single-channel map's metadata).
    public var isSingleChannel: Bool {
        [minLog2, maxLog2, gamma, offsetSDR, offsetHDR].allSatisfy { $0[0] == $0[1] && $0[0] == $0[2] }
    }

    /// The headroom of the HDR rendition, in stops (log2 of the brightest boost).
    public var headroomStops: Double { capacityMaxLog2 }

    /// Checks what a hostile or broken file could put here: three values per channel list,
    /// every value finite and within what any display could use (±16 stops), gammas in
    /// 0.001...100, min ≤ max, offsets in −1...1, capacity min a thousandth of a stop or more
    /// below max (so that what is written in millionths reads back valid). Returns the
    /// reason it is unusable, or nil.
    public func problem() -> String? {
        let lists: [(String, [Double])] = [("GainMapMin", minLog2), ("GainMapMax", maxLog2), ("Gamma", gamma),
                                           ("OffsetSDR", offsetSDR), ("OffsetHDR", offsetHDR)]
        for (name, v) in lists {
            guard v.count == 3 else { return "\(name) has \(v.count) values (1 or 3 expected)" }
            if let bad = v.first(where: { !$0.isFinite }) { return "\(name) is \(bad)" }
        }
        for (name, v) in [("HDRCapacityMin", capacityMinLog2), ("HDRCapacityMax", capacityMaxLog2)] where !v.isFinite {
            return "\(name) is \(v)"
        }
        for c in 0..<3 {
            guard abs(minLog2[c]) <= 16, abs(maxLog2[c]) <= 16 else { return "a boost of more than 16 stops (GainMapMin \(minLog2[c]), GainMapMax \(maxLog2[c]))" }
            guard minLog2[c] <= maxLog2[c] else { return "GainMapMin \(minLog2[c]) is above GainMapMax \(maxLog2[c])" }
            guard gamma[c] >= 0.001, gamma[c] <= 100 else { return "Gamma \(gamma[c]) is not in 0.001...100" }
            guard abs(offsetSDR[c]) <= 1, abs(offsetHDR[c]) <= 1 else { return "an offset outside -1...1 (\(offsetSDR[c]), \(offsetHDR[c]))" }
        }
        guard capacityMinLog2 >= 0, capacityMaxLog2 <= 16 else {
            return "HDR capacity \(capacityMinLog2)...\(capacityMaxLog2) stops is outside 0...16"
        }
        // At least a thousandth of a stop apart (what the writer's fractions keep apart).
        guard capacityMaxLog2 - capacityMinLog2 >= 0.001 - 1e-9 else {
            return "HDRCapacityMin \(capacityMinLog2) is not below HDRCapacityMax \(capacityMaxLog2)"
        }
        return nil
    }

    /// The weight at which the map applies on a display with `headroomStops` of headroom.
    public func weight(displayHeadroomStops h: Double) -> Double {
        let w = (h - capacityMinLog2) / (capacityMaxLog2 - capacityMinLog2)
        return baseIsHDR ? 1 - min(max(w, 0), 1) : min(max(w, 0), 1)
    }
}

/// What a record says of a source's gain map (`inspect` and each task record).
public struct GainMapInfo: Sendable, Codable, Equatable {
    /// Where it came from: `ultrahdr` (JPEG: MPF + XMP), `iso21496` (JPEG: ISO metadata
    /// only), `apple` (HEIC auxiliary image).
    public var kind: String
    public var width: Int
    public var height: Int
    public var bytes: Int
    /// Stops of headroom of the HDR rendition (log2 of HDRCapacityMax).
    public var headroom: Double
    /// Which metadata it had: `hdrgm` (XMP), `iso21496`, or both.
    public var metadata: [String]
    /// Why it could not be used (the image renders as SDR), if it could not.
    public var problem: String?

    public init(kind: String, width: Int, height: Int, bytes: Int, headroom: Double, metadata: [String], problem: String? = nil) {
        self.kind = kind
        self.width = width
        self.height = height
        self.bytes = bytes
        self.headroom = headroom
        self.metadata = metadata
        self.problem = problem
    }
}

/// What became of the source's gain map in one output.
public struct GainMapOutcome: Sendable, Codable, Equatable {
    /// `kept` (resized and written), `dropped`, or `applied` (the HDR rendition written).
    public var action: String
    /// The map's size and bytes in the output, when kept.
    public var width: Int?
    public var height: Int?
    public var bytes: Int?
    /// Why it was dropped.
    public var reason: String?

    public init(action: String, width: Int? = nil, height: Int? = nil, bytes: Int? = nil, reason: String? = nil) {
        self.action = action
        self.width = width
        self.height = height
        self.bytes = bytes
        self.reason = reason
    }

    public static func dropped(_ reason: String) -> GainMapOutcome { GainMapOutcome(action: "dropped", reason: reason) }
}
