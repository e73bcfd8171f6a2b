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
