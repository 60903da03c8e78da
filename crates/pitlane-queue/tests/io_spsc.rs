//! The SPSC queue as a byte pipe (`std::io::Write` for `Producer<u8>`, `std::io::Read` for
//! `Consumer<u8>`), its owned iterator, and `peek(&self)`.
#![cfg(not(pitlane_loom))]

use std::io::{ErrorKind, Read, Write};

use pitlane_queue::spsc::{self, PopError};
use pitlane_testkit::stress::run_threads;

#[test]
fn write_and_read_report_would_block_broken_pipe_and_end_of_stream() {
    let (mut producer, mut consumer) = spsc::channel::<u8>(3);
    assert_eq!(producer.write(b"").unwrap(), 0);
    assert_eq!(producer.write(b"abcd").unwrap(), 3);
    assert_eq!(
        producer.write(b"d").unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    let mut two = [0; 2];
    assert_eq!(consumer.read(&mut two).unwrap(), 2);
    assert_eq!(&two, b"ab");
    assert_eq!(consumer.read(&mut []).unwrap(), 0);
    assert_eq!(producer.write(b"de").unwrap(), 2);
    let mut rest = [0; 8];
    assert_eq!(consumer.read(&mut rest).unwrap(), 3);
    assert_eq!(&rest[..3], b"cde");
    // Empty while the producer lives: would block; once it is gone: the end.
    assert_eq!(
        consumer.read(&mut rest).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(producer);
    assert_eq!(consumer.read(&mut rest).unwrap(), 0);
    // And a producer whose consumer is gone: broken pipe.
    let (mut producer, consumer) = spsc::channel::<u8>(3);
    drop(consumer);
    assert_eq!(
        producer.write(b"x").unwrap_err().kind(),
        ErrorKind::BrokenPipe
    );
    producer.flush().unwrap();
}

#[test]
fn a_byte_stream_crosses_threads_whole_and_in_order() {
    const BYTES: usize = 200_000;
    let (producer, consumer) = spsc::channel::<u8>(64);
    let ends = std::sync::Mutex::new((Some(producer), Some(consumer)));
    run_threads(2, |t| {
        if t == 0 {
            let mut producer = ends.lock().unwrap().0.take().unwrap();
            let data: Vec<u8> = (0..BYTES).map(|i| (i % 251) as u8).collect();
            let mut sent = 0;
            while sent < BYTES {
                match producer.write(&data[sent..(sent + 100).min(BYTES)]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
        } else {
            let mut consumer = ends.lock().unwrap().1.take().unwrap();
            let mut received = Vec::with_capacity(BYTES);
            let mut buffer = [0; 37];
            loop {
                match consumer.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => received.extend_from_slice(&buffer[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(received.len(), BYTES);
            assert!(
                received
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == (i % 251) as u8)
            );
        }
    });
}

#[test]
fn peek_takes_a_shared_borrow_and_sees_what_pop_will_take() {
    let (mut producer, mut consumer) = spsc::channel(4);
    assert_eq!(consumer.peek(), Err(PopError::Empty));
    producer.push_slice(&[1, 2]);
    // Two shared borrows at once: peek does not claim anything.
    let (a, b) = (consumer.peek(), consumer.peek());
    assert_eq!((a, b), (Ok(&1), Ok(&1)));
    assert_eq!(consumer.try_pop(), Ok(1));
    // Inside a claimed run too.
    assert_eq!(consumer.peek(), Ok(&2));
    assert_eq!(consumer.try_pop(), Ok(2));
    assert_eq!(consumer.peek(), Err(PopError::Empty));
}

#[test]
fn the_owned_iterator_drains_what_is_there_and_by_reference_iteration_too() {
    let (mut producer, consumer) = spsc::channel(8);
    producer.push_iter((0..5).map(|i| i.to_string()));
    let mut values = consumer.into_iter();
    assert_eq!(values.next().as_deref(), Some("0"));
    assert_eq!(values.next().as_deref(), Some("1"));
    // The three left are dropped with the iterator and the producer, the last end (ASan and
    // the drop-counting tests watch that path).
    drop(values);
    drop(producer);
    let (mut producer, mut consumer) = spsc::channel(8);
    producer.push_slice(&[3, 4]);
    let by_ref: Vec<i32> = (&mut consumer).into_iter().collect();
    assert_eq!(by_ref, [3, 4]);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
