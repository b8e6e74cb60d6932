//! Received power on every radio link, for the capture effect: log-distance path loss with log-normal
//! shadowing.
//!
//! # What it owns
//! One number per directed radio link, computed once when the network is built: the power (dBm) at which
//! the receiver hears the sender. The topology still decides *who* hears whom ([`crate::Neighbors`]) and how
//! far apart they are; this
//! only says *how strongly*, so that a receiver facing two overlapping frames can keep the stronger one
//! ([`crate::RadioParams::capture_threshold_db`]; the MAC in [`crate::sim`] applies it). Nothing here draws
//! from a simulation stream or reads a clock: the shadowing of a link is a pure function of
//! [`Propagation::seed`] and the two node indices, so it is the same in both directions and in every run
//! on that topology, whatever the simulation seed — one room, measured many times.
//!
//! # The model
//! `P_rx = P_tx − PL(d₀) − 10·n·log10(d / d₀) − X`, with `X ~ N(0, σ²)` drawn per link (symmetric):
//! - `P_tx` = **0 dBm** ([`Propagation::tx_power_dbm`]): the CC2420's default output power (`PA_LEVEL` 31).
//! - `PL(d₀)` = **40.2 dB** at `d₀` = 1 m: free-space loss `20·log10(4π·d₀/λ)` at 2.44 GHz (λ = 12.3 cm).
//! - `n` = **3.0** ([`Propagation::exponent`]) and `σ` = **4 dB** ([`Propagation::shadowing_db`]): within
//!   the ranges measured for 2.4 GHz indoors (path-loss exponents of about 1.6-2 with line of sight in open
//!   halls up to 3-4 through walls; shadowing standard deviations of about 3-8 dB; Rappaport, *Wireless
//!   Communications*, 2nd ed., §4.11, in-building measurements). 4 dB is the conservative end for capture:
//!   more spread makes one frame dominate more often.
//!
//! Absolute levels (`P_tx`, `PL(d₀)`) cancel in the capture decision, which compares two received powers;
//! only `n`, `σ` and the geometry matter. Whether the geometry is used depends on the topology:
//! [`crate::Neighbors::Radius`] topologies have meaningful positions, so `d` is the distance (at least `d₀`);
//! [`crate::Neighbors::Explicit`] topologies (star, line, layered, Table 7) place nodes for drawing only and declare
//! who hears whom, so every declared link gets the same mean and differs by its shadowing alone.

use corral_proto::Rng;

/// The propagation model of a topology (see the module docs for the defaults and their sources).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Propagation {
    /// Transmit power, dBm (0).
    pub tx_power_dbm: f64,
    /// Path loss at 1 m, dB (40.2).
    pub ref_loss_db: f64,
    /// Path-loss exponent (3.0); used where positions are meaningful ([`crate::Neighbors::Radius`]).
    pub exponent: f64,
    /// Standard deviation of the per-link log-normal shadowing, dB (4.0). 0 makes every link of an explicit
    /// topology equally strong, so no frame is ever captured there.
    pub shadowing_db: f64,
    /// Seeds the shadowing draws (the environment, not the run).
    pub seed: u64,
}

impl Default for Propagation {
    fn default() -> Self {
        Propagation { tx_power_dbm: 0.0, ref_loss_db: 40.2, exponent: 3.0, shadowing_db: 4.0, seed: 1 }
    }
}

impl Propagation {
    /// The mean received power at distance `d` metres (clamped to at least 1 m), dBm.
    pub fn mean_dbm(&self, d: f64) -> f64 {
        self.tx_power_dbm - self.ref_loss_db - 10.0 * self.exponent * d.max(1.0).log10()
    }

    /// The shadowing of the link between nodes `a` and `b` (either order), dB: a standard normal draw
    /// (Box–Muller) scaled by σ, from a stream named by the unordered pair.
    pub fn shadowing(&self, a: usize, b: usize) -> f64 {
        if self.shadowing_db == 0.0 {
            return 0.0;
        }
        let (lo, hi) = (a.min(b) as u64, a.max(b) as u64);
        let mut rng = Rng::stream(self.seed, 0x5ad0_0000_0000_0000 ^ (lo << 24) ^ hi);
        let u1 = 1.0 - rng.f64(); // (0, 1]
        let u2 = rng.f64();
        self.shadowing_db * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// The power at which node `b` hears node `a`, `d` metres away, dBm. The topology says what `d` is
    /// (the distance between meaningful positions, or 1 m where positions are for drawing only).
    pub fn rx_dbm(&self, d: f64, a: usize, b: usize) -> f64 {
        self.mean_dbm(d) - self.shadowing(a, b)
    }
}

/// dBm to mW.
pub fn dbm_to_mw(dbm: f64) -> f64 {
    10f64.powf(dbm / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadowing_is_symmetric_seeded_and_has_the_requested_spread() {
        let p = Propagation::default();
        assert_eq!(p.shadowing(3, 7), p.shadowing(7, 3));
        assert_ne!(p.shadowing(3, 7), p.shadowing(3, 8));
        let other = Propagation { seed: 2, ..p };
        assert_ne!(p.shadowing(3, 7), other.shadowing(3, 7));
        let v: Vec<f64> = (0..4000).map(|i| p.shadowing(i, i + 1)).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!(mean.abs() < 0.3 && (sd - 4.0).abs() < 0.3, "mean {mean}, sd {sd}");
    }

    #[test]
    fn path_loss_grows_30_db_per_decade() {
        let p = Propagation::default();
        assert!((p.mean_dbm(1.0) + 40.2).abs() < 1e-9);
        assert!((p.mean_dbm(10.0) - p.mean_dbm(100.0) - 30.0).abs() < 1e-9);
        assert_eq!(p.mean_dbm(0.1), p.mean_dbm(1.0));
    }
}
