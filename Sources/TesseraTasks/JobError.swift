/// A failure of the jobs layer: a missing input, an output that would escape its
/// root, a job file that does not validate. Names the file (and line, field).
public struct JobError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let inputNotFound = Code(rawValue: "input-not-found")
        /// A FIFO, device, socket or directory, or a file of /proc or /sys: never opened for reading.
        public static let notARegularFile = Code(rawValue: "not-a-regular-file")
        /// An I/O error reading an input that exists (may pass on retry, e.g. on network storage).
        public static let readFailed = Code(rawValue: "read-failed")
        public static let inputTooLarge = Code(rawValue: "input-too-large")
        /// Memory ran out before the image could be decoded (the same code as `ImagingError`'s).
        public static let outOfMemory = Code(rawValue: "out-of-memory")
        public static let writeFailed = Code(rawValue: "write-failed")
        public static let unsafeOutputPath = Code(rawValue: "unsafe-output-path")
        /// Two inputs' outputs would be one file (both tasks fail, each naming the other).
        public static let outputCollision = Code(rawValue: "output-collision")
        /// An output would replace one of the job's inputs: the job is refused at planning.
        public static let outputReplacesInput = Code(rawValue: "output-replaces-input")
        public static let invalidJob = Code(rawValue: "invalid-job")
        // Object storage and HTTP(S).
        /// The object or URL does not exist (404).
        public static let notFound = Code(rawValue: "not-found")
        /// The credentials are valid but may not do this (403 AccessDenied, an expired presigned URL).
        public static let accessDenied = Code(rawValue: "access-denied")
        /// The store does not accept the credentials (unknown key, wrong secret, 401).
        public static let badCredentials = Code(rawValue: "bad-credentials")
        /// The transfer failed after its retries (5xx, 429, timeouts, resets): another attempt may pass.
        public static let transferFailed = Code(rawValue: "transfer-failed")
        /// The store refused the request for another reason (4xx), or the bytes did not check out.
        public static let storageRefused = Code(rawValue: "storage-refused")
        // What a submitter may reach (docs/API.md, "Security").
        /// A path or bucket outside the roots the submitter may read or write.
        public static let forbidden = Code(rawValue: "forbidden")
        /// A URL whose address the source policy refuses (loopback, link-local, private…);
        /// the message never says whether anything answered there.
        public static let forbiddenSource = Code(rawValue: "forbidden-source")
        /// An output would replace a file Tessera did not write (a confined job without
        /// `options.overwrite`).
        public static let outputExists = Code(rawValue: "output-exists")
    }

    public var code: Code
    public var reason: String
    public var file: String?

    public init(_ code: Code, _ reason: String, file: String? = nil) {
        self.code = code
        self.reason = reason
        self.file = file
    }

    /// Whether another attempt may pass (I/O and transfer trouble, not the input's fault).
    public var isRetryable: Bool { code == .readFailed || code == .writeFailed || code == .transferFailed }

    public var description: String { (file.map { "\(Paths.display($0)): " } ?? "") + "\(reason) [\(code)]" }
}
