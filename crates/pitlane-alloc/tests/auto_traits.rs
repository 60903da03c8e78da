//! The auto traits every public type of the crate has (the ones it must not have are
//! `compile_fail` doctests in `src/auto_traits.rs`).

use std::panic::{RefUnwindSafe, UnwindSafe};

use pitlane_alloc::{ClassStats, Heap, PitlaneAlloc, PurgePolicy, Stats};

fn all<T: Send + Sync + Unpin + UnwindSafe + RefUnwindSafe>() {}
fn send_unpin<T: Send + Unpin>() {}

#[test]
fn the_global_handle_and_the_figures_are_send_sync_unpin_and_unwind_safe() {
    all::<PitlaneAlloc>();
    all::<Stats>();
    all::<ClassStats>();
    all::<PurgePolicy>();
    all::<allocator_api2::boxed::Box<u8, PitlaneAlloc>>();
}

#[test]
fn an_owned_heap_moves_between_threads() {
    send_unpin::<Heap>();
    let heap = Heap::new();
    let heap = std::thread::spawn(move || {
        let block = allocator_api2::boxed::Box::new_in(7_u8, &heap);
        assert_eq!(*block, 7);
        drop(block);
        heap
    })
    .join()
    .unwrap();
    let block = allocator_api2::boxed::Box::new_in(8_u8, &heap);
    assert_eq!(*block, 8);
}
