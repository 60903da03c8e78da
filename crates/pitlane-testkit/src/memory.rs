//! The process's address space, and running a closure while the OS refuses more of it: how
//! the allocator's tests make memory run out without filling the machine.

/// The process's address space now, in bytes: the sum of its mappings in `/proc/self/maps`.
///
/// ```
/// let before = pitlane_testkit::memory::address_space();
/// let block = vec![1u8; 8 << 20];
/// assert!(pitlane_testkit::memory::address_space() >= before);
/// drop(block);
/// ```
pub fn address_space() -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .map(|line| {
            let range = line.split_whitespace().next().expect("an address range");
            let (start, end) = range.split_once('-').expect("start-end");
            u64::from_str_radix(end, 16).expect("hex")
                - u64::from_str_radix(start, 16).expect("hex")
        })
        .sum()
}

/// The process's resident set now, in KiB (`VmRSS` of `/proc/self/status`).
///
/// ```
/// let before = pitlane_testkit::memory::resident_kib();
/// let block = vec![1u8; 32 << 20];
/// assert!(pitlane_testkit::memory::resident_kib() > before);
/// drop(block);
/// ```
pub fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("a VmRSS line");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS in kB")
}

/// Runs `f` with the process's address-space limit (`RLIMIT_AS`, the soft one) lowered to
/// what the process uses now plus `headroom` bytes, and restores the limit before returning
/// `f`'s result (also if `f` panics). The limit is the whole process's: a test that uses this
/// belongs in a binary of its own (and the example below is not run, so as not to limit the
/// doctests beside it).
///
/// ```no_run
/// let refused = pitlane_testkit::memory::with_address_space_limit(64 << 20, || {
///     let mut v: Vec<u8> = Vec::new();
///     v.try_reserve(1 << 30).is_err()
/// });
/// assert!(refused);
/// ```
pub fn with_address_space_limit<R>(headroom: u64, f: impl FnOnce() -> R) -> R {
    /// Puts the limit read before back when dropped.
    struct Restore(libc::rlimit);

    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: sets this process's limit from a valid struct read by `getrlimit`.
            let restored = unsafe { libc::setrlimit(libc::RLIMIT_AS, &self.0) };
            assert_eq!(restored, 0, "restoring RLIMIT_AS");
        }
    }

    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads this process's limit into a valid struct.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut old) }, 0);
    let tight = libc::rlimit {
        // `rlim_t` is 32 bits on some 32-bit targets: a limit beyond it is no limit.
        rlim_cur: libc::rlim_t::try_from(address_space().saturating_add(headroom))
            .unwrap_or(libc::RLIM_INFINITY),
        rlim_max: old.rlim_max,
    };
    let restore = Restore(old);
    // SAFETY: lowers this process's soft limit; `restore` puts it back.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &tight) }, 0);
    let result = f();
    drop(restore);
    result
}
