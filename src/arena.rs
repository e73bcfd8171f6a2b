//! The module's memory during one `validate` call: a region it hands out by moving a pointer,
//! and takes back whole when the next call begins.
//!
//! A call builds and drops thousands of small strings, vectors and maps, and the module's
//! default allocator (wasi-libc's dlmalloc) took 7–10% of a mutating call doing so
//! (BENCHMARKS.md, issue 30). Nothing a call allocates outlives it: the host copies the
//! answer out, and the waPC guest frees it, before the next call. So during a call an allocation moves a pointer,
//! a free only counts, and the next call starts the region again.
//!
//! What keeps it safe without trusting that: the region is reused only when every block of it
//! has been freed. If one has not (a trap in the middle of a call, or a block kept on purpose),
//! the region is left as it is for good and every later call uses the default allocator. A
//! call that outgrows the region takes the rest from the default allocator, and the next call
//! gets a region big enough, up to [`MAX_REGION`]: the memory kept between calls is bounded.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The first region, enough for a pod or a small JobSet.
pub const FIRST_REGION: usize = 256 * 1024;
/// The largest region kept between calls; a bigger call takes the rest from the default
/// allocator.
pub const MAX_REGION: usize = 16 * 1024 * 1024;

/// A bump region over the default allocator. Its cells are plain: the module is one thread.
pub struct Arena {
    start: Cell<usize>,
    end: Cell<usize>,
    next: Cell<usize>,
    /// Blocks handed out from the region and not yet freed.
    live: Cell<usize>,
    /// Bytes asked for during the call, in the region or not: the next region's size.
    asked: Cell<usize>,
    in_call: Cell<bool>,
    /// A block outlived its call, so the region can never be reused.
    retired: Cell<bool>,
}

// SAFETY: wasm32-wasip1 has one thread, and natively an Arena is only used by the thread that
// made it (the unit tests); nothing shares it.
unsafe impl Sync for Arena {}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Arena {
    pub const fn new() -> Self {
        Arena {
            start: Cell::new(0),
            end: Cell::new(0),
            next: Cell::new(0),
            live: Cell::new(0),
            asked: Cell::new(0),
            in_call: Cell::new(false),
            retired: Cell::new(false),
        }
    }

    /// Starts a call: the region from its beginning, grown if the last call outgrew it. Returns
    /// whether the call runs in the region.
    pub fn begin(&self) -> bool {
        if self.retired.get() {
            return false;
        }
        if self.live.get() != 0 {
            self.retired.set(true);
            self.in_call.set(false);
            return false;
        }
        let size = self.end.get() - self.start.get();
        let wanted = self
            .asked
            .get()
            .max(FIRST_REGION)
            .checked_next_power_of_two()
            .unwrap_or(MAX_REGION)
            .min(MAX_REGION);
        if wanted > size {
            self.replace_region(wanted);
        }
        self.next.set(self.start.get());
        self.asked.set(0);
        self.in_call.set(self.end.get() > self.start.get());
        self.in_call.get()
    }

    /// Ends a call: blocks it leaves (its answer) are freed as usual, and counted.
    pub fn end(&self) {
        self.in_call.set(false);
    }

    fn replace_region(&self, size: usize) {
        let (start, end) = (self.start.get(), self.end.get());
        if end > start {
            // SAFETY: the region was allocated below with this size and alignment, and no
            // block of it is live.
            unsafe { System.dealloc(start as *mut u8, region_layout(end - start)) };
        }
        // SAFETY: the size is not zero.
        let ptr = unsafe { System.alloc(region_layout(size)) };
        let start = ptr as usize;
        self.start.set(start);
        self.end.set(match ptr.is_null() {
            true => start,
            false => start.saturating_add(size),
        });
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        (self.start.get()..self.end.get()).contains(&(ptr as usize))
    }

    /// A block from the region, or null when it does not fit.
    fn bump(&self, layout: Layout) -> *mut u8 {
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

fn region_layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).unwrap_or(Layout::new::<u128>())
}

// SAFETY: a region block is handed out once, aligned as asked, and never overlaps another
// (the pointer only moves forward until every block is freed); other blocks are System's.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.in_call.get() {
            self.asked
                .set(self.asked.get().saturating_add(layout.size()));
            let ptr = self.bump(layout);
            if !ptr.is_null() {
                return ptr;
            }
        }
        System.alloc(layout)
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
        // The last block handed out grows where it is.
        let last = (ptr as usize).checked_add(layout.size()) == Some(self.next.get());
        if self.in_call.get() && last {
            if let Some(after) = (ptr as usize).checked_add(new_size) {
                if after <= self.end.get() {
                    self.asked
                        .set(self.asked.get().saturating_add(new_size - layout.size()));
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
static MEMORY: Arena = Arena::new();

/// Runs one call of the module in the region (on wasm; natively, as it is).
pub fn per_call<T>(call: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "wasm32")]
    MEMORY.begin();
    let out = call();
    #[cfg(target_arch = "wasm32")]
    MEMORY.end();
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
        let arena = Arena::new();
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
        let arena = Arena::new();
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
        let arena = Arena::new();
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
    fn a_call_that_outgrows_the_region_takes_the_rest_from_the_default_allocator_and_the_next_region_fits(
    ) {
        let arena = Arena::new();
        let big = layout(FIRST_REGION / 2 + 1, 8);
        unsafe {
            assert!(arena.begin());
            let a = filled(&arena, big.size(), 8, 1);
            let b = filled(&arena, big.size(), 8, 2);
            assert!(arena.owns(a) && !arena.owns(b));
            assert_eq!(bytes(a, big.size()), vec![1; big.size()]);
            arena.end();
            arena.dealloc(a, big);
            arena.dealloc(b, big);
            assert!(arena.begin());
            assert_eq!(arena.end.get() - arena.start.get(), FIRST_REGION * 2);
            let a = arena.alloc(big);
            let b = arena.alloc(big);
            assert!(arena.owns(a) && arena.owns(b));
            arena.end();
            arena.dealloc(a, big);
            arena.dealloc(b, big);
        }
    }

    #[test]
    fn the_region_kept_between_calls_stops_at_its_cap() {
        let arena = Arena::new();
        let huge = layout(MAX_REGION + 1, 8);
        unsafe {
            assert!(arena.begin());
            let a = arena.alloc(huge);
            assert!(!a.is_null() && !arena.owns(a));
            arena.end();
            arena.dealloc(a, huge);
            assert!(arena.begin());
            assert_eq!(arena.end.get() - arena.start.get(), MAX_REGION);
            arena.end();
        }
    }

    #[test]
    fn realloc_grows_the_last_block_in_place_and_moves_any_other_with_its_bytes() {
        let arena = Arena::new();
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
