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

/// A whole request, for routes that take any method and a body (the JSON API).
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    public var query: [String: String]
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
}

/// What a prefix route answers: a reply with extra headers (`Location`, `Retry-After`,
/// CORS), or a stream of Server-Sent Events (each string one event's data line).
public enum HTTPResponse: Sendable {
    case reply(HTTPReply, headers: [(String, String)] = [])
    case events(@Sendable () async -> String?, headers: [(String, String)] = [])
}

/// An error starting the HTTP service (bad address, port in use).
public struct HTTPServiceError: Error, CustomStringConvertible {
    public let description: String
}

/// The HTTP side of a long-running process: `/metrics`, `/healthz`, `/readyz` (and
/// whatever else a caller routes), served by `PollHTTPServer` on its own thread, so a
/// slow, idle or oversized client never delays another (docs/decisions/010-http-server.md).
///
/// Handlers run on Swift's concurrency pool: they must only read state (under a lock),
/// never wait on the caller's event loop.
public final class HTTPService: @unchecked Sendable {
    public typealias Handler = @Sendable (_ path: String, _ query: [String: String]) async -> HTTPReply
    /// A Server-Sent Events route: called for each event of one connection (the event's
    /// data, one line; one starting with ":" is sent as a comment), waiting as long as it
    /// likes; nil ends the stream.
    public typealias EventSource = @Sendable (_ query: [String: String]) -> (@Sendable () async -> String?)
    /// A POST route (a dashboard action): the query and the request's headers (names lowercased).
    public typealias Action = @Sendable (_ query: [String: String], _ headers: [String: String]) async -> HTTPReply
    /// Every request whose path starts with a prefix, whatever its method (the JSON API).
    public typealias PrefixRoute = @Sendable (HTTPRequest) async -> HTTPResponse

    /// The port served (the one chosen when asked for port 0).
    public let port: Int
    public let address: String
    private let server: PollHTTPServer

    /// Binds `address:port` (IPv4 or IPv6 literal; port 0: any free port) and serves
    /// What HEAD on an event stream answers: its status and headers, no events.
    static func eventStreamHead(_ headers: [(String, String)]) -> HTTPAnswer {
        .reply(HTTPReply(status: 200, contentType: "text/event-stream", body: []),
               extraHeaders: headers + [("Cache-Control", "no-store")], omitBody: true)
    }

    /// `routes` (exact paths, GET and HEAD), `events` (GET) and `actions` (POST) until `stop()`.
    /// `prefixes` take every request under them (`/api/v1/` and below), with bodies of up to
    /// `maxBody` bytes (other routes drop theirs).
    public init(address: String, port: Int, routes: [String: Handler], events: [String: EventSource] = [:],
                actions: [String: Action] = [:], prefixes: [String: PrefixRoute] = [:], maxBody: Int = 64 << 10) throws {
        guard (0...65535).contains(port) else { throw HTTPServiceError(description: "HTTP port \(port) is not in 0...65535") }
        let paths = (Array(routes.keys) + Array(events.keys) + Array(prefixes.keys)).sorted().joined(separator: ", ")
        var limits = HTTPLimits()
        // A little over the routes' own limit, so that they answer a body over it themselves.
        limits.maxBody = max(limits.maxBody, maxBody + (64 << 10))
        let prefixList = prefixes.sorted { $0.key.count > $1.key.count }
        server = try PollHTTPServer(address: address, port: port, limits: limits) { request in
            if let (_, route) = prefixList.first(where: { request.path.hasPrefix($0.key) }) {
                let whole = HTTPRequest(method: request.method, path: request.path, query: request.query,
                                        headers: request.headers, body: request.body)
                switch await route(whole) {
                case let .reply(reply, headers):
                    return .reply(reply, extraHeaders: headers, omitBody: request.method == "HEAD")
                case let .events(next, headers):
                    // HEAD: the stream's head alone, not an endless body.
                    if request.method == "HEAD" { return HTTPService.eventStreamHead(headers) }
                    return .events(next, extraHeaders: headers)
                }
            }
            if request.method == "POST", let action = actions[request.path] {
                return .reply(await action(request.query, request.headers))
            }
            // No such route: 404 whatever the method (a 405 would say the path exists).
            guard routes[request.path] != nil || events[request.path] != nil || actions[request.path] != nil else {
                return .reply(.text("not found; see \(paths)\n", status: 404), omitBody: request.method == "HEAD")
            }
            guard request.method == "GET" || request.method == "HEAD" else {
                return .reply(.text("only GET and HEAD\n", status: 405), extraHeaders: [("Allow", "GET, HEAD")])
            }
            if let source = events[request.path] {
                if request.method == "HEAD" { return HTTPService.eventStreamHead([]) }
                return .events(source(request.query))
            }
            guard let handler = routes[request.path] else {
                return .reply(.text("not found; see \(paths)\n", status: 404), omitBody: request.method == "HEAD")
            }
            return .reply(await handler(request.path, request.query), omitBody: request.method == "HEAD")
        }
        self.address = address
        self.port = server.port
    }

    /// Stops listening and closes the connections.
    public func stop() {
        server.stop()
    }

    static func phrase(_ status: Int) -> String {
        [200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
         403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
         411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
         429: "Too Many Requests", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
         501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"][status] ?? "Status"
    }
}
