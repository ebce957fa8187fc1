import ArgumentParser
import Foundation
import TesseraImaging
import TesseraModel
import TesseraService
import TesseraTasks

/// Every command names itself (`commandName`): derived from the type's name, each costs a
/// runtime type lookup at every start (1.5 ms of a process's 15, measured with perf).
@main
struct Tessera: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tessera",
        abstract: "Batch image rendering: thumbnails, metadata stripping, recompression, tile pyramids.",
        discussion: """
            \(Exit.help) \
            Shell completion: tessera --generate-completion-script bash|zsh|fish.
            """,
        version: TesseraVersion.string,
        subcommands: [Render.self, Run.self, Tiles.self, Strip.self, Transcode.self, Inspect.self, Similar.self, Presets.self,
                      Submit.self, Status.self, Wait.self, Cancel.self, Results.self, Report.self,
                      CoordinatorCommand.self, WorkerCommand.self, Keygen.self, Token.self]
    )

    /// A usage error (parsing or an option combination found in `run()`): the reason, where
    /// to read more, exit 2.
    static func usageError(_ error: Error) -> Never {
        warn("error: " + message(for: error))
        let names = configuration.subcommands.map { $0._commandName }
        let sub = CommandLine.arguments.dropFirst().first.flatMap { names.contains($0) ? $0 + " " : nil } ?? ""
        warn("see 'tessera \(sub)--help'")
        Foundation.exit(Exit.usage.rawValue)
    }

    /// Like `ParsableCommand.main()`, but usage errors exit with 2 (the documented code)
    /// rather than argument-parser's 64, in the one error style: `error: reason`.
    static func main() {
        BufferReuse.enable()
        // A first word that is no command and no option is a mistyped command: said as such
        // (argument-parser would complain about the options that follow it).
        let names = configuration.subcommands.map { $0._commandName } + ["help"]
        if let first = CommandLine.arguments.dropFirst().first, !first.hasPrefix("-"), !names.contains(first) {
            let near = names.min { JobFields.distance($0, first) < JobFields.distance($1, first) }
            let hint = near.flatMap { JobFields.distance($0, first) <= max(2, $0.count / 3) ? " — did you mean '\($0)'?" : nil } ?? ""
            warn("error: unknown command '\(LogText.field(first, limit: 60))'\(hint)")
            warn("see 'tessera --help' (commands: \(names.dropLast().joined(separator: ", ")))")
            Foundation.exit(Exit.usage.rawValue)
        }
        var command: ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            if exitCode(for: error) == .validationFailure { usageError(error) }
            exit(withError: error)
        }
        do {
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure { usageError(error) }
            // Exit codes thrown on purpose, help and version requests: as argument-parser does.
            if error is ExitCode || exitCode(for: error) != .failure { exit(withError: error) }
            // Anything else stopped the command before it could do its work: one error
            // style, and the configuration exit code.
            warn("error: \(error)")
            Foundation.exit(Exit.usage.rawValue)
        }
    }
}

/// Exit codes (README, `tessera --help`): 0 every task succeeded (or was unchanged),
/// 1 some tasks failed, 2 usage or configuration error, 3 the coordinator failed or did
/// not answer, 4 refused by the coordinator's CURVE authentication; 130/143 stopped by
/// SIGINT/SIGTERM (a rerun resumes).
enum Exit {
    /// For the help of every command that runs tasks.
    static let help = """
        Exit codes: 0 every task succeeded (or was unchanged), 1 some tasks failed, 2 usage or \
        configuration error, 3 the coordinator failed or did not answer, 4 refused by the \
        coordinator's CURVE authentication, 130/143 stopped by SIGINT/SIGTERM (a rerun resumes).
        """
    static let someFailed = ExitCode(1)
    static let usage = ExitCode(2)
    static let coordinator = ExitCode(3)
    static let refused = ExitCode(4)
}
