//! corral patch: dimpl's own clock type, so that its caller's time reaches it without a clock read.
//!
//! Upstream dimpl takes `std::time::Instant`, which has no constructor but `Instant::now()`: a sans-IO
//! caller on a clock of its own (a simulator's virtual time) had to read the real clock once to anchor
//! its offsets. [`Instant`] is a moment as the time since a zero its caller chooses — the start of a
//! simulation, the start of a process — with the arithmetic dimpl's timers use (`Instant + Duration`,
//! `Instant - Instant`, ordering). dimpl never reads a clock with it; only its own tests do
//! ([`Instant::now`], `cfg(test)`).

use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A moment on the caller's clock: the time since a zero the caller chooses (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(Duration);

impl Instant {
    /// The caller's zero.
    pub const ZERO: Instant = Instant(Duration::ZERO);

    /// The moment `since_zero` after the caller's zero.
    pub const fn from_duration(since_zero: Duration) -> Instant {
        Instant(since_zero)
    }

    /// The time since the caller's zero.
    pub const fn since_zero(self) -> Duration {
        self.0
    }

    /// `self + d`, or `None` past the end of time.
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d).map(Instant)
    }

    /// `self - d`, or `None` before the zero.
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(d).map(Instant)
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later (as `std::time::Instant`'s).
    pub fn duration_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// Same as [`Instant::duration_since`].
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }

    /// The real time since the first call in this process: for dimpl's own tests, which run on the real
    /// clock. Never compiled into a build that uses dimpl.
    #[cfg(test)]
    pub fn now() -> Instant {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        // An hour in, so that tests may step back from "now".
        Instant(START.get_or_init(std::time::Instant::now).elapsed() + Duration::from_secs(3600))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    fn sub(self, d: Duration) -> Instant {
        Instant(self.0 - d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}
