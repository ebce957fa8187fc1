import TesseraModel
import TesseraShim

/// The levels of a stack made from one pass over the source rows: each row of level k goes
/// into that level's window (its tile rows are emitted as soon as they are complete) and,
/// paired with the next, halves into a row of level k + 1. Memory: a window of
/// `tileSize + 2·overlap` rows and one row to pair per level, never a whole level.
final class LevelCascade {
    private struct Level {
        let width: Int
        let height: Int
        /// Tile rows this part makes of the level.
        let tileRows: Range<Int>
        /// The next tile row to emit.
        var next: Int
        /// The window holds level rows [top, top + filled).
        var top: Int
        var filled = 0
        let window: UnsafeMutablePointer<UInt8>
        /// The next level row pushed.
        var row: Int
        /// The even row waiting for its pair, and the row of the next level they make
        /// (levels that feed another).
        let pending: UnsafeMutablePointer<UInt8>?
        let halved: UnsafeMutablePointer<UInt8>?
    }

    private var levels: [Level]
    private let geometry: PyramidGeometry
    private let channels: Int
    private let capacity: Int
    /// Emits tile row `r` of level `k` from a window whose first row is level row `top`.
    typealias Emit = (_ k: Int, _ r: Int, _ window: UnsafeMutablePointer<UInt8>, _ stride: Int, _ top: Int) throws -> Void
    /// Gets every row of the last level (its number and its bytes) as it is made.
    var lastLevelRow: ((Int, UnsafePointer<UInt8>) -> Void)?
    /// Milliseconds spent halving.
    private(set) var halvingTime = 0.0
    private let clock = Stopwatch()

    /// Levels 0..<`count` of `geometry`, making `tileRows(k)` of each; the first row pushed
    /// is source row `firstRow`, a multiple of 2^(count - 1).
    init(geometry: PyramidGeometry, count: Int, channels: Int, firstRow: Int, tileRows: (Int) -> Range<Int>) {
        precondition(count >= 1 && firstRow % (1 << (count - 1)) == 0)
        self.geometry = geometry
        self.channels = channels
        capacity = geometry.tileSize + 2 * geometry.overlap
        levels = (0..<count).map { k in
            let s = geometry.levelSize(k), rows = tileRows(k)
            let top = rows.isEmpty ? 0 : geometry.tile(k, column: 0, row: rows.lowerBound).y.lowerBound
            return Level(width: s.width, height: s.height, tileRows: rows, next: rows.lowerBound, top: top,
                         window: .allocate(capacity: s.width * channels * (geometry.tileSize + 2 * geometry.overlap)),
                         row: firstRow >> k, pending: k + 1 < count ? .allocate(capacity: s.width * channels) : nil,
                         halved: k + 1 < count ? .allocate(capacity: geometry.levelSize(k + 1).width * channels) : nil)
        }
    }

    deinit {
        for l in levels {
            l.window.deallocate()
            l.pending?.deallocate()
            l.halved?.deallocate()
        }
    }

    /// Whether every level's tile rows have been emitted.
    var done: Bool { levels.allSatisfy { $0.next >= $0.tileRows.upperBound } }

    /// Tile rows still to emit, per level (for error messages and checks).
    var missing: [Int] { levels.map { $0.tileRows.upperBound - $0.next } }

    /// The next source row (level 0), `width · channels` bytes; `emit` gets the tile rows
    /// it completes.
    func push(_ row: UnsafePointer<UInt8>, emit: Emit) throws {
        try push(row, level: 0, emit: emit)
    }

    private func push(_ row: UnsafePointer<UInt8>, level k: Int, emit: Emit) throws {
        let y = levels[k].row
        levels[k].row += 1
        if k == levels.count - 1 { lastLevelRow?(y, row) }
        try keep(row, y: y, level: k, emit: emit)
        guard let pending = levels[k].pending, let halved = levels[k].halved else { return }
        let w = levels[k].width
        if y & 1 == 0 {
            if y + 1 < levels[k].height {
                pending.update(from: row, count: w * channels)
                return
            }
            // The last row of an odd-height level halves alone, or is dropped (sizes rounded down).
            guard !geometry.roundsDown else { return }
            let t0 = clock.milliseconds
            ts_halve_rows(row, row, Int32(w), Int32(channels), 1, halved)
            halvingTime += clock.milliseconds - t0
        } else {
            let t0 = clock.milliseconds
            ts_halve_rows(pending, row, Int32(w), Int32(channels), geometry.roundsDown && w > 1 ? 0 : 1, halved)
            halvingTime += clock.milliseconds - t0
        }
        try push(UnsafePointer(halved), level: k + 1, emit: emit)
    }

    /// Copies row `y` of level `k` into its window when a tile row needs it, and emits the
    /// tile row it completes.
    private func keep(_ row: UnsafePointer<UInt8>, y: Int, level k: Int, emit: Emit) throws {
        var l = levels[k]
        defer { levels[k] = l }
        guard l.next < l.tileRows.upperBound else { return }
        let t = geometry.tile(k, column: 0, row: l.next).y
        guard y >= l.top else { return }
        let stride = l.width * channels
        precondition(y - l.top < capacity && y == l.top + l.filled, "level rows arrive in order")
        (l.window + (y - l.top) * stride).update(from: row, count: stride)
        l.filled += 1
        guard y + 1 == t.upperBound else { return }
        try emit(k, l.next, l.window, stride, l.top)
        l.next += 1
        guard l.next < l.tileRows.upperBound else { return }
        // Keep the rows the next tile row shares with this one (the overlap).
        let nextTop = geometry.tile(k, column: 0, row: l.next).y.lowerBound
        let keep = l.top + l.filled - nextTop
        if keep > 0 { l.window.update(from: l.window + (nextTop - l.top) * stride, count: keep * stride) }
        l.top = nextTop
        l.filled = max(0, keep)
    }
}
