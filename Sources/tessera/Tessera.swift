import ArgumentParser
import Foundation

@main
struct Tessera: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tessera",
        abstract: "Batch image rendering: thumbnails, metadata stripping, recompression.",
        version: "0.1.0",
        subcommands: [Render.self, Run.self, Tiles.self, Strip.self, Inspect.self, Presets.self,
                      Submit.self, Status.self, Wait.self, Cancel.self, Results.self,
                      CoordinatorCommand.self, WorkerCommand.self, Keygen.self]
    )

    /// Like `ParsableCommand.main()`, but usage errors exit with 2 (the documented code)
    /// rather than argument-parser's 64.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(Exit.usage.rawValue)
            }
            exit(withError: error)
        }
    }
}

/// Exit codes: 0 all good, 1 some tasks failed, 2 usage or configuration error.
enum Exit {
    static let someFailed = ExitCode(1)
    static let usage = ExitCode(2)
}
