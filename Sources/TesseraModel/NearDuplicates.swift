/// Groups of 64-bit perceptual hashes within a Hamming distance of each other (`tessera
/// similar`), without comparing all pairs: multi-index hashing (Norouzi, Punjani and Fleet,
/// "Fast search in Hamming space with multi-index hashing", CVPR 2012). The 64 bits are cut
/// into `m` chunks: two hashes within `r` bits then differ by at most `r / m` bits in at
/// least one chunk (pigeonhole), so each hash probes, per chunk, the chunk values that close
/// to its own and compares only the hashes found there.
public enum NearDuplicates {
    /// Connected groups (two or more members) of the indices of `hashes` whose members are
    /// within `threshold` bits of another member; each group sorted, groups by first member.
    public static func groups(_ hashes: [UInt64], threshold: Int) -> [[Int]] {
        let n = hashes.count
        guard n > 1 else { return [] }
        let r = max(0, min(threshold, 32))
        let (m, probeRadius) = plan(n: n, threshold: r)
        var widths = [Int](repeating: 64 / m, count: m)
        for c in 0..<(64 % m) { widths[c] += 1 }
        var offsets = [Int](repeating: 0, count: m)
        for c in 1..<m { offsets[c] = offsets[c - 1] + widths[c - 1] }

        var parent = Array(0..<n)
        func find(_ x: Int) -> Int {
            var x = x
            while parent[x] != x {
                parent[x] = parent[parent[x]]
                x = parent[x]
            }
            return x
        }
        func union(_ a: Int, _ b: Int) {
            let x = find(a), y = find(b)
            if x != y { parent[max(x, y)] = min(x, y) }
        }

        hashes.withUnsafeBufferPointer { h in
            for c in 0..<m {
                let width = widths[c], shift = UInt64(offsets[c]), mask = (UInt64(1) << UInt64(width)) - 1
                // Buckets of this chunk's values, as one array (counting sort).
                var start = [Int32](repeating: 0, count: (1 << width) + 1)
                for i in 0..<n { start[Int((h[i] >> shift) & mask) + 1] += 1 }
                for v in 0..<(1 << width) { start[v + 1] += start[v] }
                var fill = start
                var members = [Int32](repeating: 0, count: n)
                var memberHashes = [UInt64](repeating: 0, count: n)  // beside the ids: a bucket is read in one sweep
                for i in 0..<n {
                    let v = Int((h[i] >> shift) & mask)
                    members[Int(fill[v])] = Int32(i)
                    memberHashes[Int(fill[v])] = h[i]
                    fill[v] += 1
                }
                start.withUnsafeBufferPointer { start in
                    memberHashes.withUnsafeBufferPointer { memberHashes in
                    members.withUnsafeBufferPointer { members in
                        for i in 0..<n {
                            let hi = h[i], v = Int((hi >> shift) & mask)
                            // The chunk values within `probeRadius` bits of this one.
                            func visit(_ probe: Int) {
                                for at in Int(start[probe])..<Int(start[probe + 1]) where (hi ^ memberHashes[at]).nonzeroBitCount <= r {
                                    let j = Int(members[at])
                                    if j > i { union(i, j) }
                                }
                            }
                            visit(v)
                            if probeRadius >= 1 {
                                for a in 0..<width {
                                    let va = v ^ (1 << a)
                                    visit(va)
                                    guard probeRadius >= 2 else { continue }
                                    for b in (a + 1)..<max(a + 1, width) {
                                        let vb = va ^ (1 << b)
                                        visit(vb)
                                        guard probeRadius >= 3 else { continue }
                                        for c in (b + 1)..<max(b + 1, width) { visit(vb ^ (1 << c)) }
                                    }
                                }
                            }
                        }
                    }
                    }
                }
            }
        }
        var byRoot: [Int: [Int]] = [:]
        for i in 0..<n { byRoot[find(i), default: []].append(i) }
        return byRoot.values.filter { $0.count > 1 }.sorted { $0[0] < $1[0] }
    }

    /// Chunks and the per-chunk probe radius for `n` hashes and threshold `r`: the least
    /// expected work (buckets probed and the hashes they hold, for evenly spread hashes) among
    /// radii 0...3, each with the fewest chunks the pigeonhole allows (`r / m <= radius`),
    /// chunks of at most 20 bits.
    static func plan(n: Int, threshold r: Int) -> (chunks: Int, radius: Int) {
        func pow2(_ x: Double) -> Double {
            var v = 1.0
            for _ in 0..<Int(x) { v *= 2 }
            return v * (1 + (x - x.rounded(.down)) * 0.6931)  // 2^frac ~ 1 + frac ln 2, enough to compare plans
        }
        func binomial(_ w: Int, _ k: Int) -> Double {
            (0..<k).reduce(1.0) { $0 * Double(w - $1) / Double($1 + 1) }
        }
        var best = (chunks: max(4, r / 2 + 1), radius: 1), bestCost = Double.infinity
        for radius in 0...3 {
            let m = max(4, r / (radius + 1) + 1)
            let width = (64 + m - 1) / m
            guard width <= 20, r / m <= radius else { continue }
            let probes = (0...radius).reduce(0.0) { $0 + binomial(width, $1) }
            // A probe (a bucket looked up) costs about ten comparisons of a hash found (measured).
            let cost = Double(m) * probes * (10 + Double(n) / pow2(64.0 / Double(m)))
            if cost < bestCost { (best, bestCost) = ((m, radius), cost) }
        }
        return best
    }

    /// The threshold `tessera similar` uses unless told: chosen on a made set of near-duplicates
    /// (re-encodes, 2 % crops, half-size copies, small exposure changes) and unrelated photos.
    public static let defaultThreshold = 12
}
