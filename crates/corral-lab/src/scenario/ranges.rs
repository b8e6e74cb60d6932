//! The range of every numeric input of a scenario file, in one table ([`FIELDS`]), checked when the scenario
//! parses: a probability outside [0, 1], a negative or not-a-number duration, a count of zero is refused
//! with an error that names the field, the value and the range — never run as something else (a loss of
//! 200 % as "always lost", −0.1 as a loss-free link, NaN ms as no delay).
//!
//! # What it owns
//! [`FIELDS`] and the walk over a parsed scenario ([`check`]): every numeric leaf of the scenario as TOML
//! (its defaults included) must match an entry of the table, and a sweep axis that sets a field is checked
//! against that field's range. What the table cannot say — values that contradict each other, names from a
//! list — stays with the section that owns it (`validate` beside each family's section). A unit test walks
//! every numeric field of the schema, so a field added without a range fails it.

use super::point::AxisValue;
use super::{err, Scenario, ScenarioError};
use std::fmt;

/// The values a numeric input may take: finite, within the bounds, and whole where the field counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
    /// `lo` itself is refused (a duration that must be above zero).
    pub above_lo: bool,
    /// `hi` itself is refused (a loss probability that must leave something through).
    pub below_hi: bool,
    /// Only whole numbers (counts, integer milliseconds).
    pub whole: bool,
}

impl Range {
    /// `[lo, hi]`.
    const fn closed(lo: f64, hi: f64) -> Range {
        Range { lo, hi, above_lo: false, below_hi: false, whole: false }
    }

    /// Whole numbers in `[lo, hi]`.
    const fn count(lo: f64, hi: f64) -> Range {
        Range { lo, hi, above_lo: false, below_hi: false, whole: true }
    }

    /// A probability: `[0, 1]`.
    const PROBABILITY: Range = Range::closed(0.0, 1.0);
    /// A loss probability below 1: `[0, 1)`.
    const LOSS: Range = Range { lo: 0.0, hi: 1.0, above_lo: false, below_hi: true, whole: false };
    /// Any finite number (a plotting coordinate, a seed).
    const FINITE: Range = Range::closed(f64::MIN, f64::MAX);

    /// Whether `v` is in range.
    pub fn holds(&self, v: f64) -> bool {
        v.is_finite()
            && (if self.above_lo { v > self.lo } else { v >= self.lo })
            && (if self.below_hi { v < self.hi } else { v <= self.hi })
            && (!self.whole || v.fract() == 0.0)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Range::FINITE {
            return f.write_str("any finite number");
        }
        let n = |x: f64| crate::record::num(x);
        let (open, close) = (if self.above_lo { "(" } else { "[" }, if self.below_hi { ")" } else { "]" });
        write!(f, "{}{open}{}, {}{close}", if self.whole { "a whole number in " } else { "" }, n(self.lo), n(self.hi))
    }
}

/// One numeric input: its path in the file (`*` stands for any table key or list index), what it is, its
/// range, and the sweep axis that sets it, if one does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Field {
    pub path: &'static str,
    pub what: &'static str,
    pub range: Range,
    pub axis: Option<&'static str>,
}

const fn f(path: &'static str, what: &'static str, range: Range) -> Field {
    Field { path, what, range, axis: None }
}

const fn axis(axis: &'static str, path: &'static str, what: &'static str, range: Range) -> Field {
    Field { path, what, range, axis: Some(axis) }
}

const MS_DAY: f64 = 86_400_000.0;
const S_DAY: f64 = 86_400.0;
/// A radio link's loss models (`[network] link`, `[usage.NAME] link`).
macro_rules! link {
    ($prefix:literal) => {
        [
            f(concat!($prefix, ".p"), "a frame's loss probability", Range::PROBABILITY),
            f(concat!($prefix, ".mean_loss"), "the mean loss probability", Range::PROBABILITY),
            f(concat!($prefix, ".burst"), "the mean burst length in frames", Range::closed(1.0, 1e6)),
            f(concat!($prefix, ".loss_bad"), "the loss probability inside a burst", Range::PROBABILITY),
            f(concat!($prefix, ".snr_db"), "the per-bit SNR in dB", Range::closed(-50.0, 100.0)),
        ]
    };
}

const NETWORK_LINK: [Field; 5] = link!("network.link");
const USAGE_LINK: [Field; 5] = link!("usage.*.link");

/// Every numeric input of a scenario file.
pub const FIELDS: &[Field] = &[
    axis("group", "network.group", "group members", Range::count(1.0, 1000.0)),
    f("network.layers.*", "devices in a hop layer", Range::count(1.0, 1000.0)),
    f("network.gateways", "gateways", Range::count(1.0, 16.0)),
    f("network.channels.*", "an IEEE 802.15.4 channel (2.4 GHz)", Range::count(11.0, 26.0)),
    f("network.width", "the floor's width in m (0: no floor)", Range::closed(0.0, 100_000.0)),
    f("network.height", "the floor's height in m (0: no floor)", Range::closed(0.0, 100_000.0)),
    f("network.radius", "the radio range in m (0: no floor)", Range::closed(0.0, 100_000.0)),
    f("network.topology_seed", "a placement seed", Range::FINITE),
    f("network.wired_delay_ms", "a one-way delay in ms", Range::closed(0.0, 60_000.0)),
    NETWORK_LINK[0],
    NETWORK_LINK[1],
    NETWORK_LINK[2],
    NETWORK_LINK[3],
    NETWORK_LINK[4],
    f("interference.wifi_channel", "an IEEE 802.11 channel (2.4 GHz)", Range::count(1.0, 14.0)),
    axis("wifi_mbps", "interference.mbps", "the Wi-Fi load in Mb/s", Range::closed(0.0, 100.0)),
    f("interference.schedule.*.0", "seconds after the first query", Range::closed(0.0, S_DAY)),
    f("interference.schedule.*.1", "the Wi-Fi load in Mb/s", Range::closed(0.0, 100.0)),
    axis(
        "processing_delay_ms",
        "calibration.processing_delay_ms",
        "CPU time per datagram in ms",
        Range::closed(0.0, 10_000.0),
    ),
    axis("rx_queue", "calibration.rx_queue", "waiting slots (−1: unlimited)", Range::count(-1.0, 10_000.0)),
    axis("cca_busy_prob", "calibration.cca_busy_prob", "a probability", Range::PROBABILITY),
    axis("corruption_prob", "calibration.corruption_prob", "a probability", Range::PROBABILITY),
    axis("delay", "entity.delay", "ms between member requests", Range::count(0.0, 60_000.0)),
    f("entity.timeout_ms", "the entity's timeout in ms", Range { above_lo: true, ..Range::count(0.0, MS_DAY) }),
    f("entity.parent_delay_ms", "ms between the parent's requests", Range::count(0.0, 60_000.0)),
    f(
        "entity.notify_step",
        "a reading's step in its resource's unit",
        Range { above_lo: true, ..Range::closed(0.0, 1e6) },
    ),
    axis("ack_timeout_ms", "transmission.ack_timeout_ms", "ACK_TIMEOUT in ms", Range::count(1.0, 600_000.0)),
    f("transmission.ack_random_factor", "ACK_RANDOM_FACTOR", Range::closed(1.0, 10.0)),
    f("transmission.max_retransmit", "MAX_RETRANSMIT", Range::count(0.0, 20.0)),
    axis("leisure_ms", "transmission.leisure_ms", "the leisure in ms", Range::count(0.0, 600_000.0)),
    f("workload.repetitions", "queries per point", Range::count(1.0, 1e6)),
    f("workload.quick_repetitions", "queries per point with --quick", Range::count(1.0, 1e6)),
    f("workload.pause_ms", "ms between a response and the next query", Range::count(0.0, MS_DAY)),
    f("workload.query_limit_s", "s a query may wait for its answer", Range::count(1.0, S_DAY)),
    f("workload.duration_s", "s of virtual time", Range::count(0.0, 7.0 * S_DAY)),
    f("workload.quick_duration_s", "s of virtual time with --quick", Range::count(0.0, 7.0 * S_DAY)),
    f("workload.replicates", "replicates per point", Range::count(1.0, 1000.0)),
    f("workload.quick_replicates", "replicates per point with --quick", Range::count(1.0, 1000.0)),
    f("usage.*.wifi_mbps", "the Wi-Fi load in Mb/s", Range::closed(0.0, 100.0)),
    f("usage.*.cca_busy_prob", "a probability", Range::PROBABILITY),
    f("usage.*.corruption_prob", "a probability", Range::PROBABILITY),
    USAGE_LINK[0],
    USAGE_LINK[1],
    USAGE_LINK[2],
    USAGE_LINK[3],
    USAGE_LINK[4],
    f("figure.*.paper.*.*.*", "a paper's coordinate", Range::FINITE),
    f("figure.*.band.0", "a band's start", Range::FINITE),
    f("figure.*.band.1", "a band's end", Range::FINITE),
    f("figure.*.y_range.*", "a y axis bound", Range::FINITE),
    f("figure.*.filter.*", "a value of the axis a figure picks points by", Range::FINITE),
    axis("consumers", "proxy.consumers", "simultaneous consumers", Range::count(1.0, 256.0)),
    f("proxy.cache_entries", "cache entries", Range::count(0.0, 100_000.0)),
    f("stream.count", "readings", Range::count(1.0, 1e6)),
    f("stream.size", "bytes of a reading", Range::count(1.0, 1024.0)),
    f("stream.interval_ms", "ms between readings", Range::count(1.0, MS_DAY)),
    axis("buffer", "stream.buffer", "readings outstanding", Range::count(1.0, 1024.0)),
    axis("loss", "stream.loss", "an error rate below 1", Range::LOSS),
    f("stream.outage_period_ms", "ms between the AP's draws", Range::count(1.0, MS_DAY)),
    f("stream.outage_ms", "ms an outage lasts", Range::count(1.0, MS_DAY)),
    f("stream.bandwidth_bps", "the link's bit rate in b/s", Range::count(1.0, 1e11)),
    f("stream.delay_ms", "a one-way delay in ms", Range::closed(0.0, 60_000.0)),
    f("emulated.interval_ms", "ms between the open-loop sender's GETs", Range::count(10.0, 10_000.0)),
    f("emulated.http_pause_ms", "ms the HTTP client pauses", Range::count(0.0, 10_000.0)),
    f("emulated.duration_s", "s of traffic per point", Range::count(1.0, 3600.0)),
    f("emulated.quick_duration_s", "s of traffic per point with --quick", Range::count(1.0, 3600.0)),
    f("emulated.http_bytes", "bytes of the HTTP resource", Range::count(0.0, 1e6)),
    axis("payload", "baseline.payload", "response body bytes", Range::count(1.0, 1200.0)),
    f("baseline.count", "transactions per point", Range::count(1.0, 100_000.0)),
    f("baseline.quick_count", "transactions per point with --quick", Range::count(1.0, 100_000.0)),
    axis("rate", "baseline.rate", "requests per second (0: one after the other)", Range::closed(0.0, 10_000.0)),
    axis("snr_db", "baseline.snr_db", "an SNR in dB (0: no loss)", Range::closed(0.0, 10.0)),
    f("baseline.tcp_max_rto_ms", "TCP's largest RTO in ms", Range::count(1000.0, 600_000.0)),
    f("baseline.ack_timeout_ms", "ACK_TIMEOUT in ms", Range::count(1.0, 600_000.0)),
    f("baseline.max_retransmit", "MAX_RETRANSMIT", Range::count(0.0, 20.0)),
    f("baseline.limit_s", "s of virtual time a point may take", Range::count(1.0, 7.0 * S_DAY)),
    f("baseline.tinycoap_max_payload", "bytes", Range::count(1.0, 1200.0)),
    f("baseline.coapblip_max_payload", "bytes", Range::count(1.0, 1200.0)),
    f("baseline.radio_speed", "a factor on every radio timing", Range::closed(0.1, 100.0)),
    f("multiparty.requests", "requests per client", Range::count(1.0, 100_000.0)),
    f("multiparty.quick_requests", "requests per client with --quick", Range::count(1.0, 100_000.0)),
    axis("interval_ms", "multiparty.interval_ms", "ms between a client's requests", Range::count(1.0, MS_DAY)),
    f("multiparty.first_ms", "ms before the first request", Range::count(0.0, MS_DAY)),
    f("multiparty.cache_entries", "cache entries", Range::count(0.0, 100_000.0)),
    f("multiparty.signature_ms", "ms a signature takes", Range::closed(0.0, 1000.0)),
    f("multiparty.nstart", "requests outstanding", Range::count(1.0, 65_535.0)),
    f("multiparty.contact_m", "the contact range in m", Range::closed(0.0, 1000.0)),
    f("multiparty.pktbuf_bytes", "packet buffer bytes (0: no byte bound)", Range::count(0.0, 1e9)),
    f("multiparty.queue_datagrams", "datagrams a queue holds", Range::count(1.0, 10_000.0)),
    f("churn.present", "a share", Range::PROBABILITY),
    f("churn.departures", "a share", Range::PROBABILITY),
    f("churn.clean", "a share", Range::PROBABILITY),
    axis(
        "lifetime_s",
        "churn.lifetime_s",
        "a registration lifetime in s (the registrant's floor is 60)",
        Range::count(60.0, 4_294_967_295.0),
    ),
    f("churn.query_period_s", "s between queries", Range::count(1.0, S_DAY)),
    f("churn.timeout_ms", "the entities' timeout in ms", Range::count(1.0, MS_DAY)),
    f("churn.schedule_seed", "a schedule seed", Range::FINITE),
    axis("hops", "dtls.hops", "radio hops", Range::count(1.0, 16.0)),
    f("dtls.mtu", "bytes of the largest DTLS datagram", Range::count(128.0, 1232.0)),
    f("dtls.limit_s", "s a point may run", Range::count(1.0, S_DAY)),
    axis(
        "follow",
        "sweep.follow",
        "a polling period in s (or \"observe\")",
        Range { above_lo: true, ..Range::closed(0.0, S_DAY) },
    ),
];

/// The parts of a scenario file the walk leaves to others: sweep values are checked per axis below,
/// `[[sensitivity]]` values when the variant parses, and the procedure and findings hold no numbers.
const NOT_INPUTS: &[&str] = &["sweep", "workload.quick_sweep", "sensitivity", "procedure", "finding"];

/// Whether a path (its segments: table keys, list indices as numbers) matches `pattern` (dot-separated, `*`
/// for any one segment). Segments, not a dotted string: a table key may hold a dot (a figure's paper label
/// "testbed (approx.)").
fn matches(pattern: &str, path: &[String]) -> bool {
    let mut q = path.iter();
    for a in pattern.split('.') {
        match q.next() {
            Some(b) if a == "*" || a == b => {}
            _ => return false,
        }
    }
    q.next().is_none()
}

/// The table's entry for a concrete path.
pub fn field(path: &[String]) -> Option<&'static Field> {
    FIELDS.iter().find(|f| matches(f.path, path))
}

/// The field a sweep axis sets, if the axis is numeric.
pub fn axis_field(axis: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.axis == Some(axis))
}

/// `path = value: what must be range` when the value is out of range.
fn check_value(f: &Field, at: &str, v: f64) -> Result<(), ScenarioError> {
    if f.range.holds(v) {
        return Ok(());
    }
    let shown = if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        format!("{v}")
    } else {
        crate::record::num(v)
    };
    err(format!("{at} = {shown}: {} must be {}", f.what, f.range))
}

/// Every numeric leaf of `v` under `path`, as `(path's segments, value)`.
pub(crate) fn numbers(path: &[String], v: &toml::Value, out: &mut Vec<(Vec<String>, f64)>) {
    let at = |k: String| {
        let mut p = path.to_vec();
        p.push(k);
        p
    };
    match v {
        toml::Value::Integer(i) => out.push((path.to_vec(), *i as f64)),
        toml::Value::Float(x) => out.push((path.to_vec(), *x)),
        toml::Value::Table(t) => {
            for (k, x) in t {
                let p = at(k.clone());
                if !NOT_INPUTS.contains(&p.join(".").as_str()) {
                    numbers(&p, x, out);
                }
            }
        }
        toml::Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| numbers(&at(i.to_string()), x, out)),
        _ => {}
    }
}

/// Checks every numeric input of a parsed scenario (its defaults included) and every numeric value of its
/// sweep axes against [`FIELDS`].
pub fn check(s: &Scenario) -> Result<(), ScenarioError> {
    let doc = toml::Value::try_from(s).map_err(|e| ScenarioError::Format(e.to_string()))?;
    let mut leaves = Vec::new();
    numbers(&[], &doc, &mut leaves);
    for (path, v) in leaves {
        let at = path.join(".");
        match field(&path) {
            Some(f) => check_value(f, &at, v)?,
            // A field of the format without a range: the walk test keeps this from shipping.
            None => return err(format!("{at} = {v}: no range is declared for this field")),
        }
    }
    for (section, sweep) in [("sweep", &s.sweep), ("workload.quick_sweep", &s.workload.quick_sweep)] {
        for (axis, values) in sweep {
            for v in values {
                if let (Some(f), Ok(AxisValue::Num(x))) = (axis_field(axis), AxisValue::from_toml(axis, v)) {
                    check_value(f, &format!("{section}.{axis}"), x)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{builtin, Usage, BUILTINS};

    /// Every built-in scenario as TOML with its defaults, and fig07 with the inputs no built-in gives (each
    /// loss model, a Wi-Fi schedule, a usage profile with every field, an entity timeout): together they
    /// hold every numeric field of the format.
    fn docs() -> Vec<(String, toml::Value)> {
        let mut out: Vec<(String, toml::Value)> = BUILTINS
            .iter()
            .map(|b| {
                let s = Scenario::parse(b.text).expect("a built-in parses");
                (b.name.to_string(), toml::Value::try_from(&s).expect("serializes"))
            })
            .collect();
        let fig07 = Scenario::parse(builtin("fig07-delay").expect("built in")).expect("parses");
        for (i, link) in [
            super::super::LinkSpec::Bernoulli { p: 0.1 },
            super::super::LinkSpec::Gilbert { mean_loss: 0.05, burst: 3.0, loss_bad: 0.8 },
            super::super::LinkSpec::Snr { snr_db: 2.0 },
        ]
        .into_iter()
        .enumerate()
        {
            let mut s = fig07.clone();
            s.network.link = link;
            s.interference.schedule = vec![(0.0, 5.0), (10.0, 20.0)];
            s.entity.timeout_ms = Some(5000);
            s.usage.insert(
                "u".into(),
                Usage { wifi_mbps: Some(10.0), cca_busy_prob: Some(0.5), corruption_prob: Some(0.1), link: Some(link) },
            );
            out.push((format!("fig07 with link {i}"), toml::Value::try_from(&s).expect("serializes")));
        }
        let mut observe = Scenario::parse(builtin("ext-observe").expect("built in")).expect("parses");
        observe.entity.notify_step = Some(0.2);
        out.push(("ext-observe with a notify step".into(), toml::Value::try_from(&observe).expect("serializes")));
        out
    }

    #[test]
    fn every_numeric_field_of_the_schema_has_a_range_and_every_range_a_field() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, doc) in docs() {
            let mut leaves = Vec::new();
            numbers(&[], &doc, &mut leaves);
            for (segments, v) in leaves {
                let path = segments.join(".");
                let f = field(&segments).unwrap_or_else(|| panic!("{name}: {path} = {v} has no range in FIELDS"));
                assert!(f.range.holds(v), "{name}: {path} = {v} is outside its own range {}", f.range);
                seen.insert(f.path);
            }
        }
        for f in FIELDS.iter().filter(|f| !f.path.starts_with("sweep.")) {
            assert!(seen.contains(f.path), "{} is in FIELDS but no scenario has it: a stale entry", f.path);
        }
    }

    /// Values just outside the range (and NaN, and a fraction where a count is asked).
    fn outside(r: &Range) -> Vec<f64> {
        let mut v = vec![f64::NAN, f64::INFINITY];
        if r.lo > f64::MIN {
            v.push(if r.above_lo { r.lo } else { r.lo - 1.0 });
        }
        if r.hi < 1e15 {
            v.push(if r.below_hi { r.hi } else { r.hi + 1.0 });
        }
        if r.whole {
            v.push(r.lo.max(0.0) + 1.5);
        }
        v
    }

    /// Sets the leaf at `path` (its segments; list indices as numbers) of `doc`.
    fn set(doc: &mut toml::Value, path: &[String], v: f64) {
        let mut at = doc;
        for seg in path {
            at = match at {
                toml::Value::Table(t) => t.get_mut(seg).expect("the path exists"),
                toml::Value::Array(a) => &mut a[seg.parse::<usize>().expect("an index")],
                _ => panic!("{path:?}: {seg} is a leaf"),
            };
        }
        *at = toml::Value::Float(v);
    }

    #[test]
    fn every_field_refuses_what_is_out_of_range_naming_the_field_and_the_value() {
        let docs = docs();
        for f in FIELDS.iter().filter(|f| !f.path.starts_with("sweep.")) {
            // The first document that has this field, at a concrete path.
            let (name, doc, path) = docs
                .iter()
                .find_map(|(name, doc)| {
                    let mut leaves = Vec::new();
                    numbers(&[], doc, &mut leaves);
                    let path = leaves.into_iter().map(|l| l.0).find(|p| matches(f.path, p))?;
                    Some((name, doc, path))
                })
                .expect("every field is in some document (the test above)");
            for v in outside(&f.range) {
                let mut bad = doc.clone();
                set(&mut bad, &path, v);
                let text = toml::to_string(&bad).expect("serializes");
                let e = Scenario::parse(&text)
                    .err()
                    .unwrap_or_else(|| panic!("{name}: {path:?} = {v} was accepted"))
                    .to_string();
                // A value the field's type cannot hold is the TOML parser's error, which quotes the line;
                // the range's own error names the whole path.
                let leaf = path.iter().rev().find(|s| s.parse::<usize>().is_err()).expect("a named segment");
                let dotted = path.join(".");
                match e.contains(" must be ") {
                    true => assert!(e.contains(&format!("{dotted} = ")) && e.contains(&f.range.to_string()), "{e}"),
                    false => assert!(e.contains(leaf.as_str()), "{name}: {dotted} = {v}: {e}"),
                }
            }
        }
    }

    #[test]
    fn a_swept_value_is_held_to_its_field_s_range() {
        // The cases: a 200 % loss, a negative one, a NaN delay.
        let fig07 = builtin("fig07-delay").expect("built in");
        let e = Scenario::parse(&fig07.replace("model = \"perfect\"", "model = \"bernoulli\", p = 2.0")).unwrap_err();
        assert_eq!(e.to_string(), "network.link.p = 2: a frame's loss probability must be [0, 1]");
        let e = Scenario::parse(&fig07.replace("model = \"perfect\"", "model = \"bernoulli\", p = -0.1")).unwrap_err();
        assert!(e.to_string().starts_with("network.link.p = -0.1:"), "{e}");
        let loss = builtin("seed003-loss").expect("built in");
        let e = Scenario::parse(&loss.replace("delay_ms = 5.0", "delay_ms = nan")).unwrap_err();
        assert!(e.to_string().starts_with("stream.delay_ms = nan: a one-way delay in ms must be [0, 60000]"), "{e}");
        for f in FIELDS.iter().filter(|f| f.axis.is_some()) {
            let axis = f.axis.expect("filtered");
            let owner = BUILTINS
                .iter()
                .map(|b| b.text)
                .find(|t| Scenario::parse(t).is_ok_and(|s| s.sweep.contains_key(axis)))
                .unwrap_or(fig07);
            for v in outside(&f.range) {
                let mut s: toml::Table = owner.parse().expect("TOML");
                let sweep = s.entry("sweep").or_insert_with(|| toml::Value::Table(toml::Table::new()));
                sweep.as_table_mut().expect("a table").insert(axis.into(), toml::Value::Array(vec![v.into()]));
                let text = toml::to_string(&s).expect("serializes");
                let e = Scenario::parse(&text).err().unwrap_or_else(|| panic!("sweep.{axis} = [{v}] accepted"));
                assert!(e.to_string().contains(&format!("sweep.{axis}")), "{e}");
            }
        }
    }
}
