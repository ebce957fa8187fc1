import ArgumentParser
import Foundation
import Logging
import TesseraCoordinator
import TesseraExecution
import TesseraJobs
import TesseraTasks
import TesseraWire
import TesseraWorker

/// CURVE keys for a connecting side (worker or client), and the --insecure escape.
struct ClientKeys: ParsableArguments {
    @Option(help: "This side's key pair (a .secret file from `tessera keygen`; default $TESSERA_CURVE_SECRET).")
    var curveSecret: String? = ProcessInfo.processInfo.environment["TESSERA_CURVE_SECRET"]

    @Option(help: "The coordinator's public key (.pub file; default $TESSERA_SERVER_KEY).")
    var serverKey: String? = ProcessInfo.processInfo.environment["TESSERA_SERVER_KEY"]

    @Flag(help: "Connect to a non-loopback endpoint without CURVE (unauthenticated, unencrypted).")
    var insecure = false

    /// The keys, after checking the endpoint policy; exits 2 with the reason otherwise.
    func resolve(for endpoint: String) throws -> (keys: CurveKeyPair, serverKey: String)? {
        var curve: (CurveKeyPair, String)?
        do {
            switch (curveSecret, serverKey) {
            case let (secret?, server?): curve = (try CurveKeyPair.load(secretFile: secret), try CurveKeyPair.loadPublic(server))
            case (nil, nil): curve = nil
            default: throw KeyError("--curve-secret and --server-key go together")
            }
        } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        if let refusal = EndpointPolicy.check([endpoint], hasKeys: curve != nil, insecure: insecure) {
            warn("error: \(refusal)")
            throw Exit.usage
        }
        if insecure && curve == nil && !EndpointPolicy.isLocal(endpoint) {
            warn("WARNING: --insecure: talking to \(endpoint) without authentication or encryption")
        }
        return curve
    }
}

/// The coordinator endpoint clients use.
struct CoordinatorOption: ParsableArguments {
    @Option(name: [.customLong("coordinator")], help: "Coordinator endpoint (default: $TESSERA_COORDINATOR or tcp://127.0.0.1:5555).")
    var coordinatorOption: String?

    var coordinator: String {
        coordinatorOption ?? ProcessInfo.processInfo.environment["TESSERA_COORDINATOR"] ?? "tcp://127.0.0.1:5555"
    }

    @Option(name: .customLong("timeout"), parsing: .unconditional, help: "Seconds to wait for an answer (default 30; submit: 120, planning a large job takes a while). A refused connection is reported within a second.")
    var timeoutOption: Double?

    /// `--timeout`, or 30 s.
    var timeout: Double { timeoutOption ?? 30 }

    /// The client, waiting `defaultTimeout` unless --timeout says otherwise.
    func client(defaultTimeout: Double) throws -> CoordinatorClient {
        CoordinatorClient(endpoint: coordinator, timeout: timeoutOption ?? defaultTimeout, curve: try keys.resolve(for: coordinator))
    }

    @OptionGroup var keys: ClientKeys

    var client: CoordinatorClient {
        get throws { CoordinatorClient(endpoint: coordinator, timeout: timeout, curve: try keys.resolve(for: coordinator)) }
    }
}

struct LogOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error.",
            completion: .list(["trace", "debug", "info", "notice", "warning", "error"]))
    var logLevel: String = "info"

    @Option(help: "Log lines as text or json (one JSON object per line).", completion: .list(["text", "json"]))
    var logFormat: String = "text"

    func validate() throws {
        guard LogLines.Format(rawValue: logFormat) != nil else {
            throw ValidationError("--log-format must be text or json, got \"\(logFormat)\"")
        }
        let names = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
        guard names.contains(logLevel) else {
            throw ValidationError("--log-level must be one of \(names.joined(separator: ", ")), got \"\(logLevel)\"" + suggestion(logLevel, names))
        }
    }

    func logger(_ label: String) -> Logger {
        let format = LogLines.Format(rawValue: logFormat) ?? .text
        var l = Logger(label: label) { LogLines(label: $0, format: format) }
        l.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        return l
    }
}

/// SIGINT and SIGTERM, taken on a dispatch queue (not in a signal handler): the first
/// asks for a clean stop, a second one for an immediate exit.
final class StopSignals: @unchecked Sendable {
    private let lock = NSLock()
    private var received: [Int32] = []
    private var sources: [DispatchSourceSignal] = []

    /// - Parameters:
    ///   - first: called for the first signal (stop cleanly).
    ///   - again: called for any later one (stop now); by default exits 128 + signal.
    init(first: @escaping @Sendable (Int32) -> Void = { _ in },
         again: @escaping @Sendable (Int32) -> Void = { Foundation.exit(128 + $0) }) {
        sources = [SIGINT, SIGTERM].map { sig in
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { [weak self] in
                guard let self else { return }
                self.lock.lock()
                self.received.append(sig)
                let count = self.received.count
                self.lock.unlock()
                if count == 1 { first(sig) } else { again(sig) }
            }
            s.resume()
            return s
        }
    }

    /// The first signal received, if any.
    var first: Int32? {
        lock.lock()
        defer { lock.unlock() }
        return received.first
    }

    /// The exit status for a stop by `signal`: 130 for SIGINT, 143 for SIGTERM.
    static func status(_ signal: Int32) -> Int32 { 128 + signal }

    static func name(_ signal: Int32) -> String { signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)" }
}

struct CoordinatorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coordinator",
        abstract: "Run a coordinator: plan jobs into tasks, dispatch them to workers, journal everything.")

    @Option(help: "Endpoint to bind (repeatable).")
    var bind: [String] = ["tcp://127.0.0.1:5555"]

    @Option(help: "SQLite journal (created if missing; reopened to resume unfinished jobs).")
    var journal: String

    @Option(parsing: .unconditional, help: "Seconds without a message before a worker counts as lost.")
    var workerTimeout: Double = 5

    @Option(parsing: .unconditional, help: "Fail a task as poison after it was running on this many workers that died or hung.")
    var poison: Int = 3

    @Option(help: "The coordinator's key pair (.secret from `tessera keygen`): turns CURVE on.")
    var curveSecret: String?

    @Option(help: "Public keys allowed to connect, by role: a directory with workers/, clients/ and admins/ folders of .pub files, or a file of \"ROLE KEY\" lines (re-read every 3 s).")
    var allow: String?

    @Flag(help: "Bind non-loopback TCP without CURVE (anyone who can reach the port can submit and take work).")
    var insecure = false

    @Option(parsing: .unconditional, help: "Serve Prometheus metrics and /healthz over HTTP on this port.")
    var metricsPort: Int?

    @Option(help: "Address the HTTP port binds (0.0.0.0: every interface).")
    var metricsAddress: String = "127.0.0.1"

    @Flag(help: "Serve a live dashboard at / on the --metrics-port (read-only).")
    var dashboard = false

    @Option(help: "A file holding the token the dashboard's actions (cancel, retry failed, requeue) need; without it the dashboard is read-only.")
    var dashboardTokenFile: String?

    @Option(help: "Serve the HTTP JSON API (/api/v1/) on the --metrics-port for holders of the tokens in DIR/clients/ and DIR/admins/ (`tessera token create`; default: the --allow folder).")
    var apiTokens: String?

    @Flag(help: "Serve the HTTP JSON API without tokens, every caller trusted (only on a loopback --metrics-address).")
    var apiInsecure = false

    @Option(help: "Let browser pages from ORIGIN call the API (CORS).")
    var apiCors: String?

    @Option(help: ArgumentHelp("A folder or s3://bucket/prefix submitted jobs may read (repeatable). With roots, every submitted job's inputs, manifests and overlays must lie in them; without any, API tokens and client keys may name no local path.", valueName: "root"))
    var allowRead: [String] = []

    @Option(help: ArgumentHelp("A folder or s3://bucket/prefix submitted jobs may write (repeatable): output roots and every planned output must lie in them.", valueName: "root"))
    var allowWrite: [String] = []

    @Option(help: ArgumentHelp("Hosts (HOST or HOST:PORT, repeatable or comma-separated) confined jobs may fetch from whatever address they resolve to; others may not reach loopback, link-local, private, multicast or unspecified addresses.", valueName: "hosts"))
    var allowURLHosts: [String] = []

    @Flag(help: "Let confined jobs fetch from loopback and private addresses (10/8, 172.16/12, 192.168/16, fc00::/7); link-local addresses such as 169.254.169.254 stay refused unless named in --allow-url-hosts.")
    var allowPrivateSources = false

    @OptionGroup var log: LogOptions

    func validate() throws {
        if dashboard && metricsPort == nil { throw ValidationError("--dashboard is served on the HTTP port: give --metrics-port") }
        if (apiTokens != nil || apiInsecure) && metricsPort == nil {
            throw ValidationError("the API is served on the HTTP port: give --metrics-port")
        }
        if apiInsecure && !EndpointPolicy.isLocal("tcp://\(metricsAddress.contains(":") ? "[\(metricsAddress)]" : metricsAddress):1") {
            throw ValidationError("--api-insecure serves the API to anyone: only on a loopback --metrics-address, not \(metricsAddress)")
        }
        if apiInsecure && apiTokens != nil { throw ValidationError("--api-insecure and --api-tokens: choose one") }
        for (flag, roots) in [("--allow-read", allowRead), ("--allow-write", allowWrite)] {
            for root in roots {
                let resolved = Location.resolve(root, from: FileManager.default.currentDirectoryPath)
                if let problem = AccessRoots.problem(resolved) { throw ValidationError("\(flag): \(problem)") }
            }
        }
        for host in urlHosts {
            if let problem = SourcePolicy.hostProblem(host) { throw ValidationError("--allow-url-hosts: \(problem)") }
        }
        if apiCors != nil && apiTokens == nil && !apiInsecure && allow == nil {
            throw ValidationError("--api-cors needs the API (--api-tokens DIR or --api-insecure)")
        }
    }

    var urlHosts: [String] {
        allowURLHosts.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
    }

    func run() throws {
        raiseOpenFileLimit()
        var config = CoordinatorConfig(endpoints: bind, journalPath: journal)
        config.dashboard = dashboard
        config.access.roots = AccessRoots(read: allowRead.map { Location.resolve($0, from: FileManager.default.currentDirectoryPath) },
                                          write: allowWrite.map { Location.resolve($0, from: FileManager.default.currentDirectoryPath) })
        config.access.sources = SourcePolicy(allowPrivate: allowPrivateSources, hosts: urlHosts)
        for root in config.access.roots.read + config.access.roots.write where !Location.isRemote(root) && !Paths.exists(root) {
            warn("warning: the root \(root) does not exist (yet): jobs may name it, and nothing in it can be read until it does")
        }
        if let dashboardTokenFile {
            guard dashboard else { throw ValidationError("--dashboard-token-file needs --dashboard") }
            guard let token = try? String(contentsOfFile: dashboardTokenFile, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines), token.count >= 16 else {
                throw ValidationError("--dashboard-token-file: cannot read a token of at least 16 characters from \(dashboardTokenFile)")
            }
            config.dashboardToken = token
        }
        config.workerTimeout = workerTimeout
        config.poisonThreshold = poison
        config.metricsPort = metricsPort
        config.metricsAddress = metricsAddress
        var isDirectory: ObjCBool = false
        let allowFolder = allow.flatMap { FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && isDirectory.boolValue ? $0 : nil }
        let servesAPI = apiInsecure || apiTokens != nil || (allowFolder != nil && metricsPort != nil)
        if apiCors != nil && !servesAPI {
            // An --allow file (not a folder) holds keys, not API tokens: no API to open to pages.
            throw ValidationError("--api-cors needs the API: --api-tokens DIR, --api-insecure, or an --allow folder"
                                  + (allow != nil && allowFolder == nil ? " (\(allow!) is a file of keys, not a folder of tokens)" : ""))
        }
        if servesAPI {
            var api = APIConfig(tokens: apiTokens ?? allowFolder, insecure: apiInsecure)
            api.corsOrigin = apiCors
            config.api = api
            if let dir = api.tokens {
                let (tokens, problems) = APITokens.load(dir)
                for p in problems { warn("warning: \(p)") }
                if tokens.isEmpty {
                    warn("note: no API tokens in \(dir)/clients/ or \(dir)/admins/ yet: every API call is refused until `tessera token create NAME --dir \(dir)` makes one")
                }
            }
        }
        do {
            if let curveSecret {
                config.curve = try CurveKeyPair.load(secretFile: curveSecret)
                guard let allow else { throw KeyError("--curve-secret needs --allow (the client keys allowed in)") }
                config.allowList = allow
            } else if allow != nil {
                throw KeyError("--allow needs --curve-secret")
            }
        } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        if let refusal = EndpointPolicy.check(bind, hasKeys: config.curve != nil, insecure: insecure) {
            warn("error: \(refusal)")
            throw Exit.usage
        }
        if insecure && config.curve == nil && bind.contains(where: { !EndpointPolicy.isLocal($0) }) {
            warn("WARNING: --insecure: \(bind.joined(separator: ", ")) accepts anyone, unauthenticated and unencrypted")
        }
        let coordinator: Coordinator
        do {
            coordinator = try Coordinator(config: config, logger: log.logger("tessera.coordinator"))
        } catch let busy as JournalBusy {
            warn("error: \(busy) [journal-in-use]")
            throw Exit.usage
        } catch {
            // The journal, the endpoints, the allow-list: what it could not start with.
            warn("error: cannot start (journal \(journal), bind \(bind.joined(separator: ", "))): \(error)")
            throw Exit.usage
        }
        let signals = StopSignals(first: { _ in coordinator.stop() })
        defer { _ = signals }
        do { try coordinator.run() } catch let e as CoordinatorStartError {
            warn("error: cannot listen on \(e)")
            throw Exit.usage
        }
    }
}

struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Run a worker: take tasks from a coordinator, render them, report timings and memory.",
        discussion: "On SIGTERM the worker hands back queued tasks, finishes running ones, and exits.")

    @Option(help: "Coordinator endpoint.")
    var connect: String

    @Option(parsing: .unconditional, help: "Tasks run at once.")
    var concurrency: Int = 1

    @Option(parsing: .unconditional, help: "Tasks held queued beyond --concurrency (default: --concurrency).")
    var prefetch: Int?

    @Flag(help: "Receive inputs and return outputs inside messages (no shared storage).")
    var inline = false

    @Option(help: "Worker id (default: host-pid-random).")
    var id: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Exit when this process (the parent, `tessera run`) exits.", visibility: .hidden))
    var parentPid: Int32?

    @Option(help: ArgumentHelp("Fault injection for tests: abort on inputs whose path contains this.", visibility: .hidden))
    var crashOn: String?

    @Option(help: ArgumentHelp("Fault injection for tests: abort when such a task arrives, before it starts.", visibility: .hidden))
    var crashOnReceive: String?

    @Option(parsing: .unconditional, help: "Serve /healthz, /readyz and /metrics over HTTP on this port (for probes).")
    var metricsPort: Int?

    @Option(help: "Address the HTTP port binds (0.0.0.0: every interface).")
    var metricsAddress: String = "127.0.0.1"

    @Option(parsing: .unconditional, help: "Memory this worker may use, in MB (default: its cgroup's limit, if any). Tasks planned over their share fail with out-of-memory instead of the worker being killed.")
    var memoryLimit: Int?

    @Option(parsing: .unconditional, help: "Downloads of URL inputs (s3://, https://) run ahead of the executors, at once.")
    var transfers: Int = 4

    @Option(help: "Keep originals fetched from URLs in this directory (shared by the workers of a host), keyed by URL and ETag.")
    var cache: String?

    @Option(parsing: .unconditional, help: "Bound of the --cache directory in MB (least recently used entries go first).")
    var cacheSize: Int = 2048

    @OptionGroup var keys: ClientKeys
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1...256, got \(concurrency)") }
        if let prefetch, !(0...256).contains(prefetch) { throw ValidationError("--prefetch must be 0...256, got \(prefetch)") }
        guard (0...64).contains(transfers) else { throw ValidationError("--transfers must be 0...64, got \(transfers)") }
        guard cacheSize >= 16 else { throw ValidationError("--cache-size must be at least 16 (MB), got \(cacheSize)") }
    }

    func run() throws {
        var config = WorkerConfig(endpoint: connect, concurrency: concurrency)
        config.transfers = transfers
        config.cacheDirectory = cache
        config.cacheBytes = cacheSize << 20
        config.curve = try keys.resolve(for: connect)
        config.metricsPort = metricsPort
        config.metricsAddress = metricsAddress
        if let memoryLimit {
            guard (64...16_777_216).contains(memoryLimit) else {
                throw ValidationError("--memory-limit must be 64...16777216 (MB), got \(memoryLimit)")
            }
            config.memoryLimit = memoryLimit << 20
        } else {
            config.memoryLimit = WorkerConfig.cgroupMemoryLimit()
        }
        config.prefetch = prefetch
        config.inline = inline
        config.crashOnInputContaining = crashOn
        config.crashOnReceiving = crashOnReceive
        if let id { config.id = id }
        let worker: Worker
        do { worker = try Worker(config: config, logger: log.logger("tessera.worker")) } catch {
            warn("error: \(error)")
            throw Exit.usage
        }
        // First SIGINT/SIGTERM: drain (hand back queued tasks, finish running ones); a second: exit now.
        let signals = StopSignals(first: { _ in worker.requestDrain() })
        defer { _ = signals }
        if let parentPid { ParentWatch.exit(with: parentPid) }
        do { try worker.run() } catch let refused as AuthenticationRefused {
            warn("error: \(refused)")
            throw Exit.refused
        }
    }
}

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Write a CURVE key pair: NAME.pub (share it) and NAME.secret (mode 0600, keep it).",
        discussion: """
            The coordinator runs with --curve-secret coordinator.secret --allow DIR, where a key's \
            role is the folder its .pub file is in: DIR/workers/, DIR/clients/ or DIR/admins/ (or \
            DIR is a file of "ROLE KEY" lines). Workers and clients run with \
            --curve-secret NAME.secret --server-key coordinator.pub.
            """)

    @Argument(help: "Name of the key files.")
    var name: String

    @Option(name: .shortAndLong, help: "Directory to write them in.")
    var output: String = "."

    @Flag(help: "Replace existing files.")
    var force = false

    func run() throws {
        let pub = output + "/" + name + ".pub", sec = output + "/" + name + ".secret"
        if !force && (FileManager.default.fileExists(atPath: pub) || FileManager.default.fileExists(atPath: sec)) {
            warn("error: \(pub) or \(sec) exists (use --force to replace)")
            throw Exit.usage
        }
        let pair = try CurveKeyPair.generate()
        try pair.write(name: name, directory: output)
        print("\(pub)  public key \(pair.publicKey)")
        print("\(sec)  secret (mode 0600)")
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Bearer tokens of the coordinator's HTTP API.",
        subcommands: [Create.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Make a token: writes DIR/clients/NAME.token (or admins/) holding its SHA-256 and prints the token once.",
            discussion: """
                A client token submits jobs and sees, follows and cancels its own; an admin token \
                every job. The coordinator re-reads DIR every few seconds: removing the file \
                revokes the token.
                """)

        @Argument(help: "The token's name (the owner of the jobs it submits).")
        var name: String

        @Option(help: "client or admin.")
        var role: String = "client"

        @Option(help: "The folder the coordinator reads tokens from (its --api-tokens or --allow folder).")
        var dir: String

        func run() throws {
            guard let r = PeerRole(rawValue: role), r != .worker else {
                warn("error: --role: expected client or admin, got \(role)")
                throw Exit.usage
            }
            do {
                let token = try APITokens.create(in: dir, name: name, role: r)
                warn("wrote \(dir)/\(r.directory)/\(name).token (its hash); the token, shown once:")
                print(token)
            } catch {
                warn("error: \(error)")
                throw Exit.usage
            }
        }
    }
}
