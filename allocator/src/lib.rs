//! The process's allocator: mimalloc, asked for a plain block wherever a plain block is
//! aligned enough, and for an aligned one only where it is not.
//!
//! `mimalloc::MiMalloc` sends every request to `mi_malloc_aligned`. Almost everything
//! the webhook allocates (the strings, maps and vectors of about 490 allocations a
//! review) asks for an alignment of 1 or 8, which every block of mimalloc has anyway;
//! the aligned entry point checks the alignment again on every call and, when the
//! free block at hand is not aligned for a 16-byte request, takes a slower path that
//! allocates more than it was asked for. Plain `mi_malloc` for those cut the core's
//! seed review from 301.4 k to 291.2 k instructions (docs/BENCHMARKS.md).
//!
//! When is a plain block aligned enough? mimalloc's size classes are whole double words
//! from 16 bytes up on 64-bit targets (`MI_ALIGN2W` in `src/page-queue.c`; `alloc.c`
//! asserts a block of 16 bytes or more is 16-aligned whenever it pops one), and every
//! block is at least word-aligned. So `mi_malloc(size)` is aligned to `align` when
//! `align <= 16 && align <= size`: the rule std's `System` allocator uses for `malloc`
//! on the same targets. Everything else goes to the aligned calls, as before.
//! `tests/alignment.rs` holds the rule for every size up to 4 KiB and the alignments
//! from 1 to 4 KiB, growing and shrinking.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use libmimalloc_sys as mi;

/// The largest alignment a plain mimalloc block of at least that many bytes always
/// has. Known for 64-bit targets only; elsewhere (0) every request is an aligned one.
const PLAIN_ALIGN: usize = if cfg!(target_pointer_width = "64") {
    16
} else {
    0
};

/// Whether a plain block of `size` bytes is aligned to `align`.
#[inline]
fn plain_is_aligned(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

/// The global allocator of the webhook's binary, its benchmarks and its profiles.
pub struct Allocator;

// SAFETY: each method returns memory from mimalloc for the layout it was given (a plain
// block only where `plain_is_aligned` holds, above), or null; `dealloc` and `realloc`
// are given only pointers this allocator returned, and `mi_free`/`mi_realloc*` take a
// block from either entry point.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: C calls without preconditions beyond a power-of-two alignment, which
        // `Layout` guarantees.
        unsafe {
            if plain_is_aligned(layout.align(), layout.size()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain_is_aligned(layout.align(), layout.size()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract); a
        // block moved by `mi_realloc` is a plain block of `new_size` bytes, aligned as
        // `plain_is_aligned` says, and one kept in place keeps its address.
        unsafe {
            if plain_is_aligned(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plain_is_aligned;

    #[test]
    fn plain_blocks_only_where_std_would_malloc() {
        assert!(plain_is_aligned(1, 1));
        assert!(plain_is_aligned(8, 24));
        assert!(plain_is_aligned(16, 16));
        assert!(
            !plain_is_aligned(16, 8),
            "an 8-byte block is 8-aligned only"
        );
        assert!(!plain_is_aligned(32, 64));
        assert!(!plain_is_aligned(4096, 4096));
    }
}
