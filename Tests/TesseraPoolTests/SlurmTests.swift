import Foundation
import TesseraTasks
import TesseraTestSupport
import TesseraWire
import XCTest

/// A single-node Slurm cluster from Debian's packages (munged, slurmctld, slurmd), started
/// by the test with a generated slurm.conf in a temporary directory, on its own ports, and
/// stopped at the end. Needs root (slurmd runs jobs as their user) and `slurmd slurmctld
/// slurm-client munge` installed (.ci/run installs them).
final class SlurmCluster {
    let dir: String
    let conf: String
    private var daemons: [pid_t] = []

    static func unavailable() -> String? {
        guard getuid() == 0 else { return "needs root: slurmd runs the jobs as their submitting user" }
        for tool in ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo"]
        where (try? runProcess("/bin/sh", ["-c", "command -v \(tool)"]).status) != 0 {
            return "\(tool) is not installed (apt-get install slurmd slurmctld slurm-client munge)"
        }
        return nil
    }

    init(dir: String) throws {
        self.dir = dir
        conf = dir + "/slurm.conf"
        for sub in ["munge", "state", "spool", "log", "run"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true)
        }
        let host = try runProcess("hostname", ["-s"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let cpus = ProcessInfo.processInfo.activeProcessorCount
        let port = 20000 + Int(getpid() % 10000) * 2
        try """
            ClusterName=tessera-test
            SlurmctldHost=\(host)(127.0.0.1)
            SlurmctldPort=\(port)
            SlurmdPort=\(port + 1)
            SlurmUser=root
            SlurmdUser=root
            AuthType=auth/munge
            AuthInfo=socket=\(dir)/munge/munge.socket.2
            CredType=cred/munge
            StateSaveLocation=\(dir)/state
            SlurmdSpoolDir=\(dir)/spool
            SlurmctldPidFile=\(dir)/run/slurmctld.pid
            SlurmdPidFile=\(dir)/run/slurmd.pid
            SlurmctldLogFile=\(dir)/log/slurmctld.log
            SlurmdLogFile=\(dir)/log/slurmd.log
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            JobAcctGatherType=jobacct_gather/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_CPU
            MpiDefault=none
            ReturnToService=2
            KillWait=30
            NodeName=\(host) NodeAddr=127.0.0.1 CPUs=\(cpus) RealMemory=4000 State=UNKNOWN
            PartitionName=test Nodes=\(host) Default=YES MaxTime=INFINITE State=UP

            """.write(toFile: conf, atomically: true, encoding: .utf8)
        let key = dir + "/munge/munge.key"
        let made = try runProcess("mungekey", ["--create", "--keyfile", key, "--force"])
        guard made.status == 0 else { throw SlurmError("mungekey: \(made.stderr)") }
        chmod(key, 0o600)
        try start("munged", ["--foreground", "--force", "--socket", dir + "/munge/munge.socket.2", "--key-file", key,
                             "--log-file", dir + "/log/munged.log", "--pid-file", dir + "/run/munged.pid",
                             "--seed-file", dir + "/munge/seed"])
        usleep(300_000)
        try start("slurmctld", ["-D", "-i", "-f", conf])
        try start("slurmd", ["-D", "-f", conf])
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let r = try? command("sinfo", ["-h", "-o", "%t"]), r.status == 0, r.stdout.contains("idle") { return }
            usleep(200_000)
        }
        throw SlurmError("the node did not become idle in 30 s\n" + logs())
    }

    /// Starts a daemon (in the foreground, in its own session) through Python's subprocess,
    /// so that it is not this process's child and holds none of its descriptors: Foundation's
    /// Process leaves pipe descriptors open in children (a daemon holding one kept a later
    /// `runProcess` waiting for end of file), and reaps with a blocking waitpid on any child
    /// that changes state.
    private func start(_ tool: String, _ args: [String]) throws {
        let script = """
            import os, subprocess, sys
            log, conf = sys.argv[1], sys.argv[2]
            p = subprocess.Popen(sys.argv[3:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=open(log, "w"), env=dict(os.environ, SLURM_CONF=conf), start_new_session=True)
            print(p.pid)
            """
        let r = try runProcess("python3", ["-c", script, dir + "/log/\(tool).stderr", conf, tool] + args)
        guard r.status == 0, let pid = Int32(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw SlurmError("cannot start \(tool): \(r.stderr)")
        }
        daemons.append(pid)
    }

    /// A Slurm client command against this cluster.
    func command(_ tool: String, _ args: [String]) throws -> ProcessResult {
        try runProcess("/usr/bin/env", ["SLURM_CONF=\(conf)", tool] + args)
    }

    func logs() -> String {
        ["slurmctld.log", "slurmd.log", "munged.log", "slurmctld.stderr", "slurmd.stderr"].map { name in
            "== \(name)\n" + String(((try? String(contentsOfFile: dir + "/log/" + name, encoding: .utf8)) ?? "").suffix(3000))
        }.joined(separator: "\n")
    }

    /// Cancels every job, then stops the daemons (slurmd first, so no job step outlives it).
    func stop() {
        // Once only: with the daemons gone, scancel and squeue each wait a minute for slurmctld
        // (the deinit after the test's own stop() cost two minutes a run).
        guard !daemons.isEmpty else { return }
        _ = try? command("scancel", ["--full", "--user", "root"])
        let deadline = Date().addingTimeInterval(40)
        while Date() < deadline, let q = try? command("squeue", ["-h"]), !q.stdout.isEmpty { usleep(200_000) }
        for pid in daemons.reversed() {
            kill(pid, SIGTERM)
            let end = Date().addingTimeInterval(10)
            while kill(pid, 0) == 0 && Date() < end { usleep(50_000) }
            kill(pid, SIGKILL)
        }
        daemons.removeAll()
    }

    deinit { stop() }
}

struct SlurmError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// deploy/slurm/tessera-workers.sbatch, the script users submit, run on a real Slurm: a job
/// array of two workers finishes a job, then `scancel` drains them with nothing lost.
final class SlurmTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func testWorkerArrayFromTheDeployScriptRunsAJobAndDrainsOnScancel() throws {
        if let reason = SlurmCluster.unavailable() { throw XCTSkip(reason) }
        let c = try Cluster()
        let slurm = try SlurmCluster(dir: c.dir + "/slurm")
        defer { slurm.stop() }

        // A CURVE coordinator on loopback TCP, as the script expects (it always passes keys).
        for name in ["coordinator", "worker", "client"] {
            XCTAssertEqual(try tessera(["keygen", name, "-o", c.dir + "/keys"]).status, 0)
        }
        try Cluster.allow(c.dir + "/allow", keys: c.dir + "/keys", workers: ["worker"], clients: ["client"])
        let endpoint = "tcp://127.0.0.1:\(30000 + Int(getpid() % 10000))"
        c.coordinator = try Cluster.spawn(["coordinator", "--bind", endpoint, "--journal", c.journal, "--log-level", "info",
                                           "--curve-secret", c.dir + "/keys/coordinator.secret", "--allow", c.dir + "/allow",
                                           "--allow-read", c.dir, "--allow-write", c.dir],
                                          log: c.dir + "/coordinator.log")
        let client = CoordinatorClient(endpoint: endpoint, timeout: 10,
                                       curve: (try CurveKeyPair.load(secretFile: c.dir + "/keys/client.secret"),
                                               try CurveKeyPair.loadPublic(c.dir + "/keys/coordinator.pub")))
        var up = false
        for _ in 0..<200 where !up {
            up = (try? client.ping()) != nil
            if !up { usleep(50_000) }
        }
        XCTAssertTrue(up, c.logs())

        let first = try c.makeImages(60)

        // The script as users submit it; the command line sizes it for this node.
        let started = Date()
        let submitted = try slurm.command("sbatch", [
            "--parsable", "--array=0-1", "--cpus-per-task=1", "--mem=500M", "--time=00:20:00",
            "--output=\(c.dir)/slurm-worker-%A_%a.out",
            "--export=ALL,TESSERA_COORDINATOR=\(endpoint),TESSERA_BIN=\(Cluster.binary.path)," +
                "TESSERA_CURVE_SECRET=\(c.dir)/keys/worker.secret,TESSERA_SERVER_KEY=\(c.dir)/keys/coordinator.pub",
            Self.repository + "/deploy/slurm/tessera-workers.sbatch",
        ])
        XCTAssertEqual(submitted.status, 0, submitted.stderr)
        let arrayJob = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        func status(_ job: String) -> JobStatus? { try? client.status(job: job).jobs.first }
        // Both array tasks connected (one may start a second after the other: a job handed to
        // the first alone would be done before the second arrives).
        var connected: Double?
        while connected == nil && Date().timeIntervalSince(started) < 60 {
            if let n = try? client.status().workers, n == 2 { connected = Date().timeIntervalSince(started) } else { usleep(20_000) }
        }
        XCTAssertNotNil(connected, "both workers of the array connected\n\(slurm.logs())")
        let job1 = try client.submit(try c.job(name: "slurm-1")).job
        var firstDone: Double?
        let deadline = Date().addingTimeInterval(120)
        var end: JobStatus?
        while Date() < deadline {
            if let s = status(job1) {
                if firstDone == nil, s.succeeded > 0 { firstDone = Date().timeIntervalSince(started) }
                if s.state != .running && s.state != .queued { end = s; break }
            }
            usleep(20_000)
        }
        let done = try XCTUnwrap(end, "job 1 did not finish\n\(c.logs())\n\(slurm.logs())")
        let jobSeconds = Date().timeIntervalSince(started)
        XCTAssertEqual(done.succeeded, 60, c.logs())
        let records = try client.results(job: job1).map { try JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
        try c.assertExactlyOnce(records, inputs: first)
        let perWorker = Dictionary(grouping: records, by: { $0.worker ?? "?" }).mapValues(\.count)
        func workerOutputs() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: c.dir)) ?? []).filter { $0.hasPrefix("slurm-worker-") }.sorted()
                .map { (try? String(contentsOfFile: c.dir + "/" + $0, encoding: .utf8)) ?? "" }
        }
        XCTAssertEqual(perWorker.count, 2, "both array tasks worked: \(perWorker)\n\(workerOutputs().joined(separator: "\n--\n"))\n\(c.logs().suffix(3000))")

        // A longer job; once the workers are busy with it, cancel the array.
        let second = try c.makeImages(64, width: 1600, height: 1200).filter { !first.contains($0) }
        let job2 = try client.submit(try c.job(name: "slurm-2", presets: ["favicon", "compressedThumbnail", "web"])).job
        let busy = Date().addingTimeInterval(60)
        while Date() < busy, (status(job2)?.succeeded ?? 0) < 4 { usleep(20_000) }
        let cancelled = Date()
        XCTAssertEqual(try slurm.command("scancel", [arrayJob]).status, 0)
        var gone = false
        while !gone && Date().timeIntervalSince(cancelled) < 45 {
            gone = (try? slurm.command("squeue", ["-h", "-j", arrayJob]))?.stdout.isEmpty ?? false
            if !gone { usleep(100_000) }
        }
        let drainSeconds = Date().timeIntervalSince(cancelled)
        XCTAssertTrue(gone, "the array ended after scancel\n\(slurm.logs())")
        usleep(300_000)
        let after = try XCTUnwrap(status(job2))
        XCTAssertEqual(after.running, 0, "the drained workers handed everything back")
        XCTAssertEqual(after.failed, 0)
        XCTAssertEqual(after.succeeded + after.pending, after.total, "nothing lost: \(after)")
        XCTAssertLessThan(after.succeeded, after.total, "the cancel came before the end (the test needs work left)")
        let outputs = workerOutputs()
        XCTAssertEqual(outputs.count, 2)
        for o in outputs {
            XCTAssertTrue(o.contains("draining: handing back"), "each worker drained:\n\(o)")
            XCTAssertTrue(o.contains("drained after"), o)
        }
        let coordinatorLog = (try? String(contentsOfFile: c.dir + "/coordinator.log", encoding: .utf8)) ?? ""
        XCTAssertEqual(coordinatorLog.components(separatedBy: " left").count - 1, 2, "both said goodbye")
        XCTAssertFalse(coordinatorLog.contains("lost (no heartbeat)"), "no worker was lost")

        // A local worker finishes the rest: every input exactly once.
        let local = try Cluster.spawn(["worker", "--connect", endpoint, "--curve-secret", c.dir + "/keys/worker.secret",
                                       "--server-key", c.dir + "/keys/coordinator.pub"], log: c.dir + "/worker-local.log")
        c.workers.append(local)
        let finish = Date().addingTimeInterval(240)
        while Date() < finish, let s = status(job2), s.state == .running || s.state == .queued { usleep(50_000) }
        let records2 = try client.results(job: job2).map { try JSONDecoder().decode(TaskRecord.self, from: Data($0)) }
        try c.assertExactlyOnce(records2, inputs: first + second)
        print("""
            slurm: sbatch to both workers connected \(String(format: "%.2f", connected ?? -1)) s, to the first completed \
            task \(String(format: "%.2f", firstDone ?? -1)) s, all 60 done at \
            \(String(format: "%.2f", jobSeconds)) s, tasks per worker \(perWorker.values.sorted()); scancel with \
            \(after.succeeded)/\(after.total) done: array gone in \(String(format: "%.2f", drainSeconds)) s, \
            \(after.pending) handed back, none lost
            """)
    }
}
