import Foundation
import TesseraStorage
import TesseraTasks
import TesseraModel

/// Expands files and directories (recursively) into image inputs, sorted.
public enum InputDiscovery {
    /// Extensions picked up when walking directories. Files named explicitly are taken
    /// whatever their name (the renderer sniffs content, not names).
    /// The extensions of every format Tessera reads (`ImageFormat.byExtension`).
    public static let imageExtensions = Set(ImageFormat.byExtension.keys)

    /// Files and directories (searched with the jobs' walker), `s3://` keys and prefixes
    /// (listed) and HTTP(S) URLs as inputs, in order.
    /// Directory walks never enter `outputRoot`.
    public static func expand(_ paths: [String], recursive: Bool = true, storage: StorageSettings? = nil,
                              stores: RemoteStores = RemoteStores(), outputRoot: String? = nil,
                              skipped: SkippedFiles? = nil) throws -> [InputFile] {
        var files: [InputFile] = []
        for raw in paths {
            if Location.isRemote(raw) {
                try JobPlanner.expandRemote(raw, patterns: [], recursive: recursive, storage: stores.storage(storage)) { files.append($0) }
            } else {
                files += try JobPlanner.expand(raw.count > 1 && raw.hasSuffix("/") ? String(raw.dropLast()) : raw, recursive: recursive,
                                               outputRoot: outputRoot, skipped: skipped)
            }
        }
        return files
    }
}
