import Foundation

/// A fresh directory under the system temporary directory, removed afterwards.
public final class TemporaryDirectory {
    public let path: String
    public init() {
        path = NSTemporaryDirectory() + "tessera-test-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    public func write(_ relative: String, _ bytes: [UInt8]) -> String {
        let full = path + "/" + relative
        try! FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                 withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: full, contents: Data(bytes))
        return full
    }

    /// Every regular file below, relative, sorted.
    public func files(under sub: String = "") -> [String] {
        let root = sub.isEmpty ? path : path + "/" + sub
        let e = FileManager.default.enumerator(atPath: root)
        var out: [String] = []
        while let f = e?.nextObject() as? String {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + f, isDirectory: &isDir), !isDir.boolValue { out.append(f) }
        }
        return out.sorted()
    }
}
