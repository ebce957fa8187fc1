import Foundation
import TesseraModel

/// What happened to one task: the record reported per task, locally or to a coordinator.
public struct TaskRecord: Sendable, Codable {
    /// How the task ended (`Outcome`): one list from the scheduler to the report.
    public typealias Status = Outcome

    public struct Failure: Sendable, Codable, Equatable {
        public var code: String
        public var message: String
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// What a lossless strip removed and how it kept the image upright.
    public struct StripWork: Sendable, Codable, Equatable {
        public var removed: [String]
        public var orientation: Int
        public var transformed: Bool
        /// What became of an Ultra HDR source's gain map (nil: it had none).
        public var gainMap: GainMapOutcome?
        public init(removed: [String], orientation: Int, transformed: Bool, gainMap: GainMapOutcome? = nil) {
            self.removed = removed
            self.orientation = orientation
            self.transformed = transformed
            self.gainMap = gainMap
        }
    }

    /// What crossed the network for a task with a URL input or an object-storage output.
    public struct Transfer: Sendable, Codable, Equatable {
        /// Bytes downloaded for the input (0 on a cache hit).
        public var fetchedBytes = 0
        /// Bytes uploaded as outputs.
        public var storedBytes = 0
        /// The input came from the cache of originals (absent: no cache).
        public var cacheHit: Bool?
        /// The input's version (ETag) as the store gave it.
        public var etag: String?
        /// How long the download took, wherever it ran; the `fetch` stage is what the task
        /// waited for it (less when the worker fetched it ahead, while other tasks ran).
        public var downloadMilliseconds = 0.0
        public init() {}
    }

    public init(input: String, status: Status) {
        self.input = input
        self.status = status
    }

    /// The record of a task that failed before it ran (at planning), with `error`.
    public init(failing input: InputFile, with error: JobError) {
        self.init(input: input.name, status: .failed)
        self.error = Failure(code: error.code.rawValue, message: error.description)
        finishedAt = Date().timeIntervalSince1970
    }

    public var input: String
    public var status: Status
    public var error: Failure?
    public var bytesIn: Int = 0
    public var sourceFormat: ImageFormat?
    public var sourceWidth: Int?
    public var sourceHeight: Int?
    /// DCT scale used, in eighths (8 = full size; 8 for PNG).
    public var scaleEighths: Int?
    /// How the pixels were obtained: jpeg, progressive-dc, exif-thumbnail, png.
    public var decodePath: String?
    /// The source's gain map (Ultra HDR), when it had one; each output says what became of it.
    public var gainMap: GainMapInfo?
    /// ThumbHash and BlurHash (job option `placeholders`), from the pixels already decoded.
    public var placeholders: Placeholders?
    /// pHash, dHash, average and dominant colour (job option `fingerprints`).
    public var fingerprints: Fingerprints?
    public var outputs: [OutputRecord] = []
    public var timings = StageTimings()
    /// Peak resident memory while the task ran, when measured (pool workers).
    public var peakMemory: PeakMemory?
    public var worker: String?
    /// What a tile task made (tiles jobs).
    public var tiles: TileWork?
    /// What a strip task removed (strip jobs).
    public var strip: StripWork?
    /// Network transfers (URL inputs, object-storage outputs).
    public var transfer: Transfer?
    /// When the task ended (seconds since 1970): timelines of reports.
    public var finishedAt: Double?
    /// What went differently from what was asked, without failing the task: a time clamped
    /// to the video, data that did not decode (lenient), a gain map an output could not keep.
    public var warnings: [String]?

    public var bytesOut: Int { outputs.reduce(0) { $0 + $1.bytes } }

    // JSON (docs/JSON.md): `"type": "record"` and the format version first; stage times in
    // `timingsMilliseconds`; peak memory as `peakRSSBytes` and, for an upper bound,
    // `peakRSSShared: true`. Every field but input and status may be absent (older journals).
    enum CodingKeys: String, CodingKey {
        case type, version, input, status, error, bytesIn, bytesOut, sourceFormat, sourceWidth, sourceHeight, scaleEighths
        case decodePath, gainMap, placeholders, fingerprints, outputs, timings = "timingsMilliseconds", peakRSSBytes, peakRSSShared, worker, tiles, strip, transfer
        case finishedAt = "finishedUnixSeconds", warnings
        case legacyTimings = "timings", legacyFinishedAt = "finishedAt"
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        input = try c.decode(String.self, forKey: .input)
        status = try c.decode(Status.self, forKey: .status)
        error = try c.decodeIfPresent(Failure.self, forKey: .error)
        // Records before `cancelled` was an outcome: failed, with the error code `cancelled`.
        if status == .failed && error?.code == Outcome.cancelled.name { status = .cancelled }
        bytesIn = try c.decodeIfPresent(Int.self, forKey: .bytesIn) ?? 0
        sourceFormat = try c.decodeIfPresent(String.self, forKey: .sourceFormat).flatMap(ImageFormat.init(rawValue:))
        sourceWidth = try c.decodeIfPresent(Int.self, forKey: .sourceWidth)
        sourceHeight = try c.decodeIfPresent(Int.self, forKey: .sourceHeight)
        scaleEighths = try c.decodeIfPresent(Int.self, forKey: .scaleEighths)
        decodePath = try c.decodeIfPresent(String.self, forKey: .decodePath)
        gainMap = try c.decodeIfPresent(GainMapInfo.self, forKey: .gainMap)
        placeholders = try c.decodeIfPresent(Placeholders.self, forKey: .placeholders)
        fingerprints = try c.decodeIfPresent(Fingerprints.self, forKey: .fingerprints)
        outputs = try c.decodeIfPresent([OutputRecord].self, forKey: .outputs) ?? []
        timings = try c.decodeIfPresent(StageTimings.self, forKey: .timings)
            ?? c.decodeIfPresent(StageTimings.self, forKey: .legacyTimings) ?? StageTimings()
        if let bytes = try c.decodeIfPresent(UInt64.self, forKey: .peakRSSBytes) {
            peakMemory = PeakMemory(bytes: bytes, isUpperBound: try c.decodeIfPresent(Bool.self, forKey: .peakRSSShared) ?? false)
        }
        worker = try c.decodeIfPresent(String.self, forKey: .worker)
        tiles = try c.decodeIfPresent(TileWork.self, forKey: .tiles)
        strip = try c.decodeIfPresent(StripWork.self, forKey: .strip)
        transfer = try c.decodeIfPresent(Transfer.self, forKey: .transfer)
        finishedAt = try c.decodeIfPresent(Double.self, forKey: .finishedAt)
            ?? c.decodeIfPresent(Double.self, forKey: .legacyFinishedAt)
        warnings = try c.decodeIfPresent([String].self, forKey: .warnings)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode("record", forKey: .type)
        try c.encode(JSONOutput.version, forKey: .version)
        try c.encode(input, forKey: .input)
        try c.encode(status, forKey: .status)
        try c.encodeIfPresent(error, forKey: .error)
        try c.encode(bytesIn, forKey: .bytesIn)
        try c.encode(bytesOut, forKey: .bytesOut)
        try c.encodeIfPresent(sourceFormat, forKey: .sourceFormat)
        try c.encodeIfPresent(sourceWidth, forKey: .sourceWidth)
        try c.encodeIfPresent(sourceHeight, forKey: .sourceHeight)
        try c.encodeIfPresent(scaleEighths, forKey: .scaleEighths)
        try c.encodeIfPresent(decodePath, forKey: .decodePath)
        try c.encodeIfPresent(gainMap, forKey: .gainMap)
        try c.encodeIfPresent(placeholders, forKey: .placeholders)
        try c.encodeIfPresent(fingerprints, forKey: .fingerprints)
        try c.encode(outputs, forKey: .outputs)
        try c.encode(timings, forKey: .timings)
        try c.encodeIfPresent(peakMemory?.bytes, forKey: .peakRSSBytes)
        if peakMemory?.isUpperBound == true { try c.encode(true, forKey: .peakRSSShared) }
        try c.encodeIfPresent(worker, forKey: .worker)
        try c.encodeIfPresent(tiles, forKey: .tiles)
        try c.encodeIfPresent(strip, forKey: .strip)
        try c.encodeIfPresent(transfer, forKey: .transfer)
        try c.encodeIfPresent(finishedAt, forKey: .finishedAt)
        if let warnings, !warnings.isEmpty { try c.encode(warnings, forKey: .warnings) }
    }
}

/// The machine-readable output of every command (`--json` lines, reports, results):
/// each object has `"type"` and this `"version"` (docs/JSON.md).
public enum JSONOutput {
    public static let version = 1
}

/// A file a task sends back instead of writing (inline mode, `render -o -`): its path
/// relative to the output root, and its bytes.
public struct InlineFile: Sendable, Equatable {
    public var path: String
    public var bytes: [UInt8]

    public init(path: String, bytes: [UInt8]) {
        self.path = path
        self.bytes = bytes
    }
}
