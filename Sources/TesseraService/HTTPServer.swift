import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One parsed request: what the routes see.
struct HTTPRequestHead: Sendable {
    var method: String
    var path: String
    var query: [String: String]
    /// Header names lowercased; a repeated header keeps its last value.
    var headers: [String: String]
    var keepAlive: Bool
    /// The request's body (`Content-Length` bytes, at most `HTTPLimits.maxBody`).
    var body: [UInt8] = []
}

/// What a handler gives back: a whole reply, or a stream of Server-Sent Events.
enum HTTPAnswer: Sendable {
    case reply(HTTPReply, extraHeaders: [(String, String)] = [], omitBody: Bool = false)
    case events(@Sendable () async -> String?, extraHeaders: [(String, String)] = [])
}

/// The limits that keep one client from starving the others (probes above all).
struct HTTPLimits: Sendable {
    /// Request line and headers together (nginx: 1 k + 4 × 8 k; Go: 1 MB).
    var maxHead = 16 << 10
    var maxHeaders = 100
    /// A request body (routes that take none drop it).
    var maxBody = 64 << 10
    /// From a request's first byte to the end of its head (slowloris: a client trickling its
    /// headers is closed with 408 at this deadline).
    var headSeconds = 5.0
    /// From a request's first byte to its last.
    var requestSeconds = 10.0
    /// An open connection with no request under way.
    var idleSeconds = 60.0
    /// A reply that the peer does not read within this is abandoned.
    var writeSeconds = 30.0
    /// Open connections; past it, the one idle longest (else the oldest with a request still
    /// incomplete) is closed to make room, so a probe always gets in.
    var maxConnections = 1024
    /// Connections of one address that are idle or still sending a request: past it, that
    /// address's oldest such connection is closed (an answered request or an event stream
    /// does not count).
    var maxIncompletePerAddress = 32
    /// Unsent event bytes a slow event-stream reader may hold before it is cut off.
    var maxBacklog = 4 << 20
}

/// A small HTTP/1.1 server on one thread: `poll(2)` over the listening socket and every
/// connection, non-blocking reads and writes, requests parsed with a byte limit and a
/// deadline, handlers run as tasks whose replies come back through a pipe.
/// Idle, slow or oversized clients cost one file descriptor each and never delay another
/// request (docs/decisions/010-http-server.md).
final class PollHTTPServer: @unchecked Sendable {
    typealias Dispatch = @Sendable (HTTPRequestHead) async -> HTTPAnswer

    let port: Int
    private let listener: Int32
    private let wake: Int32, wakeWriter: Int32
    private let limits: HTTPLimits
    private let dispatch: Dispatch
    private let finished = DispatchSemaphore(value: 0)

    /// Handed from tasks to the poll thread, under `lock`.
    private enum Completion { case reply(UInt64, [UInt8], close: Bool), append(UInt64, [UInt8]), end(UInt64) }
    private let lock = NSLock()
    private var completions: [Completion] = []
    private var open: Set<UInt64> = []
    private var stopping = false

    init(address: String, port: Int, limits: HTTPLimits = HTTPLimits(), dispatch: @escaping Dispatch) throws {
        self.limits = limits
        self.dispatch = dispatch
        let v6 = address.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPServiceError(description: "cannot create a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let length: socklen_t
        let parsed: Bool = withUnsafeMutablePointer(to: &storage) { raw in
            if v6 {
                return raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
                    a.pointee.sin6_family = sa_family_t(AF_INET6)
                    a.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                    return inet_pton(AF_INET6, address, &a.pointee.sin6_addr) == 1
                }
            }
            return raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { a in
                a.pointee.sin_family = sa_family_t(AF_INET)
                a.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                return inet_pton(AF_INET, address, &a.pointee.sin_addr) == 1
            }
        }
        length = socklen_t(v6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        guard parsed else {
            close(fd)
            throw HTTPServiceError(description: "HTTP address \"\(address)\" is not an IPv4 or IPv6 address")
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HTTPServiceError(description: "cannot serve HTTP on \(address):\(port): \(reason)")
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        self.port = withUnsafePointer(to: &actual) { raw in
            v6 ? raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
               : raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        Self.configure(fd)
        listener = fd
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            close(fd)
            throw HTTPServiceError(description: "cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends { Self.configure(end) }
        (wake, wakeWriter) = (ends[0], ends[1])
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "tessera-http"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Closes the listening socket and every connection; returns when the thread has ended.
    func stop() {
        lock.lock()
        let already = stopping
        stopping = true
        lock.unlock()
        guard !already else { return }
        signal()
        _ = finished.wait(timeout: .now() + 2)
    }

    // MARK: Tasks → poll thread

    private func post(_ c: Completion) {
        lock.lock()
        completions.append(c)
        lock.unlock()
        signal()
    }

    private func signal() {
        var one: UInt8 = 1
        _ = write(wakeWriter, &one, 1)  // a full pipe is already a wake-up
    }

    /// Non-blocking, closed on exec.
    private static func configure(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// Whether a connection is still open (an event stream stops when it is not).
    private func isOpen(_ id: UInt64) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return open.contains(id)
    }

    // MARK: The poll thread

    private enum State {
        /// Reading a request: `since` is its first byte (nil: idle since `lastActive`).
        case reading(since: Double?)
        /// A handler has the request; nothing is read until it answers.
        case handling
        /// Writing a reply; afterwards read the next request, or close.
        case writing(close: Bool, since: Double)
        /// An event stream: written as events come, closed when the source ends.
        case streaming(ended: Bool)
    }

    private final class Connection {
        let fd: Int32
        let id: UInt64
        /// The peer's address (for the per-address limit).
        let address: [UInt8]
        let opened: Double
        var state: State = .reading(since: nil)
        /// The request being read has a complete head (its body is still coming).
        var headComplete = false
        var input: [UInt8] = []
        var output: [UInt8] = []
        var sent = 0
        var lastActive: Double
        init(fd: Int32, id: UInt64, address: [UInt8], now: Double) {
            (self.fd, self.id, self.address, self.lastActive, self.opened) = (fd, id, address, now, now)
        }

        /// Idle, or still sending its request.
        var isIncomplete: Bool { if case .reading = state { return true } else { return false } }
    }

    private var connections: [Int32: Connection] = [:]
    private var byID: [UInt64: Int32] = [:]
    private var nextID: UInt64 = 1

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    private func run() {
        var fds: [pollfd] = []
        var lastSweep = Self.now()
        while true {
            lock.lock()
            let stop = stopping
            let done = completions
            completions.removeAll()
            lock.unlock()
            if stop { break }
            for c in done { apply(c) }

            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
            fds.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0))
            for c in connections.values {
                var events: Int16 = 0
                switch c.state {
                case .reading: events = Int16(POLLIN)
                case .handling: events = 0  // POLLHUP/POLLERR are reported anyway
                case .writing, .streaming: events = c.sent < c.output.count ? Int16(POLLOUT) : Int16(POLLIN)
                }
                fds.append(pollfd(fd: c.fd, events: events, revents: 0))
            }
            let ready = poll(&fds, nfds_t(fds.count), 250)
            if ready < 0 && errno != EINTR { break }
            let now = Self.now()
            if fds[0].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 256)
                while read(wake, &drain, drain.count) > 0 {}
            }
            if fds[1].revents & Int16(POLLIN) != 0 { acceptAll(now: now) }
            for p in fds.dropFirst(2) where p.revents != 0 {
                guard let c = connections[p.fd] else { continue }
                if p.revents & Int16(POLLOUT) != 0 { flush(c, now: now) }
                guard connections[p.fd] === c else { continue }
                if p.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { receive(c, now: now) }
            }
            if now - lastSweep >= 0.25 {
                sweep(now: now)
                lastSweep = now
            }
        }
        for c in Array(connections.values) { drop(c) }
        close(listener)
        close(wake)
        close(wakeWriter)
    }

    private func acceptAll(now: Double) {
        while true {
            var peer = sockaddr_storage()
            var peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &peerLength) }
            }
            if fd < 0 {
                if errno == EMFILE || errno == ENFILE, evictIdlest() || evictOldestIncomplete(of: nil) { continue }
                return
            }
            let address = Self.addressBytes(peer)
            // One address's idle and incomplete connections are bounded: its oldest makes room.
            if connections.values.lazy.filter({ $0.isIncomplete && $0.address == address }).count >= limits.maxIncompletePerAddress {
                _ = evictOldestIncomplete(of: address)
            }
            if connections.count >= limits.maxConnections, !evictIdlest(), !evictOldestIncomplete(of: nil) {
                close(fd)
                continue
            }
            Self.configure(fd)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = Connection(fd: fd, id: nextID, address: address, now: now)
            nextID += 1
            connections[fd] = c
            byID[c.id] = fd
            lock.lock()
            open.insert(c.id)
            lock.unlock()
        }
    }

    /// Closes the connection idle longest (no request under way); false if there is none.
    private func evictIdlest() -> Bool {
        let idle = connections.values.filter { if case .reading(since: nil) = $0.state { return true } else { return false } }
        guard let victim = idle.min(by: { $0.lastActive < $1.lastActive }) else { return false }
        drop(victim)
        return true
    }

    /// Closes the connection whose incomplete request started longest ago (of `address`, or
    /// of any); false if there is none.
    private func evictOldestIncomplete(of address: [UInt8]?) -> Bool {
        var victim: Connection?
        for c in connections.values where c.isIncomplete && (address == nil || c.address == address) {
            if victim == nil || c.opened < victim!.opened { victim = c }
        }
        guard let victim else { return false }
        drop(victim)
        return true
    }

    /// The peer's IP address as bytes (4 or 16), for counting connections per address.
    private static func addressBytes(_ s: sockaddr_storage) -> [UInt8] {
        let family = Int32(s.ss_family)
        return withUnsafeBytes(of: s) { raw -> [UInt8] in
            if family == AF_INET { return Array(raw[4..<8]) }  // sin_addr
            if family == AF_INET6 { return Array(raw[8..<24]) }  // sin6_addr
            return []
        }
    }

    private func drop(_ c: Connection) {
        guard connections[c.fd] === c else { return }
        connections[c.fd] = nil
        byID[c.id] = nil
        lock.lock()
        open.remove(c.id)
        lock.unlock()
        close(c.fd)
    }

    private func apply(_ completion: Completion) {
        switch completion {
        case let .reply(id, bytes, closeAfter):
            guard let fd = byID[id], let c = connections[fd] else { return }
            c.output = bytes
            c.sent = 0
            c.state = .writing(close: closeAfter, since: Self.now())
            flush(c, now: Self.now())
        case let .append(id, bytes):
            guard let fd = byID[id], let c = connections[fd] else { return }
            if c.sent > 0 && c.sent == c.output.count { (c.output, c.sent) = ([], 0) }
            c.output += bytes
            if c.output.count - c.sent > limits.maxBacklog { return drop(c) }
            if case .handling = c.state { c.state = .streaming(ended: false) }
            flush(c, now: Self.now())
        case let .end(id):
            guard let fd = byID[id], let c = connections[fd] else { return }
            c.state = .streaming(ended: true)
            flush(c, now: Self.now())
        }
    }

    private func flush(_ c: Connection, now: Double) {
        while c.sent < c.output.count {
            let n = c.output.withUnsafeBytes { send(c.fd, $0.baseAddress! + c.sent, $0.count - c.sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                return drop(c)
            }
            c.sent += n
            c.lastActive = now
        }
        switch c.state {
        case let .writing(closeAfter, _):
            if closeAfter { return drop(c) }
            (c.output, c.sent) = ([], 0)
            c.state = .reading(since: c.input.isEmpty ? nil : now)
            if !c.input.isEmpty { parse(c, now: now) }  // a pipelined request
        case .streaming(ended: true):
            drop(c)
        default:
            break
        }
    }

    /// The poll thread's read buffer (one, reused: reads happen on that thread only).
    private var chunk = [UInt8](repeating: 0, count: 16 << 10)

    private func receive(_ c: Connection, now: Double) {
        let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
        if n == 0 { return drop(c) }
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            return drop(c)
        }
        switch c.state {
        case .reading:
            c.input += chunk[..<n]
            c.lastActive = now
            if case .reading(since: nil) = c.state { c.state = .reading(since: now) }
            parse(c, now: now)
        case .handling, .writing:
            // Pipelined bytes wait for the reply, within the head limit.
            c.input += chunk[..<n]
            if c.input.count > limits.maxHead + limits.maxBody { drop(c) }
        case .streaming:
            break  // an event stream's client has nothing more to say
        }
    }

    /// Closes connections past their deadlines.
    private func sweep(now: Double) {
        for c in Array(connections.values) {
            switch c.state {
            case .reading(since: nil) where now - c.lastActive > limits.idleSeconds:
                drop(c)
            case let .reading(since: start?) where !c.headComplete && now - start > limits.headSeconds:
                fail(c, 408, "the request's headers were not complete within \(Int(limits.headSeconds)) s")
            case let .reading(since: start?) where now - start > limits.requestSeconds:
                fail(c, 408, "the request was not complete within \(Int(limits.requestSeconds)) s")
            case let .writing(_, since) where now - since > limits.writeSeconds:
                drop(c)
            default:
                break
            }
        }
    }

    /// Answers a bad request and closes the connection after it.
    private func fail(_ c: Connection, _ status: Int, _ reason: String) {
        c.input.removeAll()
        c.output = Self.encode(.text(reason + "\n", status: status), extra: [], omitBody: false, close: true)
        c.sent = 0
        c.state = .writing(close: true, since: Self.now())
        flush(c, now: Self.now())
    }

    /// Parses a complete request out of `c.input`, if there is one, and hands it to a task.
    private func parse(_ c: Connection, now: Double) {
        // Blank lines (CRLF) before a request line are ignored (RFC 9112 §2.2).
        var blank = 0
        while blank + 1 < c.input.count, c.input[blank] == 13, c.input[blank + 1] == 10 { blank += 2 }
        if blank > 0 { c.input.removeFirst(blank) }
        let head: HTTPParser.Head
        switch HTTPParser.head(c.input, limits: limits) {
        case .incomplete: return
        case let .bad(status, reason): return fail(c, status, reason)
        case let .done(h): head = h
        }
        c.headComplete = true
        let body: [UInt8], end: Int
        switch head.framing {
        case .none:
            (body, end) = ([], head.bodyStart)
        case .length(let n):
            guard c.input.count >= head.bodyStart + n else { return }  // the body is still coming
            (body, end) = (Array(c.input[head.bodyStart..<(head.bodyStart + n)]), head.bodyStart + n)
        case .chunked:
            switch HTTPParser.chunked(c.input, from: head.bodyStart, limits: limits) {
            case .incomplete:
                if c.input.count > limits.maxHead * 2 + limits.maxBody * 2 { fail(c, 413, "request bodies are limited to \(limits.maxBody) bytes") }
                return
            case let .bad(status, reason): return fail(c, status, reason)
            case let .done(decoded): (body, end) = decoded
            }
        }
        c.input.removeFirst(end)
        c.headComplete = false

        let connection = head.headers["connection"]?.lowercased() ?? ""
        let keepAlive = head.version11 ? !connection.contains("close") : connection.contains("keep-alive")
        var target = head.target
        if let scheme = target.range(of: "://") {  // absolute form: keep the path
            target = target[scheme.upperBound...].firstIndex(of: "/").map { String(target[$0...]) } ?? "/"
        }
        let (path, query) = Self.split(target)
        let request = HTTPRequestHead(method: head.method, path: path, query: query, headers: head.headers, keepAlive: keepAlive,
                                      body: body)
        c.state = .handling
        let id = c.id, dispatch = self.dispatch
        Task.detached { [self] in
            switch await dispatch(request) {
            case let .reply(reply, extra, omitBody):
                post(.reply(id, Self.encode(reply, extra: extra, omitBody: omitBody, close: !keepAlive), close: !keepAlive))
            case let .events(next, extra):
                let headers = extra.map { "\($0.0): \($0.1)\r\n" }.joined()
                post(.append(id, Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\(headers)Connection: close\r\n\r\n".utf8)))
                while isOpen(id), let event = await next() {
                    // A line starting with ":" is a comment (a keep-alive), sent as it is.
                    post(.append(id, Array((event.hasPrefix(":") ? "\(event)\n\n" : "data: \(event)\n\n").utf8)))
                }
                post(.end(id))
            }
        }
    }

    /// The decoded path and query (`+` is a space; a repeated name keeps its last value).
    static func split(_ target: String) -> (String, [String: String]) {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0]).removingPercentEncoding ?? String(parts[0])
        var query: [String: String] = [:]
        if parts.count > 1 {
            for item in parts[1].split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func decode(_ s: Substring) -> String {
                    let spaced = s.replacingOccurrences(of: "+", with: " ")
                    return spaced.removingPercentEncoding ?? spaced
                }
                query[decode(pair[0])] = pair.count > 1 ? decode(pair[1]) : ""
            }
        }
        return (path, query)
    }

    static func encode(_ reply: HTTPReply, extra: [(String, String)], omitBody: Bool, close: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(reply.status) \(HTTPService.phrase(reply.status))\r\n"
        head += "Content-Type: \(reply.contentType)\r\nContent-Length: \(reply.body.count)\r\nCache-Control: no-store\r\n"
        for (name, value) in extra { head += "\(name): \(value)\r\n" }
        head += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n"
        return Array(head.utf8) + (omitBody ? [] : reply.body)
    }
}
