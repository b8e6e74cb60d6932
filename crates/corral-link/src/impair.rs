//! What happens to one direction of an emulated link, decided packet by packet and reproducible from a
//! seed: loss (corral-sim's link models — Bernoulli or Gilbert–Elliott — the same implementation the
//! simulator uses), a bit-rate limit (packets leave one after the other at the link's rate), delay with
//! jitter, and reordering (a packet that skips the delay overtakes the ones in flight).

use corral_proto::{Duration, Instant, Rng};
use corral_sim::loss::{LinkModel, LinkState};

/// The impairments of one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairments {
    pub delay: Duration,
    /// Uniform in ±jitter around the delay (never below zero).
    pub jitter: Duration,
    pub loss: LinkModel,
    /// Bits per second; 0: unlimited.
    pub rate_bps: u64,
    /// Probability that a packet is sent without the delay (and so overtakes packets in flight).
    pub reorder: f64,
}

/// One direction's state. See the module docs.
pub struct Direction {
    cfg: Impairments,
    state: LinkState,
    rng: Rng,
    /// When the link is free again (rate limit).
    free_at: Instant,
    pub forwarded: u64,
    /// Bytes of the packets forwarded (IP headers included).
    pub forwarded_bytes: u64,
    pub dropped: u64,
    pub reordered: u64,
}

impl Direction {
    pub fn new(cfg: Impairments, seed: u64, stream: u64) -> Direction {
        Direction {
            cfg,
            state: LinkState::default(),
            rng: Rng::stream(seed, stream),
            free_at: Instant::ZERO,
            forwarded: 0,
            forwarded_bytes: 0,
            dropped: 0,
            reordered: 0,
        }
    }

    /// A packet of `len` bytes enters the link at `now`: when it leaves, or `None` if it is lost.
    pub fn admit(&mut self, now: Instant, len: usize) -> Option<Instant> {
        if self.cfg.loss.lose(&mut self.state, len, &mut self.rng).is_some() {
            self.dropped += 1;
            return None;
        }
        let mut at = now;
        if let Some(us) = (len as u64 * 8 * 1_000_000).checked_div(self.cfg.rate_bps) {
            let start = self.free_at.max(now);
            let tx = Duration::from_micros(us);
            self.free_at = start + tx;
            at = self.free_at;
        }
        self.forwarded += 1;
        self.forwarded_bytes += len as u64;
        if self.cfg.reorder > 0.0 && self.rng.chance(self.cfg.reorder) {
            self.reordered += 1;
            return Some(at);
        }
        let mut delay = self.cfg.delay.as_micros() as f64;
        if !self.cfg.jitter.is_zero() {
            let j = self.cfg.jitter.as_micros() as f64;
            delay += (self.rng.f64() * 2.0 - 1.0) * j;
        }
        Some(at + Duration::from_micros(delay.max(0.0) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(loss: LinkModel) -> Impairments {
        Impairments { delay: Duration::from_millis(50), jitter: Duration::ZERO, loss, rate_bps: 0, reorder: 0.0 }
    }

    #[test]
    fn loss_delay_rate_and_reordering_as_configured() {
        let mut d = Direction::new(cfg(LinkModel::Bernoulli { p: 0.1 }), 7, 0);
        let mut lost = 0;
        for i in 0..10_000u64 {
            match d.admit(Instant::from_millis(i), 100) {
                None => lost += 1,
                Some(at) => assert_eq!(at, Instant::from_millis(i) + Duration::from_millis(50)),
            }
        }
        assert!((900..1100).contains(&lost), "{lost}");
        // 1 Mb/s: a 1250-byte packet takes 10 ms; back-to-back packets queue behind each other.
        let mut r = Direction::new(Impairments { rate_bps: 1_000_000, ..cfg(LinkModel::Perfect) }, 1, 0);
        let t0 = Instant::from_secs(1);
        assert_eq!(r.admit(t0, 1250), Some(t0 + Duration::from_millis(60)));
        assert_eq!(r.admit(t0, 1250), Some(t0 + Duration::from_millis(70)));
        let mut o = Direction::new(Impairments { reorder: 0.5, ..cfg(LinkModel::Perfect) }, 3, 0);
        let fast =
            (0..1000).filter(|i| o.admit(Instant::from_millis(*i), 10) == Some(Instant::from_millis(*i))).count();
        assert!((400..600).contains(&fast), "{fast}");
        // Same seed, same decisions.
        let mut a = Direction::new(cfg(LinkModel::bursty(0.05, 4.0, 0.8)), 9, 1);
        let mut b = Direction::new(cfg(LinkModel::bursty(0.05, 4.0, 0.8)), 9, 1);
        for i in 0..1000 {
            assert_eq!(a.admit(Instant::from_millis(i), 80), b.admit(Instant::from_millis(i), 80));
        }
    }
}
