import Foundation
import TesseraJobs
import TesseraModel
import TesseraService
import TesseraTasks
import TesseraWire

/// The HTTP JSON API (`/api/v1/`), served on the coordinator's HTTP port beside
/// `/metrics` and the dashboard (docs/API.md).
public struct APIConfig: Sendable {
    /// The folder whose `clients/` and `admins/` hold the tokens' `NAME.token` files (the
    /// allow-list folder; re-read every few seconds). nil: no tokens.
    public var tokens: String?
    /// Serve without tokens, every caller trusted (loopback HTTP only).
    public var insecure = false
    /// The origin browsers may call from (`Access-Control-Allow-Origin`); nil: no CORS.
    public var corsOrigin: String?
    /// Submissions one token may make in a minute (429 beyond).
    public var submissionsPerMinute = 60
    /// Largest job body.
    public var maxJobBytes = JobFile.maxBytes
    /// What relative paths of a submitted job resolve against.
    public var baseDirectory = FileManager.default.currentDirectoryPath

    public init(tokens: String? = nil, insecure: Bool = false) {
        self.tokens = tokens
        self.insecure = insecure
    }
}

/// Who made an API request.
struct APICaller: Sendable {
    /// The token's name (nil: `--api-insecure`).
    var name: String?
    var role: PeerRole?
    /// The owner string of the jobs it submits (the token's; nothing for an insecure caller).
    var owner: String { role.map { APIToken(name: name ?? "", role: $0).owner } ?? "" }
    /// Admins, and every caller of an insecure API, see and act on every job.
    var seesAll: Bool { role == nil || role == .admin }
}

/// What the event loop does for an API request.
enum APICall: Sendable {
    case submit(JobSpec)
    case list(state: JobStatus.State?, limit: Int, offset: Int)
    case get(String)
    case results(String, after: UInt64, limit: Int, status: Outcome?)
    case cancel(String)
    case retryFailed(String)
}

/// The answer to an API request, made on the loop.
struct APIAnswer: Sendable {
    var status: Int
    var body: [UInt8]
    var contentType = "application/json"
    var headers: [(String, String)] = []

    static func json<T: Encodable>(_ value: T, status: Int = 200, headers: [(String, String)] = []) -> APIAnswer {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return APIAnswer(status: status, body: Array((try? e.encode(value)) ?? Data("{}".utf8)), headers: headers)
    }

    /// `{"error": {"code": ..., "message": ...}}` (and the field and line of a bad job).
    static func error(_ status: Int, _ code: String, _ message: String, headers: [(String, String)] = []) -> APIAnswer {
        json(["error": APIError(code: code, message: message)], status: status, headers: headers)
    }
}

struct APIError: Codable, Sendable {
    var code: String
    var message: String
}

/// A PUSH socket other threads poke the loop's wake socket through (one at a time).
final class WakeSender: @unchecked Sendable {
    private let lock = NSLock()
    private var socket: ZMQSocket?

    init(context: ZMQContext, endpoint: String) throws {
        let s = try ZMQSocket(context, .push)
        try s.connect(endpoint)
        socket = s
    }

    func poke() {
        lock.lock()
        defer { lock.unlock() }
        _ = try? socket?.send([[1]], dontWait: true)
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        socket?.close()
        socket = nil
    }
}

/// Between the HTTP threads and the event loop: the tokens, the submission rate per
/// token, and the requests waiting for the loop.
final class APIGate: @unchecked Sendable {
    let config: APIConfig
    private let lock = NSLock()
    private var tokens: [String: APIToken] = [:]
    private var tokensRead = -1e9
    private var submissions: [String: [Double]] = [:]
    private var calls: [(APICall, APICaller, CheckedContinuation<APIAnswer, Never>)] = []
    private var pokeLoop: (@Sendable () -> Void)?
    /// Once the loop has stopped, calls are answered 503 at once.
    private var closed = false

    /// Pokes the loop's wake socket (set by the loop when it starts, cleared when it stops).
    var poke: (@Sendable () -> Void)? {
        get { lock.withLock { pokeLoop } }
        set { lock.withLock { pokeLoop = newValue } }
    }

    init(config: APIConfig) { self.config = config }

    /// The tokens as the folder says now (re-read at most every 2 seconds).
    func currentTokens() -> [String: APIToken] {
        lock.lock()
        defer { lock.unlock() }
        let now = Monotonic.seconds()
        if let dir = config.tokens, now - tokensRead >= 2 {
            tokens = APITokens.load(dir).tokens
            tokensRead = now
        }
        return tokens
    }

    /// Whether the caller may submit now; else the seconds until it may.
    func admitSubmission(_ caller: APICaller) -> Double? {
        lock.lock()
        defer { lock.unlock() }
        let now = Monotonic.seconds(), key = caller.owner
        var recent = (submissions[key] ?? []).filter { now - $0 < 60 }
        guard recent.count < config.submissionsPerMinute else {
            submissions[key] = recent
            return max(1, 60 - (now - recent[0]))
        }
        recent.append(now)
        submissions[key] = recent
        return nil
    }

    /// Queues `call` for the event loop and waits for its answer.
    func perform(_ call: APICall, _ caller: APICaller) async -> APIAnswer {
        let answer = await withCheckedContinuation { continuation in
            lock.lock()
            guard !closed else {
                lock.unlock()
                continuation.resume(returning: APIAnswer.error(503, "stopping", "the coordinator is stopping"))
                return
            }
            calls.append((call, caller, continuation))
            let wake = pokeLoop
            lock.unlock()
            wake?()
        }
        return answer
    }

    func take() -> [(APICall, APICaller, CheckedContinuation<APIAnswer, Never>)] {
        lock.lock()
        defer { lock.unlock() }
        let all = calls
        calls = []
        return all
    }

    /// The loop has stopped: what waits, and what comes, is answered 503.
    func close() {
        lock.lock()
        closed = true
        pokeLoop = nil
        let waiting = calls
        calls = []
        lock.unlock()
        for (_, _, answer) in waiting { answer.resume(returning: APIAnswer.error(503, "stopping", "the coordinator is stopping")) }
    }
}

extension Coordinator {
    /// Runs the API requests that came in (on the loop: the scheduler is the loop's).
    func runAPIRequests(now: Double) {
        guard let gate = api else { return }
        for (call, caller, answer) in gate.take() {
            let result: APIAnswer
            do {
                result = try perform(call, caller: caller, now: now)
            } catch let e as ErrorReply {
                result = .error(Self.httpStatus(of: e.code), e.code, e.message)
            } catch {
                result = .error(500, "internal", "\(error)")
            }
            answer.resume(returning: result)
        }
    }

    static func httpStatus(of code: String) -> Int {
        switch code {
        case "no-such-job": return 404
        case "forbidden", "forbidden-source": return 403
        case "output-exists": return 409
        case "invalid-request", "bad-message": return 400
        case "internal": return 500
        default: return 422  // the job's fault: invalid-job, output-replaces-input, no-inputs, …
        }
    }

    /// The owner of job `id`, nil when there is no such job.
    private func owner(of id: String) throws -> String? {
        if let job = scheduler.jobsByID[id] { return job.owner }
        return try journal.job(id)?.owner
    }

    /// Throws unless `caller` may see and act on job `id`.
    private func checkAccess(_ id: String, _ caller: APICaller) throws {
        guard let owner = try owner(of: id) else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
        guard caller.seesAll || owner == caller.owner else {
            throw ErrorReply(code: "forbidden", message: "job \(id) was submitted by another client; only it or an admin may see or change it")
        }
    }

    private func perform(_ call: APICall, caller: APICaller, now: Double) throws -> APIAnswer {
        switch call {
        case .submit(let spec):
            // Through the same path as a ZeroMQ `submit`: one validation, one planner.
            let identity = Array("\u{0}api".utf8)
            try submit(identity, Envelope(MessageType.submit, json: SubmitRequest(job: spec)), owner: caller.owner,
                       submitter: submitter(for: caller), now: now)
            guard let i = pendingReplies.lastIndex(where: { $0.0 == identity }) else {
                throw ErrorReply(code: "internal", message: "the submission was not answered")
            }
            let reply = pendingReplies.remove(at: i).1
            let submitted = try reply.decode(SubmitReply.self)
            return .json(submitted, status: 201, headers: [("Location", "/api/v1/jobs/\(submitted.job)")])
        case .list(let state, let limit, let offset):
            try journal.flush()  // jobs this iteration changed
            let live: Set<JobStatus.State> = [.queued, .running]
            let stored = state.map { live.contains($0) ? ["queued", "running"] : [$0.rawValue] }
            let rows = try journal.jobs(owner: caller.seesAll ? nil : caller.owner, states: stored, limit: limit, offset: offset)
            let list = try rows.compactMap { try jobStatus($0.id) }.filter { state == nil || $0.state == state }
            var headers: [(String, String)] = []
            if rows.count == limit {
                var next = "/api/v1/jobs?limit=\(limit)&offset=\(offset + limit)"
                if let state { next += "&state=\(state.rawValue)" }
                headers = [("Link", "<\(next)>; rel=\"next\"")]
            }
            return .json(["jobs": list], headers: headers)
        case .get(let id):
            try checkAccess(id, caller)
            guard let s = try jobStatus(id) else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
            return .json(APIJobView(s, rate: scheduler.jobsByID[id].map { apiRate($0, now: now) } ?? nil))
        case .results(let id, let after, let limit, let status):
            try checkAccess(id, caller)
            try journal.flush()  // include what this iteration decided
            let rows = try journal.results(job: id, after: after, limit: limit, status: status)
            var body: [UInt8] = []
            for row in rows {
                body += row.record
                body.append(10)
            }
            var headers: [(String, String)] = []
            if rows.count == limit, let last = rows.last?.task {
                var next = "/api/v1/jobs/\(id)/results?after=\(last)&limit=\(limit)"
                if let status { next += "&status=\(status)" }
                headers = [("Link", "<\(next)>; rel=\"next\""), ("X-Next-After", String(last))]
            }
            return APIAnswer(status: 200, body: body, contentType: "application/x-ndjson", headers: headers)
        case .cancel(let id):
            try checkAccess(id, caller)
            if let job = scheduler.jobsByID[id] {
                try scheduler.cancel(job)
                applyEffects()
                logger.info("api: job \(id) cancelled by \(caller.name ?? "an insecure caller")")
            }
            guard let s = try jobStatus(id) else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
            return .json(APIJobView(s, rate: nil))
        case .retryFailed(let id):
            try checkAccess(id, caller)
            guard scheduler.jobsByID[id] == nil else {
                return .error(409, "job-running", "job \(id) is still running: retry its failed tasks when it ends")
            }
            guard let n = try requeueFailed(id, by: "api") else { throw ErrorReply(code: "no-such-job", message: "no job \(id)") }
            return .json(APIRetried(job: id, retried: n))
        }
    }

    /// Tasks a second over the last minute of a running job, for its ETA.
    private func apiRate(_ job: ActiveJob, now: Double) -> Double? {
        let s = job.status()
        let elapsed = Date().timeIntervalSince1970 - s.submitted
        guard s.done > 0, elapsed > 0 else { return nil }
        return Double(s.done) / elapsed
    }

    /// What `/api/v1/` answers when the API is off: 404, saying how to turn it on.
    static let apiOffRoute: HTTPService.PrefixRoute = { _ in
        let a = APIAnswer.error(404, "api-off", "the HTTP API is off: start the coordinator with --api-tokens DIR"
                                + " (tokens from `tessera token create NAME --dir DIR`), or --api-insecure on a loopback --metrics-address")
        return .reply(HTTPReply(status: a.status, contentType: a.contentType, body: a.body))
    }

    /// The routes of the API, for `HTTPService(prefixes:)`.
    static func apiRoute(_ gate: APIGate) -> HTTPService.PrefixRoute {
        { request in await APIRouter(gate: gate).answer(request) }
    }
}

/// A job as the API shows it: its status, its progress and, while it runs, an ETA.
struct APIJobView: Encodable {
    var status: JobStatus
    var rate: Double?

    init(_ status: JobStatus, rate: Double?) {
        self.status = status
        self.rate = rate
    }

    enum Keys: String, CodingKey { case progress, etaSeconds, tasksPerSecond }

    func encode(to encoder: Encoder) throws {
        try status.encode(to: encoder)
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(status.total > 0 ? Double(status.done) / Double(status.total) : 1, forKey: .progress)
        if let rate, rate > 0, !status.isTerminal {
            try c.encode(rate, forKey: .tasksPerSecond)
            try c.encode(Double(status.total - status.done) / rate, forKey: .etaSeconds)
        }
    }
}

struct APIRetried: Codable {
    var job: String
    var retried: Int
}

/// Parses a request, authenticates it, and asks the loop.
struct APIRouter: Sendable {
    let gate: APIGate

    func answer(_ request: HTTPRequest) async -> HTTPResponse {
        var cors: [(String, String)] = []
        if let origin = gate.config.corsOrigin {
            cors = [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                    ("Access-Control-Expose-Headers", "Link, Location, X-Next-After, Retry-After")]
            if request.method == "OPTIONS" {
                return .reply(HTTPReply(status: 204, contentType: "text/plain", body: []), headers: cors + [
                    ("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"),
                    ("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Job-Directory"),
                    ("Access-Control-Max-Age", "600"),
                ])
            }
        }
        func reply(_ a: APIAnswer) -> HTTPResponse {
            .reply(HTTPReply(status: a.status, contentType: a.contentType, body: a.body), headers: cors + a.headers)
        }
        // The document is public: it holds nothing a caller could not read in docs/.
        if request.path == "/api/v1/openapi.json" && (request.method == "GET" || request.method == "HEAD") {
            return reply(APIAnswer(status: 200, body: Array(APIDocument.json.utf8)))
        }
        // Who is calling.
        let caller: APICaller
        if gate.config.insecure {
            caller = APICaller(name: nil, role: nil)
        } else {
            let tokens = gate.currentTokens()
            guard request.headers["authorization"] != nil else {
                return reply(.error(401, "unauthorized", "this API needs Authorization: Bearer TOKEN (tessera token create NAME)",
                                    headers: [("WWW-Authenticate", "Bearer")]))
            }
            guard let token = APITokens.match(request.headers["authorization"], in: tokens) else {
                return reply(.error(401, "unauthorized", "unknown or revoked token", headers: [("WWW-Authenticate", "Bearer error=\"invalid_token\"")]))
            }
            caller = APICaller(name: token.name, role: token.role)
        }
        let path = request.path.dropFirst("/api/v1/".count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        func methods(_ allowed: [String]) -> HTTPResponse? {
            allowed.contains(request.method) || (request.method == "HEAD" && allowed.contains("GET")) ? nil
                : reply(.error(405, "method-not-allowed", "\(request.method) \(request.path): use \(allowed.joined(separator: " or "))",
                               headers: [("Allow", allowed.joined(separator: ", "))]))
        }
        switch (path.count, path.first) {
        case (1, "jobs"?):
            if let refused = methods(["GET", "POST"]) { return refused }
            if request.method == "POST" { return reply(await submit(request, caller)) }
            let state: JobStatus.State?
            if let s = request.query["state"] {
                guard let parsed = JobStatus.State(rawValue: s) else {
                    return reply(.error(400, "invalid-request", "state: expected queued, running, succeeded, failed or cancelled, got \"\(s)\""))
                }
                state = parsed
            } else {
                state = nil
            }
            guard let limit = Self.number(request.query["limit"], default: 50, range: 1...1000) else {
                return reply(.error(400, "invalid-request", "limit: expected 1...1000"))
            }
            guard let offset = Self.number(request.query["offset"], default: 0, range: 0...Int.max) else {
                return reply(.error(400, "invalid-request", "offset: expected a count of jobs"))
            }
            return reply(await gate.perform(.list(state: state, limit: limit, offset: offset), caller))
        case (2, "jobs"?):
            if let refused = methods(["GET", "DELETE"]) { return refused }
            return reply(await gate.perform(request.method == "DELETE" ? .cancel(path[1]) : .get(path[1]), caller))
        case (3, "jobs"?) where path[2] == "results":
            if let refused = methods(["GET"]) { return refused }
            guard let limit = Self.number(request.query["limit"], default: 1000, range: 1...10_000) else {
                return reply(.error(400, "invalid-request", "limit: expected 1...10000"))
            }
            guard let after = Self.number(request.query["after"], default: 0, range: 0...Int.max) else {
                return reply(.error(400, "invalid-request", "after: expected a task number"))
            }
            var status: Outcome?
            if let s = request.query["status"] {
                guard let o = Outcome.allCases.first(where: { "\($0)" == s }) else {
                    return reply(.error(400, "invalid-request", "status: expected succeeded, failed, skipped or cancelled, got \"\(s)\""))
                }
                status = o
            }
            return reply(await gate.perform(.results(path[1], after: UInt64(after), limit: limit, status: status), caller))
        case (3, "jobs"?) where path[2] == "retry-failed":
            if let refused = methods(["POST"]) { return refused }
            return reply(await gate.perform(.retryFailed(path[1]), caller))
        case (3, "jobs"?) where path[2] == "events":
            if let refused = methods(["GET"]) { return refused }
            let first = await gate.perform(.get(path[1]), caller)
            guard first.status == 200 else { return reply(first) }
            let events = JobEvents(gate: gate, caller: caller, job: path[1], first: first)
            return .events({ await events.next() }, headers: cors)
        default:
            return reply(.error(404, "not-found", "no route \(request.method) \(request.path); see /api/v1/openapi.json"))
        }
    }

    private func submit(_ request: HTTPRequest, _ caller: APICaller) async -> APIAnswer {
        let type = (request.headers["content-type"] ?? "").split(separator: ";").first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        } ?? ""
        guard ["application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"].contains(type) else {
            return .error(415, "unsupported-media-type", "a job is application/json or application/yaml, not \"\(type)\"")
        }
        guard request.body.count <= gate.config.maxJobBytes else {
            return .error(413, "too-large", "a job is at most \(gate.config.maxJobBytes >> 20) MB; list inputs in a manifest instead")
        }
        if let wait = gate.admitSubmission(caller) {
            return .error(429, "too-many-requests", "at most \(gate.config.submissionsPerMinute) submissions a minute per token",
                          headers: [("Retry-After", String(Int(wait.rounded(.up))))])
        }
        // Relative paths resolve against the folder the client's job file is in, when it says
        // (X-Job-Directory, absolute), else against the coordinator's working directory.
        var base = gate.config.baseDirectory
        if let dir = request.headers["x-job-directory"] {
            guard dir.hasPrefix("/") else {
                return .error(400, "invalid-request", "X-Job-Directory: an absolute path, got \"\(dir)\"")
            }
            base = dir
        }
        // JSON is YAML: one parser and one validation, with line numbers into the body.
        let spec: JobSpec
        do {
            spec = try JobFile.parse(yaml: String(decoding: request.body, as: UTF8.self), file: "request body",
                                     baseDirectory: base)
        } catch let e as JobError {
            return .error(422, e.code.rawValue, (e.file.map { $0 + ": " } ?? "") + e.reason)
        } catch {
            return .error(422, "invalid-job", "request body: \(error)")
        }
        return await gate.perform(.submit(spec), caller)
    }

    static func number(_ text: String?, default d: Int, range: ClosedRange<Int>) -> Int? {
        guard let text else { return d }
        guard let n = Int(text), range.contains(n) else { return nil }
        return n
    }
}

/// A job's progress as Server-Sent Events: its status whenever its counts or state change
/// (checked twice a second), the last one when it ends. A comment line every 15 s keeps
/// proxies from closing a quiet stream and lets the server find a reader that left; a
/// token revoked meanwhile ends the stream.
final class JobEvents: @unchecked Sendable {
    private let gate: APIGate
    private let caller: APICaller
    private let job: String
    private let lock = NSLock()
    private var pending: [UInt8]?
    private var last: JobStatus?
    private var ended = false
    private var sent = Monotonic.seconds()
    static let keepAlive = 15.0

    init(gate: APIGate, caller: APICaller, job: String, first: APIAnswer) {
        self.gate = gate
        self.caller = caller
        self.job = job
        pending = first.body
    }

    func next() async -> String? {
        while true {
            switch take() {
            case .emit(let event): return event
            case .end: return nil
            case .wait: break
            }
            try? await Task.sleep(nanoseconds: 500_000_000)
            if let name = caller.name, let role = caller.role,
               !gate.currentTokens().values.contains(APIToken(name: name, role: role)) {
                return nil
            }
            let a = await gate.perform(.get(job), caller)
            guard a.status == 200 else { return nil }
            if let ping = offer(a.body) { return ping }
        }
    }

    private enum Step { case emit(String), end, wait }

    /// The status waiting to be sent, or whether the stream is over.
    private func take() -> Step {
        lock.lock()
        defer { lock.unlock() }
        if let p = pending {
            pending = nil
            let status = try? JSONDecoder().decode(JobStatus.self, from: Data(p))
            last = status
            ended = status?.isTerminal ?? true
            sent = Monotonic.seconds()
            return .emit(String(decoding: p, as: UTF8.self))
        }
        return ended ? .end : .wait
    }

    /// A status just read: sent when its counts or state differ from the last one sent (not
    /// its rate); else a keep-alive comment when the stream has been quiet for a while.
    private func offer(_ body: [UInt8]) -> String? {
        lock.lock()
        defer { lock.unlock() }
        let status = try? JSONDecoder().decode(JobStatus.self, from: Data(body))
        if status == nil || status != last {
            pending = body
            return nil
        }
        guard Monotonic.seconds() - sent >= Self.keepAlive else { return nil }
        sent = Monotonic.seconds()
        return ": keep-alive"
    }
}
