//! Summary statistics for experiment results: mean, percentiles, the five-point Tukey summary of seed 000
//! Fig. 16, and a confidence interval for the mean.

/// Summary of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub p95: f64,
    pub p99: f64,
    pub stddev: f64,
    /// Half-width of the 95 % confidence interval of the mean (normal approximation).
    pub ci95: f64,
}

impl Summary {
    /// Summarises `values` (NaNs ignored); `None` when there is nothing to summarise.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let stddev = var.sqrt();
        Some(Summary {
            n,
            mean,
            min: v[0],
            max: v[n - 1],
            p25: percentile_sorted(&v, 25.0),
            median: percentile_sorted(&v, 50.0),
            p75: percentile_sorted(&v, 75.0),
            p95: percentile_sorted(&v, 95.0),
            p99: percentile_sorted(&v, 99.0),
            stddev,
            ci95: 1.96 * stddev / (n as f64).sqrt(),
        })
    }

    /// The five-point summary (min, 25th percentile, median, 75th percentile, max) of seed 000 Fig. 16.
    pub fn tukey(&self) -> [f64; 5] {
        [self.min, self.p25, self.median, self.p75, self.max]
    }
}

/// The `p`-th percentile (0-100) of sorted values, interpolating linearly between ranks.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// A ratio in percent, or NaN for 0/0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        f64::NAN
    } else {
        100.0 * part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_tukey() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.tukey(), [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.mean, 3.0);
        assert!((s.stddev - 2.5f64.sqrt()).abs() < 1e-12);
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn percentile_interpolates() {
        let v = [0.0, 10.0];
        assert_eq!(percentile_sorted(&v, 50.0), 5.0);
        assert_eq!(percentile_sorted(&v, 100.0), 10.0);
        assert!(percent(0, 0).is_nan());
        assert_eq!(percent(1, 4), 25.0);
    }
}
