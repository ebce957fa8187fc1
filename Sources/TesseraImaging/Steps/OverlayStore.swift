import Foundation
#if canImport(Glibc)
import Glibc
import TesseraModel
#endif

/// Watermarks of `overlay` operations, read and decoded once per process and kept by path
/// (and by the width each output needs them at). A watermark is part of the recipe, like a
/// preset's settings: the one file Imaging reads itself (a regular file, at most 32 MB).
public final class OverlayStore: @unchecked Sendable {
    public static let shared = OverlayStore()

    private let lock = NSLock()
    private var decoded: [String: PixelBuffer] = [:]
    private var scaled: [String: PixelBuffer] = [:]
    /// How many times a file was read (tests: once per process).
    public private(set) var reads = 0

    /// The watermark for an output `outputWidth` pixels wide.
    func image(_ o: Overlay, outputWidth: Int) throws -> PixelBuffer {
        lock.lock()
        defer { lock.unlock() }
        let original: PixelBuffer
        if let d = decoded[o.path] {
            original = d
        } else {
            original = try load(o.path)
            if decoded.count >= 16 { decoded.removeAll() }
            decoded[o.path] = original
        }
        guard let fraction = o.width else { return original }
        let w = max(1, Int((Double(outputWidth) * fraction).rounded()))
        let h = max(1, Int((Double(original.height) * Double(w) / Double(original.width)).rounded()))
        let key = "\(w)x\(h)\u{0}\(o.path)"
        if let s = scaled[key] { return s }
        let s = try Filters.resized(original, region: Rect(x: 0, y: 0, width: Double(original.width), height: Double(original.height)),
                                    to: Size(width: w, height: h))
        if scaled.count >= 64 { scaled.removeAll() }
        scaled[key] = s
        return s
    }

    private func load(_ path: String) throws -> PixelBuffer {
        func fail(_ reason: String) -> ImagingError { ImagingError(.invalidRecipe, "overlay \(path): \(reason)") }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw fail(String(cString: strerror(errno))) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw fail("not a regular file") }
        guard st.st_size <= 32 << 20 else { throw fail("\(st.st_size) bytes, over the 32 MB a watermark may have") }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        reads += 1
        do {
            return try Renderer.decode(Array(bytes.prefix(done)))
        } catch let e as ImagingError {
            throw fail("\(e.reason) [\(e.code)]")
        }
    }
}
