import CZMQ
import Foundation

/// A libzmq error: the C code with Swift names, read from `zmq_errno()` (never the global `errno`).
public struct ZMQError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int32
    public init(code: Int32) { self.code = code }

    static var current: ZMQError { ZMQError(code: zmq_errno()) }

    public static let again = ZMQError(code: EAGAIN)
    public static let interrupted = ZMQError(code: EINTR)
    public static let hostUnreachable = ZMQError(code: EHOSTUNREACH)
    /// The context was terminated.
    public static let terminated = ZMQError(code: 156_384_765)  // ETERM
    public static let invalid = ZMQError(code: EINVAL)

    public var description: String { String(cString: zmq_strerror(code)) + " (\(code))" }
}

/// Owns a libzmq context (`zmq_ctx_new`); terminated in `deinit`, after its sockets close.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    public init(ioThreads: Int = 1) {
        handle = zmq_ctx_new()!
        zmq_ctx_set(handle, ZMQ_IO_THREADS, Int32(ioThreads))
    }

    /// Makes every blocking call on this context's sockets fail with `.terminated` (`zmq_ctx_shutdown`).
    public func shutdown() { zmq_ctx_shutdown(handle) }

    deinit {
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }
}

/// One libzmq socket, used from one thread at a time. Wraps `zmq_socket` and friends.
public final class ZMQSocket: @unchecked Sendable {
    public enum Kind: Int32, Sendable {
        case pair = 0, req = 3, rep = 4, dealer = 5, router = 6, pull = 7, push = 8
    }

    let handle: UnsafeMutableRawPointer
    public let kind: Kind
    private let context: ZMQContext  // keeps the context alive
    private var closed = false

    public init(_ context: ZMQContext, _ kind: Kind) throws {
        guard let h = zmq_socket(context.handle, kind.rawValue) else { throw ZMQError.current }
        handle = h
        self.kind = kind
        self.context = context
        try set(ZMQ_LINGER, 0 as Int32)
    }

    deinit { close() }

    /// Ends `zmq_socket_monitor` on this socket (its monitor is being closed).
    func stopMonitor() {
        guard !closed else { return }
        zmq_socket_monitor(handle, nil, 0)
    }

    /// Closes the socket (`zmq_close`); pending outgoing messages are dropped (linger 0 unless set).
    public func close() {
        guard !closed else { return }
        closed = true
        zmq_close(handle)
    }

    // MARK: Options

    func set(_ option: Int32, _ value: Int32) throws {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size) == 0 else { throw ZMQError.current }
    }

    func set(_ option: Int32, bytes: [UInt8]) throws {
        let rc = bytes.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        guard rc == 0 else { throw ZMQError.current }
    }

    /// `ZMQ_ROUTING_ID`: how a ROUTER peer names this socket.
    public func setRoutingID(_ id: String) throws { try set(ZMQ_ROUTING_ID, bytes: Array(id.utf8)) }
    /// `ZMQ_ROUTER_MANDATORY`: sending to an unknown or gone peer fails with `.hostUnreachable`
    /// instead of dropping the message silently.
    public func setRouterMandatory(_ on: Bool) throws { try set(ZMQ_ROUTER_MANDATORY, on ? 1 : 0) }
    /// `ZMQ_ROUTER_HANDOVER`: a reconnecting peer with the same routing id takes over its name.
    public func setRouterHandover(_ on: Bool) throws { try set(ZMQ_ROUTER_HANDOVER, on ? 1 : 0) }
    public func setLinger(milliseconds: Int) throws { try set(ZMQ_LINGER, Int32(milliseconds)) }
    public func setHighWaterMarks(send: Int, receive: Int) throws {
        try set(ZMQ_SNDHWM, Int32(send))
        try set(ZMQ_RCVHWM, Int32(receive))
    }
    /// Reconnect backoff: starts at `initial`, doubles up to `maximum` (`ZMQ_RECONNECT_IVL[_MAX]`).
    public func setReconnect(initialMilliseconds: Int, maximumMilliseconds: Int) throws {
        try set(ZMQ_RECONNECT_IVL, Int32(initialMilliseconds))
        try set(ZMQ_RECONNECT_IVL_MAX, Int32(maximumMilliseconds))
    }
    /// ZMTP heartbeats on the connection (`ZMQ_HEARTBEAT_IVL`, `ZMQ_HEARTBEAT_TIMEOUT`).
    public func setConnectionHeartbeat(intervalMilliseconds: Int, timeoutMilliseconds: Int) throws {
        try set(ZMQ_HEARTBEAT_IVL, Int32(intervalMilliseconds))
        try set(ZMQ_HEARTBEAT_TIMEOUT, Int32(timeoutMilliseconds))
    }
    /// Largest message accepted (`ZMQ_MAXMSGSIZE`); bigger ones drop the connection.
    public func setMaxMessageSize(_ bytes: Int) throws {
        var v = Int64(bytes)
        guard zmq_setsockopt(handle, ZMQ_MAXMSGSIZE, &v, 8) == 0 else { throw ZMQError.current }
    }
    /// CURVE server side (`ZMQ_CURVE_SERVER` + secret key).
    public func setCurveServer(secretKey: String) throws {
        try set(ZMQ_CURVE_SERVER, 1)
        try set(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
    }
    /// CURVE client side: own key pair and the server's public key.
    public func setCurveClient(publicKey: String, secretKey: String, serverKey: String) throws {
        try set(ZMQ_CURVE_SERVERKEY, bytes: Array(serverKey.utf8))
        try set(ZMQ_CURVE_PUBLICKEY, bytes: Array(publicKey.utf8))
        try set(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
    }
    /// `ZMQ_ZAP_DOMAIN`: asks the ZAP handler to authenticate connections.
    public func setZAPDomain(_ domain: String) throws { try set(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8)) }

    /// `ZMQ_LAST_ENDPOINT`: the endpoint actually bound (e.g. the port chosen for `tcp://127.0.0.1:*`).
    public var lastEndpoint: String {
        var buffer = [CChar](repeating: 0, count: 1024)
        var size = buffer.count
        guard zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) == 0 else { return "" }
        return String(cString: buffer)
    }

    // MARK: Connections

    public func bind(_ endpoint: String) throws {
        guard zmq_bind(handle, endpoint) == 0 else { throw ZMQError.current }
    }

    public func connect(_ endpoint: String) throws {
        guard zmq_connect(handle, endpoint) == 0 else { throw ZMQError.current }
    }

    public func disconnect(_ endpoint: String) throws {
        guard zmq_disconnect(handle, endpoint) == 0 else { throw ZMQError.current }
    }

    // MARK: Messages

    /// Sends a multipart message (`zmq_send` per frame with `ZMQ_SNDMORE`). Returns false
    /// when `dontWait` and the message could not be queued (EAGAIN) before any frame went.
    @discardableResult
    public func send(_ frames: [[UInt8]], dontWait: Bool = false) throws -> Bool {
        precondition(!frames.isEmpty, "a message has at least one frame")
        for (i, frame) in frames.enumerated() {
            var flags: Int32 = i < frames.count - 1 ? ZMQ_SNDMORE : 0
            if dontWait { flags |= ZMQ_DONTWAIT }
            while true {
                let rc = frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
                if rc >= 0 { break }
                let e = ZMQError.current
                if e == .interrupted { continue }
                if e == .again && i == 0 { return false }
                throw e
            }
        }
        return true
    }

    /// Receives one multipart message (`zmq_msg_recv`); nil when `dontWait` and none is ready.
    public func receive(dontWait: Bool = false) throws -> [[UInt8]]? {
        try receiveMessage(dontWait: dontWait)?.frames
    }

    /// Receives one multipart message with the ZAP user id its connection was authenticated
    /// as (`zmq_msg_gets(msg, "User-Id")`; nil without authentication).
    public func receiveMessage(dontWait: Bool = false) throws -> (frames: [[UInt8]], userID: String?)? {
        var frames: [[UInt8]] = []
        var userID: String?
        var msg = zmq_msg_t()
        zmq_msg_init(&msg)
        defer { zmq_msg_close(&msg) }
        while true {
            let rc = zmq_msg_recv(&msg, handle, dontWait && frames.isEmpty ? ZMQ_DONTWAIT : 0)
            if rc < 0 {
                let e = ZMQError.current
                if e == .interrupted { continue }
                if e == .again && frames.isEmpty { return nil }
                throw e
            }
            let size = zmq_msg_size(&msg)
            if size == 0 {
                frames.append([])
            } else {
                let data = zmq_msg_data(&msg)!.assumingMemoryBound(to: UInt8.self)
                frames.append(Array(UnsafeBufferPointer(start: data, count: size)))
            }
            if userID == nil, let p = zmq_msg_gets(&msg, "User-Id") { userID = String(cString: p) }
            if zmq_msg_more(&msg) == 0 { return (frames, userID) }
        }
    }
}

/// A socket event (`zmq_socket_monitor`): what happened, its value (an errno, a ZAP
/// status code such as 400, or a descriptor) and the endpoint it happened on.
public struct ZMQEvent: Sendable, Equatable {
    public struct Kind: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let connected = Kind(rawValue: ZMQ_EVENT_CONNECTED)
        /// A connection attempt failed (refused, no such socket file) and will be retried.
        public static let connectRetried = Kind(rawValue: ZMQ_EVENT_CONNECT_RETRIED)
        public static let disconnected = Kind(rawValue: ZMQ_EVENT_DISCONNECTED)
        public static let handshakeSucceeded = Kind(rawValue: ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        /// The ZAP handler refused the peer (or the server refused us): `value` is the status code.
        public static let handshakeFailedAuth = Kind(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        /// Wrong keys or a peer speaking another mechanism.
        public static let handshakeFailedProtocol = Kind(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        public static let handshakeFailedNoDetail = Kind(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        public static let handshakeFailed: Kind = [.handshakeFailedAuth, .handshakeFailedProtocol, .handshakeFailedNoDetail]
    }
    public let kind: Kind
    public let value: UInt32
    public let endpoint: String
}

/// Receives the events of one socket over an inproc PAIR socket.
public final class ZMQMonitor: @unchecked Sendable {
    public let socket: ZMQSocket
    private let target: ZMQSocket
    private var closed = false

    /// Starts monitoring `target` for `events` (`zmq_socket_monitor`).
    public init(_ context: ZMQContext, watching target: ZMQSocket, events: ZMQEvent.Kind) throws {
        let address = "inproc://monitor-\(UInt64.random(in: 0...UInt64.max))"
        guard zmq_socket_monitor(target.handle, address, events.rawValue) == 0 else { throw ZMQError.current }
        self.target = target
        socket = try ZMQSocket(context, .pair)
        try socket.connect(address)
    }

    deinit { close() }

    /// The next event, or nil when none is waiting (`dontWait`).
    public func next(dontWait: Bool = true) throws -> ZMQEvent? {
        guard let frames = try socket.receive(dontWait: dontWait) else { return nil }
        guard frames.count >= 2, frames[0].count >= 6 else { return nil }
        let f = frames[0]
        let kind = Int32(UInt16(f[0]) | UInt16(f[1]) << 8)  // native (little-endian) byte order
        let value = UInt32(f[2]) | UInt32(f[3]) << 8 | UInt32(f[4]) << 16 | UInt32(f[5]) << 24
        return ZMQEvent(kind: ZMQEvent.Kind(rawValue: kind), value: value, endpoint: String(decoding: frames[1], as: UTF8.self))
    }

    /// Stops the monitoring, then closes the reading end. In that order: libzmq's I/O
    /// thread sends each event with a blocking send, so an event for a monitor nobody
    /// reads any more would stall every socket of the context.
    public func close() {
        guard !closed else { return }
        closed = true
        target.stopMonitor()
        socket.close()
    }
}

/// Waits for several sockets at once (`zmq_poll`).
public struct ZMQPoller {
    private var items: [zmq_pollitem_t] = []

    public init() {}

    /// Adds a socket to wait on for input; returns its index.
    @discardableResult
    public mutating func add(_ socket: ZMQSocket) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: -1, events: Int16(ZMQ_POLLIN), revents: 0))
        return items.count - 1
    }

    /// Waits up to `timeout` milliseconds (-1: forever); returns which sockets are readable.
    public mutating func poll(timeoutMilliseconds: Int) throws -> [Bool] {
        while true {
            let rc = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeoutMilliseconds) }
            if rc >= 0 { break }
            let e = ZMQError.current
            if e == .interrupted { continue }
            throw e
        }
        return items.map { $0.revents & Int16(ZMQ_POLLIN) != 0 }
    }
}

/// CURVE key pairs as Z85 text (`zmq_curve_keypair`, `zmq_curve_public`).
public enum CurveKeys {
    public static func generate() throws -> (publicKey: String, secretKey: String) {
        var pub = [CChar](repeating: 0, count: 41), sec = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&pub, &sec) == 0 else { throw ZMQError.current }
        return (String(cString: pub), String(cString: sec))
    }

    public static func publicKey(fromSecret secret: String) throws -> String {
        var pub = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&pub, secret) == 0 else { throw ZMQError.current }
        return String(cString: pub)
    }
}
