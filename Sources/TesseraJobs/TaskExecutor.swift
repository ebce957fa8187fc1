import Foundation
import TesseraImaging

/// One unit of work: a source file and every output made from it (decoded once).
public struct RenderTask: Sendable, Codable {
    public struct Output: Sendable, Codable {
        /// Preset or recipe name, for `{preset}` in paths and for reports.
        public var name: String
        public var recipe: Recipe
        public init(name: String, recipe: Recipe) {
            self.name = name
            self.recipe = recipe
        }
    }

    public var input: InputFile
    public var outputs: [Output]
    public var naming: OutputNaming

    public init(input: InputFile, outputs: [Output], naming: OutputNaming) {
        self.input = input
        self.outputs = outputs
        self.naming = naming
    }
}

/// Milliseconds per stage of a task.
public struct TaskTimings: Sendable, Codable, Equatable {
    public var queueWait: Double = 0
    public var read: Double = 0
    public var decode: Double = 0
    public var resize: Double = 0
    /// Orientation, flattening, colour conversion.
    public var finish: Double = 0
    public var encode: Double = 0
    public var write: Double = 0
    public var total: Double = 0
    public init() {}
}

/// What happened to one task: the record reported per task, locally or to a coordinator.
public struct TaskRecord: Sendable, Codable {
    public enum Status: String, Sendable, Codable { case succeeded, failed, skipped }

    public struct OutputRecord: Sendable, Codable, Equatable {
        public var name: String
        public var path: String
        public var format: String
        public var width: Int
        public var height: Int
        public var bytes: Int
        public var jpegQuality: Int?
    }

    public struct Failure: Sendable, Codable, Equatable {
        public var code: String
        public var message: String
    }

    public var input: String
    public var status: Status
    public var error: Failure?
    public var bytesIn: Int = 0
    public var sourceFormat: String?
    public var sourceWidth: Int?
    public var sourceHeight: Int?
    /// DCT scale used, in eighths (8 = full size; 8 for PNG).
    public var scaleEighths: Int?
    public var outputs: [OutputRecord] = []
    public var timings = TaskTimings()
    /// Peak resident memory of the process while it ran the task, when measured.
    public var peakRSSBytes: Int?
    public var worker: String?

    public var bytesOut: Int { outputs.reduce(0) { $0 + $1.bytes } }
}

/// Runs a task: read, render (decode once), write every output atomically.
/// Never throws: failures become a record naming the file and the reason, and no
/// output of a failed task is written.
public enum TaskExecutor {
    public static func run(_ task: RenderTask, options: RenderOptions = RenderOptions()) -> TaskRecord {
        let clock = ContinuousClock()
        let start = clock.now
        var record = TaskRecord(input: task.input.path, status: .failed)
        func ms(_ d: Duration) -> Double {
            Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        }
        do {
            let bytes = try FileIO.read(task.input.path, limit: options.limits.maxInputBytes)
            record.bytesIn = bytes.count
            record.timings.read = ms(clock.now - start)
            let result: RenderResult
            do {
                result = try Renderer.render(bytes, recipes: task.outputs.map(\.recipe), options: options)
            } catch let e as ImagingError {
                throw e.naming(task.input.path)
            }
            record.sourceFormat = result.source.format.rawValue
            record.sourceWidth = result.source.storedSize.width
            record.sourceHeight = result.source.storedSize.height
            record.scaleEighths = result.scaleEighths
            record.timings.decode = result.timings.decode * 1000
            record.timings.resize = result.timings.resize * 1000
            record.timings.finish = result.timings.finish * 1000
            record.timings.encode = result.timings.encode * 1000
            // Name every output before writing any, so a naming error writes nothing.
            let paths = try zip(task.outputs, result.outputs).map { spec, out in
                try task.naming.path(for: task.input, preset: spec.name, format: out.format)
            }
            guard Set(paths).count == paths.count else {
                throw JobError(.outputCollision, "two outputs would be written to the same path (\(paths.joined(separator: ", ")))",
                               file: task.input.path)
            }
            let writeStart = clock.now
            for (i, out) in result.outputs.enumerated() {
                do {
                    try FileIO.writeAtomically(out.bytes, to: paths[i])
                } catch {
                    // All of a task's outputs or none: remove what this task already wrote.
                    for done in paths[..<i] { unlink(done) }
                    throw error
                }
                record.outputs.append(.init(name: task.outputs[i].name, path: paths[i], format: out.format.rawValue,
                                            width: out.size.width, height: out.size.height, bytes: out.bytes.count,
                                            jpegQuality: out.jpegQuality))
            }
            record.timings.write = ms(clock.now - writeStart)
            record.status = .succeeded
        } catch let e as ImagingError {
            record.error = .init(code: e.code.rawValue, message: e.description)
        } catch var e as JobError {
            e.file = e.file ?? task.input.path
            record.error = .init(code: e.code.rawValue, message: e.description)
        } catch {
            record.error = .init(code: "internal", message: "\(task.input.path): \(error)")
        }
        record.timings.total = ms(clock.now - start)
        return record
    }
}
