//! A test binary with `PitlaneAlloc` as its `#[global_allocator]`: std's collections, threads
//! (std's and pthreads), and allocation from thread-local destructors that run after the
//! thread's heap was parked.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use pitlane_alloc::PitlaneAlloc;

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

#[test]
fn std_collections_work() {
    let mut map = HashMap::new();
    let mut tree = BTreeMap::new();
    for i in 0..100_000u32 {
        map.insert(i, i.to_string());
        tree.insert(i.to_string(), vec![i; (i % 17) as usize]);
    }
    assert_eq!(map.len(), 100_000);
    assert_eq!(map[&77_777], "77777");
    assert_eq!(tree["99"].len(), 99 % 17);
    let text: String = (0..10_000).map(|i| format!("{i},")).collect();
    assert!(text.starts_with("0,1,2,"));
    let mut big = vec![0u8; 50 << 20];
    big[(50 << 20) - 1] = 1;
    big.truncate(10);
    big.shrink_to_fit();
    assert_eq!(big, [0; 10]);
}

struct AllocatesOnDrop(Vec<u64>);

impl Drop for AllocatesOnDrop {
    fn drop(&mut self) {
        // Runs during thread exit, possibly after the allocator's own key destructor.
        let copy: Vec<u64> = self.0.iter().map(|x| x + 1).collect();
        let text = format!("{:?}", &copy[..3]);
        assert_eq!(text, "[2, 3, 4]");
    }
}

thread_local! {
    static LATE: RefCell<Option<AllocatesOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn threads_come_and_go_and_free_each_others_blocks() {
    let shared = Arc::new(Mutex::new(Vec::<Box<[u8]>>::new()));
    for round in 0..20 {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    LATE.with(|late| {
                        *late.borrow_mut() = Some(AllocatesOnDrop(vec![1, 2, 3, 4]));
                    });
                    let mut mine = Vec::new();
                    for i in 0..2000usize {
                        mine.push(vec![(round + t) as u8; 1 + (i * 37) % 3000].into_boxed_slice());
                    }
                    let mut shared = shared.lock().unwrap();
                    // Free blocks allocated by threads of earlier rounds (now gone).
                    for block in shared.drain(..) {
                        assert!(block.iter().all(|&b| b == block[0]));
                    }
                    shared.extend(mine.drain(..1000));
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
    let blocks = shared.lock().unwrap().len();
    assert_eq!(blocks, 1000);
}
