import Foundation
import TesseraModel
import TesseraTasks
import TesseraWire
@testable import TesseraWorker
import XCTest

/// The worker's protocol decisions, alone: no socket, no thread, no coordinator.
final class WorkerSessionTests: XCTestCase {
    let job = ExecutableJob(kind: .noop, outputs: [], outputRoot: "/out", options: JobOptions())

    func task(_ n: UInt64, job: String = "j-1", attempt: UInt32 = 1) -> TaskAssignment {
        TaskAssignment(ref: TaskRef(task: n, attempt: attempt), job: job, input: InputFile(path: "/in/\(n).jpg", root: "/in"), leaseSeconds: 120)
    }

    func accepted(_ effects: [WorkerSession.Effect]) -> [UInt64] {
        effects.compactMap { if case .accept(let t, _) = $0 { return t.ref.task } else { return nil } }
    }

    func testTasksWaitForTheirJobThenRunInOrder() throws {
        var s = WorkerSession()
        let first = try s.receive(TaskAssignment.envelope([task(1), task(2)]), now: 0, draining: false)
        XCTAssertEqual(accepted(first), [], "no job announced yet: parked")
        XCTAssertEqual(s.parked["j-1"]?.count, 2)
        let announced = try s.receive(Envelope(MessageType.job, json: JobAnnouncement(job: "j-1", spec: job)), now: 1, draining: false)
        XCTAssertEqual(accepted(announced), [1, 2])
        XCTAssertNil(s.parked["j-1"])
        XCTAssertEqual(accepted(try s.receive(TaskAssignment.envelope([task(3)]), now: 2, draining: false)), [3], "a known job: at once")
    }

    func testAReregisterDropsWhatWaitsAndSaysHelloOnceForAStorm() throws {
        var s = WorkerSession()
        _ = try s.receive(TaskAssignment.envelope([task(7, job: "j-2")]), now: 0, draining: false)
        s.awaitBytes(task(8))
        let reregister = Envelope(MessageType.reregister)
        let effects = try s.receive(reregister, now: 10, draining: false)
        guard effects.count == 2, case .forgetQueued = effects[0], case .hello = effects[1] else {
            return XCTFail("expected forgetQueued then hello, got \(effects)")
        }
        XCTAssertTrue(s.parked.isEmpty)
        XCTAssertTrue(s.awaitingBytes.isEmpty)
        _ = s.helloSent(now: 10)
        // The hundreds of reregisters answering what was sent before the hello arrived.
        for t in stride(from: 10.1, to: 14.9, by: 0.1) {
            XCTAssertTrue(try s.receive(reregister, now: t, draining: false).isEmpty, "at \(t) s the hello is on its way")
        }
        XCTAssertEqual(try s.receive(reregister, now: 15.1, draining: false).count, 2, "5 s without a welcome: hello again")
        _ = try s.receive(Envelope(MessageType.welcome), now: 16, draining: false)
        XCTAssertNil(s.helloSentAt)
        XCTAssertTrue(try s.receive(reregister, now: 16.5, draining: true).isEmpty, "a draining worker does not come back")
    }

    func testReportsAreKeptUntilAcknowledgedAndSentAgainWhenStale() throws {
        var s = WorkerSession()
        let reports = (1...3).map { TaskReport(ref: TaskRef(task: $0, attempt: 1), status: .succeeded) }
        s.sent(reports, now: 100)
        _ = try s.receive(Envelope(MessageType.ack, body: TaskRef.encode([reports[1].ref])), now: 101, draining: false)
        XCTAssertEqual(Set(s.unacked.keys.map(\.task)), [1, 3])
        XCTAssertEqual(s.stale(now: 102, after: 5).count, 0)
        XCTAssertEqual(s.stale(now: 106, after: 5).map(\.ref.task).sorted(), [1, 3])
        XCTAssertEqual(s.stale(now: 107, after: 5).count, 0, "sent again at 106: not stale at 107")
        // A hello lists them, with the tasks waiting for bytes.
        s.awaitBytes(task(9))
        XCTAssertEqual(Set(s.helloSent(now: 108).map(\.task)), [1, 3, 9])
    }

    func testARefusedKeyBacksOffUpToAMinute() throws {
        var s = WorkerSession()
        let forbidden = Envelope(MessageType.error, json: ErrorReply(code: "forbidden", message: "revoked key"))
        var now = 0.0
        var pauses: [Double] = []
        for _ in 0..<8 {
            _ = try s.receive(forbidden, now: now, draining: false)
            XCTAssertFalse(s.mayHeartbeat(now: now))
            // Replies to what was sent before the pause change nothing.
            _ = try s.receive(forbidden, now: now + 0.5, draining: false)
            pauses.append(s.refusedUntil - now)
            now = s.refusedUntil
            XCTAssertTrue(s.mayHeartbeat(now: now))
        }
        XCTAssertEqual(pauses, [2, 4, 8, 16, 32, 60, 60, 60])
        _ = try s.receive(Envelope(MessageType.welcome), now: now, draining: false)
        _ = try s.receive(forbidden, now: now, draining: false)
        XCTAssertEqual(s.refusedUntil - now, 2, "a welcome resets the back-off")
    }

    func testRevokesAndDrainAndHandingBack() throws {
        var s = WorkerSession()
        s.awaitBytes(task(4))
        s.awaitBytes(task(5))
        let effects = try s.receive(Envelope(MessageType.revoke, body: TaskRef.encode([task(4).ref])), now: 0, draining: false)
        guard case .revoke(let refs) = effects.first else { return XCTFail("\(effects)") }
        XCTAssertEqual(refs, [task(4).ref])
        XCTAssertEqual(Array(s.awaitingBytes.keys), [task(5).ref])
        guard case .drain = try s.receive(Envelope(MessageType.drain), now: 1, draining: false).first else { return XCTFail() }
        _ = try s.receive(TaskAssignment.envelope([task(6, job: "j-9")]), now: 2, draining: false)
        XCTAssertEqual(Set(s.handBack().map(\.task)), [5, 6])
        XCTAssertTrue(s.parked.isEmpty && s.awaitingBytes.isEmpty)
        guard case .log(.warning, _) = try s.receive(Envelope("nonsense"), now: 3, draining: false).first else { return XCTFail() }
    }
}
