//! The auto traits every public type of the crate has (the ones it must not have, and the
//! invariance of the cell shim and the mutexes, are `compile_fail` doctests in
//! `src/auto_traits.rs`).
#![cfg(not(pitlane_loom))]

use std::cell::Cell;
use std::panic::{RefUnwindSafe, UnwindSafe};

use pitlane_sync::shim::cell::UnsafeCell;
use pitlane_sync::spin::{
    RawTas, RawTasBackoff, RawTtas, TasBackoffMutex, TasMutex, TtasMutex, TtasMutexGuard,
};
use pitlane_sync::{Tagged, TaggedIndex};

fn all<T: Send + Sync + Unpin + UnwindSafe + RefUnwindSafe>() {}
fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}
fn unwind_safe<T: UnwindSafe>() {}

#[test]
fn words_and_raw_locks_are_send_sync_unpin_and_unwind_safe() {
    all::<Tagged>();
    all::<Tagged<16>>();
    all::<TaggedIndex>();
    all::<TaggedIndex<16>>();
    all::<RawTas>();
    all::<RawTtas>();
    all::<RawTasBackoff>();
}

#[test]
fn mutexes_are_shared_for_send_data() {
    send_sync::<TasMutex<Cell<u8>>>();
    send_sync::<TtasMutex<Cell<u8>>>();
    send_sync::<TasBackoffMutex<Cell<u8>>>();
    send_sync::<TtasMutexGuard<'static, u8>>();
    send::<TtasMutexGuard<'static, Cell<u8>>>();
}

#[test]
fn the_cell_shim_is_as_core_unsafe_cell() {
    send::<UnsafeCell<Cell<u8>>>();
    unwind_safe::<UnsafeCell<u8>>();
}
