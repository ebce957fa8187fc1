import Foundation
import TesseraImaging
import TesseraTasks
import TesseraTestSupport
import XCTest

/// The dashboard and the HTML report in a real browser: Debian's chromium driven by
/// Selenium (chromium-driver, PyPI selenium; `.ci/run` installs them), on a coordinator
/// with real workers and a real job. Assertions come from the DOM.
final class DashboardTests: XCTestCase {
    /// Opens `url` and waits for `until` (a CSS selector) or 30 s; prints one JSON object:
    /// what the tests assert on, the browser's console messages, and saves a screenshot.
    static let probe = #"""
    import json, sys, time
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    url, until, shot = sys.argv[1], sys.argv[2], sys.argv[3]
    then = sys.argv[4] if len(sys.argv) > 4 else ""
    o = webdriver.ChromeOptions()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1500"]:
        o.add_argument(a)
    o.binary_location = "/usr/bin/chromium"
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    try:
        t0 = time.time()
        d.get(url)
        first = None
        found = False
        while time.time() - t0 < 30:
            if first is None and d.find_elements("css selector", "#jobs tbody tr, #job h2"): first = time.time() - t0
            if d.find_elements("css selector", until): found = True; break
            time.sleep(0.05)
        # What the page showed when `until` matched, before `then` changed it.
        stuck_before = len(d.find_elements("css selector", "table.stuck tr[data-task]"))
        if found and then:
            d.execute_script(then)
            time.sleep(1)
        # One script call reads everything: the page redraws on every event, so elements
        # found one by one could be replaced between reads.
        out = d.execute_script("""
          const q = (s) => Array.from(document.querySelectorAll(s));
          const e = document.getElementById('data');
          return {
            percent: q('#jobs .progress').map((x) => x.getAttribute('data-percent')),
            failureCodes: q('table.failures tr[data-code]').map((x) => x.getAttribute('data-code')),
            failureText: q('table.failures').map((x) => x.textContent).join(' '),
            histogramBars: q('svg.histogram rect').length,
            timelinePoints: q('svg.timeline polyline').map((x) => x.getAttribute('data-points')),
            images: q('img[src="x"]').length,
            workerStates: q('#workers tr[data-worker]').map((x) => x.getAttribute('class')),
            stages: q('table.stages tr[data-stage]').map((x) => x.getAttribute('data-stage')),
            compareColumns: q('table.compare thead th').length,
            stuckTasks: q('table.stuck tr[data-task]').length,
            sparkPoints: q('svg.spark.rss polyline').map((x) => +x.getAttribute('data-points')),
            // Chart labels outside their chart, or over their neighbour; tables of headers only.
            clippedLabels: q('svg').flatMap((g) => {
              const w = +g.getAttribute('width'), boxes = Array.from(g.querySelectorAll('text')).map((t) => [t.getBBox(), t.textContent]);
              const out = boxes.filter(([b]) => b.x < 0 || b.x + b.width > w + 0.5).map(([, t]) => t);
              const xs = boxes.filter(([b]) => b.y > +g.getAttribute('height') - 16).sort((a, b) => a[0].x - b[0].x);
              for (let i = 1; i < xs.length; i++) if (xs[i][0].x < xs[i - 1][0].x + xs[i - 1][0].width) out.push(xs[i][1]);
              return out; }),
            axisLabels: q('svg.histogram text.axis, svg.timeline text.axis').length,
            emptyTables: q('table').filter((t) => t.offsetParent !== null && t.querySelector('thead') && !t.querySelector('tbody tr'))
              .map((t) => t.className || t.id),
            scaleKeys: q('table.scales tr[data-key]').map((x) => x.getAttribute('data-key')),
            stageBars: q('svg.stage-shares rect').length,
            stageLabels: q('svg.stage-shares text.axis.x').map((x) => x.textContent),
            workerDone: q('#workers tr[data-worker]').map((r) => +r.children[4].textContent),
            jobWorkerTasks: q('table.job-workers tbody tr').map((r) => +r.children[1].textContent),
            jobDetails: q('section.job-detail h2').map((h) => h.textContent),
            emptyNotes: q('p.empty').map((x) => x.className + ': ' + x.textContent),
            embedded: e ? JSON.parse(e.textContent) : null };""")
        out.update({"found": found, "stuckBefore": stuck_before, "firstPaintSeconds": first, "untilSeconds": time.time() - t0,
                    "console": [m for m in d.get_log("browser") if m["level"] in ("SEVERE", "WARNING")]})
        d.save_screenshot(shot)
        print(json.dumps(out))
    finally:
        d.quit()
    """#

    struct Probe: Decodable {
        struct Console: Decodable { var level: String; var message: String }
        struct Embedded: Decodable {
            struct Job: Decodable { var taskTimes: [[String: Double]]; var timeline: [Int] }
            var jobs: [Job]
        }
        var found: Bool
        var firstPaintSeconds: Double?
        var untilSeconds: Double
        var percent: [String]
        var failureCodes: [String]
        var failureText: String
        var histogramBars: Int
        var timelinePoints: [String]
        var images: Int
        var workerStates: [String]
        var stages: [String]
        var compareColumns: Int
        var stuckTasks: Int
        /// Stuck rows when `until` matched, before `then` ran (a requeue empties the table).
        var stuckBefore: Int
        var sparkPoints: [Int]
        var clippedLabels: [String]
        var axisLabels: Int
        var emptyTables: [String]
        var scaleKeys: [String]
        var stageBars: Int
        var stageLabels: [String]
        var workerDone: [Int]
        var jobWorkerTasks: [Int]
        var jobDetails: [String]
        var emptyNotes: [String]
        var embedded: Embedded?
        var console: [Console]
    }

    var artefacts: String {
        let dir = NSTemporaryDirectory() + "tessera-dashboard-artefacts"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    func probe(_ url: String, until: String, screenshot: String, then: String = "") throws -> Probe {
        for path in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: path) {
            throw XCTSkip("\(path) is missing (apt install chromium chromium-driver; .ci/run does)")
        }
        guard (try? runProcess("python3", ["-c", "import selenium"]))?.status == 0 else {
            throw XCTSkip("Python's selenium is missing (pip install selenium; .ci/run does)")
        }
        let script = NSTemporaryDirectory() + "tessera-probe.py"
        try DashboardTests.probe.write(toFile: script, atomically: true, encoding: .utf8)
        let r = try runProcess("python3", [script, url, until, artefacts + "/" + screenshot, then])
        XCTAssertEqual(r.status, 0, r.stderr)
        return try JSONDecoder().decode(Probe.self, from: Data(r.stdout.utf8))
    }

    /// A live job in the dashboard: it appears, reaches 100 %, its corrupt input (named like
    /// markup) shows under its reason as text; a killed worker is marked lost; no console error.
    func testLiveDashboardShowsTheJobFailuresAndLostWorkers() throws {
        let port = freePort()
        let cluster = try Cluster(coordinatorArguments: ["--metrics-port", String(port), "--dashboard", "--worker-timeout", "2"])
        _ = try cluster.makeImages(8)
        let hostile = cluster.dir + "/in/<img src=x onerror=alert(1)>.jpg"
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: hostile))
        try cluster.startCoordinator()
        try cluster.startWorker()
        let doomed = try cluster.startWorker()
        let submitted = try cluster.client.submit(try cluster.job())
        let live = try probe("http://127.0.0.1:\(port)/", until: "#jobs .progress[data-percent='100.0']", screenshot: "dashboard.png")
        XCTAssertTrue(live.found, "progress reached 100 %: \(live.percent)")
        XCTAssertEqual(live.percent, ["100.0"])
        XCTAssertEqual(live.failureCodes, ["unsupported-format"])
        XCTAssertTrue(live.failureText.contains("<img src=x onerror=alert(1)>.jpg"), "the name shows as text: \(live.failureText)")
        XCTAssertEqual(live.images, 0, "no markup from a file name (img[src=x])")
        XCTAssertGreaterThan(live.histogramBars, 0)
        XCTAssertEqual(live.stages.first, "queueWait")
        XCTAssertEqual(live.console.map(\.message), [], "no console errors")
        // Every stage bar has its label (every other one had none); the job's tasks per worker
        // are the Workers table's, failed tasks included (they counted succeeded ones only).
        XCTAssertGreaterThan(live.stageBars, 5)
        XCTAssertEqual(live.stageLabels.count, live.stageBars, "\(live.stageLabels)")
        XCTAssertEqual(live.jobWorkerTasks.reduce(0, +), 9)
        XCTAssertEqual(live.workerDone.reduce(0, +), live.jobWorkerTasks.reduce(0, +))
        XCTAssertEqual(try cluster.waitFor(submitted.job) { $0.finished != nil }.succeeded, 8)

        kill(doomed.processIdentifier, SIGKILL)
        let after = try probe("http://127.0.0.1:\(port)/", until: "#workers tr.state-lost", screenshot: "dashboard-lost.png")
        XCTAssertTrue(after.found, "a killed worker is marked lost: \(after.workerStates)")
        XCTAssertEqual(after.workerStates.filter { $0 == "state-lost" }.count, 1)
        XCTAssertEqual(after.console.map(\.message), [])
    }

    func curl(_ args: [String]) throws -> (status: Int, body: String) {
        let r = try runProcess("curl", ["-s", "-w", "\n%{http_code}"] + args)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    /// Actions need the token; retry-failed from the page re-runs the failed task (its input
    /// fixed meanwhile) exactly once; previews come only from the job's output root.
    func testActionsNeedTheTokenAndRetryFailedRunsTheFixedTaskOnce() throws {
        let port = freePort()
        let cluster = try Cluster()
        let token = "tessera-dashboard-token-\(UUID().uuidString.prefix(8))"
        try token.write(toFile: cluster.dir + "/token", atomically: true, encoding: .utf8)
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--dashboard", "--dashboard-token-file", cluster.dir + "/token"]
        let images = try cluster.makeImages(4)
        let broken = cluster.dir + "/in/broken.jpg"
        try Data("junk".utf8).write(to: URL(fileURLWithPath: broken))
        try cluster.startCoordinator()
        try cluster.startWorker()
        let submitted = try cluster.client.submit(try cluster.job())
        let first = try cluster.waitFor(submitted.job) { $0.finished != nil }
        XCTAssertEqual(first.failed, 1)
        let base = "http://127.0.0.1:\(port)"
        // The snapshot is published twice a second: wait until it shows the finished job.
        let shown = Date().addingTimeInterval(10)
        while Date() < shown, !(try curl(["\(base)/api/state"]).body.contains("\"state\":\"failed\"")) { usleep(100_000) }
        XCTAssertEqual(try curl(["-X", "POST", "\(base)/api/retry-failed?job=\(submitted.job)"]).status, 403, "no token")
        XCTAssertEqual(try curl(["-X", "POST", "-H", "Authorization: Bearer wrong-token-wrong-token", "\(base)/api/retry-failed?job=\(submitted.job)"]).status, 403)

        // Previews: an output, yes; anything outside the output root, no.
        let records = try cluster.records(submitted.job)
        let output = try XCTUnwrap(records.first { $0.status == .succeeded }?.outputs.first?.path)
        XCTAssertEqual(try curl(["-o", "/dev/null", "\(base)/api/output?job=\(submitted.job)&path=\(output)"]).status, 200)
        let outside = cluster.dir + "/secret.jpg"
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside))
        try FileManager.default.createSymbolicLink(atPath: cluster.dir + "/out/link.jpg", withDestinationPath: outside)
        for path in [outside, cluster.dir + "/out/../secret.jpg", cluster.dir + "/out/%2e%2e/secret.jpg", cluster.dir + "/out/link.jpg",
                     "/etc/hostname"] {
            let r = try curl(["--path-as-is", "\(base)/api/output?job=\(submitted.job)&path=\(path)"])
            XCTAssertEqual(r.status, 403, "\(path): \(r.body)")
            XCTAssertFalse(r.body.contains("secret"))
        }

        // Fix the input, then retry from the page (token typed once, confirmation accepted).
        try FileManager.default.removeItem(atPath: broken)
        try FileManager.default.copyItem(atPath: images[1], toPath: broken)
        let clicked = try probe("\(base)/", until: "#retry-failed", screenshot: "dashboard-retry.png",
                                then: "window.confirm = () => true; sessionStorage.setItem('tessera-token', '\(token)'); document.getElementById('retry-failed').click();")
        XCTAssertTrue(clicked.found)
        let again = try cluster.waitFor(submitted.job, timeout: 60) { $0.finished != nil && $0.failed == 0 }
        XCTAssertEqual(again.succeeded, 5)
        let final = try cluster.records(submitted.job)
        try cluster.assertExactlyOnce(final, inputs: images + [broken])
        XCTAssertEqual(final.filter { $0.input == broken }.map(\.status), [.succeeded])
        XCTAssertEqual(try curl(["-X", "POST", "-H", "Authorization: Bearer \(token)", "\(base)/api/retry-failed?job=\(submitted.job)"]).body,
                       "{\"job\":\"\(submitted.job)\",\"retried\":\"0\"}", "nothing left to retry")
    }

    /// A worker that stops answering (SIGSTOP) holds its tasks: they show as stuck, and
    /// "Requeue" from the page has them done by another worker, each exactly once. Workers
    /// have memory and CPU sparklines.
    func testStuckTasksAreListedAndRequeuedFromThePage() throws {
        let port = freePort()
        let cluster = try Cluster()
        let token = "tessera-dashboard-token-\(UUID().uuidString.prefix(8))"
        try token.write(toFile: cluster.dir + "/token", atomically: true, encoding: .utf8)
        cluster.coordinatorArguments = ["--metrics-port", String(port), "--dashboard", "--dashboard-token-file", cluster.dir + "/token",
                                        "--worker-timeout", "120"]
        let images = try cluster.makeImages(6, width: 1600, height: 1200)
        try cluster.startCoordinator()
        let frozen = try cluster.startWorker()
        let submitted = try cluster.client.submit(try cluster.job())
        _ = try cluster.waitFor(submitted.job) { $0.running >= 1 }
        kill(frozen.processIdentifier, SIGSTOP)
        defer { kill(frozen.processIdentifier, SIGKILL) }
        try cluster.startWorker()
        let page = try probe("http://127.0.0.1:\(port)/", until: "table.stuck tr[data-task]", screenshot: "dashboard-stuck.png",
                             then: "window.confirm = () => true; sessionStorage.setItem('tessera-token', '\(token)');"
                                 + "document.querySelectorAll('table.stuck button').forEach((b) => b.click());")
        XCTAssertTrue(page.found, "the frozen worker's tasks show as stuck")
        XCTAssertGreaterThanOrEqual(page.stuckBefore, 1)
        XCTAssertTrue(page.sparkPoints.contains { $0 >= 2 }, "memory sparklines: \(page.sparkPoints)")
        let s = try cluster.waitFor(submitted.job, timeout: 60) { $0.finished != nil }
        XCTAssertEqual(s.succeeded, 6)
        try cluster.assertExactlyOnce(try cluster.records(submitted.job), inputs: images)
    }

    /// A report of a run without failures: "No failures." instead of an empty table, task
    /// times from 1 ms to seconds with every label readable, DCT scales in scale order.
    func testAReportWithoutFailuresAndWideTaskTimesReadsCleanly() throws {
        let dir = NSTemporaryDirectory() + "tessera-report-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var lines: [String] = []
        for i in 0..<200 {
            var r = TaskRecord(input: "/photos/p\(i).jpg", status: .succeeded)
            r.timings.total = pow(2, Double(i % 22))  // 1 ms … 35 min: 22 buckets
            r.timings.decode = r.timings.total / 2
            r.finishedAt = 1_800_000_000 + Double(i)
            r.scaleEighths = [1, 2, 4, 8][i % 4]
            r.decodePath = "jpeg"
            lines.append(String(decoding: try JSONEncoder().encode(r), as: UTF8.self))
        }
        var generator = SeededGenerator(seed: 29)
        try lines.shuffled(using: &generator).joined(separator: "\n").write(toFile: dir + "/r.jsonl", atomically: true, encoding: .utf8)
        let made = try tessera(["report", dir + "/r.jsonl", "--html", dir + "/r.html"])
        XCTAssertEqual(made.status, 0, made.err)
        let page = try probe("file://" + dir + "/r.html", until: "svg.histogram", screenshot: "report-clean.png")
        XCTAssertEqual(page.histogramBars, 22)
        XCTAssertEqual(page.clippedLabels, [], "labels from ≤1 to ≤2.1M fit")
        XCTAssertEqual(page.failureCodes, [])
        XCTAssertTrue(page.emptyNotes.contains("failures empty: No failures."), "\(page.emptyNotes)")
        XCTAssertEqual(page.emptyTables, [])
        XCTAssertEqual(page.scaleKeys, ["1/8", "2/8", "4/8", "8/8"])
        XCTAssertEqual(page.console.map(\.message), [])
    }

    /// `tessera run … --report job.html`: one file with the charts, the right number of points.
    func testHTMLReportHasItsCharts() throws {
        let cluster = try Cluster()
        _ = try cluster.makeImages(6)
        try Data("junk".utf8).write(to: URL(fileURLWithPath: cluster.dir + "/in/broken.jpg"))
        let jobFile = cluster.dir + "/job.yaml"
        try "name: report\ninputs: [\(cluster.dir)/in]\noutput: \(cluster.dir)/out\noutputs: [{preset: favicon}, {preset: compressedThumbnail}]\n"
            .write(toFile: jobFile, atomically: true, encoding: .utf8)
        let report = cluster.dir + "/job.html"
        let run = try tessera(["run", jobFile, "-w", "2", "--report", report])
        XCTAssertEqual(run.status, 1, run.err)  // one input failed
        let html = try String(contentsOfFile: report, encoding: .utf8)
        XCTAssertFalse(html.contains("src=\"http"), "self-contained: nothing fetched")
        XCTAssertTrue(FileManager.default.fileExists(atPath: cluster.dir + "/job.jsonl"))
        let page = try probe("file://" + report, until: "svg.histogram", screenshot: "report.png")
        XCTAssertTrue(page.found)
        let job = try XCTUnwrap(page.embedded?.jobs.first)
        XCTAssertEqual(page.histogramBars, job.taskTimes.count, "one bar per task-time bucket")
        XCTAssertEqual(page.timelinePoints, [String(job.timeline.count)])
        XCTAssertEqual(job.timeline.reduce(0, +), 7, "every task on the timeline")
        XCTAssertEqual(page.failureCodes, ["unsupported-format"])
        XCTAssertEqual(page.console.map(\.message), [])
        XCTAssertEqual(page.clippedLabels, [], "chart labels fit their charts and do not overlap")
        XCTAssertGreaterThanOrEqual(page.axisLabels, 6, "the histogram and the timeline have axes with values")
        XCTAssertEqual(page.emptyTables, [], "no table of headers only")

        // Two runs' records compared side by side; `results --html` needs a coordinator, `report` only files.
        let second = try tessera(["run", jobFile, "-w", "1", "--report", cluster.dir + "/second.jsonl", "--journal", cluster.dir + "/j2.sqlite"])
        XCTAssertEqual(second.status, 1, second.err)
        let compare = cluster.dir + "/compare.html"
        let made = try tessera(["report", cluster.dir + "/job.jsonl", cluster.dir + "/second.jsonl", "--html", compare])
        XCTAssertEqual(made.status, 0, made.err)
        let both = try probe("file://" + compare, until: "table.compare", screenshot: "compare.png")
        XCTAssertTrue(both.found)
        XCTAssertEqual(both.compareColumns, 3, "a label column and one per run")
        // Each run's detail, each named by its job (`run --report` says the job).
        XCTAssertEqual(both.jobDetails.count, 2, "\(both.jobDetails)")
        XCTAssertTrue(both.jobDetails.allSatisfy { $0.hasPrefix("Job report (") }, "\(both.jobDetails)")
        XCTAssertEqual(both.console.map(\.message), [])
        let bad = cluster.dir + "/bad.jsonl"
        try "{\"not\": \"a record\"}\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try tessera(["report", bad, "--html", cluster.dir + "/x.html"])
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.err.contains("bad.jsonl:1: not a task record"), refused.err)
    }
}
