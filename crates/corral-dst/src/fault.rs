//! The fault schedule of a seed: what goes wrong, when, and for how long, drawn up front from the seed's
//! own stream so that the schedule does not depend on the traffic.
//!
//! # What it owns
//! [`Fault`] and [`schedule`]. Each kind of fault recurs at random intervals of its own, so they meet in
//! every combination: a crash during a partition while the store is slow, a reboot mid-join. Adding a
//! fault: a variant here, a line in [`schedule`] and its effect in `world::World::apply`.

use corral_proto::{Duration, Instant, Rng};

/// One fault, starting at its scheduled time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// The gateway's process dies, now (`armed`: at the first moment after now when a store write is in
    /// flight, so between a write and its completion, or at the latest two minutes later) and restarts after
    /// `down` from what its store holds.
    Crash { armed: bool, down: Duration },
    /// Device `index` reboots, forgetting its groups, and is back after `down`.
    Reboot { index: usize, down: Duration },
    /// The gateway cannot reach `count` devices (from `first`, wrapping) for `span`.
    Partition { first: usize, count: usize, span: Duration },
    /// Every radio link loses in bursts (Gilbert–Elliott, mean loss `loss`) for `span`.
    LossBurst { loss: f64, span: Duration },
    /// Datagrams are duplicated (`duplicate`) or held back up to `max_delay` (`delay`), so reordered, for
    /// `span`.
    Jumble { duplicate: f64, delay: f64, max_delay: Duration, span: Duration },
    /// A spoofer sends a use or an observation in the victim's name every `every`, for `span`.
    Spoof { every: Duration, span: Duration },
    /// A burst of `count` malformed datagrams to the gateway.
    Garbage { count: u32 },
    /// Every store write takes seconds for `span`.
    StoreSlow { span: Duration },
    /// Every store write fails for `span`.
    StoreDown { span: Duration },
}

fn secs(rng: &mut Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.range_inclusive(lo * 1000, hi * 1000))
}

/// The kinds of fault by name, in [`schedule`]'s order: a set of them is a mask, bit `k` for `KINDS[k]`.
pub const KINDS: [&str; 9] =
    ["crash", "reboot", "partition", "loss", "jumble", "store-slow", "spoof", "garbage", "store-down"];

/// Every kind of fault.
pub const ALL: u16 = (1 << KINDS.len()) - 1;

/// The names of the kinds in `mask`, comma-separated.
pub fn names(mask: u16) -> String {
    KINDS.iter().enumerate().filter(|(k, _)| mask & (1 << k) != 0).map(|(_, n)| *n).collect::<Vec<_>>().join(",")
}

/// The mask of comma-separated kind names, or the name that is none.
pub fn parse(list: &str) -> Result<u16, String> {
    let mut mask = 0;
    for name in list.split(',').filter(|n| !n.is_empty()) {
        let k = KINDS.iter().position(|k| *k == name).ok_or_else(|| name.to_string())?;
        mask |= 1 << k;
    }
    Ok(mask)
}

/// The faults of kinds in `mask` of seed `seed`'s run of `length` over `devices` devices, in time order.
/// Each kind draws from a stream of its own, so a run with fewer kinds or a shorter length has the same
/// faults of the kinds it keeps, at the same times (what the minimiser needs).
pub fn schedule(seed: u64, mask: u16, length: Duration, devices: usize) -> Vec<(Instant, Fault)> {
    let end = Instant::ZERO + length;
    let mut out = Vec::new();
    // (mean gap lower bound, upper bound in s, how to draw one)
    type Draw = fn(&mut Rng, usize) -> Fault;
    let kinds: [(u64, u64, Draw); KINDS.len()] = [
        (120, 600, |r, _| Fault::Crash { armed: r.chance(0.6), down: secs(r, 1, 120) }),
        (60, 400, |r, n| Fault::Reboot { index: r.below(n as u64) as usize, down: secs(r, 1, 30) }),
        (120, 600, |r, n| Fault::Partition {
            first: r.below(n as u64) as usize,
            count: r.range_inclusive(1, (n as u64 / 2).max(1)) as usize,
            span: secs(r, 5, 180),
        }),
        (180, 900, |r, _| Fault::LossBurst { loss: 0.1 + r.f64() * 0.4, span: secs(r, 10, 120) }),
        (180, 900, |r, _| Fault::Jumble {
            duplicate: r.f64() * 0.3,
            delay: r.f64() * 0.3,
            max_delay: Duration::from_millis(r.range_inclusive(10, 3000)),
            span: secs(r, 10, 300),
        }),
        (180, 900, |r, _| Fault::StoreSlow { span: secs(r, 10, 120) }),
        (120, 600, |r, _| Fault::Spoof {
            every: Duration::from_millis(r.range_inclusive(200, 3000)),
            span: secs(r, 5, 60),
        }),
        (60, 600, |r, _| Fault::Garbage { count: r.range_inclusive(1, 50) as u32 }),
        (300, 1200, |r, _| Fault::StoreDown { span: secs(r, 5, 60) }),
    ];
    for (k, (lo, hi, draw)) in kinds.into_iter().enumerate() {
        if mask & (1 << k) == 0 {
            continue;
        }
        let rng = &mut Rng::stream(seed, 0xD57_F000 + k as u64);
        let mut t = Instant::ZERO + secs(rng, 10, hi);
        while t < end {
            out.push((t, draw(rng, devices)));
            t += secs(rng, lo, hi);
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}
