//! A wasmtime memory creator that records the largest size each linear memory reaches, to
//! report the peak wasm memory of a request. Only the limits run uses it: the timed runs use
//! the default engine, as policy-server does.
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

const PAGE: usize = 65536;

/// The peak byte size of the memories this creator made.
#[derive(Default)]
pub struct PeakTracker {
    pub peak: AtomicUsize,
}

pub struct TrackedMemory {
    ptr: *mut u8,
    size: usize,
    capacity: usize,
    maximum: Option<usize>,
    tracker: Arc<PeakTracker>,
}

// The buffer is owned by this value alone and only touched through wasmtime's store, which
// serializes access.
unsafe impl Send for TrackedMemory {}
unsafe impl Sync for TrackedMemory {}

fn layout(capacity: usize) -> Layout {
    Layout::from_size_align(capacity.max(PAGE), PAGE).expect("page-aligned layout")
}

unsafe impl LinearMemory for TrackedMemory {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        if self.maximum.is_some_and(|m| new_size > m) {
            wasmtime::bail!("memory maximum exceeded");
        }
        if new_size > self.capacity {
            // The engine is configured with memory_may_move, so the base may change.
            let capacity = new_size.max(self.capacity.saturating_mul(2));
            let ptr = unsafe { alloc_zeroed(layout(capacity)) };
            if ptr.is_null() {
                wasmtime::bail!("out of host memory");
            }
            unsafe {
                std::ptr::copy_nonoverlapping(self.ptr, ptr, self.size);
                dealloc(self.ptr, layout(self.capacity));
            }
            self.ptr = ptr;
            self.capacity = capacity;
        }
        self.size = new_size;
        self.tracker.peak.fetch_max(new_size, Ordering::Relaxed);
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for TrackedMemory {
    fn drop(&mut self) {
        unsafe { dealloc(self.ptr, layout(self.capacity)) };
    }
}

pub struct TrackingCreator(pub Arc<PeakTracker>);

unsafe impl MemoryCreator for TrackingCreator {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        _reserved: Option<usize>,
        _guard: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        let capacity = minimum.max(PAGE);
        let ptr = unsafe { alloc_zeroed(layout(capacity)) };
        if ptr.is_null() {
            return Err("out of host memory".into());
        }
        self.0.peak.fetch_max(minimum, Ordering::Relaxed);
        Ok(Box::new(TrackedMemory {
            ptr,
            size: minimum,
            capacity,
            maximum,
            tracker: self.0.clone(),
        }))
    }
}

/// An engine whose memories report their peak size to `tracker`.
pub fn tracking_engine(tracker: Arc<PeakTracker>) -> wasmtime::Result<wasmtime::Engine> {
    let mut config = wasmtime::Config::default();
    config
        .with_host_memory(Arc::new(TrackingCreator(tracker)))
        .memory_reservation(0)
        .memory_guard_size(0)
        .memory_reservation_for_growth(0)
        .memory_may_move(true)
        // Copy-on-write images need mmap-backed memories; these are plain allocations.
        .memory_init_cow(false);
    wasmtime::Engine::new(&config)
}
