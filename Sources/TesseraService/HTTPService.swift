import FlyingFox
import FlyingSocks
import Foundation

/// What a route answers.
public struct HTTPReply: Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]

    public init(status: Int = 200, contentType: String, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    /// A `text/plain` reply.
    public static func text(_ s: String, status: Int = 200) -> HTTPReply {
        HTTPReply(status: status, contentType: "text/plain; charset=utf-8", body: Array(s.utf8))
    }
}

/// An error starting the HTTP service (bad address, port in use).
public struct HTTPServiceError: Error, CustomStringConvertible {
    public let description: String
}

/// The HTTP side of a long-running process: `/metrics`, `/healthz`, `/readyz` (and
/// whatever else a caller routes), served by FlyingFox on an epoll socket pool, so a
/// slow or idle connection never delays another (docs/decisions/010-http-server.md).
///
/// Handlers run on Swift's concurrency pool: they must only read state (under a lock),
/// never wait on the caller's event loop.
public final class HTTPService: @unchecked Sendable {
    public typealias Handler = @Sendable (_ path: String, _ query: [String: String]) async -> HTTPReply
    /// A Server-Sent Events route: called for each event of one connection (the event's
    /// data, one line), waiting as long as it likes; nil ends the stream.
    public typealias EventSource = @Sendable (_ query: [String: String]) -> (@Sendable () async -> String?)
    /// A POST route (a dashboard action): the query and the request's headers (names lowercased).
    public typealias Action = @Sendable (_ query: [String: String], _ headers: [String: String]) async -> HTTPReply

    /// The port served (the one chosen when asked for port 0).
    public let port: Int
    public let address: String
    private let server: HTTPServer
    private let task: Task<Void, Error>

    /// Binds `address:port` (IPv4 or IPv6 literal; port 0: any free port) and serves
    /// `routes` (exact paths, GET and HEAD) until `stop()`.
    public init(address: String, port: Int, routes: [String: Handler], events: [String: EventSource] = [:],
                actions: [String: Action] = [:]) throws {
        guard (0...65535).contains(port) else { throw HTTPServiceError(description: "HTTP port \(port) is not in 0...65535") }
        let socketAddress: any SocketAddress
        do {
            socketAddress = address.contains(":")
                ? try sockaddr_in6.inet6(ip6: address, port: UInt16(port))
                : try sockaddr_in.inet(ip4: address, port: UInt16(port))
        } catch {
            throw HTTPServiceError(description: "HTTP address \"\(address)\" is not an IPv4 or IPv6 address")
        }
        let server = HTTPServer(address: socketAddress, timeout: 15, logger: .disabled)
        let paths = (Array(routes.keys) + Array(events.keys)).sorted().joined(separator: ", ")
        let table = routes, streams = events, posts = actions
        let started = DispatchSemaphore(value: 0)
        let box = StartBox()
        let handler: @Sendable (HTTPRequest) async throws -> HTTPResponse = { request in
            if request.method == .POST, let action = posts[request.path] {
                var query: [String: String] = [:]
                for item in request.query { query[item.name] = item.value }
                var headers: [String: String] = [:]
                for (name, value) in request.headers { headers[name.rawValue.lowercased()] = value }
                let reply = await action(query, headers)
                return HTTPResponse(statusCode: HTTPStatusCode(reply.status, phrase: HTTPService.phrase(reply.status)),
                                    headers: [.contentType: reply.contentType, HTTPHeader("Cache-Control"): "no-store"],
                                    body: Data(reply.body))
            }
            guard request.method == .GET || request.method == .HEAD else {
                return HTTPResponse(statusCode: HTTPStatusCode(405, phrase: "Method Not Allowed"),
                                    headers: [HTTPHeader("Allow"): "GET, HEAD"], body: Data("only GET\n".utf8))
            }
            if let source = streams[request.path] {
                var query: [String: String] = [:]
                for item in request.query { query[item.name] = item.value }
                return HTTPResponse(statusCode: .ok,
                                    headers: [.contentType: "text/event-stream", HTTPHeader("Cache-Control"): "no-store"],
                                    body: HTTPBodySequence(from: EventBytes(next: source(query))))
            }
            guard let handler = table[request.path] else {
                return HTTPResponse(statusCode: .notFound, body: Data("not found; see \(paths)\n".utf8))
            }
            var query: [String: String] = [:]
            for item in request.query { query[item.name] = item.value }
            let reply = await handler(request.path, query)
            return HTTPResponse(statusCode: HTTPStatusCode(reply.status, phrase: HTTPService.phrase(reply.status)),
                                headers: [.contentType: reply.contentType, HTTPHeader("Cache-Control"): "no-store"],
                                body: request.method == .HEAD ? Data() : Data(reply.body))
        }
        // The server runs until stopped; a failure to bind ends it at once (reported here).
        task = Task {
            await server.appendRoute("*", handler: handler)
            do { try await server.run() } catch {
                box.finish(port: nil, error: error)
                started.signal()
                throw error
            }
        }
        Task {
            for _ in 0..<1000 {
                if box.isFinished { return }
                if let address = await server.listeningAddress {
                    switch address {
                    case let .ip4(_, port), let .ip6(_, port): box.finish(port: Int(port), error: nil)
                    case .unix: box.finish(port: 0, error: nil)
                    }
                    started.signal()
                    return
                }
                try? await Task.sleep(nanoseconds: 5_000_000)
            }
        }
        if started.wait(timeout: .now() + 10) == .timedOut {
            task.cancel()
            throw HTTPServiceError(description: "HTTP on \(address):\(port) did not start within 10 s")
        }
        if let error = box.error {
            throw HTTPServiceError(description: "cannot serve HTTP on \(address):\(port): \(HTTPService.describe(error))")
        }
        self.server = server
        self.address = address
        self.port = box.port ?? 0
    }

    /// Stops listening and closes the connections.
    public func stop() {
        let done = DispatchSemaphore(value: 0)
        let server = self.server, task = self.task
        Task {
            await server.stop(timeout: 0.5)
            task.cancel()
            done.signal()
        }
        _ = done.wait(timeout: .now() + 2)
    }

    static func phrase(_ status: Int) -> String {
        [200: "OK", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
         405: "Method Not Allowed", 500: "Internal Server Error", 503: "Service Unavailable"][status] ?? "Status"
    }

    static func describe(_ error: Error) -> String {
        if let e = error as? SocketError, case let .failed(type, errno, message) = e {
            return "\(type): \(message) (errno \(errno))"
        }
        return "\(error)"
    }
}

private final class StartBox: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    private(set) var port: Int?
    private(set) var error: Error?

    var isFinished: Bool {
        lock.lock()
        defer { lock.unlock() }
        return done
    }

    /// The first outcome wins.
    func finish(port: Int?, error: Error?) {
        lock.lock()
        defer { lock.unlock() }
        guard !done else { return }
        done = true
        self.port = port
        self.error = error
    }
}


/// One connection's Server-Sent Events as bytes (`data: …` blocks), sent chunked.
struct EventBytes: AsyncBufferedSequence, Sendable {
    typealias Element = UInt8
    let next: @Sendable () async -> String?

    func makeAsyncIterator() -> Iterator { Iterator(next: next) }

    struct Iterator: AsyncBufferedIteratorProtocol {
        let next: @Sendable () async -> String?
        var pending: [UInt8] = []
        var index = 0
        init(next: @escaping @Sendable () async -> String?) { self.next = next }
        mutating func next() async throws -> UInt8? {
            if index >= pending.count {
                guard let b = try await nextBuffer(suggested: 4096) else { return nil }
                (pending, index) = (b, 0)
            }
            defer { index += 1 }
            return pending[index]
        }
        mutating func nextBuffer(suggested count: Int) async throws -> [UInt8]? {
            guard let data = await next() else { return nil }
            return Array("data: \(data)\n\n".utf8)
        }
    }
}
