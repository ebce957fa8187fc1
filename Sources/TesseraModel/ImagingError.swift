/// A failure the input or the recipe caused, with what a user needs to act on it:
/// which file, what kind of failure, and the library's or our own reason.
///
/// Codes can grow without breaking users (a struct over a `Code`, like
/// swift-service-lifecycle's `ServiceGroupError`).
public struct ImagingError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Zero bytes.
        public static let empty = Code(rawValue: "empty")
        /// Neither JPEG nor PNG.
        public static let unsupportedFormat = Code(rawValue: "unsupported-format")
        /// The data ends before the image does.
        public static let truncated = Code(rawValue: "truncated")
        /// The data is damaged or not what its header claims.
        public static let corrupt = Code(rawValue: "corrupt")
        /// A valid file using a feature this build cannot decode (12-bit, lossless JPEG, ...).
        public static let unsupportedFeature = Code(rawValue: "unsupported-feature")
        /// A valid file compressed with a scheme this build's library was not built with.
        public static let unsupportedCompression = Code(rawValue: "unsupported-compression")
        /// A video whose codec this build's FFmpeg cannot decode.
        public static let unsupportedCodec = Code(rawValue: "unsupported-codec")
        /// Decoding took longer than the task may (a video's decode, cut off cleanly).
        public static let timedOut = Code(rawValue: "timed-out")
        /// Over a configured limit (bytes, pixels, scans), checked before allocating pixels.
        public static let limitExceeded = Code(rawValue: "limit-exceeded")
        /// The byte budget cannot be met even at the lowest quality.
        public static let budgetExceeded = Code(rawValue: "budget-exceeded")
        /// A recipe or option that makes no sense.
        public static let invalidRecipe = Code(rawValue: "invalid-recipe")
        /// The encoder failed (should not happen with valid pixels).
        public static let encodeFailed = Code(rawValue: "encode-failed")
        /// A lossless transform could not be done.
        public static let transformFailed = Code(rawValue: "transform-failed")
        /// Memory ran out (an allocation failed) or the task's planned peak is over the
        /// worker's memory budget: the task fails, the worker lives.
        public static let outOfMemory = Code(rawValue: "out-of-memory")
    }

    public var code: Code
    public var reason: String
    /// The file (or other name) the bytes came from, when known.
    public var file: String?
    /// The stages timed before it failed (a file that decoded, then could not be encoded
    /// within its byte budget, spent its decode), for the record; not part of equality.
    public var timings: StageTimings?

    public init(_ code: Code, _ reason: String, file: String? = nil) {
        self.code = code
        self.reason = Self.oneLine(reason)
        self.file = file
    }

    /// A reason on one line: a library's message may end in a newline (libheif's do) or
    /// span several, and an error is one line of a report, a log or a terminal.
    public static func oneLine(_ s: String) -> String {
        guard s.contains(where: \.isNewline) else { return s }
        return s.split(whereSeparator: \.isNewline).joined(separator: " ")
    }

    public static func == (a: ImagingError, b: ImagingError) -> Bool {
        a.code == b.code && a.reason == b.reason && a.file == b.file
    }

    /// The same error with the stages timed before it, unless it has them already.
    public func timed(_ t: StageTimings) -> ImagingError {
        guard timings == nil else { return self }
        var copy = self
        copy.timings = t
        return copy
    }

    /// The same error, naming `file`.
    public func naming(_ file: String) -> ImagingError {
        var copy = self
        copy.file = file
        return copy
    }

    public var description: String {
        (file.map { "\(Self.display($0)): " } ?? "") + "\(reason) [\(code)]"
    }

    /// The file as people see it (`DisplayName`).
    public static func display(_ name: String) -> String { DisplayName.of(name) }
}
