import Foundation
import TesseraTasks
import TesseraTestSupport
import XCTest

/// Issue 51's cases that need a coordinator and workers: the API switched off says how to
/// turn it on; a worker's memory plan counts what each format allocates.
final class RobustnessPoolTests: XCTestCase {
    /// With the API off, `POST /api/v1/jobs` said `405 only GET and HEAD`.
    func testTheAPIOffSaysHowToTurnItOn() throws {
        let port = freePort()
        let cluster = try Cluster(coordinatorArguments: ["--metrics-port", String(port)])
        try cluster.startCoordinator()
        XCTAssertTrue(waitForPort(port))
        let r = try runProcess("curl", ["-s", "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
                                        "--data-binary", "{}", "http://127.0.0.1:\(port)/api/v1/jobs"])
        let lines = r.stdout.split(separator: "\n")
        XCTAssertEqual(lines.last, "404", r.stdout)
        XCTAssertTrue(r.stdout.contains("the HTTP API is off: start the coordinator with --api-tokens DIR"), r.stdout)
        let unknown = try runProcess("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", "http://127.0.0.1:\(port)/nothing"])
        XCTAssertEqual(unknown.stdout, "404", "no such route: 404 whatever the method")
    }

    /// A 60 kB GIF of 9000×9000 took a worker with `--memory-limit 150` to 570 MB: its canvas
    /// was not in the plan. Now it fails `out-of-memory` before the canvas exists, still and
    /// animated; the worker lives on and renders the next file.
    func testAGIFsCanvasIsInTheMemoryPlan() throws {
        guard let ffmpeg = which("ffmpeg") else { throw XCTSkip("ffmpeg (Debian's) is not installed") }
        let cluster = try Cluster()
        let made = try runProcess(ffmpeg, ["-loglevel", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=9000x9000", "-frames:v", "1",
                                           cluster.dir + "/in/big.gif"])
        XCTAssertEqual(made.status, 0, made.stderr)
        _ = try cluster.makeImages(1, width: 320, height: 240)
        try cluster.startCoordinator()
        try cluster.startWorker(["--memory-limit", "150"])
        for animated in [false, true] {
            let job = try cluster.job(name: "gif-\(animated)", presets: ["favicon"]) {
                $0.options.maxMegapixels = 200
                $0.options.incremental = false
                $0.output = cluster.dir + "/out-\(animated)"
                if animated { $0.outputs[0].recipe.output.format = .webp; $0.outputs[0].recipe.output.animated = true }
            }
            let id = try cluster.client.submit(job).job
            let end = try cluster.waitFor(id) { $0.isTerminal }
            XCTAssertEqual(end.succeeded, 1, "the JPEG renders")
            let gif = try XCTUnwrap(try cluster.records(id).first { $0.input.hasSuffix("big.gif") })
            XCTAssertEqual(gif.error?.code, "out-of-memory", "\(animated): \(gif.error?.message ?? "rendered")")
            XCTAssertLessThan(gif.peakMemory?.bytes ?? 0, 150 << 20, "refused before the canvas existed")
        }
    }
}
