import Foundation
import TesseraTestSupport
import XCTest

/// The README's commands run as written: every fenced `sh` block that follows a
/// `<!-- runnable -->` line is run with bash (`set -euo pipefail`) in a directory laid
/// out like a fresh clone (examples/, jobs/, scripts/, docs/, clients/, .build/release/tessera), where
/// `../shared` does not exist.
final class ReadmeTests: XCTestCase {
    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// (line number, script) of each runnable block.
    static func runnableBlocks(_ readme: String) -> [(line: Int, script: String)] {
        var blocks: [(Int, String)] = []
        let lines = readme.components(separatedBy: "\n")
        var i = 0
        while i < lines.count {
            if lines[i].trimmingCharacters(in: .whitespaces) == "<!-- runnable -->", i + 1 < lines.count,
               lines[i + 1].hasPrefix("```sh") {
                var body: [String] = []
                var j = i + 2
                while j < lines.count && !lines[j].hasPrefix("```") {
                    body.append(lines[j])
                    j += 1
                }
                blocks.append((i + 2, body.joined(separator: "\n")))
                i = j
            }
            i += 1
        }
        return blocks
    }

    /// Processes whose working directory is under `dir`.
    static func processes(in dir: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let cwd = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd") else { return false }
            return cwd == dir || cwd.hasPrefix(dir + "/")
        }
    }

    func testRunnableBlocksRun() throws {
        let repo = Self.repository
        let readme = try String(contentsOf: repo.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = Self.runnableBlocks(readme)
        XCTAssertGreaterThanOrEqual(blocks.count, 4, "the tour, jobs, tiles and cluster blocks are marked runnable")
        // No alternatives written as a pipe between commands (`status | wait ID`).
        for (line, script) in blocks {
            XCTAssertFalse(script.contains("| wait") || script.contains("|wait"), "README.md:\(line): a literal | between alternatives")
        }
        let clone = NSTemporaryDirectory() + "tessera-readme-\(UUID().uuidString.prefix(8))"
        let fm = FileManager.default
        try fm.createDirectory(atPath: clone + "/.build/release", withIntermediateDirectories: true)
        defer { try? fm.removeItem(atPath: clone) }
        for dir in ["examples", "jobs", "scripts", "docs", "clients"] {
            try fm.copyItem(atPath: repo.appendingPathComponent(dir).path, toPath: clone + "/" + dir)
        }
        try fm.createSymbolicLink(atPath: clone + "/.build/release/tessera", withDestinationPath: tesseraBinary.path)
        let bin = clone + "/bin"
        try fm.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: bin + "/tessera", withDestinationPath: tesseraBinary.path)
        for (line, script) in blocks {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/bash")
            p.arguments = ["-c", "set -euo pipefail\n" + script]
            p.currentDirectoryURL = URL(fileURLWithPath: clone)
            var env = ProcessInfo.processInfo.environment
            env["PATH"] = bin + ":" + (env["PATH"] ?? "/usr/bin:/bin")
            p.environment = env
            // A file, not a pipe: a background process the block leaves behind cannot hold the test up.
            let log = clone + "/block-\(line).log"
            _ = fm.createFile(atPath: log, contents: nil)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            p.standardOutput = handle
            p.standardError = handle
            p.standardInput = FileHandle.nullDevice
            try p.run()
            let deadline = Date().addingTimeInterval(300)
            while p.isRunning && Date() < deadline { usleep(50_000) }
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
            try handle.close()
            let left = Self.processes(in: clone)
            for pid in left { kill(pid, SIGKILL) }
            XCTAssertEqual(left, [], "README.md:\(line): the block left processes running")
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            XCTAssertEqual(p.terminationStatus, 0, "README.md:\(line): the block failed\n\(script)\n--- output\n\(text.suffix(4000))")
        }
    }
}
