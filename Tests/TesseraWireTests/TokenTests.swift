import Foundation
import TesseraWire
import XCTest

/// The HTTP API's bearer tokens: SHA-256 against FIPS 180-4's examples, files that hold
/// only the hash, matching by role, and names that cannot leave their folder.
final class TokenTests: XCTestCase {
    func testSHA256MatchesTheStandardsExamples() {
        XCTAssertEqual(SHA256.hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(SHA256.hex([UInt8](repeating: 0x61, count: 1_000_000)),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testTokensAreStoredAsHashesAndMatchedByRole() throws {
        let dir = NSTemporaryDirectory() + "tessera-tokens-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let alice = try APITokens.create(in: dir, name: "alice", role: .client)
        let root = try APITokens.create(in: dir, name: "root", role: .admin)
        XCTAssertNotEqual(alice, root)
        let file = try String(contentsOfFile: dir + "/clients/alice.token", encoding: .utf8)
        XCTAssertEqual(file, APITokens.fileLine(alice) + "\n")
        XCTAssertFalse(file.contains(alice))
        let attributes = try FileManager.default.attributesOfItem(atPath: dir + "/clients/alice.token")
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertThrowsError(try APITokens.create(in: dir, name: "alice", role: .admin), "one name, one token")
        for bad in ["", "../x", ".hidden", "a/b", "é"] {
            XCTAssertThrowsError(try APITokens.create(in: dir, name: bad, role: .client), bad)
        }
        XCTAssertThrowsError(try APITokens.create(in: dir, name: "w", role: .worker))
        try "not a hash\n".write(toFile: dir + "/clients/broken.token", atomically: true, encoding: .utf8)
        let (tokens, problems) = APITokens.load(dir)
        XCTAssertEqual(tokens.count, 2)
        XCTAssertEqual(problems.count, 1)
        XCTAssertEqual(APITokens.match("Bearer \(alice)", in: tokens), APIToken(name: "alice", role: .client))
        XCTAssertEqual(APITokens.match("bearer  \(root) ", in: tokens), APIToken(name: "root", role: .admin))
        XCTAssertNil(APITokens.match("Bearer \(alice)x", in: tokens))
        XCTAssertNil(APITokens.match("Basic \(alice)", in: tokens))
        XCTAssertNil(APITokens.match(nil, in: tokens))
        // Token files beside the keys do not disturb the CURVE allow-list.
        XCTAssertEqual(try AllowList(path: dir).keys, [])
    }
}
