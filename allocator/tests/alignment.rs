//! The allocator keeps `GlobalAlloc`'s promises for every layout the webhook can ask for:
//! each block aligned as asked and usable in full, zeroed when asked, its contents kept
//! when it grows or shrinks, on both of its paths (plain and aligned).

use prestop_alloc::Allocator;
use std::alloc::{GlobalAlloc, Layout};

// This test binary allocates through it too: every Vec, String and thread of the harness.
#[global_allocator]
static GLOBAL: Allocator = Allocator;

const ALIGNS: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 4096];

fn aligned(ptr: *mut u8, align: usize) -> bool {
    !ptr.is_null() && (ptr as usize) % align == 0
}

/// Fills the block with a pattern that depends on `seed`, so that a block that moved
/// without its contents, or one that overlaps another live one, is seen.
fn fill(ptr: *mut u8, size: usize, seed: usize) {
    for i in 0..size {
        // SAFETY: `ptr` is a live block of at least `size` bytes.
        unsafe { ptr.add(i).write((i ^ seed) as u8) };
    }
}

fn holds(ptr: *mut u8, size: usize, seed: usize) -> bool {
    // SAFETY: `ptr` is a live block of at least `size` bytes, filled by `fill`.
    (0..size).all(|i| unsafe { ptr.add(i).read() } == (i ^ seed) as u8)
}

#[test]
fn every_size_and_alignment_is_honoured() {
    for align in ALIGNS {
        // Several live blocks of each size, as a parsed tree holds them: a free list's
        // second and third blocks are where a misaligned size class would show.
        for size in 1..=4096usize {
            let layout = Layout::from_size_align(size, align).unwrap();
            let blocks: Vec<*mut u8> = (0..3)
                .map(|n| {
                    // SAFETY: `layout` has a non-zero size.
                    let ptr = unsafe { Allocator.alloc(layout) };
                    assert!(aligned(ptr, align), "size {size}, align {align}: {ptr:?}");
                    fill(ptr, size, size + n);
                    ptr
                })
                .collect();
            for (n, &ptr) in blocks.iter().enumerate() {
                assert!(holds(ptr, size, size + n), "size {size}, align {align}");
                // SAFETY: allocated above with `layout`, freed once.
                unsafe { Allocator.dealloc(ptr, layout) };
            }
        }
    }
}

#[test]
fn zeroed_blocks_are_zero_and_aligned() {
    for align in ALIGNS {
        for size in [1, 7, 8, 9, 15, 16, 17, 24, 40, 100, 1000, 4096, 70_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // Dirty a block of the same class first, so that a reused one must be cleared.
            // SAFETY: non-zero sizes; each block freed once, with its layout.
            unsafe {
                let dirty = Allocator.alloc(layout);
                fill(dirty, size, 0xa5);
                Allocator.dealloc(dirty, layout);
                let ptr = Allocator.alloc_zeroed(layout);
                assert!(aligned(ptr, align), "size {size}, align {align}");
                assert!(
                    (0..size).all(|i| ptr.add(i).read() == 0),
                    "size {size}, align {align}"
                );
                Allocator.dealloc(ptr, layout);
            }
        }
    }
}

#[test]
fn growing_and_shrinking_keep_contents_and_alignment() {
    // Across the line between the paths: a request for 16-byte alignment is plain from
    // 16 bytes on and aligned below, so these cross it in both directions.
    let sizes = [
        1, 3, 8, 12, 15, 16, 17, 24, 31, 32, 48, 100, 1024, 4095, 4096, 100_000,
    ];
    for align in ALIGNS {
        for &from in &sizes {
            for &to in &sizes {
                let layout = Layout::from_size_align(from, align).unwrap();
                // SAFETY: non-zero sizes; the block is reallocated with the layout it
                // has, and freed once with its final one.
                unsafe {
                    let ptr = Allocator.alloc(layout);
                    fill(ptr, from, from * 7 + to);
                    let moved = Allocator.realloc(ptr, layout, to);
                    assert!(aligned(moved, align), "{from} -> {to}, align {align}");
                    assert!(
                        holds(moved, from.min(to), from * 7 + to),
                        "{from} -> {to}, align {align}: contents lost"
                    );
                    Allocator.dealloc(moved, Layout::from_size_align(to, align).unwrap());
                }
            }
        }
    }
}

#[test]
fn the_collections_built_on_it_work() {
    // What the webhook does with it, on several threads (mimalloc's heaps are per thread,
    // and a block freed on another thread goes back through a different path).
    let built: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                scope.spawn(move || {
                    (0..2000)
                        .map(|i| format!("{t}-{i}-{}", "x".repeat(i % 70)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, strings) in built.iter().enumerate() {
        for (i, s) in strings.iter().enumerate() {
            assert_eq!(*s, format!("{t}-{i}-{}", "x".repeat(i % 70)));
        }
    }
    // Freed here, on the main thread.
    drop(built);
}
