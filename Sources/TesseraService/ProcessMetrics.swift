import Foundation
import Prometheus

/// The standard `process_*` metrics every Prometheus client library exports (CPU time,
/// resident and virtual memory, open and maximum file descriptors, start time), read
/// from `/proc/self` at each scrape.
final class ProcessMetrics {
    private let cpu: Prometheus.Counter
    private let resident: Prometheus.Gauge
    private let virtual: Prometheus.Gauge
    private let openFDs: Prometheus.Gauge
    private let maxFDs: Prometheus.Gauge
    private let startTime: Prometheus.Gauge
    private var cpuSeen = 0.0
    private let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    init(registry: PrometheusCollectorRegistry) {
        cpu = registry.makeCounter(name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.")
        resident = registry.makeGauge(name: "process_resident_memory_bytes", help: "Resident memory size in bytes.")
        virtual = registry.makeGauge(name: "process_virtual_memory_bytes", help: "Virtual memory size in bytes.")
        openFDs = registry.makeGauge(name: "process_open_fds", help: "Number of open file descriptors.")
        maxFDs = registry.makeGauge(name: "process_max_fds", help: "Maximum number of open file descriptors.")
        startTime = registry.makeGauge(name: "process_start_time_seconds",
                                       help: "Start time of the process since unix epoch in seconds.")
        if let stat = Self.stat(), stat.count > 20, let start = Double(stat[20]), let boot = Self.bootTime() {
            startTime.set(boot + start / ticks)
        }
        update()
    }

    func update() {
        if let stat = Self.stat(), stat.count > 22 {
            // proc(5) field k (1-based) is stat[k - 2]: pid and command are one element here.
            // utime 14, stime 15, starttime 22, vsize 23, rss 24 (pages).
            let cpuNow = ((Double(stat[12]) ?? 0) + (Double(stat[13]) ?? 0)) / ticks
            if cpuNow > cpuSeen {
                cpu.increment(by: cpuNow - cpuSeen)
                cpuSeen = cpuNow
            }
            virtual.set(Double(stat[21]) ?? 0)
            resident.set((Double(stat[22]) ?? 0) * Double(sysconf(Int32(_SC_PAGESIZE))))
        }
        var fds = 0
        if let dir = opendir("/proc/self/fd") {
            while let entry = readdir(dir) {
                if entry.pointee.d_name.0 != UInt8(ascii: ".") { fds += 1 }
            }
            closedir(dir)
            openFDs.set(Double(max(0, fds - 1)))  // not counting the directory stream itself
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs.set(Double(limit.rlim_cur)) }
    }

    /// `/proc/self/stat` split into fields, the command name (which may hold spaces) as one.
    private static func stat() -> [String]? {
        guard let text = read("/proc/self/stat"), let close = text.lastIndex(of: ")") else { return nil }
        let pid = text[..<text.index(after: close)]
        return [String(pid)] + text[text.index(after: close)...].split(separator: " ").map(String.init)
    }

    private static func bootTime() -> Double? {
        guard let text = read("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// procfs files report size 0: read them with read(2).
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
