//! The auto traits every public type of the crate has (the ones it must not have are
//! `compile_fail` doctests in `src/auto_traits.rs`). The slab types share memory through
//! atomics only, so every handle is `Send` and `Sync`, and none runs user code, so all are
//! unwind safe.
#![cfg(not(pitlane_loom))]

use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;

use pitlane_slab::freelist::{Corrupt, Freelist};
use pitlane_slab::{
    CheckReport, Config, ObjectId, OpenError, RecoverReport, RegionKind, ShmSlab, Slab, SlabError,
    TypedSlab,
};

fn all<T: Send + Sync + Unpin + UnwindSafe + RefUnwindSafe>() {}
fn send_sync_unpin<T: Send + Sync + Unpin>() {}

#[test]
fn slabs_and_handles_are_send_sync_unpin_and_unwind_safe() {
    all::<Slab>();
    all::<ShmSlab>();
    all::<TypedSlab<u64>>();
    all::<TypedSlab<[u32; 4], ShmSlab>>();
    all::<TypedSlab<u64, Arc<Slab>>>();
    all::<TypedSlab<u64, &'static Slab>>();
    all::<Freelist>();
    all::<Freelist<16>>();
}

#[test]
fn values_ids_and_reports_are_send_sync_unpin_and_unwind_safe() {
    all::<ObjectId>();
    all::<Config>();
    all::<RegionKind>();
    all::<CheckReport>();
    all::<RecoverReport>();
    all::<SlabError>();
    all::<Corrupt>();
    // It may carry an `io::Error`, which is not unwind safe.
    send_sync_unpin::<OpenError>();
}

#[test]
fn plain_values_may_cross_threads() {
    // `Plain` implies `Send + Sync`: a typed slab shares copies of its values between threads
    // whatever `T` is.
    fn plain<T: pitlane_slab::Plain>() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<T>();
    }
    plain::<u64>();
    plain::<[f32; 8]>();
}
