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
        // A refused handshake is reported at once instead of as a time-out.
        let monitor = try ZMQMonitor(context, watching: socket, events: .handshakeFailed)
        defer { monitor.close() }
        try socket.connect(endpoint)
        try socket.send(e.frames)
        var poller = ZMQPoller()
        poller.add(socket)
        poller.add(monitor.socket)
        let limit = timeout ?? self.timeout
        let deadline = Date().addingTimeInterval(limit)
        var frames: [[UInt8]]?
        while frames == nil {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw ClientTimeout(endpoint: endpoint, seconds: limit) }
            let readable = try poller.poll(timeoutMilliseconds: Int(left * 1000) + 1)
            if readable[1], let event = try monitor.next() {
                throw AuthenticationRefused(endpoint: endpoint, keyID: curve?.keys.keyID, event: event)
            }
            if readable[0] { frames = try socket.receive(dontWait: true) }
        }
        guard let frames else { throw ClientTimeout(endpoint: endpoint, seconds: limit) }
        let reply = try Envelope(frames: frames)
        if reply.type == MessageType.error { throw try reply.decode(ErrorReply.self) }
        return reply
    }

    /// Sends a job (validated here first, as the coordinator validates it again: a value
    /// JSON cannot carry, such as an infinite timeout, is caught before it is lost).
    public func submit(_ job: JobSpec) throws -> SubmitReply {
        do { try job.validate() } catch let e as JobError {
            throw ErrorReply(code: "invalid-job", message: "submit: job: \(e.reason)")
        }
        return try request(Envelope(MessageType.submit, json: SubmitRequest(job: job)), timeout: max(timeout, 120))
            .decode(SubmitReply.self)
    }

    public func status(job: String? = nil) throws -> StatusReply {
        try request(Envelope(MessageType.status, json: JobQuery(job: job))).decode(StatusReply.self)
    }

    /// Blocks until the job ends. Re-asks every few seconds, so a coordinator restart
    /// (which forgets registered waiters) cannot leave it waiting forever.
    public func wait(job: String, progress: ((JobStatus) -> Void)? = nil) throws -> JobStatus {
        while true {
            do {
                let reply = try request(Envelope(MessageType.wait, json: JobQuery(job: job)), timeout: 2)
                return try reply.decode(JobStatus.self)
            } catch is ClientTimeout {
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
