//! glibc heap tuning for the `floe` process (kept apart from `alloc.rs`, which the fuzz targets
//! share and which does not need it).

/// Largest allocation glibc serves from its heap rather than a fresh mapping.
const HEAP_ALLOCATION_BYTES_MAX: i32 = 32 << 20;
/// Free memory at the top of a heap that glibc keeps before returning it to the kernel.
const HEAP_KEPT_FREE_BYTES: i32 = 256 << 20;

/// Makes glibc keep freed megabyte buffers for reuse. By default it maps every allocation over
/// 128 KiB afresh and unmaps it when freed (adapting only slowly), so each Fetch response and
/// each partition read buffer is new memory the kernel must fault in page by page: a profile of a
/// hot catch-up read put about 30 % of the agent's CPU in those page faults. The cost is up to
/// [`HEAP_KEPT_FREE_BYTES`] per heap held after a burst. Call before starting threads.
pub(crate) fn keep_freed_buffers() {
    // SAFETY: `mallopt` only sets allocator thresholds; it is called once, before any other
    // thread exists, and invalid values are refused by glibc (return 0), not undefined.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_ALLOCATION_BYTES_MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, HEAP_KEPT_FREE_BYTES);
    }
}
