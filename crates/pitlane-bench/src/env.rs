//! What machine and build produced a report.

/// The environment of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Operating system and kernel.
    pub os: String,
    /// The compiler that built the benchmarks.
    pub rustc: String,
    /// The commit of the source tree the benchmarks were built from, with `-dirty` when it had
    /// uncommitted changes then.
    pub git_commit: String,
}

impl Machine {
    /// Reads the machine now.
    pub fn capture() -> Self {
        Self {
            cpu: cpu_model().unwrap_or_else(|| "unknown".into()),
            cores: cores(),
            os: os_name(),
            rustc: env!("PITLANE_RUSTC_VERSION").to_string(),
            // Read when the benchmarks were built (see `build.rs`), so that a binary run after
            // the tree moved on still names its own source.
            git_commit: env!("PITLANE_GIT_COMMIT").to_string(),
        }
    }
}

/// Cores available to this process (1 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn os_name() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    match (pretty, kernel) {
        (Some(p), Some(k)) => format!("{p}, Linux {k}"),
        (Some(p), None) => p,
        (None, Some(k)) => format!("Linux {k}"),
        (None, None) => std::env::consts::OS.to_string(),
    }
}

/// How the machine behaved around a run: shared virtual machines change under a benchmark
/// (their two vCPUs may run on two physical cores, which gives real parallelism but slow
/// cache-line transfers, or on one core's two hyperthreads, which gives little parallelism
/// but fast transfers), and a reader of a report needs to know which state it saw.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineState {
    /// Work done by two threads spinning on private data, divided by one thread's: near 2
    /// with two real cores to ourselves, near 1 when the two threads share one; NaN when the
    /// OS would not start the threads.
    pub parallel_speedup: f64,
    /// Median time for one cache line to go to the other thread and back (a ping-pong on one
    /// atomic word), in nanoseconds; NaN when the probe finished no batch in its time (or the
    /// OS would not start its second thread).
    pub round_trip_ns: f64,
}

impl MachineState {
    /// Measures the machine now (about a second): three alternations of one and two spinning
    /// threads, then a ping-pong between two threads.
    pub fn probe() -> Self {
        let mut ratios: Vec<f64> = (0..3)
            .map(|_| match (spin_work(1), spin_work(2)) {
                (Some(one), Some(two)) if one > 0 => two as f64 / one as f64,
                (Some(_), Some(_)) => 0.0,
                // The OS would not start the threads.
                _ => f64::NAN,
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        Self {
            parallel_speedup: ratios[1],
            round_trip_ns: ping_pong_ns(),
        }
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        let reading = if !self.parallel_speedup.is_finite() {
            "not measured: the OS would not start the threads"
        } else if self.parallel_speedup >= 1.6 {
            "two cores"
        } else if self.parallel_speedup <= 1.3 {
            "about one core's worth of parallelism"
        } else {
            "partly shared cores"
        };
        let trip = if self.round_trip_ns.is_finite() {
            format!("{:.0} ns (median)", self.round_trip_ns)
        } else {
            "not measured (no batch of round trips finished in 200 ms)".to_string()
        };
        format!(
            "two spinning threads did {:.2}× the work of one ({reading}); cache-line round \
             trip between two threads {trip}",
            self.parallel_speedup
        )
    }
}

/// Units of private work `threads` threads finish together in 100 ms; `None` if the OS would
/// not start them all.
fn spin_work(threads: usize) -> Option<u64> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map_while(|_| {
                let spawned = std::thread::Builder::new().spawn_scoped(s, || {
                    let (mut x, mut units) = (1_u64, 0_u64);
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        }
                        units += 1;
                    }
                    std::hint::black_box(x);
                    units
                });
                spawned.ok()
            })
            .collect();
        if workers.len() == threads {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        let all_started = workers.len() == threads;
        let units = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
        all_started.then_some(units)
    })
}

/// Median nanoseconds per round trip of a counter bounced between two threads, over batches
/// of 100 round trips, for at most about 200 ms (on an oversubscribed machine a round trip can
/// wait for the scheduler, so the probe stops at its deadline with the batches it finished;
/// `f64::NAN` if it finished none).
fn ping_pong_ns() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    const TRIPS: u64 = 100;
    const MAX_BATCHES: usize = 50;
    const STOP: u64 = u64::MAX;
    let deadline = Instant::now() + Duration::from_millis(200);
    let ball = AtomicU64::new(0);
    let mut per_trip = std::thread::scope(|s| {
        let ball = &ball;
        let echo = std::thread::Builder::new().spawn_scoped(s, move || {
            // The echo: turns every odd value into the next even one, until told to stop.
            loop {
                match ball.load(Ordering::Acquire) {
                    STOP => return,
                    v if v % 2 == 1 => ball.store(v + 1, Ordering::Release),
                    _ => std::hint::spin_loop(),
                }
            }
        });
        let mut batches = Vec::with_capacity(MAX_BATCHES);
        if echo.is_err() {
            // No echo: no round trip can finish.
            return batches;
        }
        let mut value = 0;
        'batches: for _ in 0..MAX_BATCHES {
            let start = Instant::now();
            for trip in 0..TRIPS {
                ball.store(value + 1, Ordering::Release);
                let mut spins = 0_u32;
                while ball.load(Ordering::Acquire) != value + 2 {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(1024) && Instant::now() > deadline {
                        break 'batches;
                    }
                }
                value += 2;
                if trip % 16 == 15 && Instant::now() > deadline {
                    break 'batches;
                }
            }
            batches.push(start.elapsed().as_nanos() as f64 / TRIPS as f64);
        }
        ball.store(STOP, Ordering::Release);
        batches
    });
    if per_trip.is_empty() {
        return f64::NAN;
    }
    per_trip.sort_by(f64::total_cmp);
    per_trip[per_trip.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_measures_something_plausible() {
        let state = MachineState::probe();
        // Two threads never do less than a fraction of one thread's work, nor more than a
        // few times it on any machine this runs on; a round trip takes some time.
        assert!(
            state.parallel_speedup > 0.3 && state.parallel_speedup < 64.0,
            "{state:?}"
        );
        // NaN only when no batch finished in time (a very busy machine).
        assert!(
            state.round_trip_ns.is_nan() || state.round_trip_ns > 1.0,
            "{state:?}"
        );
        assert!(
            state.describe().contains("round trip"),
            "{}",
            state.describe()
        );
    }
}
