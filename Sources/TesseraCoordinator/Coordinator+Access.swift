import Foundation
import TesseraJobs
import TesseraTasks
import TesseraWire

/// What jobs submitted to this coordinator may reach (docs/API.md, "Security").
public struct AccessConfig: Sendable {
    /// `--allow-read` and `--allow-write`: folders and `s3://bucket/prefix` roots every
    /// submitted job must stay in (empty: none configured).
    public var roots = AccessRoots()
    /// `--allow-private-sources` and `--allow-url-hosts`: the addresses a confined job's
    /// fetches may dial.
    public var sources = SourcePolicy.standard

    public init() {}
}

/// Who submits a job, as far as what the job may reach is concerned.
enum Submitter {
    /// The coordinator's own side of the host: ZeroMQ without CURVE (loopback, ipc) and an
    /// `--api-insecure` API, whose callers are trusted.
    case local
    /// An API token or a CURVE key: its role, and the `NAME.roots` file beside its token or
    /// key file, which narrows the coordinator's roots for its jobs.
    case keyed(role: PeerRole, rootsFile: String?)
}

extension Coordinator {
    func submitter(for peer: Peer) -> Submitter {
        guard let key = peer.key, let role = peer.role else { return .local }
        let file = allow?.keyFiles[key].map { f -> String in
            let name = String(Paths.lastComponent(f))
            let stem = name.hasSuffix(".pub") ? String(name.dropLast(4)) : name
            return Paths.directory(of: f) + "/" + stem + ".roots"
        }
        return .keyed(role: role, rootsFile: file)
    }

    func submitter(for caller: APICaller) -> Submitter {
        guard let role = caller.role, let name = caller.name else { return .local }
        return .keyed(role: role, rootsFile: api?.config.tokens.map { $0 + "/" + role.directory + "/" + name + ".roots" })
    }

    /// The check planning runs on a job of `submitter` (nil: nothing to check) and the access
    /// the job keeps (told to workers; nil: not confined).
    ///
    /// - Roots configured (`--allow-read`, `--allow-write`): every submitted job stays in
    ///   them, narrowed by the submitter's own `.roots` file when it has one.
    /// - None configured: a local submitter and an admin are not confined to roots; a
    ///   client may name no local path at all (only a `.roots` file of its own opens some).
    /// - Tokens and keys: their fetches follow the source policy whatever the roots.
    func confinement(of submitter: Submitter, spec: JobSpec) throws -> (check: AccessCheck?, access: JobAccess?) {
        let configured = config.access.roots.isEmpty ? nil : config.access.roots
        var roots = configured
        var role: PeerRole?
        if case .keyed(let r, let file) = submitter {
            role = r
            if let file, FileManager.default.fileExists(atPath: file) {
                let own: AccessRoots
                do {
                    own = try AccessRoots.parse(try String(contentsOfFile: file, encoding: .utf8), file: file)
                } catch let e as JobError {
                    throw ErrorReply(code: "forbidden", message: "this submitter's roots cannot be read: \(e.reason)")
                } catch {
                    throw ErrorReply(code: "forbidden", message: "this submitter's roots cannot be read: \(file): \(error)")
                }
                roots = configured.map { $0.narrowed(by: own, resolve: AccessCheck.resolve) } ?? own
            }
        }
        let overwrite = spec.options.overwrite
        // Tessera wrote a file when this journal says so, or the journal of a `tessera run`
        // into the same root (`.tessera/journal.sqlite`) does.
        let local: String? = Location.isRemote(spec.output) ? nil : spec.output
        let runJournal = local.flatMap { Journal.recordedOutputs(in: LocalRun.journalPath(output: $0)) }
        let wrote: (String) -> Bool = { [journal] in ((try? journal.wroteOutput($0)) ?? false) || runJournal?($0) == true }
        switch (role, roots) {
        case (nil, nil):
            return (nil, nil)
        case (.admin?, nil):
            return (nil, JobAccess(roots: nil, sources: config.access.sources, overwrite: overwrite))
        case (.some, nil):
            let refusal = "this coordinator was given no folders for the jobs of API tokens and client keys, so it takes no local path from them;"
                + " its operator opens some with --allow-read DIR and --allow-write DIR (or a NAME.roots file beside this client's token or key)"
            return (AccessCheck(roots: nil, refuseLocal: refusal, overwrite: overwrite, wroteBefore: wrote),
                    JobAccess(roots: nil, sources: config.access.sources, overwrite: overwrite))
        case (_, .some(let roots)):
            return (AccessCheck(roots: roots, overwrite: overwrite, wroteBefore: wrote),
                    JobAccess(roots: roots, sources: config.access.sources, overwrite: overwrite))
        }
    }
}
