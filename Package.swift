// swift-tools-version:6.0
import PackageDescription

// MARK: - Dependencies

let dependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    // 1.16: log handlers take one `LogEvent`.
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
    // Metrics API in the libraries, Prometheus exposition at the edge.
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
]

// MARK: - C libraries (system-library targets: module map + one shim header)

let cTargets: [Target] = [
    .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg",
                   providers: [.apt(["libturbojpeg0-dev"])]),
    .systemLibrary(name: "CJPEG", pkgConfig: "libjpeg",
                   providers: [.apt(["libjpeg62-turbo-dev"])]),
    .systemLibrary(name: "CPNG", pkgConfig: "libpng",
                   providers: [.apt(["libpng-dev"])]),
    .systemLibrary(name: "CExif", pkgConfig: "libexif",
                   providers: [.apt(["libexif-dev"])]),
    .systemLibrary(name: "CLCMS2", pkgConfig: "lcms2",
                   providers: [.apt(["liblcms2-dev"])]),
    .systemLibrary(name: "CZMQ", pkgConfig: "libzmq",
                   providers: [.apt(["libzmq3-dev"])]),
    // HEIC/HEIF (libde265), AVIF (dav1d/aom decode, aom encode). Headers only, like JPEG
    // XL's: the shim opens the library at its first use (lazy_codecs.c, decision 026).
    .systemLibrary(name: "CHeif",
                   providers: [.apt(["libheif-dev"])]),
    // WebP decode/encode, demux (VP8X metadata, animation), mux (ICC in outputs).
    .systemLibrary(name: "CWebP", pkgConfig: "libwebpmux",
                   providers: [.apt(["libwebp-dev"])]),
    // TIFF and BigTIFF: strips, tiles, pages, every compression Debian's libtiff was built with.
    .systemLibrary(name: "CTIFF", pkgConfig: "libtiff-4",
                   providers: [.apt(["libtiff-dev"])]),
    // GIF (giflib 5): still frames and animations.
    .systemLibrary(name: "CGIF", pkgConfig: "libgif",
                   providers: [.apt(["libgif-dev"])]),
    // JPEG XL (libjxl 0.7): decode (with the DC pass for thumbnails), encode, and lossless
    // JPEG recompression with the JPEG bitstream kept reconstructible.
    .systemLibrary(name: "CJXL",
                   providers: [.apt(["libjxl-dev"])]),
    // AV1 still pictures at 10 bits (HDR AVIF), which libheif 1.15 cannot have aom write:
    // docs/decisions/021-gain-maps.md.
    .systemLibrary(name: "CAOM", pkgConfig: "aom",
                   providers: [.apt(["libaom-dev"])]),
    // Video (FFmpeg 5.1): containers from memory, decoders, pixel format conversion. Headers
    // only (in the default include path): the shim opens the libraries at the first video
    // (docs/decisions/026-lazy-ffmpeg.md), and pkg-config's flags would link them into
    // every process.
    // Camera raw: LibRaw's header only, like FFmpeg: the shim opens libraw_r at the first raw file.
    .systemLibrary(name: "CRaw", providers: [.apt(["libraw-dev"])]),
    .systemLibrary(name: "CFFmpeg",
                   providers: [.apt(["libavformat-dev", "libavcodec-dev", "libswscale-dev", "libavutil-dev"])]),
    // HTTP(S) and S3 (AWS Signature V4) transfers: docs/decisions/013-object-storage.md.
    // Headers only, like FFmpeg: the shim opens libcurl at the first transfer.
    .systemLibrary(name: "CCurl",
                   providers: [.apt(["libcurl4-openssl-dev"])]),
    // C that Swift cannot express: the setjmp guards for libjpeg and libpng, SIMD kernels, prctl,
    // Little CMS's memory plugin, libtiff's variadic tag calls and error handlers, FFmpeg's
    // function-like macros (AVERROR) and custom I/O callbacks.
    // zlib (libpng's own dependency, zlib1g-dev): Deflate tiles of pyramidal TIFFs.
    .target(name: "TesseraShim", dependencies: ["CJPEG", "CPNG", "CCurl", "CLCMS2", "CTIFF", "CGIF", "CFFmpeg", "CAOM",
                                                "CHeif", "CJXL", "CRaw"],
            // FFmpeg, libcurl, libheif and libjxl are not linked: the shim opens them at the
            // first video (video_shim.c), transfer (curl_shim.c), HEIF or JPEG XL (lazy_codecs.c).
            linkerSettings: [.linkedLibrary("z"), .linkedLibrary("aom")]),
]

// MARK: - Libraries

let libraries: [Target] = [
    // What every layer shares, in plain Swift (no C module below it): recipes and presets,
    // formats, geometry, limits, stage timings and the clock, pyramid geometry.
    .target(name: "TesseraModel"),
    .target(
        name: "TesseraImaging",
        dependencies: ["TesseraModel", "TesseraShim", "CTurboJPEG", "CJPEG", "CExif", "CLCMS2", "CHeif", "CWebP", "CTIFF", "CJXL"]
    ),
    // The task model: jobs as validated values, inputs, output naming, records. What the
    // wire carries; no parsing of job files, no execution.
    .target(name: "TesseraTasks", dependencies: ["TesseraModel"]),
    // Job files (YAML/JSON) and planning a job into tasks.
    .target(name: "TesseraJobs", dependencies: ["TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraStorage", .product(name: "Yams", package: "Yams")]),
    // Running one task (fetch, render, store) and its record: the worker's and `tessera render`'s.
    .target(name: "TesseraExecution", dependencies: ["TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraStorage"]),
    // Records summed up, once: the terminal and --json summary, the HTML report, the dashboard page.
    .target(name: "TesseraReports", dependencies: [
        "TesseraModel", "TesseraTasks", .product(name: "Histogram", package: "hdrhistogram-swift"),
    ]),
    // Where inputs and outputs live beyond the local disk: S3-compatible object storage and
    // HTTP(S) URLs (libcurl through the shim), with an on-disk cache of originals.
    .target(name: "TesseraStorage", dependencies: ["TesseraModel", "TesseraTasks", "TesseraShim"]),
    // The libzmq wrapper and the message codec: plain Swift values and libzmq, no codec.
    .target(name: "TesseraWire", dependencies: ["CZMQ", "TesseraModel", "TesseraTasks"]),
    // What a long-running process serves: HTTP probes, metrics (swift-metrics → Prometheus), process metrics.
    .target(name: "TesseraService", dependencies: [
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
    ]),
    .target(
        name: "TesseraWorker",
        dependencies: ["TesseraModel", "TesseraTasks", "TesseraWire", "TesseraExecution", "TesseraStorage", "TesseraService", "TesseraShim", .product(name: "CoreMetrics", package: "swift-metrics"),
                       .product(name: "Logging", package: "swift-log")]
    ),
    .target(
        name: "TesseraCoordinator",
        dependencies: ["TesseraModel", "TesseraTasks", "TesseraWire", "TesseraJobs", "TesseraReports", "TesseraService",
                       .product(name: "CoreMetrics", package: "swift-metrics"),
                       .product(name: "GRDB", package: "GRDB.swift"),
                       .product(name: "Logging", package: "swift-log")]
    ),
]

// MARK: - Executable

let executables: [Target] = [
    .executableTarget(
        name: "tessera",
        dependencies: [
            "TesseraModel",
            "TesseraImaging",
            "TesseraTasks",
            "TesseraJobs",
            "TesseraExecution",
            "TesseraReports",
            "TesseraStorage",
            "TesseraWire",
            "TesseraCoordinator",
            "TesseraWorker",
            "TesseraService",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]
    ),
]

// MARK: - Tests

let tests: [Target] = [
    // The process runner and the binary's location, shared by the test targets.
    .target(name: "TesseraTestSupport", path: "Tests/TesseraTestSupport"),
    .testTarget(name: "TesseraModelTests", dependencies: ["TesseraModel"]),
    .testTarget(name: "TesseraTasksTests", dependencies: ["TesseraModel", "TesseraTasks", "TesseraTestSupport"]),
    .testTarget(name: "TesseraExecutionTests", dependencies: ["TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraExecution", "TesseraTestSupport"]),
    .testTarget(name: "TesseraReportsTests", dependencies: ["TesseraModel", "TesseraTasks", "TesseraReports", "TesseraTestSupport"]),
    .testTarget(name: "TesseraImagingTests", dependencies: ["TesseraModel", "TesseraImaging", "TesseraTestSupport", "CTurboJPEG", "TesseraShim"]),
    .testTarget(name: "TesseraJobsTests", dependencies: ["TesseraTestSupport", "TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraJobs", "TesseraExecution", .product(name: "Yams", package: "Yams")]),
    .testTarget(name: "TesseraCLITests", dependencies: ["tessera", "TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraTestSupport"]),
    .testTarget(name: "TesseraServiceTests", dependencies: ["TesseraService", "TesseraTestSupport", .product(name: "CoreMetrics", package: "swift-metrics")]),
    .testTarget(name: "TesseraStorageTests", dependencies: ["TesseraStorage", "TesseraTasks", "TesseraTestSupport"]),
    .testTarget(name: "TesseraWireTests", dependencies: ["TesseraTestSupport", "TesseraModel", "TesseraWire", "TesseraTasks"]),
    .testTarget(name: "TesseraWorkerTests", dependencies: ["TesseraModel", "TesseraTasks", "TesseraWire", "TesseraWorker"]),
    .testTarget(name: "TesseraCoordinatorTests", dependencies: ["TesseraTestSupport", "TesseraCoordinator", "TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraJobs", "TesseraWire", .product(name: "Logging", package: "swift-log")]),
    .testTarget(name: "TesseraPoolTests", dependencies: ["tessera", "TesseraTestSupport", "TesseraService", "TesseraModel", "TesseraImaging", "TesseraTasks", "TesseraJobs", "TesseraExecution", "TesseraStorage", "TesseraWire"]),
]

let package = Package(
    name: "Tessera",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "tessera", targets: ["tessera"]),
        // The plain-Swift model (recipes, presets, formats, timings, outcomes).
        .library(name: "TesseraModel", targets: ["TesseraModel"]),
        .library(name: "TesseraImaging", targets: ["TesseraImaging"]),
        .library(name: "TesseraJobs", targets: ["TesseraTasks", "TesseraJobs", "TesseraExecution"]),
        // The message codec, for the fuzz targets (Fuzz/) and tools that speak the protocol.
        .library(name: "TesseraWire", targets: ["TesseraWire"]),
    ],
    dependencies: dependencies,
    targets: cTargets + libraries + executables + tests,
    swiftLanguageModes: [.v5]
)
