//! The Recipient's replay window (RFC 8613 §7.4): a sliding window over the Partial IVs of received
//! requests, `size` wide (32 by default), like IPsec's anti-replay window (RFC 4303 §3.4.3).

/// See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    size: usize,
    /// The highest Partial IV accepted, if any.
    top: Option<u64>,
    /// Bit i set: `top - i` was accepted (bit 0 is `top` itself).
    seen: u128,
    /// After a restart that lost the window (RFC 8613 Appendix B.1.2): nothing is accepted until the peer
    /// has proven freshness (Echo) and [`ReplayWindow::resynchronise`] set the window.
    unsynchronised: bool,
}

/// Why a Partial IV was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Seen before.
    Replay,
    /// Older than the window reaches: it cannot be told from a replay.
    TooOld,
    /// The window was lost in a restart; freshness must be established first.
    Unsynchronised,
}

impl ReplayWindow {
    /// A window of `size` (1 to 128) Partial IVs.
    pub fn new(size: usize) -> ReplayWindow {
        ReplayWindow { size: size.clamp(1, 128), top: None, seen: 0, unsynchronised: false }
    }

    pub(crate) fn desynchronise(&mut self) {
        self.unsynchronised = true;
    }

    pub fn is_synchronised(&self) -> bool {
        !self.unsynchronised
    }

    /// Whether `piv` would be accepted, without accepting it (decryption comes between check and update,
    /// so that a forged message cannot move the window).
    pub fn check(&self, piv: u64) -> Result<(), Refusal> {
        if self.unsynchronised {
            return Err(Refusal::Unsynchronised);
        }
        let Some(top) = self.top else { return Ok(()) };
        if piv > top {
            return Ok(());
        }
        let age = top - piv;
        if age >= self.size as u64 {
            return Err(Refusal::TooOld);
        }
        if self.seen & (1u128 << age) != 0 {
            return Err(Refusal::Replay);
        }
        Ok(())
    }

    /// Records `piv` as received (after [`ReplayWindow::check`] and a successful decryption).
    pub fn accept(&mut self, piv: u64) {
        match self.top {
            Some(top) if piv <= top => self.seen |= 1u128 << (top - piv),
            Some(top) => {
                let shift = piv - top;
                self.seen = if shift >= 128 { 0 } else { self.seen << shift };
                self.seen |= 1;
                self.top = Some(piv);
            }
            None => {
                self.seen = 1;
                self.top = Some(piv);
            }
        }
        if self.size < 128 {
            self.seen &= (1u128 << self.size) - 1;
        }
    }

    /// Freshness was proven (an Echo round trip) for a request with `piv`: from now on only Partial IVs
    /// above it are new.
    pub fn resynchronise(&mut self, piv: u64) {
        self.unsynchronised = false;
        self.top = Some(piv);
        // Everything at or below `piv` counts as seen: a replay of an older request must not pass.
        self.seen = if self.size >= 128 { u128::MAX } else { (1u128 << self.size) - 1 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_new_rejects_replays_and_old() {
        let mut w = ReplayWindow::new(32);
        for piv in [5, 3, 7, 6] {
            assert_eq!(w.check(piv), Ok(()));
            w.accept(piv);
        }
        assert_eq!(w.check(5), Err(Refusal::Replay));
        assert_eq!(w.check(4), Ok(()), "out of order, still in the window");
        w.accept(100);
        assert_eq!(w.check(68), Err(Refusal::TooOld));
        assert_eq!(w.check(69), Ok(()));
        assert_eq!(w.check(100), Err(Refusal::Replay));
        w.desynchronise();
        assert_eq!(w.check(1000), Err(Refusal::Unsynchronised));
        w.resynchronise(1000);
        assert_eq!(w.check(999), Err(Refusal::Replay));
        assert_eq!(w.check(1001), Ok(()));
    }
}
