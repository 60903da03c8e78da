//! What every `bag` run checks: each thread's tallies of what it pushed and popped, FIFO
//! order per producer, the drain after the run, and how evenly the threads shared the work.

use super::*;

/// What one thread pushed and popped: counts, plain sums and sums of a mixing function, so
/// that a lost item and a duplicated one cannot cancel out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) count: u64,
    pub(super) sum: u64,
    pub(super) mixed: u64,
}

impl Tally {
    #[inline(always)]
    pub(super) fn add(&mut self, item: u64) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(item);
        self.mixed = self.mixed.wrapping_add(mix(item));
    }

    pub(super) fn merge(&mut self, other: Tally) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
        self.mixed = self.mixed.wrapping_add(other.mixed);
    }
}

/// SplitMix64's finalizer.
#[inline(always)]
pub(super) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub(super) fn item(producer: usize, seq: u64) -> u64 {
    ((producer as u64) << SEQ_BITS) | seq
}

/// Per-producer order, checked by a consumer of a FIFO subject.
pub(super) struct OrderCheck {
    pub(super) enabled: bool,
    pub(super) last: Vec<Option<u64>>,
}

impl OrderCheck {
    pub(super) fn new(enabled: bool, producers: usize) -> Self {
        Self {
            enabled,
            last: vec![None; producers],
        }
    }

    #[inline(always)]
    pub(super) fn see(&mut self, item: u64) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        let producer = (item >> SEQ_BITS) as usize;
        let seq = item & ((1 << SEQ_BITS) - 1);
        let last = self
            .last
            .get_mut(producer)
            .ok_or_else(|| format!("item {item:#x} names producer {producer}, which never ran"))?;
        if let Some(before) = *last
            && seq <= before
        {
            return Err(format!(
                "FIFO broken: producer {producer}'s item {seq} arrived after its item {before}"
            ));
        }
        *last = Some(seq);
        Ok(())
    }
}

/// What a worker thread reports.
pub(super) struct Outcome {
    pub(super) pushed: Tally,
    pub(super) popped: Tally,
    pub(super) started: Instant,
    pub(super) ended: Instant,
}

/// Empties `bag` after a run and checks that everything pushed came out exactly once.
pub(super) fn drain_and_check<S: BagSubject>(
    bag: &S,
    prefilled: Tally,
    outcomes: &[Outcome],
) -> Result<u64, String> {
    let mut pushed = prefilled;
    let mut popped = Tally::default();
    for outcome in outcomes {
        pushed.merge(outcome.pushed);
        popped.merge(outcome.popped);
    }
    let worker = bag.worker();
    while let Some(item) = worker.try_pop() {
        popped.add(item);
        if popped.count > pushed.count {
            return Err(format!(
                "{} items popped but only {} pushed",
                popped.count, pushed.count
            ));
        }
    }
    if popped != pushed {
        return Err(format!(
            "pushed {pushed:?} but popped {popped:?}: an item was lost or duplicated"
        ));
    }
    let operations: u64 = outcomes
        .iter()
        .map(|o| o.pushed.count + o.popped.count)
        .sum();
    Ok(operations)
}

/// The fewest successful operations one thread did divided by the most: 1 when they shared
/// the run evenly, near 0 when one of them ran (almost) alone.
pub(super) fn balance(outcomes: &[Outcome]) -> f64 {
    let operations = outcomes.iter().map(|o| o.pushed.count + o.popped.count);
    let (fewest, most) = operations.fold((u64::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if most == 0 {
        0.0
    } else {
        fewest as f64 / most as f64
    }
}
