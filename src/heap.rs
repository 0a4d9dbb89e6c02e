//! glibc heap tuning for the `floe` process (kept apart from `alloc.rs`, which the fuzz targets
//! share and which does not need it).

/// Largest allocation glibc serves from its heap rather than a fresh mapping.
const HEAP_ALLOCATION_BYTES_MAX: i32 = 32 << 20;
/// Free memory at the top of a heap that glibc keeps before returning it to the kernel.
const HEAP_KEPT_FREE_BYTES: i32 = 256 << 20;

/// Fewest heaps (arenas) glibc may use, whatever the core count.
const ARENAS_MIN: usize = 2;

/// Makes glibc keep freed megabyte buffers for reuse. By default it maps every allocation over
/// 128 KiB afresh and unmaps it when freed (adapting only slowly), so each Fetch response and
/// each partition read buffer is new memory the kernel must fault in page by page: a profile of a
/// hot catch-up read put about 30 % of the agent's CPU in those page faults. The cost is up to
/// [`HEAP_KEPT_FREE_BYTES`] per heap held after a burst, so the heaps are also capped at one
/// per core ([`ARENAS_MIN`] at least) instead of glibc's eight per core: at 2,000 partitions on
/// 2 cores, bursts spread over 16 heaps held about 500 MiB more after four minutes (issue 53).
/// Call before starting threads.
pub(crate) fn keep_freed_buffers() {
    let arenas = std::thread::available_parallelism().map_or(ARENAS_MIN, |n| n.get().max(ARENAS_MIN));
    // SAFETY: `mallopt` only sets allocator thresholds; it is called once, before any other
    // thread exists, and invalid values are refused by glibc (return 0), not undefined.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_ALLOCATION_BYTES_MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, HEAP_KEPT_FREE_BYTES);
        libc::mallopt(libc::M_ARENA_MAX, i32::try_from(arenas).unwrap_or(i32::MAX));
    }
}

/// What glibc's heaps hold, over every heap (arena), in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapUsage {
    /// In live allocations, those served by their own mapping included.
    pub(crate) in_use: u64,
    /// Freed and kept in the heaps for reuse: resident until reused or trimmed, so part of the
    /// process's RSS that no allocation accounts for.
    pub(crate) free: u64,
}

/// The heaps' usage now (glibc's `mallinfo2`: it locks each heap in turn and walks its free
/// lists, so it is for a scrape, not a hot path).
pub(crate) fn usage() -> HeapUsage {
    // SAFETY: `mallinfo2` has no preconditions; it only reads the allocator's bookkeeping.
    let info = unsafe { libc::mallinfo2() };
    HeapUsage { in_use: (info.uordblks + info.hblkhd) as u64, free: info.fordblks as u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_a_live_allocation_and_its_release() {
        let before = usage().in_use;
        let block = vec![1u8; 8 << 20];
        let during = usage().in_use;
        assert!(during >= before + (8 << 20) - (1 << 20), "8 MiB live: {before} -> {during}");
        drop(std::hint::black_box(block));
        let after = usage().in_use;
        assert!(after + (7 << 20) <= during, "8 MiB freed: {during} -> {after}");
    }
}
