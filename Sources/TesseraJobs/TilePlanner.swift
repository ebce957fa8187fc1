import Foundation
import TesseraImaging
import TesseraStorage
import TesseraTasks
import TesseraModel

/// Planning `tiles` jobs: each input becomes the parts of its pyramid.
public enum TilePlanner {
    /// One task per pyramid part, for every input. Inputs whose header cannot be read
    /// get one task anyway: it fails on a worker with the reason, without stopping the
    /// other inputs.
    public static func plan(_ job: JobSpec, inputs: [InputFile], stores: RemoteStores = RemoteStores(),
                            sources: SourcePolicy? = nil) -> [InputFile] {
        let settings = job.tiles ?? TileSettings()
        var tasks: [InputFile] = []
        for input in inputs {
            do {
                let info: TileSourceInfo
                if Location.isRemote(input.path) {
                    // The header only (a ranged GET); the whole source when it lies further in.
                    let storage = stores.storage(job.storage, sources: sources)
                    let head = try storage.fetchPrefix(input.path, count: 1 << 20)
                    if let probed = try? withExtendedLifetime(head, { try TileSourceInfo.probe(head.bytes, limits: job.options.tileLimits) }) {
                        info = probed
                    } else {
                        let whole = try storage.fetch(input.path, knownETag: input.etag, limit: job.options.maxInputMB << 20)
                        info = try withExtendedLifetime(whole) { try TileSourceInfo.probe(whole.bytes.bytes, limits: job.options.tileLimits) }
                    }
                } else {
                    let mapped = try FileIO.map(input.path, limit: job.options.maxInputMB << 20)
                    info = try withExtendedLifetime(mapped) {
                        try TileSourceInfo.probe(mapped.bytes, limits: job.options.tileLimits)
                    }
                }
                let geometry = PyramidGeometry(width: info.width, height: info.height, settings: settings)
                let parts = geometry.plan(info: info, settings: settings)
                // Over the memory budget (a huge progressive JPEG): one task fails with the reason, not every part.
                if parts.contains(where: { geometry.memoryEstimate($0, info: info, settings: settings) > settings.memoryBudgetMB << 20 }) {
                    tasks.append(input.with(part: parts[0]))
                    continue
                }
                for part in parts { tasks.append(input.with(part: part)) }
            } catch {
                tasks.append(input.with(part: .tail(from: 0)))
            }
        }
        return tasks
    }

}
