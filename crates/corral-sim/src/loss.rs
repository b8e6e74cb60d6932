//! Loss and interference models: per-link Bernoulli and Gilbert–Elliott loss, SNR-driven loss under
//! Rayleigh fading (seed 002, Eqs. (1)-(4)), and the Wi-Fi interferer.
//!
//! # What it owns
//! The *probabilities*: given a frame and a link, how likely is it lost; given a Wi-Fi load, when are the
//! bursts. Every random draw is made by the caller from a seeded [`Rng`] it passes in (the channel's
//! stream for link loss, the interferer's own stream for bursts), so the models themselves hold no RNG and
//! never read a clock.
//!
//! # SNR-driven loss (seed 002)
//! Seed 002 gives, for an IEEE 802.15.4 link under Rayleigh fading:
//! - Eq. (2), the bit error rate for an average SNR γ: `B = ½ (1 − √(γ / (1 + γ)))` (the closed form for
//!   coherent detection averaged over Rayleigh fading);
//! - the symbol error rate from it, 4 bits per O-QPSK/DSSS symbol: `S = 1 − (1 − B)⁴`;
//! - Eq. (1), the frame error rate of an `m`-byte frame (2 symbols per byte): `P = 1 − (1 − S)^{2m}`;
//! - Eq. (3), the loss after `r` MAC retransmissions: `C = P^{r+1}`;
//! - Eq. (4), the loss of a datagram of `f` fragments.
//!
//! The simulator applies Eqs. (1)-(2) to every frame ([`LinkModel::Snr`]); Eqs. (3) and (4) are then *not*
//! applied as formulas but emerge from the MAC retries and the fragmentation the simulator actually performs.
//! [`snr`] exposes all four for comparison. Two caveats, both documented in the tests: the Eq. (4) printed
//! in the seed, `C_f = Σ_{j=1..f} C·(1−P)^{j−1}`, is what reproduces its Table 4 but is not the loss of
//! independent fragments (`1 − (1 − C)^f`, which the simulator realises); and Table 4's absolute numbers
//! (1.23 % at 2.5 dB) are not reproduced by Eqs. (1)-(3) with γ as the plain linear SNR — the seed does not
//! say which SNR normalisation it used, so [`LinkModel::Snr`] takes the SNR as a per-bit γ in dB and the
//! lab calibrates it.
//!
//! # The Wi-Fi interferer
//! An IEEE 802.11g link (seed 000 §5.2.2: `iperf` UDP at a constant bit rate on Wi-Fi channel 13, which
//! overlaps IEEE 802.15.4 channels 25 and 26). Each Wi-Fi frame is one *burst* of energy: DATA (1500 B of
//! IP + 36 B of MAC header, LLC/SNAP and FCS at 54 Mb/s OFDM: 20 µs preamble/SIGNAL + 57 symbols of 4 µs =
//! 248 µs) + SIFS 10 µs + ACK (28 µs at 24 Mb/s) = **286 µs**. Frames are offered every `1500·8 / X` s for
//! an offered load of X Mb/s, and each one waits DIFS (28 µs) plus a random backoff of 0-15 slots of 9 µs
//! after the previous burst, so the link saturates near **31 Mb/s** (a 382 µs cycle) — the paper's Wi-Fi
//! nodes topped out at 28.5 Mb/s. The airtime fraction is `X / 12 Mb · 286 µs` per second, about 72 % at
//! 28.5 Mb/s ([`WifiParams::airtime_fraction`]).
//!
//! Effects on the IEEE 802.15.4 nodes in range on an overlapping channel: a CCA that overlaps a burst reports
//! busy with probability [`Interferer::cca_busy_prob`] (the Wi-Fi signal is not always above the CC2420/CC2520
//! energy-detection threshold), and every burst that overlaps a received frame corrupts it with probability
//! [`Interferer::corruption_prob`] — so the frame loss grows with both the load and the frame length. Wi-Fi
//! does not defer to IEEE 802.15.4 (seed 000 §5.2.2: "Wi-Fi MAC will not detect that wireless sensors are
//! sending").

use corral_proto::{Duration, Instant, Rng};

/// The loss model of one directed radio link, applied to every frame (data and ACK) that reaches the
/// receiver without colliding.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LinkModel {
    /// No loss.
    #[default]
    Perfect,
    /// Each frame is lost independently with probability `p`.
    Bernoulli { p: f64 },
    /// Gilbert–Elliott: a two-state Markov chain stepped once per frame on the link. In the good state a
    /// frame is lost with `loss_good`, in the bad state with `loss_bad`; after each frame the chain moves
    /// good→bad with `p_gb` and bad→good with `p_bg` (mean burst length `1/p_bg` frames).
    GilbertElliott { p_gb: f64, p_bg: f64, loss_good: f64, loss_bad: f64 },
    /// SNR-driven loss under Rayleigh fading (seed 002 Eqs. (1)-(2)); `snr_db` is the average per-bit SNR.
    Snr { snr_db: f64 },
    /// Eq. (1) with a given symbol error rate: a frame of `m` bytes is lost with `1 − (1 − ser)^{2m}`. For
    /// seed 002's Table 4, whose SNRs Eqs. (1)-(2) do not reproduce: [`snr::table4_symbol_error_rate`]
    /// reads the symbol error rate back from the table's unfragmented column.
    SymbolErrors { ser: f64 },
}

/// Timed outages of a link (seed 003 §4: "we generate a packet loss event by using a randomly generated
/// number at the AP every second"): every `period` a number is drawn; with probability `p` the link goes
/// down for `duration` — every datagram either way is lost — unless it is down already. The paper's own
/// trace (its Fig. 12: readings 39–43, 500 ms apart, lost with "network unreachable") shows an outage of
/// about 2.5 s, which is why one event loses a burst of readings rather than one.
///
/// The draws are made on the clock, whether or not anything is sent, so the outages a run sees do not
/// depend on its traffic; the caller passes the link's own seeded stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outages {
    pub p: f64,
    pub period: Duration,
    pub duration: Duration,
}

/// Where an [`Outages`] process is: its next draw and the end of the current outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutageState {
    next_draw: Instant,
    down_until: Instant,
}

impl Outages {
    /// Whether the link is down at `now`; makes the draws due up to `now` (the first at time zero).
    pub fn down(&self, state: &mut OutageState, now: Instant, rng: &mut Rng) -> bool {
        if self.period.is_zero() {
            return false;
        }
        while state.next_draw <= now {
            let t = state.next_draw;
            if t >= state.down_until && rng.chance(self.p) {
                state.down_until = t + self.duration;
            }
            state.next_draw = t + self.period;
        }
        now < state.down_until
    }
}

/// Why a frame was lost by a link model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelLoss {
    Bernoulli,
    Burst,
    Snr,
}

/// Per-link state of a model (the Gilbert–Elliott chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkState {
    pub bad: bool,
}

impl LinkModel {
    /// A Gilbert–Elliott model with the given mean loss and mean burst length (frames), loss-free in the
    /// good state and lossy (`loss_bad`) in the bad one.
    pub fn bursty(mean_loss: f64, mean_burst: f64, loss_bad: f64) -> LinkModel {
        let p_bg = 1.0 / mean_burst.max(1.0);
        // Stationary P(bad) = p_gb / (p_gb + p_bg) = mean_loss / loss_bad.
        let pi_bad = (mean_loss / loss_bad).clamp(0.0, 0.999);
        let p_gb = pi_bad * p_bg / (1.0 - pi_bad);
        LinkModel::GilbertElliott { p_gb, p_bg, loss_good: 0.0, loss_bad }
    }

    /// Decides whether a frame of `phy_bytes` bytes (PHY overhead included) is lost, drawing from `rng`.
    pub fn lose(&self, state: &mut LinkState, phy_bytes: usize, rng: &mut Rng) -> Option<ModelLoss> {
        match *self {
            LinkModel::Perfect => None,
            LinkModel::Bernoulli { p } => rng.chance(p).then_some(ModelLoss::Bernoulli),
            LinkModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                let lost = rng.chance(if state.bad { loss_bad } else { loss_good });
                state.bad = if state.bad { !rng.chance(p_bg) } else { rng.chance(p_gb) };
                lost.then_some(ModelLoss::Burst)
            }
            LinkModel::Snr { snr_db } => {
                rng.chance(snr::frame_error_rate(snr::db_to_linear(snr_db), phy_bytes)).then_some(ModelLoss::Snr)
            }
            LinkModel::SymbolErrors { ser } => {
                rng.chance(snr::frame_error_rate_of_ser(ser, phy_bytes)).then_some(ModelLoss::Snr)
            }
        }
    }

    /// The long-run frame loss probability of the model for a frame of `phy_bytes` bytes.
    pub fn mean_loss(&self, phy_bytes: usize) -> f64 {
        match *self {
            LinkModel::Perfect => 0.0,
            LinkModel::Bernoulli { p } => p,
            LinkModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                let pi_bad = if p_gb + p_bg > 0.0 { p_gb / (p_gb + p_bg) } else { 0.0 };
                pi_bad * loss_bad + (1.0 - pi_bad) * loss_good
            }
            LinkModel::Snr { snr_db } => snr::frame_error_rate(snr::db_to_linear(snr_db), phy_bytes),
            LinkModel::SymbolErrors { ser } => snr::frame_error_rate_of_ser(ser, phy_bytes),
        }
    }
}

/// Seed 002's equations, as plain functions.
pub mod snr {
    /// dB to a linear power ratio.
    pub fn db_to_linear(db: f64) -> f64 {
        10f64.powf(db / 10.0)
    }

    /// Eq. (2): bit error rate under Rayleigh fading for an average SNR `gamma` (linear).
    pub fn bit_error_rate(gamma: f64) -> f64 {
        if gamma <= 0.0 {
            return 0.5;
        }
        0.5 * (1.0 - (gamma / (1.0 + gamma)).sqrt())
    }

    /// The O-QPSK/DSSS symbol error rate: a symbol carries 4 bits.
    pub fn symbol_error_rate(gamma: f64) -> f64 {
        1.0 - (1.0 - bit_error_rate(gamma)).powi(4)
    }

    /// Eq. (1): frame error rate of an `m`-byte frame (2 symbols per byte).
    pub fn frame_error_rate(gamma: f64, m: usize) -> f64 {
        1.0 - (1.0 - symbol_error_rate(gamma)).powf(2.0 * m as f64)
    }

    /// Eq. (1) for a symbol error rate `ser`.
    pub fn frame_error_rate_of_ser(ser: f64, m: usize) -> f64 {
        1.0 - (1.0 - ser).powf(2.0 * m as f64)
    }

    /// Seed 002 Table 4, as legible in the OCR: the application-layer loss `C_f` (%) of a datagram of `f`
    /// full frames (133 B with the PHY header), `f` = 1..12, at SNR 2.5, 2, 1.5 and 1 dB.
    pub const TABLE4_SNR_DB: [f64; 4] = [2.5, 2.0, 1.5, 1.0];
    pub const TABLE4: [[f64; 4]; 12] = [
        [1.23, 5.20, 16.78, 39.64],
        [2.05, 7.91, 22.82, 47.82],
        [2.59, 9.33, 24.99, 49.51],
        [2.96, 10.08, 25.77, 49.86],
        [3.20, 10.46, 26.06, 49.94],
        [3.37, 10.67, 26.16, 49.95],
        [3.47, 10.77, 26.19, 49.95],
        [3.55, 10.83, 26.21, 49.95],
        [3.59, 10.86, 26.21, 49.95],
        [3.63, 10.87, 26.21, 49.95],
        [3.65, 10.88, 26.21, 49.95],
        [3.66, 10.88, 26.21, 49.95],
    ];

    /// Table 4's `C_f` (a fraction) at `snr_db` (one of [`TABLE4_SNR_DB`]) for `f` fragments (1..=12).
    pub fn table4(snr_db: f64, f: usize) -> Option<f64> {
        let col = TABLE4_SNR_DB.iter().position(|s| (s - snr_db).abs() < 1e-9)?;
        Some(TABLE4.get(f.checked_sub(1)?)?[col] / 100.0)
    }

    /// The symbol error rate that gives Table 4's unfragmented loss at `snr_db`: `P = C₁^{1/(r+1)}` (Eq. (3)
    /// backwards, `r` = 3 MAC retransmissions), then `S = 1 − (1 − P)^{1/(2·133)}` (Eq. (1) backwards).
    pub fn table4_symbol_error_rate(snr_db: f64) -> Option<f64> {
        let p = table4(snr_db, 1)?.powf(0.25);
        Some(1.0 - (1.0 - p).powf(1.0 / 266.0))
    }

    /// Eq. (3): loss after `r` MAC retransmissions of a frame with error rate `p`.
    pub fn mac_loss(p: f64, r: u32) -> f64 {
        p.powi(r as i32 + 1)
    }

    /// Eq. (4) as printed in seed 002 (it reproduces the seed's Table 4).
    pub fn fragmented_loss_seed(c: f64, p: f64, f: u32) -> f64 {
        (1..=f).map(|j| c * (1.0 - p).powi(j as i32 - 1)).sum()
    }

    /// The loss of a datagram of `f` fragments each lost independently with `c` (what the simulator does).
    pub fn fragmented_loss_independent(c: f64, f: u32) -> f64 {
        1.0 - (1.0 - c).powi(f as i32)
    }
}

/// The Wi-Fi link's PHY and MAC timing (IEEE 802.11g ERP-OFDM). See the module docs for the numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WifiParams {
    /// IP datagram size of each Wi-Fi frame (1500 B, `iperf` UDP at the MTU).
    pub frame_bytes: u32,
    /// Energy-on-air time of one frame exchange: DATA + SIFS + ACK (286 µs at 54 Mb/s).
    pub burst: Duration,
    /// DIFS (28 µs with the short slot).
    pub difs: Duration,
    /// Slot time (9 µs).
    pub slot: Duration,
    /// CWmin (15): the backoff is uniform in 0..=CWmin slots.
    pub cw_min: u32,
}

impl Default for WifiParams {
    fn default() -> Self {
        WifiParams {
            frame_bytes: 1500,
            burst: Duration::from_micros(286),
            difs: Duration::from_micros(28),
            slot: Duration::from_micros(9),
            cw_min: 15,
        }
    }
}

impl WifiParams {
    /// Interval between frames at an offered load of `mbps`, or `None` for no traffic.
    pub fn interval(&self, mbps: f64) -> Option<Duration> {
        (mbps > 0.0).then(|| Duration::from_secs_f64(f64::from(self.frame_bytes) * 8.0 / (mbps * 1e6)))
    }

    /// The mean saturation cycle: burst + DIFS + mean backoff.
    pub fn saturated_cycle(&self) -> Duration {
        self.burst + self.difs + Duration::from_micros(self.slot.as_micros() * u64::from(self.cw_min) / 2)
    }

    /// The throughput at which the link saturates, in Mb/s (≈ 31 Mb/s by default).
    pub fn saturation_mbps(&self) -> f64 {
        f64::from(self.frame_bytes) * 8.0 / self.saturated_cycle().as_secs_f64() / 1e6
    }

    /// Fraction of time the channel carries Wi-Fi energy at an offered load of `mbps` (mean, ignoring
    /// backoff jitter below saturation).
    pub fn airtime_fraction(&self, mbps: f64) -> f64 {
        let carried = mbps.min(self.saturation_mbps()).max(0.0);
        carried * 1e6 / (f64::from(self.frame_bytes) * 8.0) * self.burst.as_secs_f64()
    }
}

/// Which nodes an interferer reaches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reach {
    /// Every node on an overlapping channel (a room-sized testbed: Wi-Fi power dwarfs IEEE 802.15.4).
    All,
    /// Nodes with a position within `radius` of `(x, y)`.
    Within { x: f64, y: f64, radius: f64 },
}

/// A Wi-Fi link generating interference, with a time-varying offered load.
#[derive(Debug, Clone, PartialEq)]
pub struct Interferer {
    /// The IEEE 802.11 channel (1-13); it overlaps IEEE 802.15.4 channels whose centre lies within 11 MHz.
    pub wifi_channel: u8,
    /// Offered load in Mb/s from each time on: `(from, mbps)`, sorted by time. Before the first entry the
    /// load is zero.
    pub load: Vec<(Instant, f64)>,
    /// Probability that a CCA overlapping a burst reports busy.
    pub cca_busy_prob: f64,
    /// Probability that one burst overlapping a received frame corrupts it.
    pub corruption_prob: f64,
    pub reach: Reach,
    pub wifi: WifiParams,
}

impl Interferer {
    /// A constant load on Wi-Fi channel 13 reaching every node (seed 000's setup), with the default
    /// detection and corruption probabilities (0.5 and 0.1; uncalibrated — see the module docs).
    pub fn constant(wifi_channel: u8, mbps: f64) -> Interferer {
        Interferer {
            wifi_channel,
            load: vec![(Instant::ZERO, mbps)],
            cca_busy_prob: 0.5,
            corruption_prob: 0.1,
            reach: Reach::All,
            wifi: WifiParams::default(),
        }
    }

    /// The offered load at `t`.
    pub fn load_at(&self, t: Instant) -> f64 {
        self.load.iter().take_while(|(from, _)| *from <= t).last().map_or(0.0, |(_, l)| *l)
    }

    /// The first load change strictly after `t`.
    pub fn next_change(&self, t: Instant) -> Option<Instant> {
        self.load.iter().map(|(from, _)| *from).find(|from| *from > t)
    }

    /// Whether the Wi-Fi channel overlaps IEEE 802.15.4 channel `ieee_channel` (11-26).
    pub fn overlaps(&self, ieee_channel: u8) -> bool {
        wifi_overlaps(self.wifi_channel, ieee_channel)
    }
}

/// Whether 20 MHz Wi-Fi channel `wifi` (centre 2407 + 5·c MHz) overlaps 2 MHz IEEE 802.15.4 channel `ieee`
/// (centre 2405 + 5·(k − 11) MHz): the centres are less than 10 + 1 MHz apart.
pub fn wifi_overlaps(wifi: u8, ieee: u8) -> bool {
    let wifi_centre = 2407 + 5 * i32::from(wifi);
    let ieee_centre = 2405 + 5 * (i32::from(ieee) - 11);
    (wifi_centre - ieee_centre).abs() < 11
}

/// The burst process of one interferer: CBR arrivals with 802.11 DCF spacing (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct BurstProcess {
    pub(crate) on: bool,
    /// Bursts started so far (a receiver compares it before and after a frame).
    pub(crate) count: u32,
    pub(crate) last_off: Instant,
    next_nominal: Instant,
    pub(crate) rng: Rng,
}

impl BurstProcess {
    pub(crate) fn new(rng: Rng) -> BurstProcess {
        BurstProcess { on: false, count: 0, last_off: Instant::ZERO, next_nominal: Instant::ZERO, rng }
    }

    /// The start of the next burst after the channel went idle at `idle_since` (`now` ≥ it), or the next
    /// load change to re-evaluate at when the load is zero.
    pub(crate) fn next_start(&mut self, cfg: &Interferer, now: Instant, idle_since: Instant) -> Option<Instant> {
        let Some(interval) = cfg.wifi.interval(cfg.load_at(now)) else {
            self.next_nominal = Instant::ZERO;
            return cfg.next_change(now);
        };
        let backoff = cfg.wifi.slot.saturating_mul(self.rng.range_inclusive(0, u64::from(cfg.wifi.cw_min)));
        let earliest = idle_since + cfg.wifi.difs + backoff;
        let nominal = if self.next_nominal == Instant::ZERO { now } else { self.next_nominal };
        let start = nominal.max(earliest).max(now);
        // No credit accumulates while saturated: the next frame is offered one interval after this one.
        self.next_nominal = start.max(nominal) + interval;
        // A load change before the start is picked up at the next burst's end; good enough at ms scale.
        Some(start)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn outages_start_on_the_period_and_last_their_duration() {
        let o = Outages { p: 1.0, period: Duration::from_secs(1), duration: Duration::from_millis(2500) };
        let (mut s, mut rng) = (OutageState::default(), Rng::new(1));
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        // Down from 0 to 2.5 s; the draws at 1 s and 2 s fall inside it; the one at 3 s starts the next.
        assert!(o.down(&mut s, at(0), &mut rng));
        assert!(o.down(&mut s, at(2499), &mut rng));
        assert!(!o.down(&mut s, at(2500), &mut rng));
        assert!(!o.down(&mut s, at(2999), &mut rng));
        assert!(o.down(&mut s, at(3000), &mut rng));
    }

    #[test]
    fn outages_take_the_share_of_draws_their_probability_says() {
        let o = Outages { p: 0.1, period: Duration::from_secs(1), duration: Duration::from_millis(500) };
        let (mut s, mut rng) = (OutageState::default(), Rng::new(7));
        let down = (0..20_000u64).filter(|k| o.down(&mut s, Instant::ZERO + Duration::from_secs(*k), &mut rng)).count();
        assert!((1_700..2_300).contains(&down), "{down} of 20000 draws");
    }

    use super::*;

    #[test]
    fn wifi_13_overlaps_25_and_26() {
        assert!(wifi_overlaps(13, 25) && wifi_overlaps(13, 26));
        assert!(!wifi_overlaps(1, 26) && !wifi_overlaps(13, 11));
    }

    #[test]
    fn wifi_saturation_and_airtime() {
        let w = WifiParams::default();
        let sat = w.saturation_mbps();
        assert!((30.0..32.5).contains(&sat), "{sat}");
        let f = w.airtime_fraction(28.5);
        assert!((0.65..0.75).contains(&f), "{f}");
        assert!(w.airtime_fraction(5.0) < w.airtime_fraction(15.0));
        assert_eq!(w.airtime_fraction(100.0), w.airtime_fraction(sat));
    }

    #[test]
    fn seed_002_eq4_as_printed_reproduces_table_4_shape() {
        // Table 4 at 1 dB: C = 39.64 % for f = 1, 47.82 % for f = 2, saturating at 49.95 %. With P = C^(1/4)
        // (Eq. (3), r = 3) the printed Eq. (4) gives exactly these.
        let c = 0.3964f64;
        let p = c.powf(0.25);
        assert!((snr::fragmented_loss_seed(c, p, 2) - 0.4782).abs() < 5e-4);
        assert!((snr::fragmented_loss_seed(c, p, 12) - 0.4995).abs() < 5e-4);
        // Independent fragments lose more.
        assert!(snr::fragmented_loss_independent(c, 2) > snr::fragmented_loss_seed(c, p, 2));
    }

    #[test]
    fn table4_read_backwards_gives_its_unfragmented_column() {
        for s in snr::TABLE4_SNR_DB {
            let ser = snr::table4_symbol_error_rate(s).unwrap();
            let p = LinkModel::SymbolErrors { ser }.mean_loss(133);
            assert!((snr::mac_loss(p, 3) - snr::table4(s, 1).unwrap()).abs() < 1e-9, "{s} dB");
        }
        assert_eq!(snr::table4(3.0, 1), None);
        assert_eq!(snr::table4(1.0, 13), None);
    }

    #[test]
    fn snr_loss_decreases_with_snr_and_grows_with_length() {
        let lo = LinkModel::Snr { snr_db: 30.0 }.mean_loss(133);
        let hi = LinkModel::Snr { snr_db: 40.0 }.mean_loss(133);
        assert!(hi < lo && lo < 1.0 && hi > 0.0);
        assert!(LinkModel::Snr { snr_db: 30.0 }.mean_loss(20) < lo);
        assert!((snr::mac_loss(0.5, 3) - 0.0625).abs() < 1e-12);
    }

    #[test]
    fn bursty_model_has_the_requested_mean() {
        let m = LinkModel::bursty(0.1, 5.0, 0.8);
        assert!((m.mean_loss(0) - 0.1).abs() < 1e-9);
        let mut rng = Rng::new(3);
        let mut st = LinkState::default();
        let lost = (0..100_000).filter(|_| m.lose(&mut st, 50, &mut rng).is_some()).count();
        assert!((8_000..12_000).contains(&lost), "{lost}");
    }
}
