import ArgumentParser

@main
struct Tessera: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tessera",
        abstract: "Batch image rendering: thumbnails, metadata stripping, recompression.",
        version: "0.1.0",
        subcommands: [Render.self, Strip.self, Inspect.self, Presets.self]
    )
}

/// Exit codes: 0 all good, 1 some tasks failed, 2 usage or configuration error.
enum Exit {
    static let someFailed = ExitCode(1)
    static let usage = ExitCode(2)
}
