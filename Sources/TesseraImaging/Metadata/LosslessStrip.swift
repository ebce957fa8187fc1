import TesseraModel


public struct StripResult: Sendable {
    public let bytes: [UInt8]
    public let format: ImageFormat
    /// What was removed, e.g. ["EXIF", "XMP", "COM", "trailer (1.2 MB)"].
    public let removed: [String]
    /// The orientation the output still declares (1 when none).
    public let orientation: Int
    /// Whether pixels were rotated losslessly.
    public let transformed: Bool
    /// What became of an Ultra HDR source's gain map (nil: it had none).
    public var gainMap: GainMapOutcome? = nil
}

/// Metadata removal without re-encoding: the compressed image data is copied
/// byte for byte; only metadata segments (JPEG) or chunks (PNG) are dropped.
public enum LosslessStrip {
    public static func strip(_ input: [UInt8], options: StripOptions = StripOptions()) throws -> StripResult {
        guard !input.isEmpty else { throw ImagingError(.empty, "the file is empty (0 bytes)") }
        guard let (loader, format) = input.withUnsafeBytes({ SourceLoaders.sniff($0) }) else {
            throw ImagingError(.unsupportedFormat, input.withUnsafeBytes { FormatDetection.unsupportedMessage($0) })
        }
        if loader.stripsLosslessly { return try loader.stripLosslessly(input, options: options) }
        if let refusal = loader.stripRefusal { throw ImagingError(.unsupportedFeature, refusal) }
        // What a render keeping the format would write: the same format where Tessera
        // writes it, else a JPEG — at full size, re-encoded (not lossless).
        let name = format.rawValue.uppercased()
        let kept = format.keptByOriginal ? name : "JPEG"
        throw ImagingError(.unsupportedFeature, "its metadata (EXIF with GPS, XMP) cannot be removed without re-encoding: lossless "
                           + "stripping handles \(SourceLoaders.strippable); no output written. Render the \(name) "
                           + "file instead: tessera render FILE --format original -o DIR writes it at full size as a re-encoded "
                           + "\(kept) (quality 80; --format and -q choose others), with no metadata copied")
    }

    /// A JPEG with a gain map: the primary and the map stripped each, then put together
    /// again as an Ultra HDR JPEG (the map's metadata written anew from what was read);
    /// rotated losslessly only if the map rotates too.
    static func stripJPEG(_ input: [UInt8], _ options: StripOptions) throws -> StripResult {
        let found = input.withUnsafeBytes { UltraHDR.locate($0, limits: Limits()) }
        guard let found else { return try stripPlainJPEG(input, options) }
        var result: StripResult
        switch found {
        case .unusable(let info):
            result = try stripPlainJPEG(input, options)
            result.gainMap = .dropped("the gain map is unusable: \(info.problem ?? "unknown reason")")
            return result
        case .usable(let source):
            guard options.keepGainMap else {
                result = try stripPlainJPEG(input, options)
                result.gainMap = .dropped("the strip drops it (--drop-gain-map, keepGainMap: false)")
                return result
            }
            var mapBytes = Array(input[source.range])
            var o = options
            o.keepGainMap = false
            let primary = Array(input[..<source.range.lowerBound])
            result = try stripPlainJPEG(primary, o)
            // The map turns only with the image; if it cannot, neither does the image.
            if result.transformed {
                let orientation = try exifSummary(input)?.orientation ?? 1
                if let rotated = try? TurboJPEGTransform.apply(Orientation(exif: orientation), to: mapBytes, perfect: true) {
                    mapBytes = rotated
                } else {
                    o.orientation = .tag
                    result = try stripPlainJPEG(primary, o)
                }
            }
            // The map keeps nothing but its pixels (its orientation is the image's).
            let map = try stripPlainJPEG(mapBytes, StripOptions(keepICC: false, keepCopyright: false, orientation: .tag,
                                                                keepGainMap: false))
            let file = UltraHDR.assemble(primary: result.bytes, map: map.bytes, metadata: source.metadata)
            // MPF and the ISO block are written again: not "removed" (unless other APP2 segments were).
            let otherAPP2 = input.withUnsafeBytes { raw in
                UltraHDR.headerSegments(raw).contains { s in
                    JPEGSegments.kind(of: s, in: raw) == .otherApp(2) && !UltraHDR.starts(raw, s.payload, UltraHDR.isoSignature)
                }
            }
            var out = StripResult(bytes: file, format: .jpeg,
                                  removed: result.removed.filter { $0 != "MPF" && (otherAPP2 || $0 != "APP2") },
                                  orientation: result.orientation, transformed: result.transformed)
            out.gainMap = GainMapOutcome(action: "kept", width: source.info.width, height: source.info.height,
                                         bytes: file.count - result.bytes.count)
            return out
        }
    }

    private static func stripPlainJPEG(_ input: [UInt8], _ options: StripOptions) throws -> StripResult {
        var bytes = input
        var summary = try exifSummary(bytes)
        var orientation = summary?.orientation.map { (1...8).contains($0) ? $0 : 1 } ?? 1
        var transformed = false
        if orientation != 1 && options.orientation == .transform {
            if let rotated = try? TurboJPEGTransform.apply(Orientation(exif: orientation), to: bytes, perfect: true) {
                bytes = rotated
                transformed = true
                orientation = 1
                summary = try exifSummary(bytes) ?? summary
            }
        }
        return try bytes.withUnsafeBytes { raw in
            let parsed = try JPEGSegments(raw)
            // Only images are copied: what `inspect` cannot read is refused, not passed on
            // (fuzzing found outputs of segment soup without a frame).
            guard let sof = parsed.frame, sof.payload.count >= 6 else {
                throw ImagingError(.corrupt, "JPEG has no frame header (SOF)")
            }
            var out: [UInt8] = []
            out.reserveCapacity(raw.count)
            var removed: [String] = []
            let copyright = options.keepCopyright ? summary?.copyright : nil
            let newExif: [UInt8]? = (orientation != 1 || copyright != nil)
                ? Exif.build(orientation: orientation != 1 ? orientation : nil, copyright: copyright) : nil
            var exifWritten = false
            var kept = 0
            func writeExif() {
                guard let e = newExif, !exifWritten, e.count + 2 <= 0xFFFF else { return }
                exifWritten = true
                let len = e.count + 2
                out += [0xFF, 0xE1, UInt8(len >> 8), UInt8(len & 0xFF)] + e
            }
            for s in parsed.segments {
                let kind = JPEGSegments.kind(of: s, in: raw)
                let keep: Bool
                switch kind {
                case .other where s.marker == 0x00 || s.marker == 0x01 || (0xD0...0xD7).contains(s.marker):
                    // Outside scan data, 0xFF00 is garbage and RSTn/TEM carry nothing (libjpeg
                    // skips them); copied after a scan they would read as part of it and swallow
                    // the segments behind them.
                    keep = false; removed.append("stray markers")
                case .jfif, .adobe, .frame, .scan, .tables, .restartInterval, .other: keep = true
                case .icc: keep = options.keepICC
                case .exif: keep = false; removed.append("EXIF")
                case .xmp, .xmpExtended: keep = false; removed.append("XMP")
                case .iptc: keep = false; removed.append("IPTC")
                case .comment: keep = false; removed.append("COM")
                case .mpf: keep = false; removed.append("MPF")
                case .jfxx: keep = false; removed.append("JFXX thumbnail")
                case .otherApp(let n): keep = false; removed.append("APP\(n)")
                }
                if !keep && kind == .icc { removed.append("ICC") }
                // EXIF goes right after SOI (and JFIF, which must come first when present).
                if s.marker != 0xD8 && kind != .jfif { writeExif() }
                if keep { out += raw[s.range]; kept += 1 }
            }
            if exifWritten { kept += 1 }  // the new EXIF segment
            // The output must walk as the same segments: a kept segment's bytes must not
            // change meaning next to its new neighbours (what `inspect` cannot read is refused).
            let reparsed = try? out.withUnsafeBytes { try JPEGSegments($0).segments.count }
            guard reparsed == kept else {
                throw ImagingError(.corrupt, "JPEG's segments cannot be copied without changing how they read "
                                   + "(\(reparsed.map { "\($0)" } ?? "unreadable") segments instead of \(kept))")
            }
            if !parsed.trailingBytes.isEmpty { removed.append("trailer (\(parsed.trailingBytes.count) bytes)") }
            return StripResult(bytes: out, format: .jpeg, removed: unique(removed), orientation: orientation,
                               transformed: transformed)
        }
    }

    static func stripPNG(_ input: [UInt8], _ options: StripOptions) throws -> StripResult {
        try input.withUnsafeBytes { raw in
            let parsed = try PNGChunks(raw)
            // The chunks libpng reads before the image data (IHDR, PLTE, tRNS, iCCP... and
            // their CRCs) must be readable, as for `inspect`: damage is refused, not copied.
            _ = try PNGDecoder(bytes: raw, limits: Limits())
            var orientation = 1
            var copyright: String?
            if let exif = parsed.chunks.first(where: { $0.type == "eXIf" }), let s = Exif.read(Array(raw[exif.data])) {
                orientation = s.orientation.map { (1...8).contains($0) ? $0 : 1 } ?? 1
                copyright = options.keepCopyright ? s.copyright : nil
            }
            let keepTypes: Set<String> = ["IHDR", "PLTE", "IDAT", "IEND", "tRNS", "gAMA", "cHRM", "sRGB", "sBIT",
                                          "cICP", "mDCV", "cLLI", "pHYs", "bKGD", "acTL", "fcTL", "fdAT"]
            var out = PNGChunks.signature
            var removed: [String] = []
            var exifWritten = false
            for c in parsed.chunks {
                if c.type == "IDAT" || c.type == "acTL", !exifWritten {
                    exifWritten = true
                    if orientation != 1 || copyright != nil {
                        // eXIf holds the TIFF structure without the "Exif\0\0" prefix.
                        let payload = Array(Exif.build(orientation: orientation != 1 ? orientation : nil,
                                                       copyright: copyright).dropFirst(6))
                        out += PNGChunks.make(type: "eXIf", data: payload)
                    }
                }
                if keepTypes.contains(c.type) || (c.type == "iCCP" && options.keepICC) {
                    out += raw[c.range]
                } else {
                    removed.append(c.type)
                }
            }
            return StripResult(bytes: out, format: .png, removed: unique(removed), orientation: orientation,
                               transformed: false)
        }
    }

    private static func exifSummary(_ jpeg: [UInt8]) throws -> ExifSummary? {
        try jpeg.withUnsafeBytes { raw in
            let parsed = try JPEGSegments(raw)
            guard let s = parsed.segments.first(where: { JPEGSegments.kind(of: $0, in: raw) == .exif }) else { return nil }
            return Exif.read(Array(raw[s.payload]))
        }
    }

    private static func unique(_ a: [String]) -> [String] {
        var seen = Set<String>()
        return a.filter { seen.insert($0).inserted }
    }
}
