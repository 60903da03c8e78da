//! The statistics of a run: medians, and ratios paired by round.

/// Per-round ratios of two subjects' round values, summarised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paired {
    /// Median of the per-round ratios.
    pub median: f64,
    /// Smallest per-round ratio.
    pub min: f64,
    /// Largest per-round ratio.
    pub max: f64,
    /// Rounds with a ratio.
    pub rounds: usize,
    /// Rounds whose ratio satisfied the `won` test given to [`paired`].
    pub won: usize,
}

/// Pairs `ours[i]` with `peer[i]` (the same round) and summarises the ratios; a round whose
/// peer value is zero, or where either value is not finite, is left out. A round is won when
/// `won` holds for its ratio. `None` without rounds.
///
/// ```
/// use pitlane_bench::results::Better;
/// use pitlane_bench::stats::paired;
///
/// // ns per item, lower is better: ours was faster in two rounds of three.
/// let p = paired(&[2.0, 3.0, 9.0], &[4.0, 4.0, 6.0], |r| Better::Lower.ours_better(r)).unwrap();
/// assert_eq!((p.median, p.min, p.max, p.rounds, p.won), (0.75, 0.5, 1.5, 3, 2));
/// ```
pub fn paired(ours: &[f64], peer: &[f64], won: impl Fn(f64) -> bool) -> Option<Paired> {
    let per_round: Vec<f64> = ours
        .iter()
        .zip(peer)
        .filter(|(o, p)| o.is_finite() && p.is_finite() && **p != 0.0)
        .map(|(o, p)| o / p)
        .collect();
    let (median, min, max) = summarize(&per_round)?;
    let won = per_round.iter().filter(|&&r| won(r)).count();
    Some(Paired {
        median,
        min,
        max,
        rounds: per_round.len(),
        won,
    })
}

/// The median of `samples` (mean of the middle two for an even count). `None` when empty or
/// when a sample is NaN.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Summarises one subject's samples of one metric: `(median, min, max)`.
pub fn summarize(samples: &[f64]) -> Option<(f64, f64, f64)> {
    let median = median(samples)?;
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((median, min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        assert_eq!(summarize(&[5.0, 1.0, 9.0, 2.0, 4.0]), Some((4.0, 1.0, 9.0)));
    }
}
