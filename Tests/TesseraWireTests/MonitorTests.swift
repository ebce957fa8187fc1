import Foundation
import TesseraWire
import XCTest

/// libzmq's I/O thread writes a monitored socket's events into the monitor's PAIR socket
/// and blocks when nobody reads it. A monitor that is closed must therefore stop the
/// monitoring first: otherwise the next event (a connection retried, every 100 ms while
/// the peer is down) freezes every socket of the context. A coordinator restart did just
/// that to `CoordinatorClient`: its `wait` then never heard the restarted coordinator.
final class MonitorTests: XCTestCase {
    func testAClosedMonitorNeverStallsTheContext() throws {
        let context = ZMQContext()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tessera-monitor-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }

        // A socket that keeps retrying a peer that is not there, its monitor closed.
        let retrying = try ZMQSocket(context, .dealer)
        try retrying.setReconnect(initialMilliseconds: 10, maximumMilliseconds: 10)
        let monitor = try ZMQMonitor(context, watching: retrying, events: [.connectRetried])
        try retrying.connect("ipc://\(dir.path)/nobody.sock")
        monitor.close()
        usleep(300_000)  // dozens of retries, each an event for the closed monitor

        // The same context must still carry a request and its answer.
        let router = try ZMQSocket(context, .router)
        defer { router.close() }
        try router.bind("ipc://\(dir.path)/router.sock")
        let dealer = try ZMQSocket(context, .dealer)
        defer { dealer.close() }
        try dealer.connect("ipc://\(dir.path)/router.sock")
        try dealer.send([Array("ping".utf8)])
        var poller = ZMQPoller()
        poller.add(router)
        let readable = try poller.poll(timeoutMilliseconds: 3000)
        XCTAssertTrue(readable[0], "the context's I/O thread is stuck sending a monitor event nobody reads")
        if readable[0] {
            let frames = try XCTUnwrap(try router.receive(dontWait: true))
            XCTAssertEqual(frames.last, Array("ping".utf8))
        }
        retrying.close()
    }
}
