//! `arena::Arena`, the module's memory on wasm, against a model: over any sequence of calls,
//! each allocating, growing, shrinking and freeing blocks of any size and alignment, every
//! live block keeps its bytes, no two live blocks overlap, every block is aligned as asked,
//! and a block kept past its call retires the region for good without losing its bytes. Some
//! of each call's blocks are made while it builds its tree (from the region's top), and some
//! calls abandon their tree: those blocks are never freed, and the next call still runs in the
//! region.
use jobset_multislice_policy::arena::{Arena, MAX_BLOCK};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout};

/// A region small enough for the calls to outgrow.
const REGION_IN_TEST: usize = 4 * MAX_BLOCK;

#[derive(Debug, Clone)]
enum Op {
    Alloc {
        size: usize,
        align_log2: u32,
    },
    Grow {
        which: usize,
        by: usize,
    },
    Shrink {
        which: usize,
        to_pct: usize,
    },
    Free {
        which: usize,
    },
    /// Enters or leaves the tree's mode, as `arena::building_tree` does.
    TreeMode(bool),
}

fn op() -> impl Strategy<Value = Op> {
    // Sizes from a byte to past the largest block the region takes; a few of the largest
    // outgrow a region of `REGION_IN_TEST`.
    let size = prop_oneof![1usize..64, 64usize..4096, (MAX_BLOCK / 2)..(MAX_BLOCK * 2)];
    prop_oneof![
        4 => (size, 0u32..6).prop_map(|(size, align_log2)| Op::Alloc { size, align_log2 }),
        2 => (any::<usize>(), 1usize..2048).prop_map(|(which, by)| Op::Grow { which, by }),
        1 => (any::<usize>(), 0usize..100).prop_map(|(which, to_pct)| Op::Shrink { which, to_pct }),
        2 => any::<usize>().prop_map(|which| Op::Free { which }),
        2 => any::<bool>().prop_map(Op::TreeMode),
    ]
}

/// A live block: where it is, its layout, the byte it was filled with, and whether it was made
/// (or last moved) in the tree's mode.
struct Block {
    ptr: *mut u8,
    layout: Layout,
    byte: u8,
    tree: bool,
}

fn fill(block: &Block) {
    // SAFETY: the arena handed out `layout.size()` bytes at `ptr`.
    unsafe { std::ptr::write_bytes(block.ptr, block.byte, block.layout.size()) };
}

fn holds_its_bytes(block: &Block) -> bool {
    // SAFETY: as in `fill`.
    let bytes = unsafe { std::slice::from_raw_parts(block.ptr, block.layout.size()) };
    bytes.iter().all(|b| *b == block.byte)
}

fn check(blocks: &[Block]) -> Result<(), TestCaseError> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for block in blocks {
        prop_assert!(holds_its_bytes(block), "a block lost its bytes");
        prop_assert_eq!(block.ptr as usize % block.layout.align(), 0);
        spans.push((block.ptr as usize, block.ptr as usize + block.layout.size()));
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        prop_assert!(pair[0].1 <= pair[1].0, "two live blocks overlap");
    }
    Ok(())
}

/// Runs one call's operations on `blocks`; `byte` numbers the fills.
fn run(
    arena: &Arena,
    ops: &[Op],
    blocks: &mut Vec<Block>,
    byte: &mut u8,
) -> Result<(), TestCaseError> {
    let mut tree = false;
    for op in ops {
        *byte = byte.wrapping_add(1);
        match *op {
            Op::Alloc { size, align_log2 } => {
                let layout = Layout::from_size_align(size, 1 << align_log2).unwrap();
                // SAFETY: the size is not zero.
                let ptr = unsafe { arena.alloc(layout) };
                prop_assert!(!ptr.is_null());
                let block = Block {
                    ptr,
                    layout,
                    byte: *byte,
                    tree,
                };
                fill(&block);
                blocks.push(block);
            }
            Op::Grow { which, by } => {
                let Some(i) = which.checked_rem(blocks.len()) else {
                    continue;
                };
                let old = &blocks[i];
                let new_size = old.layout.size() + by;
                // SAFETY: a live block of the arena, with its layout; the new size is not zero.
                let ptr = unsafe { arena.realloc(old.ptr, old.layout, new_size) };
                prop_assert!(!ptr.is_null());
                let layout = Layout::from_size_align(new_size, old.layout.align()).unwrap();
                let before = Block {
                    ptr,
                    layout: old.layout,
                    byte: old.byte,
                    tree,
                };
                prop_assert!(holds_its_bytes(&before), "realloc lost the block's bytes");
                // Grown in the tree's mode, a block moves to the top; out of it, to the bottom.
                blocks[i] = Block {
                    ptr,
                    layout,
                    byte: *byte,
                    tree,
                };
                fill(&blocks[i]);
            }
            Op::Shrink { which, to_pct } => {
                let Some(i) = which.checked_rem(blocks.len()) else {
                    continue;
                };
                let old = &blocks[i];
                let new_size = (old.layout.size() * to_pct / 100).max(1);
                // SAFETY: as for growing.
                let ptr = unsafe { arena.realloc(old.ptr, old.layout, new_size) };
                prop_assert!(!ptr.is_null());
                let layout = Layout::from_size_align(new_size, old.layout.align()).unwrap();
                blocks[i] = Block {
                    ptr,
                    layout,
                    byte: old.byte,
                    tree: old.tree,
                };
                prop_assert!(
                    holds_its_bytes(&blocks[i]),
                    "shrinking lost the block's bytes"
                );
            }
            Op::Free { which } => {
                let Some(i) = which.checked_rem(blocks.len()) else {
                    continue;
                };
                let block = blocks.swap_remove(i);
                // SAFETY: a live block of the arena, with its layout.
                unsafe { arena.dealloc(block.ptr, block.layout) };
            }
            Op::TreeMode(on) => {
                tree = on;
                arena.set_tree_mode(on);
            }
        }
        check(blocks)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_live_block_keeps_its_bytes_across_calls_and_a_kept_block_retires_the_region(
        calls in prop::collection::vec(prop::collection::vec(op(), 0..60), 1..6),
        keep_after in prop::option::of(0usize..6),
        abandons in prop::collection::vec(any::<bool>(), 6),
    ) {
        let arena = Arena::new(REGION_IN_TEST);
        let mut byte = 0u8;
        let mut kept: Vec<Block> = Vec::new();
        for (n, ops) in calls.iter().enumerate() {
            // Until a block outlives its call, every call runs in the region.
            let in_region = arena.begin();
            prop_assert!(in_region || !kept.is_empty());
            let mut blocks = Vec::new();
            run(&arena, ops, &mut blocks, &mut byte)?;
            // A call that abandons its tree forgets the blocks made in the tree's mode, when
            // the arena lets it: they are never freed.
            if abandons[n] && arena.may_abandon() {
                blocks.retain(|block| !block.tree);
            }
            arena.end();
            // What the call leaves is freed after it, as the waPC guest frees the answer; or
            // one block is kept past it.
            if keep_after == Some(n) && !blocks.is_empty() && kept.is_empty() {
                kept.push(blocks.swap_remove(0));
            }
            for block in blocks {
                // SAFETY: a live block of the arena, with its layout.
                unsafe { arena.dealloc(block.ptr, block.layout) };
            }
            check(&kept)?;
        }
    }
}
