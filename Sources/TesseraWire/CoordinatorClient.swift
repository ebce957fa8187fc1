import Foundation
import TesseraTasks

/// A client failed to reach the coordinator in time.
public struct ClientTimeout: Error, CustomStringConvertible {
    public let endpoint: String
    public let seconds: Double
    public init(endpoint: String, seconds: Double) {
        self.endpoint = endpoint
        self.seconds = seconds
    }
    public var description: String { "no answer from the coordinator at \(endpoint) within \(Int(seconds)) s" }
}

/// Nothing listens at the endpoint: the connection was refused (or the ipc socket file is
/// missing) and still was after a second of retries. Said at once, not after the time-out.
public struct CoordinatorUnreachable: Error, CustomStringConvertible {
    public let endpoint: String
    public init(endpoint: String) { self.endpoint = endpoint }
    public var description: String { "no coordinator at \(endpoint): the connection was refused (is it running, and is this its --bind address?)" }
}

/// Talks to a coordinator: one DEALER socket per request, so a late reply to an
/// earlier request can never be taken for the answer to a new one.
public final class CoordinatorClient: @unchecked Sendable {
    public let endpoint: String
    public var timeout: Double
    /// CURVE: this client's key pair and the coordinator's public key.
    public var curve: (keys: CurveKeyPair, serverKey: String)?
    private let context = ZMQContext()

    public init(endpoint: String, timeout: Double = 30, curve: (keys: CurveKeyPair, serverKey: String)? = nil) {
        self.endpoint = endpoint
        self.timeout = timeout
        self.curve = curve
    }

    /// Sends one request and returns its reply; an `error` reply throws `ErrorReply`.
    public func request(_ e: Envelope, timeout: Double? = nil) throws -> Envelope {
        let socket = try ZMQSocket(context, .dealer)
        defer { socket.close() }
        if let curve {
            try socket.setCurveClient(publicKey: curve.keys.publicKey, secretKey: curve.keys.secretKey, serverKey: curve.serverKey)
        }
        // A refused handshake is reported at once instead of as a time-out; so is a refused
        // connection (ZMQ connects lazily and retries for ever: a second of refusals, with
        // no connection made, means nothing listens there). A busy coordinator has accepted
        // the connection, and gets the whole time-out to answer.
        let monitor = try ZMQMonitor(context, watching: socket, events: [.handshakeFailed, .connected, .connectRetried])
        defer { monitor.close() }
        try socket.connect(endpoint)
        try socket.send(e.frames)
        var poller = ZMQPoller()
        poller.add(socket)
        poller.add(monitor.socket)
        let limit = timeout ?? self.timeout
        let start = Date()
        let deadline = start.addingTimeInterval(limit)
        let refusalGrace = min(1.0, limit)
        var frames: [[UInt8]]?
        var connected = false, refused = false
        while frames == nil {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else {
                if refused && !connected { throw CoordinatorUnreachable(endpoint: endpoint) }
                throw ClientTimeout(endpoint: endpoint, seconds: limit)
            }
            let untilGrace = refusalGrace - Date().timeIntervalSince(start)
            let wait = refused && !connected ? max(0.01, min(left, untilGrace)) : left
            let readable = try poller.poll(timeoutMilliseconds: Int(wait * 1000) + 1)
            if readable[1] {
                while let event = try monitor.next() {
                    if event.kind == .connected { connected = true } else if event.kind == .connectRetried { refused = true } else {
                        throw AuthenticationRefused(endpoint: endpoint, keyID: curve?.keys.keyID, event: event)
                    }
                }
            }
            if readable[0] { frames = try socket.receive(dontWait: true) }
            if frames == nil, refused, !connected, Date().timeIntervalSince(start) >= refusalGrace {
                throw CoordinatorUnreachable(endpoint: endpoint)
            }
        }
        guard let frames else { throw ClientTimeout(endpoint: endpoint, seconds: limit) }
        let reply = try Envelope(frames: frames)
        if reply.type == MessageType.error { throw try reply.decode(ErrorReply.self) }
        return reply
    }

    /// Sends a job (validated here first, as the coordinator validates it again: a value
    /// JSON cannot carry, such as an infinite timeout, is caught before it is lost).
    /// - Parameter timeout: how long planning may take (default: the client's time-out).
    public func submit(_ job: JobSpec, timeout: Double? = nil) throws -> SubmitReply {
        do { try job.validate() } catch let e as JobError {
            throw ErrorReply(code: "invalid-job", message: "submit: job: \(e.reason)")
        }
        return try request(Envelope(MessageType.submit, json: SubmitRequest(job: job)), timeout: timeout).decode(SubmitReply.self)
    }

    public func status(job: String? = nil) throws -> StatusReply {
        try request(Envelope(MessageType.status, json: JobQuery(job: job))).decode(StatusReply.self)
    }

    /// Blocks until the job ends. Re-asks every few seconds, so a coordinator restart
    /// (which forgets registered waiters) cannot leave it waiting forever.
    /// A coordinator that is not there at the first ask is an error; one that goes away
    /// later (a restart) is waited for.
    /// - Parameter within: an overall limit in seconds (`ClientTimeout` after it); none by default.
    public func wait(job: String, within: Double? = nil, progress: ((JobStatus) -> Void)? = nil) throws -> JobStatus {
        var answered = false
        let deadline = within.map { Date().addingTimeInterval($0) }
        while true {
            if let deadline, Date() >= deadline { throw ClientTimeout(endpoint: endpoint, seconds: within ?? 0) }
            do {
                let reply = try request(Envelope(MessageType.wait, json: JobQuery(job: job)), timeout: 2)
                return try reply.decode(JobStatus.self)
            } catch let error as CoordinatorUnreachable {
                if !answered { throw error }
                Thread.sleep(forTimeInterval: 0.5)
            } catch is ClientTimeout {
                answered = true
                if let s = try? status(job: job).jobs.first {
                    if s.isTerminal { return s }
                    progress?(s)
                }
            }
        }
    }

    public func cancel(job: String) throws -> JobStatus {
        try request(Envelope(MessageType.cancel, json: JobQuery(job: job))).decode(JobStatus.self)
    }

    /// Every result record of a job (JSON objects, task order), fetched page by page.
    public func results(job: String) throws -> [[UInt8]] {
        var all: [[UInt8]] = []
        var after: UInt64? = nil
        repeat {
            let reply = try request(Envelope(MessageType.results, json: JobQuery(job: job, after: after, limit: 5000)))
            let page = try ResultsReply(body: reply.body)
            all += page.records
            after = page.next
        } while after != nil
        return all
    }

    public func ping() throws {
        _ = try request(Envelope(MessageType.ping), timeout: 5)
    }

    public func shutdown() throws {
        _ = try request(Envelope(MessageType.shutdown), timeout: 10)
    }
}
