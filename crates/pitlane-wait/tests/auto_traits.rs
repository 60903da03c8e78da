//! The auto traits of every public type and future of the crate: the positive checks (the
//! negative ones are `compile_fail` doctests in `src/auto_traits.rs`), and a side-by-side
//! comparison with tokio's types, which this crate replaces by a change of path: `Send`,
//! `Sync`, `Unpin`, `UnwindSafe` and `RefUnwindSafe` must be the same for each pair.
#![cfg(not(pitlane_loom))]

use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;

use pitlane_wait::queue::{Locked, Node, WaitQueue};
use pitlane_wait::{
    AcquireError, Notified, Notify, OwnedNotified, OwnedSemaphorePermit, Semaphore,
    SemaphorePermit, TryAcquireError,
};

fn send_sync<T: Send + Sync>() {}
fn unpin<T: Unpin>() {}
fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

/// Which of the five auto traits the type of a value has, read without naming the type (so
/// that it works on the futures `async fn`s return): an inherent method, which exists only
/// when the bound holds, wins over the trait method of the same name.
struct Probe<T>(PhantomData<T>);

fn probe<T>(_: &T) -> Probe<T> {
    Probe(PhantomData)
}

trait Lacks {
    fn send(&self) -> bool {
        false
    }
    fn sync(&self) -> bool {
        false
    }
    fn unpin(&self) -> bool {
        false
    }
    fn unwind_safe(&self) -> bool {
        false
    }
    fn ref_unwind_safe(&self) -> bool {
        false
    }
}

impl<T> Lacks for Probe<T> {}

/// One inherent impl per trait: two bounds on one impl would make each method need both.
macro_rules! has {
    ($($method:ident: $bound:path),*) => {$(
        impl<T: $bound> Probe<T> {
            fn $method(&self) -> bool {
                true
            }
        }
    )*};
}

has!(send: Send, sync: Sync, unpin: Unpin, unwind_safe: UnwindSafe, ref_unwind_safe: RefUnwindSafe);

/// The five answers for the type of `$value`, as `[Send, Sync, Unpin, UnwindSafe, RefUnwindSafe]`.
macro_rules! traits_of {
    ($value:expr) => {{
        let p = probe(&$value);
        [
            p.send(),
            p.sync(),
            p.unpin(),
            p.unwind_safe(),
            p.ref_unwind_safe(),
        ]
    }};
}

/// `traits_of` for a type named, through a reference to nothing: the probe never reads it.
macro_rules! traits_of_type {
    ($t:ty) => {{
        let p = Probe::<$t>(PhantomData);
        [
            p.send(),
            p.sync(),
            p.unpin(),
            p.unwind_safe(),
            p.ref_unwind_safe(),
        ]
    }};
}

#[test]
fn the_probe_tells_each_trait_apart() {
    assert_eq!(traits_of_type!(u8), [true; 5]);
    assert_eq!(traits_of_type!(Cell<u8>), [true, false, true, true, false]);
    assert_eq!(
        traits_of_type!(std::rc::Rc<u8>),
        [false, false, true, true, true]
    );
    assert_eq!(
        traits_of_type!(std::marker::PhantomPinned),
        [true, true, false, true, true]
    );
    assert_eq!(traits_of_type!(&mut u8), [true, true, true, false, true]);
}

#[test]
fn types_have_the_auto_traits_of_tokios() {
    let pairs = [
        (
            "Notify",
            traits_of_type!(Notify),
            traits_of_type!(tokio::sync::Notify),
        ),
        (
            "Semaphore",
            traits_of_type!(Semaphore),
            traits_of_type!(tokio::sync::Semaphore),
        ),
        (
            "SemaphorePermit",
            traits_of_type!(SemaphorePermit<'static>),
            traits_of_type!(tokio::sync::SemaphorePermit<'static>),
        ),
        (
            "OwnedSemaphorePermit",
            traits_of_type!(OwnedSemaphorePermit),
            traits_of_type!(tokio::sync::OwnedSemaphorePermit),
        ),
        (
            "AcquireError",
            traits_of_type!(AcquireError),
            traits_of_type!(tokio::sync::AcquireError),
        ),
        (
            "TryAcquireError",
            traits_of_type!(TryAcquireError),
            traits_of_type!(tokio::sync::TryAcquireError),
        ),
    ];
    for (name, ours, tokios) in pairs {
        assert_eq!(
            ours, tokios,
            "{name}: [Send, Sync, Unpin, UnwindSafe, RefUnwindSafe]"
        );
    }
}

/// The named futures match tokio's in all but `UnwindSafe`, which ours are and tokio's are
/// not (its intrusive list pointers sit in an `UnsafeCell`): harmless, since a future moved
/// into a `catch_unwind` closure is dropped with it when the closure panics, which leaves its
/// `Notify` as any drop of a waiting future does, and a `&mut` of it is not `UnwindSafe`.
#[test]
fn notified_futures_have_the_auto_traits_of_tokios_and_are_unwind_safe() {
    let pairs = [
        (
            "Notified",
            traits_of_type!(Notified<'static>),
            traits_of_type!(tokio::sync::futures::Notified<'static>),
        ),
        (
            "OwnedNotified",
            traits_of_type!(OwnedNotified),
            traits_of_type!(tokio::sync::futures::OwnedNotified),
        ),
    ];
    for (name, ours, tokios) in pairs {
        assert_eq!(
            ours,
            [true, true, false, true, false],
            "{name}: [Send, Sync, Unpin, UnwindSafe, RefUnwindSafe]"
        );
        assert_eq!(
            tokios,
            [true, true, false, false, false],
            "tokio's {name}: [Send, Sync, Unpin, UnwindSafe, RefUnwindSafe]"
        );
    }
}

#[test]
fn futures_have_the_send_sync_and_unpin_of_tokios() {
    let ours = Arc::new(Semaphore::new(1));
    let tokios = Arc::new(tokio::sync::Semaphore::new(1));
    let notify = Arc::new(Notify::new());
    let tokio_notify = Arc::new(tokio::sync::Notify::new());
    // `Send`, `Sync` and `Unpin`: the properties tokio's `async_send_sync.rs` checks of them.
    let three = |all: [bool; 5]| [all[0], all[1], all[2]];
    let pairs = [
        (
            "acquire",
            traits_of!(ours.acquire()),
            traits_of!(tokios.acquire()),
        ),
        (
            "acquire_many",
            traits_of!(ours.acquire_many(1)),
            traits_of!(tokios.acquire_many(1)),
        ),
        (
            "acquire_owned",
            traits_of!(ours.clone().acquire_owned()),
            traits_of!(tokios.clone().acquire_owned()),
        ),
        (
            "acquire_many_owned",
            traits_of!(ours.clone().acquire_many_owned(1)),
            traits_of!(tokios.clone().acquire_many_owned(1)),
        ),
        (
            "notified",
            traits_of!(notify.notified()),
            traits_of!(tokio_notify.notified()),
        ),
        (
            "notified_owned",
            traits_of!(notify.clone().notified_owned()),
            traits_of!(tokio_notify.clone().notified_owned()),
        ),
    ];
    for (name, ours, tokios) in pairs {
        assert_eq!(three(ours), three(tokios), "{name}: [Send, Sync, Unpin]");
        assert_eq!(
            three(ours),
            [true, true, false],
            "{name}: [Send, Sync, Unpin]"
        );
    }
}

#[test]
fn synchronisation_types_are_send_sync_and_unpin() {
    send_sync::<Notify>();
    send_sync::<Semaphore>();
    send_sync::<SemaphorePermit<'static>>();
    send_sync::<OwnedSemaphorePermit>();
    send_sync::<Notified<'static>>();
    send_sync::<OwnedNotified>();
    send_sync::<AcquireError>();
    send_sync::<TryAcquireError>();
    unpin::<Notify>();
    unpin::<Semaphore>();
    unpin::<SemaphorePermit<'static>>();
    unpin::<OwnedSemaphorePermit>();
}

#[test]
fn notify_semaphore_and_permits_are_unwind_safe_as_tokios_are() {
    unwind_safe::<Notify>();
    unwind_safe::<Semaphore>();
    unwind_safe::<SemaphorePermit<'static>>();
    unwind_safe::<OwnedSemaphorePermit>();
    unwind_safe::<Arc<Semaphore>>();
    unwind_safe::<AcquireError>();
    unwind_safe::<TryAcquireError>();
}

#[test]
fn the_wait_queue_is_shared_when_its_data_is_sync() {
    // `Cell` data is `Send` but not `Sync`: the queue is neither (see the doctests); data
    // that is `Sync` but not `Send` is enough, since the queue never moves or drops it.
    send_sync::<WaitQueue<u8>>();
    send_sync::<WaitQueue<std::sync::MutexGuard<'static, u8>>>();
    send_sync::<Node<u8>>();
    unpin::<WaitQueue<u8>>();
    unpin::<Locked<'static, u8>>();
}

#[test]
fn a_permit_and_a_future_may_borrow_for_less_long() {
    // Covariant in the lifetime of the borrow of the semaphore or `Notify`, as tokio's.
    fn shorter_permit<'a>(p: SemaphorePermit<'static>) -> SemaphorePermit<'a> {
        p
    }
    fn shorter_notified<'a>(n: Notified<'static>) -> Notified<'a> {
        n
    }
    static SEMAPHORE: Semaphore = Semaphore::const_new(1);
    static NOTIFY: Notify = Notify::const_new();
    let permit = shorter_permit(SEMAPHORE.try_acquire().unwrap());
    assert_eq!(permit.num_permits(), 1);
    drop(shorter_notified(NOTIFY.notified()));
}
