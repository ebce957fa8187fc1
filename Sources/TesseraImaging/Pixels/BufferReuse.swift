import TesseraShim

/// Every image allocates, and frees, buffers of a few megabytes: decoded rows, the
/// resampler's rings, the encoder's coefficients. glibc maps each allocation above its
/// threshold (128 kB at first) on its own and unmaps it when freed, so the next image
/// faults it in again, a page at a time, each zeroed by the kernel. glibc raises the
/// threshold by itself only after freeing such a block, so how much a process paid
/// depended on which images it happened to see first. A process that renders image after
/// image keeps them instead: below 32 MB from the heap, and up to 64 MB freed at its top
/// left mapped (docs/decisions/025-buffer-reuse.md). Larger blocks (a progressive JPEG's
/// coefficients) are still mapped on their own and returned.
public enum BufferReuse {
    /// Sets the policy for this process (before its first image).
    public static func enable() {
        _ = ts_keep_freed_buffers(32 << 20, 64 << 20)
    }
}
