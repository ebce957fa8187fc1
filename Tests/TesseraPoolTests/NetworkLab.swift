import Foundation
import XCTest

/// Hosts for tests made as Linux network namespaces, each with one veth link (`eth0`)
/// to a bridge in the root namespace, on a private test subnet. Needs root and
/// iproute2; `init` throws `XCTSkip` with the reason when namespaces cannot be made.
/// Everything it made is removed in `deinit` (and stale labs of dead test runs first).
final class NetworkLab {
    struct Host {
        let name: String
        let namespace: String
        /// The root-namespace end of the host's link: cutting it cuts the host off.
        let link: String
        let address: String
    }

    let tag: String
    let bridge: String
    private(set) var hosts: [String: Host] = [:]
    private var processes: [Process] = []
    private let subnet = "10.203.77"

    init(hosts names: [String]) throws {
        guard geteuid() == 0 else { throw XCTSkip("multi-host test skipped: needs root to create network namespaces") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") || FileManager.default.isExecutableFile(atPath: "/sbin/ip")
            || FileManager.default.isExecutableFile(atPath: "/usr/bin/ip") else {
            throw XCTSkip("multi-host test skipped: iproute2 (`ip`) is not installed")
        }
        NetworkLab.removeStale()
        tag = "ts" + String(getpid() % 100_000, radix: 36)
        bridge = tag + "br"
        do {
            try NetworkLab.ip(["link", "add", bridge, "type", "bridge"])
        } catch {
            throw XCTSkip("multi-host test skipped: cannot create a bridge here (\(error)); no namespaces, no test")
        }
        do {
            try NetworkLab.ip(["link", "set", bridge, "up"])
            for (i, name) in names.enumerated() {
                let ns = "tessera-\(getpid())-\(name)"
                let link = "\(tag)v\(i)"
                let address = "\(subnet).\(i + 1)"
                try NetworkLab.ip(["netns", "add", ns])
                hosts[name] = Host(name: name, namespace: ns, link: link, address: address)
                try NetworkLab.ip(["link", "add", link, "type", "veth", "peer", "name", "\(tag)p\(i)", "netns", ns])
                try NetworkLab.ip(["link", "set", link, "master", bridge, "up"])
                try NetworkLab.ip(["-n", ns, "link", "set", "\(tag)p\(i)", "name", "eth0"])
                try NetworkLab.ip(["-n", ns, "addr", "add", "\(address)/24", "dev", "eth0"])
                try NetworkLab.ip(["-n", ns, "link", "set", "eth0", "up"])
                try NetworkLab.ip(["-n", ns, "link", "set", "lo", "up"])
            }
        } catch {
            teardown()
            throw XCTSkip("multi-host test skipped: cannot create network namespaces here (\(error))")
        }
    }

    deinit { teardown() }

    func address(_ host: String) -> String { hosts[host]!.address }

    /// Starts `command` inside `host`'s namespace; killed at teardown.
    func spawn(_ host: String, _ command: [String], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ip", "netns", "exec", hosts[host]!.namespace] + command
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try p.run()
        processes.append(p)
        return p
    }

    /// Runs `command` inside `host`'s namespace to its end.
    @discardableResult
    func run(_ host: String, _ command: [String]) throws -> (status: Int32, out: String, err: String) {
        try NetworkLab.exec(["ip", "netns", "exec", hosts[host]!.namespace] + command)
    }

    /// Cuts the host's link (`ip link set … down` on the bridge side), or restores it.
    func setLink(_ host: String, up: Bool) throws {
        try NetworkLab.ip(["link", "set", hosts[host]!.link, up ? "up" : "down"])
    }

    private func teardown() {
        for p in processes where p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        processes.removeAll()
        for h in hosts.values { _ = try? NetworkLab.exec(["ip", "netns", "del", h.namespace]) }
        hosts.removeAll()
        _ = try? NetworkLab.exec(["ip", "link", "del", bridge])
    }

    /// Labs left by test runs that were killed: their namespaces carry the dead pid.
    private static func removeStale() {
        guard let list = try? exec(["ip", "netns", "list"]) else { return }
        for line in list.out.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            let parts = name.split(separator: "-")
            guard parts.count >= 3, parts[0] == "tessera", let pid = Int32(parts[1]), kill(pid, 0) != 0 else { continue }
            _ = try? exec(["ip", "netns", "del", name])
            _ = try? exec(["ip", "link", "del", "ts" + String(pid % 100_000, radix: 36) + "br"])
        }
    }

    struct CommandFailed: Error, CustomStringConvertible {
        let command: [String]
        let status: Int32
        let err: String
        var description: String { "\(command.joined(separator: " ")) exited \(status): \(err)" }
    }

    static func ip(_ args: [String]) throws {
        let r = try exec(["ip"] + args)
        guard r.status == 0 else { throw CommandFailed(command: ["ip"] + args, status: r.status, err: r.err) }
    }

    static func exec(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        p.standardInput = FileHandle.nullDevice
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // Read both pipes at once so neither fills up and blocks the child.
        final class Box: @unchecked Sendable { var data = Data() }
        let errBox = Box()
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            errBox.data = err.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: errBox.data, as: UTF8.self))
    }
}
