//! The region against its promises: blocks handed out aligned and apart, taken back whole
//! by the next call, and the region retired for good when a block outlives its call.
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

/// Blocks made while the tree is built come from the region's top down, counted apart from the
/// bottom's; a block of the bottom grown then moves to the top, with its bytes.
#[test]
fn the_trees_blocks_come_from_the_top_and_are_counted_apart() {
    let arena = Arena::new(REGION);
    unsafe {
        assert!(arena.begin());
        let bottom = filled(&arena, 8, 8, 1);
        assert!(!arena.set_tree_mode(true));
        let top = filled(&arena, 24, 16, 2);
        assert_eq!(top as usize, arena.end.get() - 32);
        assert_eq!((arena.live.get(), arena.tree_live.get()), (1, 1));
        let moved = arena.realloc(bottom, layout(8, 8), 40);
        assert!(arena.owns(moved) && arena.in_tree_end(moved) && moved < top);
        assert_eq!(bytes(moved, 8), [1; 8]);
        assert_eq!((arena.live.get(), arena.tree_live.get()), (0, 2));
        assert!(arena.set_tree_mode(false));
        arena.end();
        arena.dealloc(moved, layout(40, 8));
        arena.dealloc(top, layout(24, 16));
        assert_eq!(arena.tree_live.get(), 0);
        assert!(arena.begin());
        arena.end();
    }
}

/// The two ends never meet: once they would, the rest is the default allocator's, and a tree
/// that took a block from it is not abandoned (forgetting it would leak that block). A large
/// block of the bottom does not stop the tree from being abandoned.
#[test]
fn the_two_ends_never_meet_and_a_tree_with_a_default_block_is_dropped() {
    let arena = Arena::new(4 * MAX_BLOCK);
    let block = layout(MAX_BLOCK, 8);
    unsafe {
        assert!(arena.begin());
        let answer = filled(&arena, MAX_BLOCK + 1, 8, 7);
        arena.set_tree_mode(true);
        let tree: Vec<*mut u8> = (0..3u8).map(|i| filled(&arena, MAX_BLOCK, 8, i)).collect();
        arena.set_tree_mode(false);
        let bottom = filled(&arena, MAX_BLOCK, 8, 3);
        let outside = filled(&arena, MAX_BLOCK, 8, 4);
        let owned: Vec<bool> = [&tree[..], &[bottom, outside, answer]]
            .concat()
            .iter()
            .map(|b| arena.owns(*b))
            .collect();
        assert_eq!(owned, [true, true, true, true, false, false]);
        assert!(arena.may_abandon());
        arena.set_tree_mode(true);
        let spilled = filled(&arena, 16, 8, 5);
        assert!(!arena.owns(spilled));
        assert!(!arena.may_abandon());
        for (i, b) in (0u8..).zip([&tree[..], &[bottom, outside]].concat()) {
            assert_eq!(bytes(b, MAX_BLOCK), vec![i; MAX_BLOCK]);
        }
        arena.end();
        [&tree[..], &[bottom, outside]]
            .concat()
            .into_iter()
            .for_each(|b| arena.dealloc(b, block));
        arena.dealloc(spilled, layout(16, 8));
        arena.dealloc(answer, layout(MAX_BLOCK + 1, 8));
        assert!(arena.begin());
        arena.end();
    }
}

/// An abandoned tree is never freed, and the next call takes its blocks back all the same.
#[test]
fn an_abandoned_tree_is_taken_back_by_the_next_call() {
    let arena = Arena::new(REGION);
    unsafe {
        assert!(arena.begin());
        arena.set_tree_mode(true);
        let tree = filled(&arena, 100, 8, 3);
        arena.set_tree_mode(false);
        let answer = filled(&arena, 10, 1, 4);
        assert!(arena.may_abandon());
        arena.end();
        arena.dealloc(answer, layout(10, 1));
        assert!(arena.begin());
        arena.set_tree_mode(true);
        assert_eq!(arena.alloc(layout(100, 8)), tree);
        arena.end();
    }
}

/// A block of the tree's end still live at the next call, when the tree was not abandoned,
/// retires the region as any other block does.
#[test]
fn a_tree_block_kept_without_abandoning_retires_the_region() {
    let arena = Arena::new(REGION);
    unsafe {
        assert!(arena.begin());
        arena.set_tree_mode(true);
        let kept = filled(&arena, 100, 8, 6);
        arena.set_tree_mode(false);
        arena.end();
        assert!(!arena.begin());
        let later = filled(&arena, 100, 8, 1);
        assert!(!arena.owns(later));
        assert_eq!(bytes(kept, 100), [6; 100]);
        arena.end();
        arena.dealloc(later, layout(100, 8));
    }
}

/// Grown while the tree is built, a block of the default allocator may be the tree's: the
/// tree is then dropped, not forgotten, or the block would never be freed.
#[test]
fn a_default_block_grown_in_the_trees_mode_keeps_the_tree_from_being_abandoned() {
    let arena = Arena::new(REGION);
    unsafe {
        assert!(arena.begin());
        let large = filled(&arena, MAX_BLOCK + 1, 8, 2);
        assert!(!arena.owns(large));
        assert!(arena.may_abandon());
        arena.set_tree_mode(true);
        let grown = arena.realloc(large, layout(MAX_BLOCK + 1, 8), MAX_BLOCK + 64);
        assert_eq!(bytes(grown, MAX_BLOCK + 1), vec![2; MAX_BLOCK + 1]);
        assert!(!arena.may_abandon());
        arena.end();
        arena.dealloc(grown, layout(MAX_BLOCK + 64, 8));
    }
}

/// On wasm, where the arena is the module's allocator: each route leaves the region to the
/// next call. A tree that held a block made outside `building_tree` (a value a stamp made
/// before it wrote) would be forgotten with it, and that block would retire the region for
/// good, silently: every later call would run on the default allocator. Not here: an opted-in
/// Job's pod (its request is made by the Job controller's simulation, in the bench), the
/// queue check (a host call), and settings other than the defaults.
#[cfg(target_arch = "wasm32")]
#[test]
fn each_route_leaves_the_region_to_the_next_call() {
    let as_update = |create: &str| {
        let mut update: serde_json::Value = serde_json::from_str(create).unwrap();
        update["operation"] = "UPDATE".into();
        update["oldObject"] = update["object"].clone();
        update.to_string()
    };
    let jobset = include_str!("../../test_data/requests/jobset-tpu-4-slices.v09.json");
    let job = include_str!("../../test_data/requests/job-jax-gpu-4.json");
    let (jobset_update, job_update) = (as_update(jobset), as_update(job));
    // (route, request, whether the answer mutates, whether a tree was abandoned)
    let requests = [
        ("JobSet CREATE", jobset, true, true),
        (
            "queued JobSet CREATE, narrowed",
            include_str!("../../test_data/requests/jobset-queue.json"),
            true,
            true,
        ),
        ("JobSet UPDATE", &jobset_update, false, true),
        (
            "JobSet CREATE, rejected",
            include_str!("../../test_data/requests/jobset-rule-t4-fail.json"),
            false,
            true,
        ),
        ("Job CREATE", job, true, true),
        ("Job UPDATE", &job_update, false, true),
        (
            "TPU pod",
            include_str!("../../test_data/requests/pod-tpu-slice-pod.json"),
            true,
            true,
        ),
        (
            "pod with two TPU containers",
            include_str!("../../test_data/requests/pod-tpu7x-two-containers-pod.json"),
            true,
            true,
        ),
        (
            "pod the policy does not serve",
            include_str!("../../test_data/requests/pod-not-a-jobset-pod.json"),
            false,
            false,
        ),
    ];
    for (route, request, mutates, abandons) in requests {
        let payload = format!(r#"{{"request": {request}, "settings": {{}}}}"#);
        for _ in 0..2 {
            let answer = per_call(payload.len(), || {
                crate::admission::validate(payload.as_bytes())
            });
            let answer: serde_json::Value = serde_json::from_slice(&answer.unwrap()).unwrap();
            let rejected = route.ends_with("rejected");
            assert_eq!(answer["accepted"], !rejected, "{route}: {answer}");
            assert_eq!(answer["mutated_object"].is_object(), mutates, "{route}");
            assert_eq!(MEMORY.abandoned.get(), abandons, "{route}");
            assert_eq!(MEMORY.live.get(), 0, "{route}: a block outlived the call");
            assert!(!MEMORY.retired.get(), "{route}: the region is retired");
        }
    }
}
