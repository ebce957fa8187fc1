import CoreMetrics
import Foundation
import Prometheus

/// A metric's name, kind and help line: declared once beside the code that records it,
/// handed to the exporter so every family gets a `# HELP`.
public struct MetricInfo: Sendable, Hashable {
    public let name: String
    public let help: String

    public init(_ name: String, _ help: String) {
        self.name = name
        self.help = help
    }
}

/// The swift-metrics factory a coordinator or worker records into, exported as
/// Prometheus text: swift-prometheus' registry underneath, with help text for every
/// family, seconds for every duration, and the standard `process_*` metrics and
/// `tessera_build_info` added at each scrape.
///
/// Libraries take a `MetricsFactory` and never see Prometheus; the executable picks
/// this exporter (the edge), and `exposition()` is what `/metrics` serves.
public final class MetricsExporter: MetricsFactory, @unchecked Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let help: [String: String]
    private let lock = NSLock()
    private let process: ProcessMetrics
    /// Upper bounds of duration histograms: 1 ms … 5 min.
    public static let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(20), .milliseconds(50),
        .milliseconds(100), .milliseconds(200), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10),
        .seconds(30), .seconds(60), .seconds(300),
    ]

    /// - Parameters:
    ///   - metrics: every metric this process may record (names not listed get no help line).
    ///   - role: `coordinator`, `worker` or `run`, a label of `tessera_build_info`.
    ///   - version: the program's version.
    public init(metrics: [MetricInfo], role: String, version: String) {
        var h: [String: String] = [:]
        for m in metrics { h[m.name] = m.help }
        help = h
        let build = registry.makeGauge(name: "tessera_build_info", labels: [("version", version), ("role", role)],
                                       help: "Always 1; the labels say which Tessera this is.")
        build.set(Double(1))
        process = ProcessMetrics(registry: registry)
    }

    /// The Prometheus text exposition (format 0.0.4) of everything recorded so far.
    public func exposition() -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        process.update()
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 << 10)
        registry.emit(into: &buffer)
        return buffer
    }

    /// The content type of `exposition()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private func helpText(_ name: String) -> String { help[name] ?? "" }

    // MARK: MetricsFactory

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: helpText(label))
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: helpText(label))
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(name: label, labels: dimensions, help: helpText(label)) }
        return registry.makeValueHistogram(name: label, labels: dimensions,
                                           buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
                                           help: helpText(label))
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(name: label, labels: dimensions, help: helpText(label))
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(name: label, labels: dimensions, buckets: Self.durationBuckets, help: helpText(label))
    }

    public func destroyCounter(_ handler: any CounterHandler) {
        if let c = handler as? Prometheus.Counter { registry.unregisterCounter(c) }
    }

    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let c = handler as? Prometheus.Counter { registry.unregisterCounter(c) }
    }

    public func destroyRecorder(_ handler: any RecorderHandler) {
        if let g = handler as? Prometheus.Gauge { registry.unregisterGauge(g) }
        if let h = handler as? Prometheus.Histogram<Double> { registry.unregisterValueHistogram(h) }
    }

    public func destroyMeter(_ handler: any MeterHandler) {
        if let g = handler as? Prometheus.Gauge { registry.unregisterGauge(g) }
    }

    public func destroyTimer(_ handler: any TimerHandler) {
        if let h = handler as? Prometheus.Histogram<Duration> { registry.unregisterDurationHistogram(h) }
    }
}
