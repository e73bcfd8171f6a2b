//! The module's memory during one `validate` call: a region it hands out by moving a pointer,
//! and takes back whole when the next call begins.
//!
//! A call builds and drops thousands of small strings, vectors and maps (a 64-rjob JobSet
//! CREATE about 30 thousand), and the module's default allocator (wasi-libc's dlmalloc)
//! spent about a third of the call on them. Nothing a call allocates outlives it: the host
//! copies the answer out before the next call. So during a call an allocation moves a pointer,
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
        self.end
            .set(if ptr.is_null() { start } else { start + size });
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
                self.live.set(self.live.get() + 1);
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
            self.live.set(self.live.get() - 1);
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
        let last = ptr as usize + layout.size() == self.next.get();
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
mod tests;
