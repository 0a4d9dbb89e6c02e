//! glibc heap tuning for the `floe` process (kept apart from `alloc.rs`, which the fuzz targets
//! share and which does not need it).

/// Largest allocation glibc serves from its heap rather than a fresh mapping.
const HEAP_ALLOCATION_BYTES_MAX: i32 = 32 << 20;
/// Free memory at the top of a heap that glibc keeps before returning it to the kernel.
const HEAP_KEPT_FREE_BYTES: i32 = 256 << 20;

/// Fewest heaps (arenas) glibc may use, whatever the core count.
const ARENAS_MIN: usize = 2;

/// Resident memory outside live allocations (freed memory the heaps keep, and the little the
/// process maps besides its heaps) that [`return_free_memory`] lets stand.
const FREE_RESIDENT_BYTES_MAX: u64 = 128 << 20;
/// How often the heaps' free memory is looked at.
const FREE_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Bytes [`return_free_memory`] gave back to the kernel since the process started.
static RETURNED_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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

/// Starts a thread that, every [`FREE_CHECK_EVERY`], gives the heaps' free memory back to the
/// kernel once the resident memory outside live allocations passes [`FREE_RESIDENT_BYTES_MAX`]
/// (or `FLOE_HEAP_FREE_MAX_BYTES`; `off`: never). glibc returns only the free memory at the top
/// of a heap (past `M_TRIM_THRESHOLD`); what is freed in the middle stays resident for ever. At
/// 2,000 partitions the live heap stayed near 600-700 MiB while freed memory grew to 750 MiB in
/// ten minutes, and RSS with it (issue 53). Buffers freed and reused within a check keep the
/// reuse [`keep_freed_buffers`] is for; each return locks a heap for 15-35 ms there.
pub(crate) fn return_free_memory_in_background() {
    let kept_max = match std::env::var("FLOE_HEAP_FREE_MAX_BYTES") {
        Err(_) => FREE_RESIDENT_BYTES_MAX,
        Ok(v) if v == "off" => return,
        Ok(v) => match v.parse() {
            Ok(bytes) => bytes,
            Err(_) => {
                tracing::warn!(value = %v, "FLOE_HEAP_FREE_MAX_BYTES is not a byte count or `off`; using the default");
                FREE_RESIDENT_BYTES_MAX
            }
        },
    };
    let spawned = std::thread::Builder::new().name("floe-heap-trim".into()).spawn(move || {
        loop {
            std::thread::sleep(FREE_CHECK_EVERY);
            return_free_memory(kept_max);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "the heap's free memory will not be returned to the kernel");
    }
}

/// Gives the heaps' free memory back to the kernel if the process keeps more than `kept_max`
/// resident bytes outside live allocations (glibc's `malloc_trim`: the whole pages inside free
/// chunks, in every heap, each heap locked while it is walked). The heaps' own count of free
/// bytes cannot say: it still counts a free chunk whose pages went back.
fn return_free_memory(kept_max: u64) {
    let Some(before) = resident_bytes() else { return };
    if before.saturating_sub(usage().in_use) <= kept_max {
        return;
    }
    let started = std::time::Instant::now();
    // SAFETY: `malloc_trim` has no preconditions; it takes each heap's lock itself.
    unsafe { libc::malloc_trim(0) };
    let after = resident_bytes().unwrap_or(before);
    RETURNED_BYTES.fetch_add(before.saturating_sub(after), std::sync::atomic::Ordering::Relaxed);
    tracing::debug!(before, after, took_us = started.elapsed().as_micros(), "returned the heaps' free memory");
}

/// The process's resident memory (`/proc/self/statm`).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: `sysconf` has no preconditions.
    let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages.checked_mul(u64::try_from(page_bytes).ok()?)
}

/// Bytes given back to the kernel by [`return_free_memory_in_background`] so far.
pub(crate) fn returned_bytes() -> u64 {
    RETURNED_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// What glibc's heaps hold, over every heap (arena), in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapUsage {
    /// In live allocations, those served by their own mapping included.
    pub(crate) in_use: u64,
    /// Freed and kept in the heaps for reuse: resident until reused or returned to the kernel
    /// ([`return_free_memory_in_background`]), so part of the process's RSS that no allocation
    /// accounts for.
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

    #[test]
    fn free_memory_between_live_blocks_goes_back_to_the_kernel() {
        // Every other 64 KiB block freed: none of it at a heap's top, so glibc keeps it all.
        let mut blocks: Vec<Vec<u8>> = (0..2048).map(|i| vec![u8::try_from(i % 251).unwrap_or(0); 64 << 10]).collect();
        let mut kept = Vec::new();
        for (i, block) in blocks.drain(..).enumerate() {
            if i % 2 == 0 {
                kept.push(block);
            }
        }
        let before = resident_bytes().unwrap_or(0);
        return_free_memory(0);
        let after = resident_bytes().unwrap_or(u64::MAX);
        assert!(after + (32 << 20) <= before, "64 MiB freed between live blocks: RSS {before} -> {after}");
        assert!(returned_bytes() >= 32 << 20, "counted: {}", returned_bytes());
        drop(std::hint::black_box(kept));
    }
}
