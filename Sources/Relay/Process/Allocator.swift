import CShims

/// glibc malloc's trimming, set once at start-up before any thread exists.
enum Allocator {
    /// Free memory an arena keeps at its top before handing it back to the kernel.
    static let trimThreshold: Int32 = 1 << 20
    /// Blocks from this size up get their own mapping.
    static let mmapThreshold: Int32 = 2 << 20

    /// By default an arena gives back any free top over 128 KB as soon as a free makes one, with a
    /// `madvise(MADV_DONTNEED)`; in a multi-threaded process that flushes the TLB of every CPU running one of its
    /// threads. A pause's garbage (its JSON, props, payloads) crossed the line about once per pause, and a
    /// 1,000-device fan-out several times, on the path to the pushes. 1 MB holds a pause's churn in place; the
    /// `mmap` threshold is fixed above it (setting the first stops glibc raising the second by itself), so the
    /// fan-out's arrays come from the arenas rather than from a map and unmap each. The resident size after a
    /// 10k-device fan-out is the same within 0.3 MB (`docs/benchmarks.md`). Overrides `GLIBC_TUNABLES`' two settings.
    /// Bytes malloc has handed out and not had back (`CShims_malloc_in_use`): what a leak grows.
    static func inUseBytes() -> Int { Int(CShims_malloc_in_use()) }

    static func configure() {
        // Refused only for values out of range; the defaults then stay, which cost time, not correctness.
        _ = CShims_malloc_set_thresholds(trimThreshold, mmapThreshold)
    }
}
