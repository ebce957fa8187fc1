// swift-tools-version:5.9
// Coverage-guided fuzz targets (libFuzzer through Swift's -sanitize=fuzzer), built apart
// from the main package: Benchmarks/fuzz.sh builds and runs them. One executable holds
// every target; FUZZ_TARGET chooses (Sources/FuzzTargets/Targets.swift).
import Foundation
import PackageDescription

/// A path dependency's identity is its directory's name (the clone's name).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "TesseraFuzz",
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(name: "FuzzTargets",
                          dependencies: [.product(name: "TesseraModel", package: root),
                                         .product(name: "TesseraImaging", package: root),
                                         .product(name: "TesseraJobs", package: root),
                                         .product(name: "TesseraWire", package: root)],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
    ]
)
