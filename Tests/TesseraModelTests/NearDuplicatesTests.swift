import TesseraModel
import XCTest

/// The multi-index grouping finds exactly what comparing every pair finds.
final class NearDuplicatesTests: XCTestCase {
    /// A fixed generator (SplitMix64): the same hashes every run.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Random hashes, and near copies of some: each copy a few random bits away from its original.
    static func hashes(_ n: Int, copies: Int, seed: UInt64) -> [UInt64] {
        var g = SplitMix(state: seed)
        var h = (0..<n).map { _ in g.next() }
        for k in 0..<copies {
            var v = h[Int(g.next() % UInt64(n))]
            for _ in 0..<(k % 14) { v ^= 1 << (g.next() % 64) }
            h.append(v)
        }
        return h
    }

    static func bruteForce(_ h: [UInt64], threshold: Int) -> [[Int]] {
        var parent = Array(h.indices)
        func find(_ x: Int) -> Int { parent[x] == x ? x : find(parent[x]) }
        for i in h.indices {
            for j in (i + 1)..<h.count where (h[i] ^ h[j]).nonzeroBitCount <= threshold {
                let a = find(i), b = find(j)
                if a != b { parent[max(a, b)] = min(a, b) }
            }
        }
        var groups: [Int: [Int]] = [:]
        for i in h.indices { groups[find(i), default: []].append(i) }
        return groups.values.filter { $0.count > 1 }.sorted { $0[0] < $1[0] }
    }

    func testGroupsAreThoseOfEveryPair() {
        let h = Self.hashes(3000, copies: 600, seed: 7)
        for threshold in [0, 1, 3, 5, 8, 10, 13, 16, 24] {
            let fast = NearDuplicates.groups(h, threshold: threshold)
            XCTAssertEqual(fast, Self.bruteForce(h, threshold: threshold), "threshold \(threshold)")
            // At 13 and 16 bits the planted copies are found (random 64-bit hashes rarely come
            // that close); at 24, 3 % of random pairs do and everything chains into few groups.
            if threshold == 13 || threshold == 16 { XCTAssertGreaterThan(fast.count, 400, "the planted copies are found") }
        }
        // Exact duplicates, chains (A near B near C, A far from C), nothing near.
        let a: UInt64 = 0xF0F0_F0F0_0F0F_0F0F
        let b = a ^ 0b1111, c = b ^ 0b1111_0000
        XCTAssertEqual(NearDuplicates.groups([a, 0, a], threshold: 0), [[0, 2]])
        XCTAssertEqual(NearDuplicates.groups([a, b, c, ~a], threshold: 4), [[0, 1, 2]])
        XCTAssertEqual(NearDuplicates.groups([a, ~a], threshold: 10), [])
        XCTAssertEqual(NearDuplicates.groups([], threshold: 10), [])
    }
}
