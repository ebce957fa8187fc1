import Foundation
import TesseraTasks

/// Expands files and directories (recursively) into image inputs, sorted.
public enum InputDiscovery {
    /// Extensions picked up when walking directories. Files named explicitly are taken
    /// whatever their name (the renderer sniffs content, not names).
    public static let imageExtensions: Set<String> = ["jpg", "jpeg", "jpe", "jfif", "png", "webp", "heic", "heif", "hif", "avif"]

    /// Files and directories (searched with the jobs' walker) as inputs, in order.
    public static func expand(_ paths: [String], recursive: Bool = true) throws -> [InputFile] {
        try paths.flatMap { raw in
            try JobPlanner.expand(raw.count > 1 && raw.hasSuffix("/") ? String(raw.dropLast()) : raw, recursive: recursive)
        }
    }
}
