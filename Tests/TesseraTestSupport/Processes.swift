import Foundation

/// What a finished process did.
public struct ProcessResult: Sendable {
    public var status: Int32
    /// Standard output as bytes (an image written to `-o -`) and as text.
    public var output: Data
    public var stdout: String { String(decoding: output, as: UTF8.self) }
    public var stderr: String
}

/// The built `tessera` binary, next to the test bundle (`TESSERA_TEST_BINARY` names another:
/// the pool and command tests run against an older build to show what it got wrong).
public let tesseraBinary: URL = {
    if let other = ProcessInfo.processInfo.environment["TESSERA_TEST_BINARY"], !other.isEmpty {
        return URL(fileURLWithPath: other)
    }
    let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [dir, dir.deletingLastPathComponent(), Bundle.main.bundleURL] {
        let url = candidate.appendingPathComponent("tessera")
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return dir.appendingPathComponent("tessera")
}()

/// Runs a program to its end (found on PATH unless the path is absolute) in `cwd`, with
/// `input` on its standard input: the one process runner of every test target.
public func runProcess(_ program: String, _ args: [String], in cwd: String? = nil, input: Data? = nil,
                       environment: [String: String] = [:]) throws -> ProcessResult {
    let p = Process()
    if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    p.executableURL = URL(fileURLWithPath: program.hasPrefix("/") ? program : "/usr/bin/env")
    p.arguments = program.hasPrefix("/") ? args : [program] + args
    if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
    let out = Pipe(), err = Pipe(), stdin = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = input == nil ? FileHandle.nullDevice : stdin
    try p.run()
    if let input {
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
    }
    // Both pipes drained at once, so a chatty child never blocks on a full one.
    nonisolated(unsafe) var e = Data()
    let reader = Thread { e = err.fileHandleForReading.readDataToEndOfFile() }
    reader.start()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    while !reader.isFinished { usleep(1000) }
    return ProcessResult(status: p.terminationStatus, output: o, stderr: String(decoding: e, as: UTF8.self))
}

/// Runs `tessera` to its end.
public func tessera(_ args: [String], in cwd: String? = nil, input: Data? = nil,
                    environment: [String: String] = [:]) throws -> ProcessResult {
    try runProcess(tesseraBinary.path, args, in: cwd, input: input, environment: environment)
}
