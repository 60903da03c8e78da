//! How busy the machine was with other work while a workload ran.
//!
//! A figure measured while a compiler shared the two cores says little about the structure
//! under test. The runner reads the kernel's CPU counters before and after each workload
//! ([`CpuSample::now`]) and turns the difference into a [`Busy`]: the share of the machine's
//! CPU time that went to other processes, and the share the hypervisor stole. A suite's own
//! child processes (the slab's processes, the allocators' passes) count as this process once
//! they have been waited for, which is before the workload's second sample. A workload
//! measured while more than [`BUSY_LIMIT_PCT`] percent of the machine was busy elsewhere is
//! marked in the report.
//!
//! The counters (`/proc/stat`, `/proc/self/stat`) are in clock ticks of usually 10 ms, so a
//! workload that lasts a few ticks gets a coarse figure; the whole run's figure is exact to
//! within a few ticks.

/// Above this share of the machine (steal plus other processes' CPU time, in percent), a
/// workload counts as measured on a busy machine.
pub const BUSY_LIMIT_PCT: f64 = 25.0;

/// The kernel's CPU counters at one moment, in clock ticks, summed over all CPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuSample {
    /// All CPU time of the machine (user, nice, system, idle, iowait, irq, softirq, steal).
    pub total: u64,
    /// Time no process wanted a CPU (idle and iowait).
    pub idle: u64,
    /// Time the hypervisor gave this machine's CPUs to someone else.
    pub steal: u64,
    /// CPU time of this process, all its threads (user and system), and of its children that
    /// have been waited for (a suite's child processes run the suite's own workload).
    pub ours: u64,
    /// The one-minute load average.
    pub load_avg: f64,
}

impl CpuSample {
    /// Reads the counters now; `None` where `/proc` is missing or unreadable (not Linux).
    pub fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        let load = std::fs::read_to_string("/proc/loadavg").ok()?;
        Self::parse(&stat, &own, &load)
    }

    /// Parses the contents of `/proc/stat`, `/proc/self/stat` and `/proc/loadavg`.
    ///
    /// ```
    /// use pitlane_bench::busy::CpuSample;
    ///
    /// let stat = "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 18 0 0\n";
    /// let own = "4242 (pitlane bench) R 1 2 3 0 -1 0 0 0 0 0 60 20 7 3 20 0 3";
    /// let sample = CpuSample::parse(stat, own, "1.50 0.9 0.5 3/120 4242\n").unwrap();
    /// // 60 + 20 ticks of its own, 7 + 3 of its children.
    /// assert_eq!((sample.total, sample.idle, sample.steal, sample.ours), (1000, 810, 35, 90));
    /// assert_eq!(sample.load_avg, 1.5);
    /// ```
    pub fn parse(stat: &str, own: &str, load: &str) -> Option<Self> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal (guest time is inside user already).
        let field = |i: usize| fields.get(i).copied().unwrap_or(0);
        let total = (0..8).map(field).sum();
        // The command name may hold spaces and parentheses: fields are counted after the last ')'.
        let after_name = &own[own.rfind(')')? + 1..];
        let own_fields: Vec<&str> = after_name.split_whitespace().collect();
        // utime, stime, cutime and cstime are fields 14 to 17 of the line, 12 to 15 after the
        // name: this process's time and that of its children it has waited for.
        let ticks = |i: usize| own_fields.get(i)?.parse::<u64>().ok();
        let ours = ticks(11)? + ticks(12)? + ticks(13)? + ticks(14)?;
        Some(Self {
            total,
            idle: field(3) + field(4),
            steal: field(7),
            ours,
            load_avg: load.split_whitespace().next()?.parse().ok()?,
        })
    }
}

/// What the machine did besides this process between two samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Busy {
    /// Percent of the machine's CPU time the hypervisor stole.
    pub steal_pct: f64,
    /// Percent of the machine's CPU time spent by other processes (not idle, not stolen, not
    /// this process).
    pub other_cpu_pct: f64,
    /// The highest one-minute load average of the two samples.
    pub load_avg: f64,
}

impl Busy {
    /// The interval from `before` to `after` (all zero when no clock tick passed); `None` when
    /// the counters went backwards (samples given in the wrong order).
    ///
    /// ```
    /// use pitlane_bench::busy::{Busy, CpuSample};
    ///
    /// let at = |total, idle, steal, ours| CpuSample { total, idle, steal, ours, load_avg: 1.0 };
    /// // 200 ticks on two cores: this process used 100, another 60, the hypervisor stole 10.
    /// let busy = Busy::between(&at(1000, 500, 0, 40), &at(1200, 530, 10, 140)).unwrap();
    /// assert_eq!((busy.other_cpu_pct, busy.steal_pct), (30.0, 5.0));
    /// assert!(busy.is_busy());
    /// ```
    pub fn between(before: &CpuSample, after: &CpuSample) -> Option<Self> {
        let total = after.total.checked_sub(before.total)?;
        let idle = after.idle.saturating_sub(before.idle);
        let steal = after.steal.saturating_sub(before.steal);
        let ours = after.ours.saturating_sub(before.ours);
        let other = total.saturating_sub(idle + steal).saturating_sub(ours);
        let pct = |ticks: u64| 100.0 * ticks as f64 / total.max(1) as f64;
        Some(Self {
            steal_pct: pct(steal),
            other_cpu_pct: pct(other),
            load_avg: before.load_avg.max(after.load_avg),
        })
    }

    /// Steal plus other processes' CPU time, in percent of the machine.
    pub fn elsewhere_pct(&self) -> f64 {
        self.steal_pct + self.other_cpu_pct
    }

    /// Whether more than [`BUSY_LIMIT_PCT`] of the machine was busy elsewhere.
    pub fn is_busy(&self) -> bool {
        self.elsewhere_pct() > BUSY_LIMIT_PCT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_parentheses_and_spaces_parses() {
        let own = "7 (a (b) c) S 1 2 3 0 -1 0 0 0 0 0 5 6 0 0 20 0 1";
        let s = CpuSample::parse("cpu  1 2 3 4 5 6 7 8\n", own, "0.00 0 0 1/1 7").unwrap();
        assert_eq!(s.ours, 11);
        assert_eq!(s.total, 36);
    }

    #[test]
    fn this_machine_has_counters_that_move() {
        let Some(a) = CpuSample::now() else { return };
        let mut x = 0_u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = CpuSample::now().unwrap();
        assert!(b.total >= a.total && b.ours >= a.ours, "{a:?} {b:?}");
        if let Some(busy) = Busy::between(&a, &b) {
            assert!((0.0..=100.0).contains(&busy.other_cpu_pct), "{busy:?}");
        }
    }
}
