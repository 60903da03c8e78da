//! Two threads of push+pop pairs on one `mpmc::Queue<u64>`, through the plain calls or
//! through handles, counting the segments allocated afresh (a counting global allocator: every
//! allocation of 8 KiB or more is a segment here) against the segments the run went through.
//!
//! ```sh
//! cargo build --release -p pitlane-queue --example segment_pool
//! target/release/examples/segment_pool plain 1024 1    # mode, prefill, seconds
//! target/release/examples/segment_pool handle 1024 1
//! ```
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pitlane_queue::mpmc::Queue;

static LARGE: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= 8192 {
            LARGE.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "plain".into());
    let prefill: u64 = args.next().map_or(0, |s| s.parse().expect("a count"));
    let seconds: f64 = args.next().map_or(1.0, |s| s.parse().expect("seconds"));
    let queue: Queue<u64> = Queue::new();
    (0..prefill).for_each(|i| queue.push(i));
    let stop = AtomicBool::new(false);
    let pairs = AtomicU64::new(0);
    let allocated_before = LARGE.load(Ordering::Relaxed);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut n = 0;
                let handle = queue.handle();
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..256 {
                        if mode == "plain" {
                            queue.push(i);
                            while queue.pop().is_none() {}
                        } else {
                            handle.push(i);
                            while handle.pop().is_none() {}
                        }
                    }
                    n += 256;
                }
                pairs.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = started.elapsed().as_secs_f64();
    let pairs = pairs.load(Ordering::Relaxed);
    println!(
        "{mode}, prefill {prefill}: {:.1} Mpairs/s; {} segments allocated for {} gone through",
        pairs as f64 / elapsed / 1e6,
        LARGE.load(Ordering::Relaxed) - allocated_before,
        pairs / pitlane_queue::mpmc::DEFAULT_SEGMENT as u64,
    );
}
