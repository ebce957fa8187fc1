import CLCMS2
import Foundation
import TesseraShim

/// Little CMS with its allocations capped (`ts_lcms_limit_allocations`), installed once
/// before the first profile: every use of lcms goes through `LittleCMS.ready`.
enum LittleCMS {
    static let ready: Bool = ts_lcms_limit_allocations() == 1
}

/// An ICC profile opened by Little CMS. Wraps `cmsOpenProfileFromMem`.
final class ICCProfile: @unchecked Sendable {
    enum ColorSpace { case rgb, gray, cmyk, other }

    let handle: cmsHPROFILE
    let bytes: [UInt8]

    init?(_ bytes: [UInt8]) {
        guard LittleCMS.ready, !bytes.isEmpty,
              let h = bytes.withUnsafeBytes({ cmsOpenProfileFromMem($0.baseAddress, UInt32($0.count)) }) else {
            return nil
        }
        handle = h
        self.bytes = bytes
    }

    private init(handle: cmsHPROFILE) {
        self.handle = handle
        self.bytes = []
    }

    deinit { cmsCloseProfile(handle) }

    /// The built-in sRGB profile (`cmsCreate_sRGBProfile`).
    static let sRGB: ICCProfile = {
        _ = LittleCMS.ready
        return ICCProfile(handle: cmsCreate_sRGBProfile())
    }()

    /// CIE L*a*b* relative to D50 (`cmsCreateLab4Profile`): the Lab of ICC, Photoshop and TIFF files without a white point.
    static let lab: ICCProfile = {
        _ = LittleCMS.ready
        return ICCProfile(handle: cmsCreateLab4Profile(nil))
    }()

    var colorSpace: ColorSpace {
        switch cmsGetColorSpace(handle) {
        case cmsSigRgbData: return .rgb
        case cmsSigGrayData: return .gray
        case cmsSigCmykData: return .cmyk
        default: return .other
        }
    }

    /// The profile's description (`cmsGetProfileInfoASCII`).
    var name: String {
        var buffer = [CChar](repeating: 0, count: 256)
        let n = cmsGetProfileInfoASCII(handle, cmsInfoDescription, "en", "US", &buffer, UInt32(buffer.count))
        return n > 0 ? String(cString: buffer) : "unnamed"
    }

    /// Whether the profile is sRGB in effect: same primaries (rXYZ/gXYZ/bXYZ) and
    /// tone curves as sRGB within a tolerance invisible in 8 bits. Such images are
    /// passed through instead of converted.
    var isEffectivelySRGB: Bool {
        guard colorSpace == .rgb else { return false }
        let reference = ICCProfile.sRGB.handle
        let colorants = [cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag]
        for tag in colorants {
            guard let a = cmsReadTag(handle, tag)?.assumingMemoryBound(to: cmsCIEXYZ.self).pointee,
                  let b = cmsReadTag(reference, tag)?.assumingMemoryBound(to: cmsCIEXYZ.self).pointee else {
                return false
            }
            if abs(a.X - b.X) > 0.004 || abs(a.Y - b.Y) > 0.004 || abs(a.Z - b.Z) > 0.004 { return false }
        }
        for tag in [cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag] {
            guard let curve = cmsReadTag(handle, tag) else { return false }
            let c = OpaquePointer(curve)
            for x in stride(from: Float(0.05), through: 0.95, by: 0.15) {
                let expected = Float(SRGB.decode(Double(x)))
                if abs(cmsEvalToneCurveFloat(c, x) - expected) > 0.004 { return false }
            }
        }
        return true
    }
}

/// A Little CMS colour transform between 8-bit pixel layouts. Wraps `cmsCreateTransform`.
final class ColorTransform: @unchecked Sendable {
    /// Pixel formats (lcms2.h's TYPE_* values, which are macros Swift cannot import).
    enum Format {
        case gray8, rgb8, rgba8, cmyk8, cmyk8Inverted
        /// CIE L*a*b* in ICC's 8-bit encoding (a* and b* offset by 128).
        case lab8

        var value: UInt32 {
            let sh = { (space: UInt32, channels: UInt32) in (space << 16) | (channels << 3) | 1 }
            switch self {
            case .gray8: return sh(3, 1)
            case .rgb8: return sh(4, 3)
            case .rgba8: return sh(4, 3) | (1 << 7)
            case .cmyk8: return sh(6, 4)
            case .cmyk8Inverted: return sh(6, 4) | (1 << 13)
            case .lab8: return sh(10, 3)
            }
        }
    }

    private let handle: cmsHTRANSFORM

    init?(from source: ICCProfile, _ input: Format, to destination: ICCProfile, _ output: Format) {
        let flags: UInt32 = input == .rgba8 ? 0x0400_0000 : 0  // cmsFLAGS_COPY_ALPHA
        guard let t = cmsCreateTransform(source.handle, input.value, destination.handle, output.value,
                                         0 /* INTENT_PERCEPTUAL */, flags) else { return nil }
        handle = t
    }

    deinit { cmsDeleteTransform(handle) }

    /// Converts `count` pixels; `source` and `destination` may be the same buffer
    /// when the layouts have the same size.
    func apply(_ source: UnsafeRawPointer, _ destination: UnsafeMutableRawPointer, count: Int) {
        cmsDoTransform(handle, source, destination, UInt32(count))
    }
}

/// ICC profiles made with Little CMS: to attach to outputs, or to make fixtures.
public enum ICCProfiles {
    /// Little CMS's sRGB profile.
    public static var sRGB: [UInt8] {
        _ = LittleCMS.ready
        return save(cmsCreate_sRGBProfile())
    }

    /// Display P3: DCI-P3 primaries, D65 white, the sRGB tone curve (what phones write).
    public static var displayP3: [UInt8] {
        rgb(name: "Display P3", red: (0.680, 0.320), green: (0.265, 0.690), blue: (0.150, 0.060))
    }

    /// Adobe RGB (1998)-like primaries with the sRGB curve (for tests of wide gamuts).
    public static var adobeRGBPrimaries: [UInt8] {
        rgb(name: "Adobe RGB primaries", red: (0.64, 0.33), green: (0.21, 0.71), blue: (0.15, 0.06))
    }

    /// A tone curve for a made-up profile.
    enum Transfer {
        case sRGB, linear, gamma(Double)
    }

    static func rgb(name: String, red: (Double, Double), green: (Double, Double), blue: (Double, Double),
                    white whitePoint: (Double, Double) = (0.3127, 0.3290), transfer: Transfer = .sRGB) -> [UInt8] {
        _ = LittleCMS.ready
        var white = cmsCIExyY(x: whitePoint.0, y: whitePoint.1, Y: 1)
        var primaries = cmsCIExyYTRIPLE(Red: cmsCIExyY(x: red.0, y: red.1, Y: 1),
                                        Green: cmsCIExyY(x: green.0, y: green.1, Y: 1),
                                        Blue: cmsCIExyY(x: blue.0, y: blue.1, Y: 1))
        let curve: OpaquePointer?
        switch transfer {
        case .sRGB:
            // sRGB's curve as an ICC parametric curve of type 4.
            var params: [Double] = [2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045]
            curve = cmsBuildParametricToneCurve(nil, 4, &params)
        case .linear: curve = cmsBuildGamma(nil, 1)
        case .gamma(let g): curve = cmsBuildGamma(nil, g)
        }
        defer { cmsFreeToneCurve(curve) }
        var curves: [OpaquePointer?] = [curve, curve, curve]
        let h = cmsCreateRGBProfile(&white, &primaries, &curves)!
        if let mlu = cmsMLUalloc(nil, 1) {
            cmsMLUsetASCII(mlu, "en", "US", name)
            cmsWriteTag(h, cmsSigProfileDescriptionTag, UnsafeRawPointer(mlu))
            cmsMLUfree(mlu)
        }
        return save(h)
    }

    private static func save(_ h: cmsHPROFILE) -> [UInt8] {
        defer { cmsCloseProfile(h) }
        var size: UInt32 = 0
        guard cmsSaveProfileToMem(h, nil, &size) != 0, size > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: Int(size))
        guard cmsSaveProfileToMem(h, &out, &size) != 0 else { return [] }
        return out
    }
}
