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
//! One exception, at the region's other end: the object's tree. Dropping it walked every map
//! of it, and took 7% of a JobSet CREATE's instructions to free blocks the next call takes
//! back anyway. So what is allocated in [`building_tree`] comes from the region's top down,
//! counted apart, and when the call is done with the tree it is [`abandon`]ed, not dropped.
//! In a call that abandoned its tree, the next call takes the top back whole, whether or not
//! its blocks were freed; in any other call, a block of the top still live retires the
//! region as any other block does. What this trusts is the code run in [`building_tree`]:
//! the reads of the object (the lean read, a pod's tree from its text, the old object of an
//! UPDATE), the pod's view and plan, and what the stamps write and their writing. It is the
//! policy's own, and keeps nothing past the call: its blocks end in the tree, or are freed
//! before the call returns. Everything written into the tree must be made there: a block
//! of the bottom in an abandoned tree is never freed, and retires the region (a lib test on
//! wasm runs each route to catch one). A tree is dropped, not abandoned, when something made
//! in [`building_tree`] came from the default allocator (over [`MAX_BLOCK`], or the region
//! full), since forgetting it would leak that block.
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
    /// Blocks handed out from the region's bottom and not yet freed.
    live: Cell<usize>,
    /// The tree's end: blocks handed out while [`building_tree`] are taken from the top down,
    /// and `low` is the lowest of them (`end` when there is none).
    low: Cell<usize>,
    /// Blocks handed out from the top and not yet freed.
    tree_live: Cell<usize>,
    /// Whether the call is building the tree: its blocks come from the top.
    tree_mode: Cell<bool>,
    /// Something made or grown in the tree's mode came from the default allocator (over
    /// [`MAX_BLOCK`], or the region full): the tree may hold it, so it must be dropped, not
    /// forgotten, or that block would never be freed.
    tree_spilled: Cell<bool>,
    /// The call abandoned its tree: the top's blocks are dead once it returns.
    abandoned: Cell<bool>,
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
            low: Cell::new(0),
            tree_live: Cell::new(0),
            tree_mode: Cell::new(false),
            tree_spilled: Cell::new(false),
            abandoned: Cell::new(false),
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
        let tree_kept = self.tree_live.get() != 0 && !self.abandoned.get();
        if self.live.get() != 0 || tree_kept {
            self.retired.set(true);
            self.in_call.set(false);
            return false;
        }
        self.reserve();
        self.next.set(self.start.get());
        self.low.set(self.end.get());
        self.tree_live.set(0);
        self.tree_mode.set(false);
        self.tree_spilled.set(false);
        self.abandoned.set(false);
        self.in_call.set(self.end.get() > self.start.get());
        self.in_call.get()
    }

    /// Sets whether the call is building its tree (its blocks then come from the top);
    /// returns whether it was.
    pub fn set_tree_mode(&self, on: bool) -> bool {
        self.tree_mode.replace(on)
    }

    /// Whether the call's tree may be forgotten rather than dropped, and if so, records that
    /// it was: the call runs in the region, and nothing made in the tree's mode came from
    /// the default allocator. The caller then forgets it.
    pub fn may_abandon(&self) -> bool {
        let may = self.in_call.get() && !self.tree_spilled.get();
        if may {
            self.abandoned.set(true);
        }
        may
    }

    /// Ends a call: blocks it leaves (its answer) are freed as usual, and counted.
    pub fn end(&self) {
        self.in_call.set(false);
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        (self.start.get()..self.end.get()).contains(&(ptr as usize))
    }

    /// Whether a block of the region is the tree's: the bottom's never reach `low`.
    fn in_tree_end(&self, ptr: *mut u8) -> bool {
        ptr as usize >= self.low.get()
    }

    /// A block from the region during a call, or null: between calls, over [`MAX_BLOCK`], or
    /// when it does not fit. The tree's blocks come from the top.
    fn bump(&self, layout: Layout) -> *mut u8 {
        if !self.in_call.get() {
            return std::ptr::null_mut();
        }
        let tree = self.tree_mode.get();
        let ptr = if layout.size() > MAX_BLOCK {
            std::ptr::null_mut()
        } else if tree {
            self.bump_down(layout)
        } else {
            self.bump_up(layout)
        };
        if ptr.is_null() && tree {
            self.tree_spilled.set(true);
        }
        ptr
    }

    fn bump_up(&self, layout: Layout) -> *mut u8 {
        let Some(aligned) = self.next.get().checked_next_multiple_of(layout.align()) else {
            return std::ptr::null_mut();
        };
        match aligned.checked_add(layout.size()) {
            Some(after) if after <= self.low.get() => {
                self.next.set(after);
                self.live.set(self.live.get().saturating_add(1));
                aligned as *mut u8
            }
            _ => std::ptr::null_mut(),
        }
    }

    fn bump_down(&self, layout: Layout) -> *mut u8 {
        // An alignment is a power of two: clearing the bits below it rounds down.
        let aligned = match self.low.get().checked_sub(layout.size()) {
            Some(below) => below & !(layout.align() - 1),
            None => return std::ptr::null_mut(),
        };
        if aligned < self.next.get() {
            return std::ptr::null_mut();
        }
        self.low.set(aligned);
        self.tree_live.set(self.tree_live.get().saturating_add(1));
        aligned as *mut u8
    }
}

// SAFETY: a region block is handed out once, aligned as asked, and never overlaps another:
// the bottom's pointer only moves up and the top's only down, neither past the other, until
// the next call begins, which it does only when every block of the bottom is freed and the
// top's are freed or abandoned with their tree; other blocks are System's.
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
        if !self.owns(ptr) {
            System.dealloc(ptr, layout);
        } else if self.in_tree_end(ptr) {
            self.tree_live.set(self.tree_live.get().saturating_sub(1));
        } else {
            self.live.set(self.live.get().saturating_sub(1));
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            // Grown while the tree is built, a block of the default allocator may be the
            // tree's: then the tree is dropped, not forgotten.
            if self.in_call.get() && self.tree_mode.get() {
                self.tree_spilled.set(true);
            }
            return System.realloc(ptr, layout, new_size);
        }
        if new_size <= layout.size() {
            return ptr;
        }
        // The last block handed out from the bottom grows where it is, unless the tree is
        // being built; past `MAX_BLOCK`, it moves out.
        let last = (ptr as usize).checked_add(layout.size()) == Some(self.next.get());
        if self.in_call.get() && last && !self.tree_mode.get() && new_size <= MAX_BLOCK {
            if let Some(after) = (ptr as usize).checked_add(new_size) {
                if after <= self.low.get() {
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

/// Runs `build`, which reads or stamps the object's tree, with its blocks from the region's
/// top (on wasm; natively, as it is). What it allocates must be the call's own, and kept no
/// longer than the call: its blocks are taken back by the next call once the tree is
/// [`abandon`]ed.
pub fn building_tree<T>(build: impl FnOnce() -> T) -> T {
    #[cfg(target_arch = "wasm32")]
    let before = MEMORY.set_tree_mode(true);
    let out = build();
    #[cfg(target_arch = "wasm32")]
    MEMORY.set_tree_mode(before);
    out
}

/// Done with the call's tree: forgotten when the next call takes its blocks back anyway (a
/// call in the region, where nothing made in [`building_tree`] came from the default
/// allocator), else dropped.
pub fn abandon<T>(tree: T) {
    #[cfg(target_arch = "wasm32")]
    if MEMORY.may_abandon() {
        std::mem::forget(tree);
        return;
    }
    drop(tree);
}

#[cfg(test)]
mod region_tests;
