import ArgumentParser
import Foundation
import TesseraModel

struct Presets: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presets",
        abstract: "List the presets (built-in and from preset files).")

    @Option(help: "Preset file (JSON) adding presets (repeatable).")
    var presets: [String] = []

    @Flag(help: "Print each preset's recipe as JSON.")
    var json = false

    func run() throws {
        let catalog: PresetCatalog
        do { catalog = try loadCatalog(presets) } catch let e as ImagingError {
            warn("error: \(e)")
            throw Exit.usage
        }
        for name in catalog.names {
            let r = catalog[name]!
            if json {
                struct Line: Encodable { var name: String; var recipe: Recipe }
                printJSONLine(Line(name: name, recipe: r), type: "preset")
                continue
            }
            print(name.padding(toLength: 20, withPad: " ", startingAt: 0) + describe(r))
        }
    }

    /// Every operation in order, then the output settings.
    func describe(_ r: Recipe) -> String {
        var parts = r.operations.map(\.summary)
        if r.resize == nil { parts.insert("no resize", at: 0) }
        let o = r.output
        if o.formats.isEmpty {
            parts.append(o.format.rawValue)
            parts.append(String(format: "quality %.2f", min(max(o.quality, 0), 1)))
        } else {
            parts.append(o.formats.map { String(format: "%@ %.2f", $0.format.rawValue, $0.quality ?? o.quality) }.joined(separator: " + "))
        }
        if let m = o.maxBytes { parts.append("< \(m + 1) bytes") }
        parts.append(o.keep.isEmpty ? "no metadata" : "keeps " + o.keep.map(\.rawValue).joined(separator: "+"))
        return parts.joined(separator: ", ")
    }
}
