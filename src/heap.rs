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
