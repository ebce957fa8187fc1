import TesseraModel
import TesseraShim

/// libheif and libjxl are opened at their first use, not linked (`lazy_codecs.c`,
/// docs/decisions/026-lazy-ffmpeg.md): every entry point into either asks here first, and
/// a machine without the library fails those images with `unsupported-feature`, alone.
enum LazyCodecs {
    static func requireHEIF() throws {
        if let why = ts_heif_unavailable() { throw ImagingError(.unsupportedFeature, String(cString: why)) }
    }

    static func requireJXL() throws {
        if let why = ts_jxl_unavailable() { throw ImagingError(.unsupportedFeature, String(cString: why)) }
    }

    static var hasHEIF: Bool { ts_heif_unavailable() == nil }
}
