//! Every value that enters a B-Queue is dropped exactly once: by whoever pops it, or by the last
//! end to go when it is still queued; a refused push hands its value back undropped.
#![cfg(not(pitlane_loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::spsc::{self, Builder, PushError};

/// Per-value drop counts, so that a double drop and a leak are both seen, and which value.
struct Ledger {
    drops: Vec<AtomicUsize>,
}

impl Ledger {
    fn new(values: usize) -> Arc<Self> {
        Arc::new(Self {
            drops: (0..values).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    fn value(self: &Arc<Self>, id: usize) -> Tracked {
        Tracked {
            id,
            ledger: Arc::clone(self),
        }
    }

    fn dropped(&self, id: usize) -> usize {
        self.drops[id].load(Ordering::SeqCst)
    }

    fn assert_each_dropped_once(&self) {
        for (id, count) in self.drops.iter().enumerate() {
            assert_eq!(count.load(Ordering::SeqCst), 1, "value {id}");
        }
    }
}

struct Tracked {
    id: usize,
    ledger: Arc<Ledger>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.ledger.drops[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn queued_values_are_dropped_by_the_last_end_consumer_last() {
    let ledger = Ledger::new(5);
    let (mut producer, mut consumer) = spsc::channel::<Tracked>(8);
    for id in 0..5 {
        assert!(producer.try_push(ledger.value(id)).is_ok());
    }
    drop(consumer.try_pop().unwrap());
    assert_eq!(ledger.dropped(0), 1);
    drop(producer);
    assert!(consumer.is_abandoned());
    for id in 1..5 {
        assert_eq!(ledger.dropped(id), 0, "still queued");
    }
    drop(consumer);
    ledger.assert_each_dropped_once();
}

#[test]
fn queued_values_are_dropped_by_the_last_end_producer_last() {
    let ledger = Ledger::new(3);
    let (mut producer, consumer) = spsc::channel::<Tracked>(3);
    drop(consumer);
    assert!(producer.is_abandoned());
    for id in 0..3 {
        assert!(producer.try_push(ledger.value(id)).is_ok());
    }
    assert_eq!(ledger.dropped(0), 0);
    drop(producer);
    ledger.assert_each_dropped_once();
}

#[test]
fn a_refused_value_comes_back_undropped() {
    let ledger = Ledger::new(2);
    let (mut producer, consumer) = spsc::channel::<Tracked>(1);
    assert!(producer.try_push(ledger.value(0)).is_ok());
    let Err(PushError::Full(back)) = producer.try_push(ledger.value(1)) else {
        panic!("a ring of one slot holding one value is full");
    };
    assert_eq!(back.id, 1);
    assert_eq!(ledger.dropped(1), 0);
    drop(back);
    drop((producer, consumer));
    ledger.assert_each_dropped_once();
}

#[test]
fn peeking_neither_moves_nor_drops() {
    let ledger = Ledger::new(1);
    let (mut producer, consumer) = spsc::channel::<Tracked>(2);
    assert!(producer.try_push(ledger.value(0)).is_ok());
    for _ in 0..3 {
        assert_eq!(consumer.peek().unwrap().id, 0);
    }
    assert_eq!(ledger.dropped(0), 0);
    drop(consumer);
    drop(producer);
    ledger.assert_each_dropped_once();
}

/// Wrapped rings with a partly claimed batch on each end: the ring's drop must find exactly
/// the slots that are full, whatever the ends had claimed.
#[test]
fn leftovers_after_wrapping_with_claims_outstanding() {
    for capacity in 1..=9 {
        for batch in 1..=capacity {
            for popped in 0..=2 * capacity {
                let values = 3 * capacity;
                let ledger = Ledger::new(values);
                let (mut producer, mut consumer) = Builder::new(capacity)
                    .batch(batch)
                    .build::<Tracked>()
                    .unwrap();
                let mut next = 0;
                let mut taken = 0;
                // A value the ring refused, to be pushed first next time.
                let mut refused = None;
                // Interleave pushes and pops until `popped` values were taken.
                while taken < popped {
                    while next < values {
                        let value = refused.take().unwrap_or_else(|| ledger.value(next));
                        match producer.try_push(value) {
                            Ok(()) => next += 1,
                            Err(full) => {
                                refused = Some(full.into_inner());
                                break;
                            }
                        }
                    }
                    match consumer.try_pop() {
                        Ok(value) => {
                            assert_eq!(value.id, taken);
                            taken += 1;
                        }
                        Err(_) => break,
                    }
                }
                // Some remain queued; the refused one and those never made are dropped here.
                let made = next + usize::from(refused.is_some());
                drop(refused);
                for id in made..values {
                    drop(ledger.value(id));
                }
                drop(producer);
                drop(consumer);
                ledger.assert_each_dropped_once();
            }
        }
    }
}

#[test]
fn batch_operations_drop_once() {
    let ledger = Ledger::new(100);
    let (mut producer, mut consumer) = Builder::new(16).batch(4).build::<Tracked>().unwrap();
    let mut source = (0..100).map(|id| ledger.value(id));
    let mut received = 0;
    loop {
        let pushed = producer.push_iter(source.by_ref());
        let mut popped = 0;
        for value in consumer.try_iter().take(5) {
            assert_eq!(value.id, received);
            received += 1;
            popped += 1;
        }
        if pushed == 0 && popped == 0 {
            break;
        }
    }
    drop(source);
    drop((producer, consumer));
    ledger.assert_each_dropped_once();
}

/// Zero-sized values with a `Drop` still count.
#[test]
fn zero_sized_values_are_dropped_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Unit;
    impl Drop for Unit {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (mut producer, mut consumer) = spsc::channel::<Unit>(5);
    assert_eq!(
        producer.push_iter(std::iter::repeat_with(|| Unit).take(7)),
        5
    );
    assert_eq!(DROPS.load(Ordering::SeqCst), 0);
    drop(consumer.try_pop().unwrap());
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    drop(consumer);
    drop(producer);
    assert_eq!(DROPS.load(Ordering::SeqCst), 5);
}

/// The two ends on two threads, both dropped while values are in flight.
#[test]
fn concurrent_ends_drop_each_value_once() {
    for round in 0..50 {
        let values = 2_000;
        let ledger = Ledger::new(values);
        let (mut producer, mut consumer) = Builder::new(64).batch(8).build::<Tracked>().unwrap();
        let stop_after = round * 37 % values;
        let feeder = {
            let ledger = Arc::clone(&ledger);
            std::thread::spawn(move || {
                for id in 0..values {
                    let mut value = ledger.value(id);
                    loop {
                        match producer.try_push(value) {
                            Ok(()) => break,
                            Err(full) if !producer.is_abandoned() => {
                                value = full.into_inner();
                                std::hint::spin_loop();
                            }
                            // Nobody will pop it: drop it here.
                            Err(_) => break,
                        }
                    }
                }
            })
        };
        let mut expected = 0;
        while expected < stop_after {
            if let Ok(value) = consumer.try_pop() {
                assert_eq!(value.id, expected);
                expected += 1;
            }
        }
        drop(consumer);
        feeder.join().unwrap();
        ledger.assert_each_dropped_once();
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// A value that counts its drop and then panics if armed.
struct Bomb {
    tracked: Tracked,
    armed: bool,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.armed {
            panic!("bomb {}", self.tracked.id);
        }
    }
}

#[test]
fn a_queued_value_whose_drop_panics_in_the_last_ends_drop_propagates_and_the_rest_still_drop_once()
{
    for last_is_consumer in [false, true] {
        let ledger = Ledger::new(5);
        let (mut producer, mut consumer) = spsc::channel::<Bomb>(8);
        for id in 0..5 {
            let bomb = Bomb {
                tracked: ledger.value(id),
                armed: id == 3,
            };
            assert!(producer.try_push(bomb).is_ok());
        }
        // Value 0 is popped and dropped here; 1 to 4 are left queued, 3 armed.
        drop(consumer.try_pop().unwrap());
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            if last_is_consumer {
                drop(producer);
                drop(consumer);
            } else {
                drop(consumer);
                drop(producer);
            }
        }));
        let message = outcome.expect_err("the bomb's panic reaches the dropping end");
        assert_eq!(message.downcast_ref::<String>().unwrap(), "bomb 3");
        // Every value is dropped once: those before the bomb, the bomb itself (its fields
        // still drop), and, as `Vec` does, the one after it while the panic unwinds.
        for id in 0..=4 {
            assert_eq!(ledger.dropped(id), 1, "value {id}");
        }
    }
}
