import Foundation
import TesseraModel

/// Output paths from a template with `{dir}` (the input's directory relative to its
/// root), `{stem}`, `{ext}` (of the output format), `{srcext}` (the input's own extension,
/// which tells `x.jpg` and `x.png` apart) and `{preset}`. The result always
/// stays inside the output root: absolute templates, `..` and symlinked directories
/// that lead out are refused.
public struct OutputNaming: Sendable, Codable {
    public let root: String
    public let template: String

    public static let single = "{dir}/{stem}.{ext}"
    public static let perPreset = "{dir}/{stem}-{preset}.{ext}"

    public init(root: String, template: String) {
        self.root = root
        self.template = template
    }

    /// The path (under `root`) of one output.
    public func path(for input: InputFile, preset: String, format: ImageFormat) throws -> String {
        try OutputNaming.confine(relativePath(for: input, preset: preset, format: format), under: root)
    }

    /// The output's path relative to the root (checked for `..` and absolute paths,
    /// not yet against symlinks on disk: `confine` does that where it is written).
    public func relativePath(for input: InputFile, preset: String, format: ImageFormat) throws -> String {
        try relativePath(for: input, preset: preset, ext: format.fileExtension)
    }

    /// The same, with `{ext}` given (strip keeps the input's own extension).
    public func relativePath(for input: InputFile, preset: String, ext: String) throws -> String {
        try relativePath(for: Parts(input), preset: preset, ext: ext)
    }

    /// What a template takes from an input, worked out once for all of its outputs.
    public struct Parts: Sendable {
        public var directory: String
        public var stem: String
        public var sourceExtension: String
        public init(_ input: InputFile) {
            directory = input.relativeDirectory
            stem = input.stem
            sourceExtension = input.fileExtension
        }
    }

    /// The path of one output of an input whose parts are known (planning names a million
    /// inputs' outputs: one pass over the template, no string searches).
    public func relativePath(for parts: Parts, preset: String, ext: String) throws -> String {
        var rel = ""
        rel.reserveCapacity(template.utf8.count + parts.directory.utf8.count + parts.stem.utf8.count + 16)
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            rel += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else { break }
            switch rest[open...close] {
            case "{dir}":
                rel += parts.directory
                // `{dir}/` with no directory is nothing, not "/".
                if parts.directory.isEmpty, rest[rest.index(after: close)...].first == "/" {
                    rest = rest[rest.index(close, offsetBy: 2)...]
                    continue
                }
            case "{stem}": rel += parts.stem
            case "{ext}": rel += ext
            case "{srcext}": rel += parts.sourceExtension.isEmpty ? "noext" : parts.sourceExtension
            case "{preset}": rel += preset
            default: rel += rest[open...close]
            }
            rest = rest[rest.index(after: close)...]
        }
        rel += rest
        return try OutputNaming.normalise(rel)
    }

    /// The tokens a template may use.
    public static let tokens: Set<String> = ["{dir}", "{stem}", "{ext}", "{srcext}", "{preset}"]

    /// Why a template cannot name files (NUL or control characters, which the kernel would
    /// cut or which no one can type), or nil.
    public static func templateProblem(_ template: String) -> String? {
        if template.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "contains a control character (NUL, newline, ...)"
        }
        // Every {token} is one Tessera fills in: a typo would be a literal part of every name.
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { return "unclosed \"{\"" }
            let token = rest[open...close]
            if !tokens.contains(String(token)) {
                return "unknown token \(token); expected {dir}, {stem}, {ext}, {srcext} or {preset}"
            }
            rest = rest[rest.index(after: close)...]
        }
        // Outputs stay under the root: decided here, before any file is read or written.
        if template.hasPrefix("/") { return "must be relative to the output root, got \"\(template)\"" }
        if template.split(separator: "/").contains("..") { return "must not contain \"..\" (outputs stay under the output root), got \"\(template)\"" }
        // `.tessera/` holds the journal and staged files: no output goes there.
        if template.split(separator: "/").first == ".tessera" { return "must not write into .tessera/ (Tessera's own files), got \"\(template)\"" }
        return nil
    }

    /// `a/./b//c` -> `a/b/c`; refuses absolute paths, `..`, control characters and empty paths.
    public static func normalise(_ relative: String) throws -> String {
        // The common case, already normal: no leading "/", no empty, "." or ".." part, no NUL.
        if isNormal(relative) { return relative }
        // A NUL would end the name at the kernel: every output would go to one file.
        guard !relative.unicodeScalars.contains(where: { $0.value == 0 }) else {
            throw JobError(.unsafeOutputPath, "output path contains a NUL character")
        }
        guard !relative.hasPrefix("/") else {
            throw JobError(.unsafeOutputPath, "output path \"\(relative)\" is absolute; it must be relative to the output root")
        }
        var parts: [Substring] = []
        for part in relative.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            guard part != ".." else { throw JobError(.unsafeOutputPath, "output path \"\(relative)\" contains \"..\"") }
            parts.append(part)
        }
        guard !parts.isEmpty else { throw JobError(.unsafeOutputPath, "output path \"\(relative)\" is empty") }
        return parts.joined(separator: "/")
    }

    private static func isNormal(_ relative: String) -> Bool {
        var previous: UInt8 = UInt8(ascii: "/")  // as if a "/" came before the first byte
        var dots = 0
        for b in relative.utf8 {
            if b == 0 { return false }
            if b == UInt8(ascii: "/") {
                if previous == UInt8(ascii: "/") || (dots > 0 && dots <= 2 && previous == UInt8(ascii: ".")) { return false }
                dots = 0
            } else if b == UInt8(ascii: ".") && (previous == UInt8(ascii: "/") || dots > 0) {
                dots += 1
            } else {
                dots = -1
            }
            previous = b
        }
        // Not empty, no trailing "/", and the last part not "." or "..".
        return !relative.isEmpty && previous != UInt8(ascii: "/") && !(dots == 1 || dots == 2)
    }

    /// Joins `relative` to `root`, refusing anything that would land outside it.
    public static func confine(_ relative: String, under root: String) throws -> String {
        let path = root + "/" + (try normalise(relative))
        // A symlink inside the root could still point out of it: check the existing prefix.
        let realRoot = Paths.realPath(root) ?? root
        var probe = Paths.directory(of: path)
        while !Paths.exists(probe) && probe.count > root.count {
            probe = Paths.directory(of: probe)
        }
        let realProbe = Paths.realPath(probe) ?? probe
        guard realProbe == realRoot || realProbe.hasPrefix(realRoot + "/") else {
            throw JobError(.unsafeOutputPath, "output path \"\(relative)\" leads outside the output root through a symlink")
        }
        return path
    }
}
