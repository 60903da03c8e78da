//! Differential tests: the same random script of allocator calls runs on std's `System`
//! allocator (the reference) and on `PitlaneAlloc`, side by side, and everything both promise
//! is compared after every call.
//!
//! The reference is `System`, through `GlobalAlloc` and through allocator_api2's own
//! `Allocator` for it (zero sizes get a dangling pointer, a resize at one alignment goes
//! through `realloc`, one that changes the alignment allocates, copies and frees). (Not
//! `Global`: under `--cfg pitlane_alloc_global` the global allocator of this binary *is*
//! pitlane-alloc.) PitlaneAlloc is not this binary's global allocator otherwise, so a failure
//! cannot hide in the harness.
//!
//! What is compared, call by call:
//! - both succeed or both fail: on reasonable requests (sizes 0 to 4 MiB around the size
//!   classes, the OS pages and large blocks' 64-byte header, alignments 1 to 2 MiB) both must
//!   succeed; on absurd ones (sizes of 2^58 bytes and more, up to the largest `Layout`;
//!   alignments of 2^48 and more) both must fail, as a null pointer or `AllocError`, never
//!   an abort or a panic, and a failed resize leaves its block as it was;
//! - a success is aligned as asked and at least as long as asked (the slice an `Allocator`
//!   returns, and pitlane's `raw::usable_size`), and overlaps no other live block;
//! - zeroed allocations are zero, `grow_zeroed` zeroes what it adds and keeps the rest,
//!   `grow`, `shrink` and `GlobalAlloc::realloc` (to larger, smaller and the same size) keep
//!   the prefix, and every live block's pattern is intact after every step (a block handed
//!   out twice, moved without its bytes, or written by the allocator's bookkeeping breaks
//!   one);
//! - pitlane's own promise (crate docs, "Guarantees"): a resize at one alignment stays in
//!   place when the old and new sizes share a size class, and for a large block when its
//!   mapping has room (`raw::usable_size` of the block before the call).
//!
//! Blocks move between the interfaces as std's `Global` moves them: a block allocated through
//! `Allocator` may be resized with `realloc` and freed with `dealloc`, and the other way round
//! (sizes above 0; a zero-sized `Allocator` block is dangling and goes back only through
//! `Allocator`). `GlobalAlloc` is never asked for size 0 (its contract forbids it; pitlane's
//! own answer is tested in `global_zero_sized.rs`).
//!
//! Plus one plain test from several threads: blocks of every kind allocated on one thread,
//! handed to the next through a channel, checked, resized and freed there.

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, SMALL_MAX, raw};
use pitlane_testkit::stress::run_threads;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// The reference: std's `System`, with allocator_api2's own `Allocator` for it (its `std`
// feature, turned on for this crate's tests only).
// ---------------------------------------------------------------------------------------------

use std::alloc::System as Reference;

fn block_of(p: *mut u8, len: usize) -> Option<NonNull<[u8]>> {
    NonNull::new(p).map(|p| NonNull::slice_from_raw_parts(p, len))
}

// ---------------------------------------------------------------------------------------------
// Pitlane's size classes (the crate's `class` module, which is private; its documentation
// gives them): for the in-place promise of resizes.
// ---------------------------------------------------------------------------------------------

const CLASS_SIZES: [usize; 40] = [
    8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640,
    768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240,
    12288, 14336, 16384,
];

/// The class serving `size` bytes at `align`: the first at least as large whose size is a
/// multiple of the alignment; `None` for a large block.
fn class_of(size: usize, align: usize) -> Option<usize> {
    if size > SMALL_MAX {
        return None;
    }
    CLASS_SIZES
        .iter()
        .position(|&c| c >= size && c % align == 0)
}

// ---------------------------------------------------------------------------------------------
// Blocks, their patterns, and the calls made on both sides.
// ---------------------------------------------------------------------------------------------

const REF: usize = 0;
const PIT: usize = 1;
const SIDES: [&str; 2] = ["reference (System)", "pitlane"];

/// A live block: its layout, its pattern's seed, and where it is on each side.
#[derive(Clone, Copy, Debug)]
struct Block {
    layout: Layout,
    seed: u8,
    at: [NonNull<u8>; 2],
}

/// The pattern byte at offset `i` of a block seeded `seed` (changes with every byte and with
/// every 256-byte stretch, so a shifted copy does not match).
fn pattern(seed: u8, i: usize) -> u8 {
    seed ^ (i as u8) ^ ((i >> 8) as u8).rotate_left(3) ^ ((i >> 16) as u8).rotate_left(5)
}

/// The offsets of a block of `size` bytes that are written and checked: the first and last
/// 128 bytes, and about 200 in between.
fn marks(size: usize) -> impl Iterator<Item = usize> {
    let head = 0..size.min(128);
    let stride = (size / 200).max(61) | 1;
    let middle = (128..size.saturating_sub(128)).step_by(stride);
    let tail = size.saturating_sub(128).max(128).min(size)..size;
    head.chain(middle).chain(tail)
}

fn write_marks(p: NonNull<u8>, size: usize, seed: u8) {
    for i in marks(size) {
        // SAFETY: `i < size`: inside the live block.
        unsafe { p.as_ptr().add(i).write(pattern(seed, i)) };
    }
}

/// The first offset below `upto` where the block's marks (for `size`) differ from the pattern.
fn first_bad_mark(p: NonNull<u8>, size: usize, upto: usize, seed: u8) -> Option<usize> {
    marks(size)
        .filter(|&i| i < upto)
        // SAFETY: `i < size`: inside the live block.
        .find(|&i| unsafe { p.as_ptr().add(i).read() } != pattern(seed, i))
}

/// The first non-zero byte in `from..to` of the block: every byte up to 256 KiB, beyond that
/// 64 bytes at every OS page and the bytes the marks name.
fn first_non_zero(p: NonNull<u8>, from: usize, to: usize) -> Option<usize> {
    // SAFETY: `from..to` lies inside the live block.
    let read = |i: usize| unsafe { p.as_ptr().add(i).read() };
    if to - from <= 256 << 10 {
        // SAFETY: as above.
        let bytes = unsafe { core::slice::from_raw_parts(p.as_ptr().add(from), to - from) };
        return bytes.iter().position(|&b| b != 0).map(|i| from + i);
    }
    (from..to)
        .step_by(4096)
        .flat_map(|page| page..(page + 64).min(to))
        .chain(marks(to).filter(|&i| i >= from))
        .find(|&i| read(i) != 0)
}

/// Fills a block with 0xEE before it is freed, so that a block reused later is dirty.
fn dirty(p: NonNull<u8>, size: usize) {
    // SAFETY: the live block holds `size` bytes.
    unsafe { p.as_ptr().write_bytes(0xEE, size) };
}

#[derive(Clone, Copy, Debug)]
enum Call {
    Allocate(Layout),
    AllocateZeroed(Layout),
    Alloc(Layout),
    AllocZeroed(Layout),
    Grow(Layout, Layout),
    GrowZeroed(Layout, Layout),
    Shrink(Layout, Layout),
    Realloc(Layout, usize),
}

impl Call {
    /// The layout of the block the call resizes, if it resizes one.
    fn old_layout(self) -> Option<Layout> {
        match self {
            Call::Allocate(_) | Call::AllocateZeroed(_) | Call::Alloc(_) | Call::AllocZeroed(_) => {
                None
            }
            Call::Grow(old, _) | Call::GrowZeroed(old, _) | Call::Shrink(old, _) => Some(old),
            Call::Realloc(old, _) => Some(old),
        }
    }

    /// The layout of the block the call returns.
    fn new_layout(self) -> Layout {
        match self {
            Call::Allocate(l) | Call::AllocateZeroed(l) | Call::Alloc(l) | Call::AllocZeroed(l) => {
                l
            }
            Call::Grow(_, new) | Call::GrowZeroed(_, new) | Call::Shrink(_, new) => new,
            Call::Realloc(old, size) => Layout::from_size_align(size, old.align())
                .expect("realloc is only asked for sizes its contract allows"),
        }
    }

    /// From which offset the returned block must be zero, if it must.
    fn zero_from(self) -> Option<usize> {
        match self {
            Call::AllocateZeroed(_) | Call::AllocZeroed(_) => Some(0),
            Call::GrowZeroed(old, _) => Some(old.size()),
            _ => None,
        }
    }
}

/// Makes `call` on `a`; `at` is the block it resizes (unused by an allocation).
///
/// # Safety
/// For a resize, `at` is a live block of `a` with the call's old layout, and the call meets
/// its trait's contract (grow: not smaller; shrink: not larger; realloc: a valid new layout
/// of non-zero size). The old block is gone if the call succeeds.
unsafe fn perform<A: Allocator + GlobalAlloc>(
    a: &A,
    call: Call,
    at: NonNull<u8>,
) -> Option<NonNull<[u8]>> {
    // SAFETY: forwarded from the caller.
    unsafe {
        match call {
            Call::Allocate(l) => a.allocate(l).ok(),
            Call::AllocateZeroed(l) => a.allocate_zeroed(l).ok(),
            Call::Alloc(l) => block_of(GlobalAlloc::alloc(a, l), l.size()),
            Call::AllocZeroed(l) => block_of(GlobalAlloc::alloc_zeroed(a, l), l.size()),
            Call::Grow(old, new) => a.grow(at, old, new).ok(),
            Call::GrowZeroed(old, new) => a.grow_zeroed(at, old, new).ok(),
            Call::Shrink(old, new) => a.shrink(at, old, new).ok(),
            Call::Realloc(old, size) => {
                block_of(GlobalAlloc::realloc(a, at.as_ptr(), old, size), size)
            }
        }
    }
}

/// Frees a block of one side through `Allocator`.
fn free_one(side: usize, at: NonNull<u8>, layout: Layout) {
    // SAFETY: the caller's live block of that side's allocator with this layout, freed once.
    unsafe {
        if side == REF {
            Reference.deallocate(at, layout);
        } else {
            PitlaneAlloc.deallocate(at, layout);
        }
    }
}

/// Frees `b` on both sides, through `GlobalAlloc` if `global` (and the block is not a
/// zero-sized `Allocator` one), else through `Allocator`; first dirtied if `dirtied` (not
/// after a failure, which may have been a block shorter than asked).
fn free_both(b: Block, global: bool, dirtied: bool) {
    let size = b.layout.size();
    for (side, &at) in b.at.iter().enumerate() {
        if dirtied {
            dirty(at, size);
        }
        // SAFETY: a live block of that side's allocator with this layout, freed once; a
        // zero-sized block goes through `Allocator`, which allocated it.
        unsafe {
            match (side, global && size > 0) {
                (REF, true) => GlobalAlloc::dealloc(&Reference, at.as_ptr(), b.layout),
                (REF, false) => Allocator::deallocate(&Reference, at, b.layout),
                (_, true) => GlobalAlloc::dealloc(&PitlaneAlloc, at.as_ptr(), b.layout),
                (_, false) => Allocator::deallocate(&PitlaneAlloc, at, b.layout),
            }
        }
    }
}

/// Checks every live block's marks on both sides.
fn check_all(live: &[Block], step: usize) -> Result<(), TestCaseError> {
    for (k, b) in live.iter().enumerate() {
        for side in [REF, PIT] {
            let size = b.layout.size();
            if let Some(i) = first_bad_mark(b.at[side], size, size, b.seed) {
                return Err(TestCaseError::fail(format!(
                    "after step {step}: {}: live block {k} ({:?} at {:p}) corrupted at byte {i}",
                    SIDES[side], b.layout, b.at[side]
                )));
            }
        }
    }
    Ok(())
}

/// Checks a block one side returned for `call`: aligned, long enough, overlapping no other
/// live block, zero where it must be, the old prefix kept.
fn check_result(
    side: usize,
    call: Call,
    got: NonNull<[u8]>,
    old_seed: Option<u8>,
    others: &[Block],
) -> Result<(), TestCaseError> {
    let new = call.new_layout();
    let p = got.cast::<u8>();
    let what = |msg: String| TestCaseError::fail(format!("{}: {call:?}: {msg}", SIDES[side]));
    if p.as_ptr().addr() % new.align() != 0 {
        return Err(what(format!("{p:p} is not aligned to {}", new.align())));
    }
    if got.len() < new.size() {
        return Err(what(format!(
            "{} bytes for {} asked",
            got.len(),
            new.size()
        )));
    }
    if new.size() == 0 {
        return Ok(());
    }
    if side == PIT {
        // SAFETY: a live, non-empty block of pitlane.
        let usable = unsafe { raw::usable_size(p.as_ptr()) };
        if usable < new.size() {
            return Err(what(format!("usable size {usable} < {}", new.size())));
        }
    }
    let (start, end) = (p.as_ptr().addr(), p.as_ptr().addr() + new.size());
    for (k, b) in others.iter().enumerate() {
        let (s, e) = (
            b.at[side].as_ptr().addr(),
            b.at[side].as_ptr().addr() + b.layout.size(),
        );
        if b.layout.size() > 0 && start < e && s < end {
            return Err(what(format!(
                "{start:#x}..{end:#x} overlaps live block {k} ({:?}) at {s:#x}..{e:#x}",
                b.layout
            )));
        }
    }
    if let (Some(old_layout), Some(seed)) = (call.old_layout(), old_seed) {
        let kept = old_layout.size().min(new.size());
        if let Some(i) = first_bad_mark(p, old_layout.size(), kept, seed) {
            return Err(what(format!("byte {i} of the kept {kept} bytes lost")));
        }
    }
    if let Some(from) = call.zero_from().filter(|&from| from < new.size()) {
        if let Some(i) = first_non_zero(p, from, new.size()) {
            return Err(what(format!("byte {i} is not zero")));
        }
    }
    Ok(())
}

/// Pitlane's promise: a resize at one alignment stays in place when the old and new sizes
/// share a class, and for a large block when its mapping has room (`usable` bytes, from
/// `raw::usable_size` before the call).
fn check_in_place(
    call: Call,
    before: NonNull<u8>,
    usable: usize,
    after: NonNull<u8>,
) -> Result<(), TestCaseError> {
    let (Some(old), new) = (call.old_layout(), call.new_layout()) else {
        return Ok(());
    };
    if old.size() == 0 || new.size() == 0 || old.align() != new.align() {
        return Ok(());
    }
    let stays = match (
        class_of(old.size(), old.align()),
        class_of(new.size(), new.align()),
    ) {
        (Some(a), Some(b)) => a == b,
        (None, None) => new.size() <= usable,
        _ => false,
    };
    if stays && before != after {
        return Err(TestCaseError::fail(format!(
            "pitlane: {call:?} moved the block from {before:p} to {after:p} although it should \
             stay in place (usable size before: {usable})"
        )));
    }
    Ok(())
}

/// What a call did on both sides.
#[derive(Debug, PartialEq)]
enum Outcome {
    BothServed,
    BothRefused,
}

/// Makes `call` on both sides, on block `k` of `live` for a resize, checks the results and
/// updates `live`. A divergence (one side serves, the other refuses) is an error.
fn apply(
    live: &mut Vec<Block>,
    k: Option<usize>,
    call: Call,
    seed: u8,
    step: usize,
) -> Result<Outcome, TestCaseError> {
    let dummy = NonNull::<u8>::dangling();
    let old = k.map(|k| live[k]);
    let at = old.map_or([dummy; 2], |b| b.at);
    let usable_before = match old {
        // SAFETY: a live, non-empty block of pitlane.
        Some(b) if b.layout.size() > 0 => unsafe { raw::usable_size(b.at[PIT].as_ptr()) },
        _ => 0,
    };
    // SAFETY: the script only makes calls that meet the contracts (see `run`), on blocks that
    // are live on that side with the layout `live` records.
    let (r, p) = unsafe {
        (
            perform(&Reference, call, at[REF]),
            perform(&PitlaneAlloc, call, at[PIT]),
        )
    };
    match (r, p) {
        (None, None) => Ok(Outcome::BothRefused),
        (Some(r), Some(p)) => {
            let others: Vec<Block> = live
                .iter()
                .enumerate()
                .filter(|&(i, _)| Some(i) != k)
                .map(|(_, b)| *b)
                .collect();
            let new = call.new_layout();
            let block = Block {
                layout: new,
                seed: old.map_or(seed, |b| b.seed),
                at: [r.cast(), p.cast()],
            };
            // Recorded before the checks, so that a failing case frees what both hold.
            match k {
                Some(k) => live[k] = block,
                None => live.push(block),
            }
            let old_seed = old.map(|b| b.seed);
            check_result(REF, call, r, old_seed, &others)?;
            check_result(PIT, call, p, old_seed, &others)?;
            if let Some(b) = old {
                check_in_place(call, b.at[PIT], usable_before, p.cast())?;
            }
            write_marks(block.at[REF], new.size(), block.seed);
            write_marks(block.at[PIT], new.size(), block.seed);
            Ok(Outcome::BothServed)
        }
        (r, p) => {
            // One side served, the other refused: free what the serving side returned, and
            // what the refusing side still holds of a resized block, so that `live` stays
            // true to both sides for the frees after the failure.
            let served = [r, p];
            if let Some(k) = k {
                let b = live.swap_remove(k);
                for side in [REF, PIT] {
                    if served[side].is_none() {
                        free_one(side, b.at[side], b.layout);
                    }
                }
            }
            for side in [REF, PIT] {
                if let Some(got) = served[side] {
                    free_one(side, got.cast(), call.new_layout());
                }
            }
            Err(TestCaseError::fail(format!(
                "divergence at step {step}: {call:?}: reference (System) {}, pitlane {}",
                if r.is_some() { "served it" } else { "refused" },
                if p.is_some() { "served it" } else { "refused" },
            )))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scripts.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    /// `allocate` / `allocate_zeroed`, or `alloc` / `alloc_zeroed` (size at least 1).
    Alloc {
        size: usize,
        align_log: u32,
        zeroed: bool,
        global: bool,
    },
    /// `deallocate`, or `dealloc`.
    Free { which: usize, global: bool },
    /// `grow` / `grow_zeroed` to `max(size, old size)`, at the block's alignment or another.
    Grow {
        which: usize,
        size: usize,
        align_log: Option<u32>,
        zeroed: bool,
    },
    /// `shrink` to `min(size, old size)`, at the block's alignment or another.
    Shrink {
        which: usize,
        size: usize,
        align_log: Option<u32>,
    },
    /// `GlobalAlloc::realloc` to `size` (at least 1), or to the same size.
    Realloc { which: usize, size: Option<usize> },
    /// A request no allocator can serve: both must refuse it.
    Absurd { which: usize, kind: Absurd },
}

#[derive(Clone, Copy, Debug)]
enum Absurd {
    /// A new block of `huge_size(pick, align)` bytes, through interface `how` (0..4:
    /// allocate, allocate_zeroed, alloc, alloc_zeroed).
    Size {
        pick: usize,
        align_log: u32,
        how: u8,
    },
    /// A new block of `size` (at least 1) bytes at alignment 2^`align_log` (2^48 and more).
    Align {
        size: usize,
        align_log: u32,
        how: u8,
    },
    /// Block `which` grown (`how` 0: grow, 1: grow_zeroed, 2: realloc) to a huge size at its
    /// alignment.
    Resize { pick: usize, how: u8 },
    /// Block `which` grown to its size (at least 1) at an alignment of 2^48 or more.
    Realign { align_log: u32, zeroed: bool },
}

/// Sizes no allocator can serve: up to the largest a `Layout` of alignment `align` allows
/// (picks beyond it make no `Layout` and are skipped).
fn huge_size(pick: usize, align: usize) -> usize {
    let largest = isize::MAX as usize - (align - 1);
    [
        largest,
        largest - 4096,
        isize::MAX as usize / 2 + 1,
        1 << 62,
        1 << 60,
        1 << 58,
        largest + 1,
        usize::MAX,
    ][pick % 8]
}

/// Sizes at the edges: every class size and its neighbours, OS pages and their multiples
/// (with and without the 64 bytes of a large block's header), 64 KiB pages, and some MiB.
fn edge_sizes() -> Vec<usize> {
    let mut sizes = vec![0, 1, 2, 3, 5, 7, 9, 15, 17, 31, 33];
    for c in CLASS_SIZES {
        sizes.extend([c - 1, c, c + 1]);
    }
    for pages in [1usize, 2, 3, 4, 5, 8, 15, 16, 17, 32, 64, 256] {
        let p = pages * 4096;
        sizes.extend([p - 65, p - 64, p - 63, p - 1, p, p + 1]);
    }
    sizes.extend([
        1 << 20,
        (1 << 20) + 1,
        (1 << 20) - 64,
        (2 << 20) - 1,
        2 << 20,
        (3 << 20) + 4097,
        4 << 20,
    ]);
    sizes
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => prop::sample::select(edge_sizes()),
        3 => 0usize..=512,
        2 => 513usize..=20_000,
        1 => 20_001usize..=4 << 20,
    ]
}

/// Alignments 1 to 4 KiB mostly, up to 2 MiB sometimes.
fn align_log() -> impl Strategy<Value = u32> {
    prop_oneof![5 => 0u32..=12, 1 => 13u32..=21]
}

fn absurd() -> impl Strategy<Value = Absurd> {
    prop_oneof![
        (any::<usize>(), 0u32..=21, 0u8..4).prop_map(|(pick, align_log, how)| Absurd::Size {
            pick,
            align_log,
            how
        }),
        (size(), 48u32..=62, 0u8..4).prop_map(|(size, align_log, how)| Absurd::Align {
            size,
            align_log,
            how
        }),
        (any::<usize>(), 0u8..3).prop_map(|(pick, how)| Absurd::Resize { pick, how }),
        (48u32..=62, any::<bool>())
            .prop_map(|(align_log, zeroed)| Absurd::Realign { align_log, zeroed }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (size(), align_log(), any::<bool>(), any::<bool>()).prop_map(
            |(size, align_log, zeroed, global)| Op::Alloc { size, align_log, zeroed, global }
        ),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(which, global)| Op::Free { which, global }),
        2 => (any::<usize>(), size(), prop::option::weighted(0.2, align_log()), any::<bool>())
            .prop_map(|(which, size, align_log, zeroed)| Op::Grow {
                which,
                size,
                align_log,
                zeroed
            }),
        2 => (any::<usize>(), size(), prop::option::weighted(0.2, align_log()))
            .prop_map(|(which, size, align_log)| Op::Shrink { which, size, align_log }),
        2 => (any::<usize>(), prop::option::weighted(0.8, size()))
            .prop_map(|(which, size)| Op::Realloc { which, size }),
        1 => (any::<usize>(), absurd()).prop_map(|(which, kind)| Op::Absurd { which, kind }),
    ]
}

fn alloc_call(layout: Layout, zeroed: bool, global: bool) -> Call {
    match (global, zeroed) {
        (false, false) => Call::Allocate(layout),
        (false, true) => Call::AllocateZeroed(layout),
        (true, false) => Call::Alloc(layout),
        (true, true) => Call::AllocZeroed(layout),
    }
}

/// Runs an absurd request on both sides: both must refuse it.
fn absurd_step(
    live: &mut Vec<Block>,
    which: usize,
    kind: Absurd,
    step: usize,
) -> Result<(), TestCaseError> {
    let (k, call) = match kind {
        Absurd::Size {
            pick,
            align_log,
            how,
        } => {
            let align = 1usize << align_log;
            let Ok(layout) = Layout::from_size_align(huge_size(pick, align), align) else {
                return Ok(());
            };
            (None, alloc_call(layout, how % 2 == 1, how >= 2))
        }
        Absurd::Align {
            size,
            align_log,
            how,
        } => {
            let layout = Layout::from_size_align(size.max(1), 1 << align_log).unwrap();
            (None, alloc_call(layout, how % 2 == 1, how >= 2))
        }
        Absurd::Resize { pick, how } => {
            if live.is_empty() {
                return Ok(());
            }
            let k = which % live.len();
            let old = live[k].layout;
            let size = huge_size(pick, old.align());
            let Ok(new) = Layout::from_size_align(size, old.align()) else {
                return Ok(());
            };
            let call = match how {
                0 => Call::Grow(old, new),
                1 => Call::GrowZeroed(old, new),
                // `realloc` only takes blocks of non-zero size.
                _ if old.size() == 0 => Call::Grow(old, new),
                _ => Call::Realloc(old, size),
            };
            (Some(k), call)
        }
        Absurd::Realign { align_log, zeroed } => {
            if live.is_empty() {
                return Ok(());
            }
            let k = which % live.len();
            let old = live[k].layout;
            let new = Layout::from_size_align(old.size().max(1), 1 << align_log).unwrap();
            (
                Some(k),
                if zeroed {
                    Call::GrowZeroed(old, new)
                } else {
                    Call::Grow(old, new)
                },
            )
        }
    };
    let outcome = apply(live, k, call, 0, step)?;
    prop_assert_eq!(
        outcome,
        Outcome::BothRefused,
        "step {}: both allocators served an absurd request: {:?}",
        step,
        call
    );
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut live: Vec<Block> = Vec::new();
    let result = run_ops(&mut live, ops);
    for b in live {
        free_both(b, false, result.is_ok());
    }
    result
}

fn run_ops(live: &mut Vec<Block>, ops: &[Op]) -> Result<(), TestCaseError> {
    for (step, op) in ops.iter().enumerate() {
        let seed = (step as u8).wrapping_mul(37).wrapping_add(11);
        match *op {
            Op::Alloc {
                size,
                align_log,
                zeroed,
                global,
            } => {
                // `GlobalAlloc` is not asked for size 0 (its contract forbids it).
                let size = if global { size.max(1) } else { size };
                let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
                let outcome = apply(live, None, alloc_call(layout, zeroed, global), seed, step)?;
                prop_assert_eq!(outcome, Outcome::BothServed, "step {}: {:?}", step, op);
            }
            Op::Free { which, global } => {
                if live.is_empty() {
                    continue;
                }
                free_both(live.swap_remove(which % live.len()), global, true);
            }
            Op::Grow {
                which,
                size,
                align_log,
                zeroed,
            } => {
                if live.is_empty() {
                    continue;
                }
                let k = which % live.len();
                let old = live[k].layout;
                let align = align_log.map_or(old.align(), |l| 1 << l);
                let new = Layout::from_size_align(size.max(old.size()), align).unwrap();
                let call = if zeroed {
                    Call::GrowZeroed(old, new)
                } else {
                    Call::Grow(old, new)
                };
                let outcome = apply(live, Some(k), call, seed, step)?;
                prop_assert_eq!(outcome, Outcome::BothServed, "step {}: {:?}", step, call);
            }
            Op::Shrink {
                which,
                size,
                align_log,
            } => {
                if live.is_empty() {
                    continue;
                }
                let k = which % live.len();
                let old = live[k].layout;
                let align = align_log.map_or(old.align(), |l| 1 << l);
                let new = Layout::from_size_align(size.min(old.size()), align).unwrap();
                let call = Call::Shrink(old, new);
                let outcome = apply(live, Some(k), call, seed, step)?;
                prop_assert_eq!(outcome, Outcome::BothServed, "step {}: {:?}", step, call);
            }
            Op::Realloc { which, size } => {
                if live.is_empty() {
                    continue;
                }
                let k = which % live.len();
                let old = live[k].layout;
                if old.size() == 0 {
                    // A dangling `Allocator` block: not one `realloc` may take.
                    continue;
                }
                let call = Call::Realloc(old, size.map_or(old.size(), |s| s.max(1)));
                let outcome = apply(live, Some(k), call, seed, step)?;
                prop_assert_eq!(outcome, Outcome::BothServed, "step {}: {:?}", step, call);
            }
            Op::Absurd { which, kind } => absurd_step(live, which, kind, step)?,
        }
        check_all(live, step)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 64 } else { 256 }))]

    /// Random scripts through both interfaces, on both allocators, compared call by call.
    #[test]
    fn scripts_run_alike_on_system_and_pitlane(ops in prop::collection::vec(op(), 1..120)) {
        run(&ops)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Fixed cases.
// ---------------------------------------------------------------------------------------------

/// Every edge size at alignments 1 to 2 MiB through every allocation call, then grown by one
/// byte, shrunk to half, reallocated to the same size and freed: one script, deterministic.
#[test]
fn every_edge_size_and_alignment_runs_alike() {
    let mut ops = Vec::new();
    let aligns: &[u32] = if cfg!(debug_assertions) {
        &[0, 3, 4, 6, 12, 14, 16, 21]
    } else {
        &[
            0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15, 16, 17, 18, 21,
        ]
    };
    for (n, &size) in edge_sizes().iter().enumerate() {
        for &align_log in aligns {
            let which = 0;
            ops.push(Op::Alloc {
                size,
                align_log,
                zeroed: n % 2 == 0,
                global: (n / 2 + align_log as usize) % 2 == 0,
            });
            // The new block is the last one; with one live block, `which = 0` names it.
            ops.push(Op::Grow {
                which,
                size: size + 1,
                align_log: None,
                zeroed: n % 3 == 0,
            });
            ops.push(Op::Shrink {
                which,
                size: size / 2,
                align_log: None,
            });
            ops.push(Op::Realloc { which, size: None });
            ops.push(Op::Free {
                which,
                global: n % 2 == 1,
            });
        }
    }
    run(&ops).unwrap();
}

/// Absurd sizes and alignments at every interface, on a fresh block of each kind: refused by
/// both, the block left as it was.
#[test]
fn absurd_requests_are_refused_by_both() {
    let mut ops = Vec::new();
    for (n, size) in [8usize, 100, 5000, 16_384, 16_385, 100_000, 3 << 20]
        .into_iter()
        .enumerate()
    {
        for align_log in [0u32, 3, 6, 12, 16, 21] {
            ops.push(Op::Alloc {
                size,
                align_log,
                zeroed: false,
                global: n % 2 == 0,
            });
            for pick in 0..8 {
                for how in 0..4 {
                    let kind = Absurd::Size {
                        pick,
                        align_log,
                        how,
                    };
                    ops.push(Op::Absurd { which: 0, kind });
                }
                for how in 0..3 {
                    let kind = Absurd::Resize { pick, how };
                    ops.push(Op::Absurd { which: 0, kind });
                }
            }
            for align_log in [48u32, 52, 62] {
                for how in 0..4 {
                    let kind = Absurd::Align {
                        size,
                        align_log,
                        how,
                    };
                    ops.push(Op::Absurd { which: 0, kind });
                }
                for zeroed in [false, true] {
                    let kind = Absurd::Realign { align_log, zeroed };
                    ops.push(Op::Absurd { which: 0, kind });
                }
            }
            ops.push(Op::Free {
                which: 0,
                global: true,
            });
        }
    }
    run(&ops).unwrap();
}

/// Alignments from 4 MiB to 1 GiB (2^28 among them) are served by both, at every interface;
/// a `GlobalAlloc::realloc` past what `Layout` allows (outside its contract, which System is
/// therefore not asked) gets pitlane's null, the block left as it was.
#[test]
fn large_alignments_are_served_by_both() {
    let mut ops = Vec::new();
    for align_log in [22u32, 24, 28, 30] {
        for (how, size) in [1usize, 4096, 100_000].into_iter().enumerate() {
            ops.push(Op::Alloc {
                size,
                align_log,
                zeroed: how % 2 == 0,
                global: how == 1,
            });
            ops.push(Op::Grow {
                which: 0,
                size: size * 3,
                align_log: None,
                zeroed: true,
            });
            ops.push(Op::Realloc {
                which: 0,
                size: Some(size),
            });
            ops.push(Op::Free {
                which: 0,
                global: false,
            });
        }
    }
    run(&ops).unwrap();

    let a = PitlaneAlloc::new();
    for align in [1usize, 8, 4096, 1 << 21] {
        let layout = Layout::from_size_align(100, align).unwrap();
        // SAFETY: a valid layout; the block is freed once. The `realloc` sizes overflow
        // `isize` once rounded to the alignment: outside `GlobalAlloc`'s contract, but
        // pitlane checks the layout and returns null (lib.rs, `realloc`).
        unsafe {
            let p = a.alloc(layout);
            let block = NonNull::new(p).unwrap();
            write_marks(block, 100, 7);
            for new_size in [isize::MAX as usize - (align - 1) + 1, usize::MAX] {
                assert!(Layout::from_size_align(new_size, align).is_err());
                assert!(a.realloc(p, layout, new_size).is_null(), "align {align}");
                assert_eq!(first_bad_mark(block, 100, 100, 7), None);
            }
            a.dealloc(p, layout);
        }
    }
}

/// What the kernel's heuristic overcommit lets one `mmap` reserve: RAM plus swap, from
/// /proc/meminfo; `None` if the policy is another one or cannot be read.
fn heuristic_overcommit_limit() -> Option<usize> {
    let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").ok()?;
    if mode.trim() != "0" {
        return None;
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| -> Option<usize> {
        let line = meminfo.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((kib("MemTotal:")? + kib("SwapTotal:")?) << 10)
}

/// An alignment `A` with `A` < RAM + swap < 2·`A` (16 GiB on a machine with 23 GiB and no
/// swap), one byte: both serve it (glibc maps about `A` + the size). The first run of this
/// file found pitlane refusing it: `os::map_aligned` mapped `len + align`, about 2·`A`, as
/// ordinary memory, which the kernel's heuristic overcommit refused as larger than RAM plus
/// swap; it now reserves the span as untouchable address space, which the policy does not
/// count, and maps only the aligned `len` bytes inside it. (Skipped where the overcommit
/// policy is not the heuristic one.)
#[test]
fn an_alignment_above_half_of_memory_is_served_by_system_and_by_pitlane() {
    let Some(limit) = heuristic_overcommit_limit() else {
        eprintln!("skipped: overcommit policy is not the heuristic one");
        return;
    };
    // The largest power of two that leaves 64 MiB of the limit: below it, twice it above it.
    let align = 1usize << (usize::BITS - 1 - (limit - (64 << 20)).leading_zeros());
    let layout = Layout::from_size_align(1, align).unwrap();
    let mut live = Vec::new();
    let outcome = apply(&mut live, None, Call::Allocate(layout), 1, 0);
    for b in live {
        free_both(b, false, true);
    }
    assert_eq!(
        outcome.unwrap(),
        Outcome::BothServed,
        "alignment {align} (limit {limit})"
    );
}

// ---------------------------------------------------------------------------------------------
// Several threads.
// ---------------------------------------------------------------------------------------------

/// A block in flight between threads.
struct Parcel {
    at: NonNull<u8>,
    layout: Layout,
    seed: u8,
}

// SAFETY: a heap block owned by whoever holds the parcel.
unsafe impl Send for Parcel {}

/// The address ranges of every block live in the threads' test, to catch a block handed out
/// twice across threads.
static LIVE_RANGES: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

fn register(p: NonNull<u8>, size: usize) {
    let (start, end) = (p.as_ptr().addr(), p.as_ptr().addr() + size);
    let mut ranges = LIVE_RANGES.lock().unwrap();
    if let Some((&s, &e)) = ranges.range(..end).next_back() {
        assert!(
            e <= start,
            "block {start:#x}..{end:#x} overlaps live block {s:#x}..{e:#x}"
        );
    }
    ranges.insert(start, end);
}

fn unregister(p: NonNull<u8>) {
    let removed = LIVE_RANGES.lock().unwrap().remove(&p.as_ptr().addr());
    assert!(removed.is_some(), "freeing a block that is not live");
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A layout of any kind: mostly small, some up to 16 KiB, a few large (up to 1 MiB); mostly at
/// alignment 8, some at up to 4 KiB and 64 KiB.
fn random_layout(rng: &mut u64) -> Layout {
    let r = xorshift(rng);
    let size = match r % 64 {
        0 => SMALL_MAX + 1 + (r >> 8) as usize % (1 << 20),
        1..=4 => 4097 + (r >> 8) as usize % (SMALL_MAX - 4096),
        5..=16 => 513 + (r >> 8) as usize % 3584,
        _ => 1 + (r >> 8) as usize % 512,
    };
    let align = match (r >> 40) % 32 {
        0 => 1 << 16,
        1..=4 => 1 << ((r >> 48) % 13),
        _ => 8,
    };
    Layout::from_size_align(size, align).unwrap()
}

fn make_parcel(a: PitlaneAlloc, rng: &mut u64, seed: u8) -> Parcel {
    let layout = random_layout(rng);
    let p = if xorshift(rng) % 2 == 0 {
        a.allocate(layout).expect("allocation failed").cast::<u8>()
    } else {
        // SAFETY: a layout of non-zero size.
        NonNull::new(unsafe { GlobalAlloc::alloc(&a, layout) }).expect("allocation failed")
    };
    assert_eq!(p.as_ptr().addr() % layout.align(), 0, "{layout:?}");
    // SAFETY: a live block of pitlane.
    assert!(unsafe { raw::usable_size(p.as_ptr()) } >= layout.size());
    register(p, layout.size());
    write_marks(p, layout.size(), seed);
    Parcel {
        at: p,
        layout,
        seed,
    }
}

fn verify(b: &Parcel) {
    assert_eq!(
        first_bad_mark(b.at, b.layout.size(), b.layout.size(), b.seed),
        None,
        "block {:p} ({:?}) corrupted",
        b.at,
        b.layout
    );
}

/// Frees a block (on whatever thread holds it).
fn free_parcel(a: PitlaneAlloc, b: Parcel) {
    verify(&b);
    unregister(b.at);
    dirty(b.at, b.layout.size());
    // SAFETY: a live block of pitlane with this layout, freed once.
    unsafe { a.deallocate(b.at, b.layout) };
}

/// Resizes a received block on this thread (to a size of any kind), checking what it keeps.
fn resize_parcel(a: PitlaneAlloc, b: Parcel, rng: &mut u64) -> Parcel {
    verify(&b);
    let new = Layout::from_size_align(random_layout(rng).size(), b.layout.align()).unwrap();
    unregister(b.at);
    // SAFETY: a live block with its layout; `new` has its alignment and a non-zero size.
    let p = NonNull::new(unsafe { a.realloc(b.at.as_ptr(), b.layout, new.size()) })
        .expect("realloc failed");
    let kept = b.layout.size().min(new.size());
    assert_eq!(
        first_bad_mark(p, b.layout.size(), kept, b.seed),
        None,
        "realloc {:?} -> {} lost bytes",
        b.layout,
        new.size()
    );
    assert_eq!(p.as_ptr().addr() % new.align(), 0);
    register(p, new.size());
    write_marks(p, new.size(), b.seed);
    Parcel {
        at: p,
        layout: new,
        seed: b.seed,
    }
}

/// Threads allocate blocks of every kind, fill them and hand each to the next thread (a ring
/// of channels); the receiver checks it, and frees it at once, or resizes it and keeps it a
/// while. Every block is freed on another thread than the one that allocated it, some after
/// that thread finished; no two live blocks overlap; every pattern holds until its free.
#[test]
fn blocks_handed_between_threads_keep_their_bytes() {
    const THREADS: usize = 4;
    let per_thread = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    type Link = (
        Mutex<Option<Sender<Parcel>>>,
        Mutex<Option<Receiver<Parcel>>>,
    );
    let links: Vec<Link> = (0..THREADS)
        .map(|_| {
            let (tx, rx) = channel();
            (Mutex::new(Some(tx)), Mutex::new(Some(rx)))
        })
        .collect();
    let received = run_threads(THREADS, |t| {
        let a = PitlaneAlloc::new();
        // Thread t sends to thread t + 1 and receives from thread t - 1.
        let tx = links[(t + 1) % THREADS].0.lock().unwrap().take().unwrap();
        let rx = links[t].1.lock().unwrap().take().unwrap();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ ((t as u64 + 1) << 32);
        let mut kept: Vec<Parcel> = Vec::new();
        let mut received = 0usize;
        let mut receive = |b: Parcel, rng: &mut u64, kept: &mut Vec<Parcel>| {
            received += 1;
            if xorshift(rng) % 3 == 0 {
                kept.push(resize_parcel(a, b, rng));
                if kept.len() > 64 {
                    let old = kept.swap_remove(xorshift(rng) as usize % kept.len());
                    free_parcel(a, old);
                }
            } else {
                free_parcel(a, b);
            }
        };
        for i in 0..per_thread {
            let seed = (i as u8) ^ (t as u8).wrapping_mul(0x55);
            tx.send(make_parcel(a, &mut rng, seed)).unwrap();
            while let Ok(b) = rx.try_recv() {
                receive(b, &mut rng, &mut kept);
            }
        }
        drop(tx);
        for b in rx {
            receive(b, &mut rng, &mut kept);
        }
        for b in kept.iter() {
            verify(b);
        }
        for b in kept {
            free_parcel(a, b);
        }
        received
    });
    assert_eq!(received, vec![per_thread; THREADS]);
    assert!(LIVE_RANGES.lock().unwrap().is_empty());
}
