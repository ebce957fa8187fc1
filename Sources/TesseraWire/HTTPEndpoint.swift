import Foundation

/// A very small HTTP/1.1 server for metrics and health probes: GET only, one
/// connection at a time, `Connection: close`. Enough for Prometheus scrapes and
/// Kubernetes probes without bringing a web framework into every build.
public final class HTTPEndpoint: @unchecked Sendable {
    public typealias Handler = @Sendable (_ path: String) -> (status: Int, contentType: String, body: String)

    private let fd: Int32
    public let port: Int
    private let handler: Handler
    private var running = true
    private let lock = NSLock()

    /// Binds `address:port` (port 0: any free port) and serves on a background thread.
    public init(address: String = "0.0.0.0", port: Int, handler: @escaping Handler) throws {
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw KeyError("metrics: socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, address, &addr.sin_addr) == 1 else { throw KeyError("metrics: bad address \(address)") }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw KeyError("metrics: cannot listen on \(address):\(port): \(message)")
        }
        var actual = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: actual.sin_port))
        let t = Thread { [self] in serve() }
        t.name = "http"
        t.start()
    }

    public func stop() {
        lock.lock()
        running = false
        lock.unlock()
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    private func serve() {
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                lock.lock()
                let stillRunning = running
                lock.unlock()
                if !stillRunning { return }
                usleep(10_000)
                continue
            }
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var request = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while request.count < 16384 {
                let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                request += buffer[0..<n]
                if request.count >= 4, request.suffix(4) == [13, 10, 13, 10] { break }
            }
            let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
            var response: (Int, String, String)
            if line.count >= 2 && line[0] == "GET" {
                let path = String(line[1].split(separator: "?").first ?? "/")
                response = handler(path)
            } else {
                response = (405, "text/plain", "only GET\n")
            }
            let reason = [200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"][response.0] ?? "OK"
            let body = Array(response.2.utf8)
            let head = "HTTP/1.1 \(response.0) \(reason)\r\nContent-Type: \(response.1)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            let out = Array(head.utf8) + body
            var sent = 0
            while sent < out.count {
                let n = out.withUnsafeBytes { send(client, $0.baseAddress! + sent, out.count - sent, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break }
                sent += n
            }
            close(client)
        }
    }
}
