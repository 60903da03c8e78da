//! A ring far larger than what will ever be in it costs no memory at creation: its slots come
//! from a zeroed allocation (an empty slot is all zeros), so a capacity the allocator grants
//! under overcommit is not written page by page, which once brought the out-of-memory killer
//! instead of an error for a capacity near the machine's memory. Dropping it does not visit
//! the slots of a type with no `Drop`.
//!
//! One test in its own process, so that no other test's memory moves the resident set.
#![cfg(all(not(pitlane_loom), target_os = "linux"))]

use pitlane_queue::spsc::{self, ChannelError};
use pitlane_testkit::memory::resident_kib;

#[test]
fn a_4_gib_ring_is_created_and_used_without_touching_its_pages() {
    // 2^31 slots of a byte and its state byte: 4 GiB of address space (1 GiB where `usize`
    // is 32 bits, which 4 GiB would not fit).
    const CAPACITY: usize = if usize::BITS == 64 { 1 << 31 } else { 1 << 29 };
    let before = resident_kib();
    let (mut producer, mut consumer) = match spsc::try_channel::<u8>(CAPACITY) {
        Ok(ends) => ends,
        // A machine that does not overcommit may refuse; what matters then is the error.
        Err(error @ ChannelError::OutOfMemory { .. }) => {
            println!("refused, as a machine without overcommit may: {error}");
            return;
        }
        Err(error) => panic!("unexpected error for {CAPACITY} slots: {error}"),
    };
    let created = resident_kib();
    for round in 0..3u8 {
        for i in 0..100_000u32 {
            producer.try_push(i as u8).expect("room in a 4 GiB ring");
        }
        for i in 0..100_000u32 {
            assert_eq!(consumer.try_pop(), Ok(i as u8), "round {round}");
        }
    }
    let used = resident_kib();
    drop(producer);
    drop(consumer);
    println!("resident: {before} KiB before, {created} KiB created, {used} KiB after use");
    // Writing every slot would add 4 GiB; what is allowed here is the test harness's own
    // noise and the slots the pushes reached (300,000 slots of 2 bytes: 600 KiB).
    assert!(
        created.saturating_sub(before) < 16 * 1024,
        "creating the ring added {} KiB to the resident set",
        created.saturating_sub(before)
    );
    assert!(
        used.saturating_sub(before) < 32 * 1024,
        "using 300,000 slots of the ring added {} KiB to the resident set",
        used.saturating_sub(before)
    );
}
