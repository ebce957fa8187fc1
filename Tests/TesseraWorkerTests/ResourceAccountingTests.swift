import Foundation
@testable import TesseraWorker
import XCTest

/// A task's peak memory is the kernel's high-water mark since the mark was reset: what a
/// task allocates shows in it, and a reset forgets what came before.
final class ResourceAccountingTests: XCTestCase {
    func testThePeakFollowsWhatATaskTouchesAndResetsBetweenTasks() throws {
        try XCTSkipUnless(ResourceAccounting.resetPeak(), "/proc/self/clear_refs is not writable here")
        let before = ResourceAccounting.peakResident()
        XCTAssertGreaterThan(before, 0)
        let size = 96 << 20
        // Fresh pages from the kernel: malloc could hand back a free region of its heap that
        // earlier tests in this process left resident, and then nothing new would show.
        let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let block = mapped, block != MAP_FAILED else { return XCTFail("mmap failed") }
        memset(block, 0x5A, size)  // touched: resident
        let during = ResourceAccounting.peakResident()
        XCTAssertGreaterThanOrEqual(during, before + UInt64(size) * 9 / 10, "the allocation shows in the peak")
        XCTAssertGreaterThanOrEqual(ResourceAccounting.currentResident() + UInt64(size) / 10, UInt64(size))
        munmap(block, size)
        XCTAssertTrue(ResourceAccounting.resetPeak())
        let after = ResourceAccounting.peakResident()
        XCTAssertLessThan(after, during - UInt64(size) / 2, "a reset forgets the earlier task's peak")
    }
}
