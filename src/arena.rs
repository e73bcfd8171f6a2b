//! The module's memory during one `validate` call: a region it hands out by moving a pointer,
//! and takes back whole when the next call begins.
//!
//! A call builds and drops thousands of small strings, vectors and maps, and the module's
//! default allocator (wasi-libc's dlmalloc) took 7–10% of a mutating call doing so
//! (BENCHMARKS.md, issue 30). Nothing a call allocates outlives it: the host copies the
//! answer out, and the waPC guest frees it, before the next call. So during a call an
//! allocation moves a pointer, a free only counts, and the next call starts the region again.
//!
//! What keeps it safe without trusting that: the region is reused only when every block of it
//! has been freed. If one has not (a trap in the middle of a call, or a block kept on purpose),
//! the region is left as it is for good and every later call uses the default allocator.
//!
//! The region is one block of [`REGION`] bytes, taken when the module starts. A call that
//! outgrows it takes the rest from the default allocator, and so do blocks over
//! [`MAX_BLOCK`] (a huge annotation, the answer to a huge JobSet): they are few, and it grows
//! them where they are. A request over [`MAX_REQUEST`] runs on the default allocator alone:
//! the region reuses nothing within a call, and in it a 10 MB JobSet peaked at 42 MiB of
//! linear memory and a 64 MB annotation at 259 MiB, against 32 and 193 without it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The region the module keeps: a 64-rjob JobSet CREATE fits in it.
pub const REGION: usize = 2 * 1024 * 1024;
/// The largest block taken from the region.
pub const MAX_BLOCK: usize = 64 * 1024;
/// The largest request run in the region. A larger one allocates more than the region holds
/// (its tree alone), and runs on the default allocator, which reuses memory within the call:
/// its peak memory is what it was without the region.
pub const MAX_REQUEST: usize = REGION / 4;

/// A bump region over the default allocator. Its cells are plain: the module is one thread.
pub struct Arena {
    size: usize,
    start: Cell<usize>,
    end: Cell<usize>,
    next: Cell<usize>,
    /// Blocks handed out from the region and not yet freed.
    live: Cell<usize>,
    in_call: Cell<bool>,
    /// A block outlived its call, so the region can never be reused.
    retired: Cell<bool>,
}

// SAFETY: wasm32-wasip1 has one thread, and natively an Arena is only used by the thread that
// made it (the tests); nothing shares it.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena whose region, once reserved, is `size` bytes.
    pub const fn new(size: usize) -> Self {
        Arena {
            size,
            start: Cell::new(0),
            end: Cell::new(0),
            next: Cell::new(0),
            live: Cell::new(0),
            in_call: Cell::new(false),
            retired: Cell::new(false),
        }
    }

    /// Takes the region from the default allocator, once.
    pub fn reserve(&self) {
        if self.end.get() > self.start.get() || self.size == 0 {
            return;
        }
        let Ok(layout) = Layout::from_size_align(self.size, 16) else {
            return;
        };
        // SAFETY: the size is not zero.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.start.set(ptr as usize);
            self.next.set(ptr as usize);
            self.end.set((ptr as usize).saturating_add(self.size));
        }
    }

    /// Starts a call: the region from its beginning. Returns whether the call runs in it.
    pub fn begin(&self) -> bool {
        if self.retired.get() {
            return false;
        }
        if self.live.get() != 0 {
            self.retired.set(true);
            self.in_call.set(false);
            return false;
        }
        self.reserve();
        self.next.set(self.start.get());
        self.in_call.set(self.end.get() > self.start.get());
        self.in_call.get()
    }

    /// Ends a call: blocks it leaves (its answer) are freed as usual, and counted.
    pub fn end(&self) {
        self.in_call.set(false);
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        (self.start.get()..self.end.get()).contains(&(ptr as usize))
    }

    /// A block from the region during a call, or null: between calls, over [`MAX_BLOCK`], or
    /// when it does not fit.
    fn bump(&self, layout: Layout) -> *mut u8 {
        if !self.in_call.get() || layout.size() > MAX_BLOCK {
            return std::ptr::null_mut();
        }
        let aligned = match self.next.get().checked_next_multiple_of(layout.align()) {
            Some(a) => a,
            None => return std::ptr::null_mut(),
        };
        match aligned.checked_add(layout.size()) {
            Some(after) if after <= self.end.get() => {
                self.next.set(after);
                self.live.set(self.live.get().saturating_add(1));
                aligned as *mut u8
            }
            _ => std::ptr::null_mut(),
        }
    }
}

// SAFETY: a region block is handed out once, aligned as asked, and never overlaps another
// (the pointer only moves forward until every block is freed); other blocks are System's.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = self.bump(layout);
        if !ptr.is_null() {
            return ptr;
        }
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = self.bump(layout);
        if !ptr.is_null() {
            // The region is reused: its bytes are the last call's.
            std::ptr::write_bytes(ptr, 0, layout.size());
            return ptr;
        }
        // The default allocator knows which of its memory is still zero, and leaves it
        // untouched.
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.owns(ptr) {
            self.live.set(self.live.get().saturating_sub(1));
        } else {
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            return System.realloc(ptr, layout, new_size);
        }
        if new_size <= layout.size() {
            return ptr;
        }
        // The last block handed out grows where it is; past `MAX_BLOCK`, it moves out.
        let last = (ptr as usize).checked_add(layout.size()) == Some(self.next.get());
        if self.in_call.get() && last && new_size <= MAX_BLOCK {
            if let Some(after) = (ptr as usize).checked_add(new_size) {
                if after <= self.end.get() {
                    self.next.set(after);
                    return ptr;
                }
            }
        }
        // SAFETY: the caller guarantees new_size with the old alignment is a valid layout.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
    }
}

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static MEMORY: Arena = Arena::new(REGION);

/// Takes the module's region, when it starts (on wasm; natively, nothing).
pub fn reserve() {
    #[cfg(target_arch = "wasm32")]
    MEMORY.reserve();
}

/// Runs one call of the module on a request of `request_len` bytes, in the region when the
/// request is small enough (on wasm; natively, as it is).
pub fn per_call<T>(request_len: usize, call: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "wasm32")]
    let in_region = request_len <= MAX_REQUEST && MEMORY.begin();
    #[cfg(not(target_arch = "wasm32"))]
    let _ = request_len;
    let out = call();
    #[cfg(target_arch = "wasm32")]
    if in_region {
        MEMORY.end();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// Allocates `size` bytes filled with `byte`.
    unsafe fn filled(arena: &Arena, size: usize, align: usize, byte: u8) -> *mut u8 {
        let ptr = arena.alloc(layout(size, align));
        assert!(!ptr.is_null());
        std::ptr::write_bytes(ptr, byte, size);
        ptr
    }

    unsafe fn bytes<'a>(ptr: *mut u8, size: usize) -> &'a [u8] {
        std::slice::from_raw_parts(ptr, size)
    }

    #[test]
    fn a_call_takes_aligned_blocks_from_the_region_and_the_next_call_starts_it_again() {
        let arena = Arena::new(REGION);
        unsafe {
            assert!(arena.begin());
            let a = filled(&arena, 3, 1, 1);
            let b = filled(&arena, 24, 8, 2);
            let c = filled(&arena, 16, 16, 3);
            assert!(arena.owns(a) && arena.owns(b) && arena.owns(c));
            assert_eq!((b as usize % 8, c as usize % 16), (0, 0));
            assert!(b as usize >= a as usize + 3 && c as usize >= b as usize + 24);
            assert_eq!(bytes(a, 3), [1; 3]);
            assert_eq!(bytes(b, 24), [2; 24]);
            arena.end();
            // The answer is freed after the call, as the waPC guest does.
            for (ptr, l) in [(a, layout(3, 1)), (b, layout(24, 8)), (c, layout(16, 16))] {
                arena.dealloc(ptr, l);
            }
            assert!(arena.begin());
            assert_eq!(arena.alloc(layout(3, 1)), a);
            arena.end();
            arena.dealloc(a, layout(3, 1));
        }
    }

    #[test]
    fn between_calls_blocks_come_from_the_default_allocator() {
        let arena = Arena::new(REGION);
        unsafe {
            assert!(arena.begin());
            arena.end();
            let outside = filled(&arena, 64, 8, 7);
            assert!(!arena.owns(outside));
            arena.dealloc(outside, layout(64, 8));
            assert!(arena.begin());
            arena.end();
        }
    }

    #[test]
    fn a_block_that_outlives_its_call_retires_the_region_for_good() {
        let arena = Arena::new(REGION);
        unsafe {
            assert!(arena.begin());
            let kept = filled(&arena, 100, 4, 9);
            arena.end();
            assert!(!arena.begin());
            let later = filled(&arena, 100, 4, 5);
            assert!(!arena.owns(later));
            assert_eq!(bytes(kept, 100), [9; 100]);
            arena.end();
            arena.dealloc(later, layout(100, 4));
            // Freeing the kept block does not bring the region back: it may be in use still.
            arena.dealloc(kept, layout(100, 4));
            assert!(!arena.begin());
        }
    }

    #[test]
    fn a_call_that_outgrows_the_region_takes_the_rest_from_the_default_allocator() {
        let arena = Arena::new(4 * MAX_BLOCK);
        let block = layout(MAX_BLOCK, 8);
        unsafe {
            assert!(arena.begin());
            let blocks: Vec<*mut u8> = (0..5u8).map(|i| filled(&arena, MAX_BLOCK, 8, i)).collect();
            let owned: Vec<bool> = blocks.iter().map(|b| arena.owns(*b)).collect();
            assert_eq!(owned, [true, true, true, true, false]);
            for (i, b) in (0u8..).zip(&blocks) {
                assert_eq!(bytes(*b, MAX_BLOCK), vec![i; MAX_BLOCK]);
            }
            arena.end();
            blocks.iter().for_each(|b| arena.dealloc(*b, block));
            assert!(arena.begin());
            let again = arena.alloc(block);
            assert_eq!(again, blocks[0]);
            arena.end();
            arena.dealloc(again, block);
        }
    }

    /// A block over `MAX_BLOCK` is the default allocator's, and so is one that grows past it.
    #[test]
    fn a_large_block_is_the_default_allocators() {
        let arena = Arena::new(REGION);
        unsafe {
            assert!(arena.begin());
            let large = filled(&arena, MAX_BLOCK + 1, 8, 3);
            assert!(!arena.owns(large));
            let small = filled(&arena, 16, 8, 4);
            assert!(arena.owns(small));
            let grown = arena.realloc(small, layout(16, 8), MAX_BLOCK + 1);
            assert!(!arena.owns(grown));
            assert_eq!(bytes(grown, 16), [4; 16]);
            arena.end();
            arena.dealloc(large, layout(MAX_BLOCK + 1, 8));
            arena.dealloc(grown, layout(MAX_BLOCK + 1, 8));
            assert!(arena.begin());
            arena.end();
        }
    }

    /// The region is taken once, when the module starts, and kept: every call starts it again.
    #[test]
    fn the_region_is_taken_once() {
        let arena = Arena::new(REGION);
        arena.reserve();
        let start = arena.start.get();
        assert_eq!(arena.end.get() - start, REGION);
        arena.reserve();
        assert!(arena.begin());
        assert_eq!(arena.start.get(), start);
        arena.end();
        // No region at all: every call uses the default allocator.
        let none = Arena::new(0);
        assert!(!none.begin());
    }

    #[test]
    fn realloc_grows_the_last_block_in_place_and_moves_any_other_with_its_bytes() {
        let arena = Arena::new(REGION);
        unsafe {
            assert!(arena.begin());
            let a = filled(&arena, 8, 8, 1);
            let grown = arena.realloc(a, layout(8, 8), 32);
            assert_eq!(grown, a);
            std::ptr::write_bytes(grown.add(8), 4, 24);
            let b = filled(&arena, 8, 8, 2);
            let moved = arena.realloc(grown, layout(32, 8), 64);
            assert_ne!(moved, grown);
            assert!(arena.owns(moved) && moved as usize > b as usize);
            assert_eq!(bytes(moved, 8), [1; 8]);
            assert_eq!(bytes(moved.add(8), 24), [4; 24]);
            assert_eq!(arena.realloc(b, layout(8, 8), 4), b);
            arena.end();
            arena.dealloc(moved, layout(64, 8));
            arena.dealloc(b, layout(4, 8));
            assert_eq!(arena.live.get(), 0);
            assert!(arena.begin());
            arena.end();
        }
    }
}
