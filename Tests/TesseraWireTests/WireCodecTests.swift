import Foundation
import TesseraTasks
import TesseraWire
import TesseraTestSupport
import XCTest
import TesseraModel

/// The message codec alone: every message comes back as it went, and bytes that are not
/// a message — truncated, oversized counts, garbage — are a `WireError`, never a crash
/// and never an allocation sized by what the bytes claim.
final class WireCodecTests: XCTestCase {
    let assignments = [
        TaskAssignment(ref: TaskRef(task: 1, attempt: 0x0001_0001), job: "j-1", input: InputFile(path: "/in/a b/ü.jpg", root: "/in"),
                       leaseSeconds: 120),
        TaskAssignment(ref: TaskRef(task: 2, attempt: 7), job: "j-1", input: InputFile(path: "/in/c.jpg", root: "/in"),
                       expectedHash: 0xDEAD_BEEF, inlineInput: [0xFF, 0xD8, 0xFF], leaseSeconds: 2.5),
        TaskAssignment(ref: TaskRef(task: .max, attempt: .max), job: "j-2", input: InputFile(path: "/big.tif", root: "/", part: .descriptor),
                       leaseSeconds: 1),
        TaskAssignment(ref: TaskRef(task: 3, attempt: 1), job: "j-2", input: InputFile(path: "/big.tif", root: "/", part: .band(shrink: 2, rows: 3..<7)),
                       leaseSeconds: 1),
    ]

    var report: TaskReport {
        var timings = StageTimings()
        for (i, stage) in Stage.allCases.enumerated() { timings[stage] = Double(i + 1) * 1.5 }
        return TaskReport(ref: TaskRef(task: 42, attempt: 3), status: .failed, retryable: true,
                   timings: timings, peakMemory: PeakMemory(bytes: 96 << 20, isUpperBound: true), inputHash: 99,
                   errorCode: "corrupt", errorMessage: "x.jpg: bad Huffman table", record: Array("{\"input\":\"x.jpg\"}".utf8),
                   inlineOutputs: [InlineFile(path: "thumbs/x.jpg", bytes: [1, 2, 3]), InlineFile(path: "icons/x.png", bytes: [])])
    }

    func roundTrip(_ e: Envelope) throws -> Envelope { try Envelope(frames: e.frames) }

    func testEveryMessageComesBackAsItWent() throws {
        let refs = [TaskRef(task: 0, attempt: 0), TaskRef(task: .max, attempt: .max)]
        XCTAssertEqual(try TaskRef.decode(TaskRef.encode(refs)), refs)
        XCTAssertEqual(try TaskRef.decode(TaskRef.encode([])), [])

        let tasks = try TaskAssignment.decode(roundTrip(TaskAssignment.envelope(assignments)))
        XCTAssertEqual(tasks.map { $0.ref }, assignments.map { $0.ref })
        XCTAssertEqual(tasks.map { $0.input }, assignments.map { $0.input })
        XCTAssertEqual(tasks.map { $0.input.part }, [nil, nil, .descriptor, .band(shrink: 2, rows: 3..<7)])
        XCTAssertEqual(tasks.map { $0.job }, assignments.map { $0.job })
        XCTAssertEqual(tasks.map { $0.expectedHash }, assignments.map { $0.expectedHash })
        XCTAssertEqual(tasks.map { $0.inlineInput }, assignments.map { $0.inlineInput })
        XCTAssertEqual(tasks.map { $0.leaseSeconds }, assignments.map { $0.leaseSeconds })

        let r = try XCTUnwrap(try TaskReport.decode(roundTrip(TaskReport.envelope([report, report]))).last)
        XCTAssertEqual(r.ref, report.ref)
        XCTAssertEqual(r.status, .failed)
        XCTAssertTrue(r.retryable)
        XCTAssertEqual(r.timings, report.timings)
        XCTAssertEqual(r.peakMemory, PeakMemory(bytes: 96 << 20, isUpperBound: true))
        XCTAssertEqual(r.inputHash, 99)
        XCTAssertEqual([r.errorCode, r.errorMessage], [report.errorCode, report.errorMessage])
        XCTAssertEqual(r.record, report.record)
        XCTAssertEqual(r.inlineOutputs.map(\.path), ["thumbs/x.jpg", "icons/x.png"])
        XCTAssertEqual(r.inlineOutputs.map(\.bytes), [[1, 2, 3], []])

        let hello = WorkerHello(worker: "w1", host: "h", pid: 9, concurrency: 2, credit: 8, inline: true,
                                holding: refs)
        let h = try roundTrip(Envelope(MessageType.hello, json: hello)).decode(WorkerHello.self)
        XCTAssertEqual([h.worker, h.host], ["w1", "h"])
        XCTAssertEqual(h.holding, refs)
        XCTAssertEqual(h.protocolVersion, Envelope.version)
        XCTAssertEqual(try roundTrip(Envelope(MessageType.bye, json: WorkerBye(returned: refs))).decode(WorkerBye.self).returned, refs)
        let page = try ResultsReply(body: roundTrip(ResultsReply(records: [Array("{\"a\":1}".utf8), Array("{\"b\":\"é\"}".utf8)],
                                                                   next: 77).envelope).body)
        XCTAssertEqual(page.next, 77)
        XCTAssertEqual(page.records.map { String(decoding: $0, as: UTF8.self) }, ["{\"a\":1}", "{\"b\":\"é\"}"])
        XCTAssertNil(try ResultsReply(body: ResultsReply(records: [], next: nil).envelope.body).next)
        XCTAssertThrowsError(try ResultsReply(body: Array("[1]".utf8))) { XCTAssertTrue($0 is WireError) }
        // Records are cut apart verbatim, whatever their strings hold; anything not laid out as
        // a coordinator writes it is parsed in full, and fails as a wire error when broken.
        let tricky = [#"{"a":"}],\"{[","b":[{"c":{}}],"d":-1.5e3}"#, #"{"e":"\\"}"#, "{}"].map { Array($0.utf8) }
        let cut = try ResultsReply(body: ResultsReply(records: tricky, next: 9).envelope.body)
        XCTAssertEqual(cut.records, tricky)
        XCTAssertEqual(cut.next, 9)
        let reordered = try ResultsReply(body: Array(#"{"records":[{"b":1,"a":2}],"next":3}"#.utf8))
        XCTAssertEqual(reordered.records.map { String(decoding: $0, as: UTF8.self) }, [#"{"a":2,"b":1}"#])
        XCTAssertEqual(reordered.next, 3)
        for broken in [#"{"next":null,"records":[{"a":1}"#, #"{"next":null,"records":[{"a":"}]}"#, #"{"next":null,"records":[1]}"#, #"{"next":,"records":[]}"#] {
            XCTAssertThrowsError(try ResultsReply(body: Array(broken.utf8)), broken) { XCTAssertTrue($0 is WireError, "\($0)") }
        }
        let spec = JobSpec(name: "n", inputs: [.path("/in", patterns: ["*.jpg"], recursive: false)], output: "/out")
        XCTAssertEqual(try roundTrip(Envelope(MessageType.submit, json: SubmitRequest(job: spec))).decode(SubmitRequest.self).job, spec)
    }

    func testStatusTimesSayTheirUnitAndOldKeysStillLoad() throws {
        let status = JobStatus(id: "j-1", name: "n", kind: .thumbnail, priority: 0, state: .succeeded, total: 2, pending: 0,
                               running: 0, succeeded: 2, failed: 0, skipped: 0, cancelled: 0, submitted: 1_700_000_000.5,
                               finished: 1_700_000_002)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(status)) as? [String: Any])
        XCTAssertEqual(json["submittedUnixSeconds"] as? Double, 1_700_000_000.5)
        XCTAssertEqual(json["finishedUnixSeconds"] as? Double, 1_700_000_002)
        XCTAssertNil(json["submitted"])
        XCTAssertEqual(try JSONDecoder().decode(JobStatus.self, from: JSONEncoder().encode(status)), status)
        let old = Data(#"{"id":"j-1","name":"n","kind":"thumbnail","priority":0,"state":"succeeded","total":2,"pending":0,"running":0,"succeeded":2,"failed":0,"skipped":0,"cancelled":0,"submitted":1700000000.5,"finished":1700000002}"#.utf8)
        XCTAssertEqual(try JSONDecoder().decode(JobStatus.self, from: old), status)

        var record = TaskRecord(input: "a.jpg", status: .succeeded)
        record.finishedAt = 1_700_000_003
        let r = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as? [String: Any])
        XCTAssertEqual(r["finishedUnixSeconds"] as? Double, 1_700_000_003)
        let oldRecord = Data(#"{"input":"a.jpg","status":"succeeded","finishedAt":1700000003}"#.utf8)
        XCTAssertEqual(try JSONDecoder().decode(TaskRecord.self, from: oldRecord).finishedAt, 1_700_000_003)
    }

    func testEveryTruncationIsAWireError() throws {
        for e in [TaskAssignment.envelope(assignments), TaskReport.envelope([report])] {
            for n in 0..<e.body.count {
                var cut = e
                cut.body = Array(e.body.prefix(n))
                XCTAssertThrowsError(try decodeAny(cut), "\(e.type) cut at \(n) of \(e.body.count)") {
                    XCTAssertTrue($0 is WireError, "\($0)")
                }
            }
        }
        for n in 0..<TaskRef.encode([TaskRef(task: 1, attempt: 1)]).count {
            XCTAssertThrowsError(try TaskRef.decode(Array(TaskRef.encode([TaskRef(task: 1, attempt: 1)]).prefix(n))))
        }
    }

    func testClaimedSizesAreCheckedBeforeAnythingIsAllocated() throws {
        var w = BinaryWriter()
        w.u32(.max)
        for type in [MessageType.tasks, MessageType.report] {
            XCTAssertThrowsError(try decodeAny(Envelope(type, body: w.bytes))) { XCTAssertTrue($0 is WireError) }
        }
        XCTAssertThrowsError(try TaskRef.decode(w.bytes)) { XCTAssertEqual(($0 as? WireError)?.reason, "task list claims 4294967295 entries") }
        // One task whose job name claims 4 GB.
        var t = BinaryWriter()
        t.u32(1); t.u64(1); t.u32(1); t.u32(0xFFFF_FFF0)
        t.u32(0); t.u32(0); t.u32(0); t.u32(0); t.u32(0); t.u32(0)
        XCTAssertThrowsError(try TaskAssignment.decode(Envelope(MessageType.tasks, body: t.bytes))) {
            XCTAssertTrue(($0 as? WireError)?.reason.hasPrefix("needed 4294967280 bytes") == true, "\($0)")
        }
        // Inline payloads named but not sent.
        var missing = TaskAssignment.envelope(assignments)
        missing.payloads = []
        XCTAssertThrowsError(try TaskAssignment.decode(missing)) { XCTAssertEqual(($0 as? WireError)?.reason, "task 2 names payload 0") }
        var noOutputs = TaskReport.envelope([report])
        noOutputs.payloads = [[1]]
        XCTAssertThrowsError(try TaskReport.decode(noOutputs)) { XCTAssertTrue($0 is WireError) }
    }

    func testFramesThatAreNotAMessageAreRefused() throws {
        XCTAssertThrowsError(try Envelope(frames: [Envelope.tag, Array("hb".utf8)])) {
            XCTAssertEqual(($0 as? WireError)?.reason, "expected at least 3 frames, got 2")
        }
        XCTAssertThrowsError(try Envelope(frames: [Array("TSR9".utf8), [], []])) {
            XCTAssertEqual(($0 as? WireError)?.reason, "unsupported protocol tag \"TSR9\" (this coordinator speaks TSR1)")
        }
        XCTAssertThrowsError(try Envelope(MessageType.hello, body: Array("{\"worker\":".utf8)).decode(WorkerHello.self)) {
            XCTAssertTrue(($0 as? WireError)?.reason.hasPrefix("hello: body is not the expected JSON") == true)
        }
        // A pyramid part that is not one.
        var bad = BinaryWriter()
        bad.u32(1); bad.u64(5); bad.u32(1)
        for text in ["j", "/a.jpg", "/", "k1:r9-2"] { bad.string(text) }
        bad.u64(0); bad.f32(1); bad.u32(.max)
        XCTAssertThrowsError(try TaskAssignment.decode(Envelope(MessageType.tasks, body: bad.bytes))) {
            XCTAssertEqual(($0 as? WireError)?.reason, "task 5 names no pyramid part (\"k1:r9-2\")")
        }
        var report = TaskReport.envelope([self.report])
        report.body[16] = 9  // status byte (after count u32, task u64, attempt u32)
        XCTAssertThrowsError(try TaskReport.decode(report)) { XCTAssertEqual(($0 as? WireError)?.reason, "unknown task status") }
    }

    /// Random bytes and random mutations of real messages: decoded or refused, never a crash.
    func testGarbageNeverCrashes() throws {
        var rng = SeededGenerator(seed: 29)
        let real = [TaskAssignment.envelope(assignments), TaskReport.envelope([report])]
        var refused = 0
        for i in 0..<20_000 {
            var e = real[i % 2]
            if i % 3 == 0 {
                e.body = (0..<Int.random(in: 0..<200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                for _ in 0..<Int.random(in: 1...4, using: &rng) where !e.body.isEmpty {
                    e.body[Int.random(in: 0..<e.body.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            do { try decodeAny(e) } catch is WireError { refused += 1 }
        }
        XCTAssertGreaterThan(refused, 5000)
    }

    private func decodeAny(_ e: Envelope) throws {
        if e.type == MessageType.tasks { _ = try TaskAssignment.decode(e) } else { _ = try TaskReport.decode(e) }
    }
}
