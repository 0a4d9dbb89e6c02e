//! The process allocator: the system allocator, except that single allocations of
//! [`LAZY_BYTES_MIN`] or more reserve address space without committing memory up front.
//!
//! Why: the Kafka codec (`kafka-protocol`) pre-allocates arrays from the length prefix a client
//! sends. A 14-byte request claiming 2^31 array elements asks for hundreds of GiB; the system
//! allocator then fails and Rust aborts the whole process, taking every client with it. Mapped
//! with `MAP_NORESERVE`, such a reservation succeeds lazily, the decoder fails on the missing
//! bytes right after, and the mapping is released untouched. Legitimate allocations this large do
//! not occur: frames are capped at 100 MiB. Under strict overcommit (`vm.overcommit_memory=2`)
//! the kernel ignores `MAP_NORESERVE` and the protection does not apply.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::null_mut;

/// Allocations at least this large are lazily mapped.
const LAZY_BYTES_MIN: usize = 1 << 30;
/// Mappings are page aligned; larger alignments go to the system allocator.
const PAGE_BYTES: usize = 4096;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct LazyHugeAllocator;

fn is_lazy(layout: &Layout) -> bool {
    layout.size() >= LAZY_BYTES_MIN && layout.align() <= PAGE_BYTES
}

// SAFETY: every method forwards to `System` except for lazy layouts, which are served by
// anonymous private mappings (page aligned, zero filled) and released with `munmap` of the same
// size; `is_lazy` is a pure function of the layout, so a block is always freed by the same
// mechanism that allocated it.
unsafe impl GlobalAlloc for LazyHugeAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !is_lazy(&layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: an anonymous mapping with no address hint has no preconditions.
        let p = unsafe {
            libc::mmap(
                null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED { null_mut() } else { p.cast() }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_lazy(&layout) {
            // SAFETY: anonymous mappings are zero filled.
            return unsafe { self.alloc(layout) };
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_lazy(&layout) {
            // SAFETY: `ptr` came from `alloc` for this layout, i.e. from `mmap` of this size.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_lazy(&layout) && !is_lazy(&new_layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: both blocks are valid for the copied length, and the old block is freed by
        // the mechanism that allocated it.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}
