//! Memory goes back to the OS: the resident set grows with a big allocation and falls after
//! everything is freed and the purge policy has run. One test in its own binary, so that no
//! other test's memory moves the resident set meanwhile.

use pitlane_alloc::{PitlaneAlloc, PurgePolicy};
use std::time::Duration;

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// The resident set in bytes, from /proc/self/statm.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn allocate_a_lot() -> (Vec<Vec<u8>>, Vec<Box<[u64]>>) {
    // 256 MiB of small blocks of mixed sizes, and 64 MiB of large ones, all touched.
    let small: Vec<Vec<u8>> = (0..256 * 1024)
        .map(|i| vec![i as u8; 64 + (i % 8) * 256])
        .collect();
    let large: Vec<Box<[u64]>> = (0..32)
        .map(|i| vec![i as u64; 256 * 1024].into_boxed_slice())
        .collect();
    (small, large)
}

#[test]
fn resident_memory_falls_after_a_big_free_all() {
    let base = rss();
    let (small, large) = allocate_a_lot();
    let peak = rss();
    let grown = peak.saturating_sub(base);
    assert!(
        grown > 300 << 20,
        "the resident set grew by only {grown} bytes"
    );
    drop(small);
    drop(large);

    // Without being asked: the policy purges after its delay, on a later slow path.
    pitlane_alloc::set_purge_policy(PurgePolicy {
        delay_ms: 20,
        ..PurgePolicy::default()
    });
    std::thread::sleep(Duration::from_millis(60));
    // A release of a page (here: a block that empties its own page) runs the due sweep.
    for _ in 0..3 {
        let v = vec![0u8; 9000];
        drop(v);
        let w: Vec<Box<[u8; 20_000]>> = (0..2).map(|_| Box::new([0; 20_000])).collect();
        drop(w);
        std::thread::sleep(Duration::from_millis(30));
    }
    let lazy = rss();
    // And at once when asked.
    pitlane_alloc::collect();
    let after = rss();
    let stats = pitlane_alloc::stats();
    eprintln!(
        "rss: base {} MiB, peak {} MiB, after the delay {} MiB, after collect {} MiB; {stats:?}",
        base >> 20,
        peak >> 20,
        lazy >> 20,
        after >> 20
    );
    assert!(
        lazy < base + grown / 4,
        "the delayed purge gave back too little: {} MiB left of {} MiB",
        (lazy - base) >> 20,
        grown >> 20
    );
    assert!(after < base + grown / 8);
    assert!(stats.purged > 200 << 20);
    assert!(stats.in_use < 16 << 20, "{stats:?}");
}
