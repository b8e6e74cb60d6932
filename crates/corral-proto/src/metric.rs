//! Metrics as plain data: what a stats struct counts, said beside it, so that whoever exposes the numbers
//! (corral-http's `/metrics` in the OpenMetrics format, a library user's own exporter, a test) names them
//! the same without repeating a list.
//!
//! Owns: [`Metric`], [`MetricValue`], [`MetricUnit`] and the descriptions of the endpoint's [`Stats`] and
//! [`TableSizes`]. Each other crate describes its own stats beside them (corral-group's `EmStats`,
//! corral-proxy's `Stats`, corral-dtls's `DtlsStats`). Must never: depend on a metrics crate or keep state
//! (a description is a walk over numbers the caller already holds).

use crate::endpoint::{Stats, TableSizes};

/// One sample of a metric: its family's name (snake case, without the `corral_` prefix, a unit or
/// `_total`, e.g. `coap_timeouts`), what it measures, its unit, the labels that tell its samples apart,
/// and its value. The exporter adds the prefix, the unit's suffix and `_total`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric<'a> {
    pub name: &'static str,
    pub help: &'static str,
    pub unit: Option<MetricUnit>,
    /// Label names and values, in order (a sample of a family without labels has none).
    pub labels: &'a [(&'static str, &'a str)],
    pub value: MetricValue<'a>,
    /// Announces the family (its help, type and unit) without a sample: a family keyed by something
    /// that may have no rows yet (members, next hops) is announced before its rows, so that a scrape
    /// shows it from the start.
    pub announce: bool,
}

/// A base unit, in Prometheus' conventions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricUnit {
    Seconds,
    Bytes,
}

/// What kind of number a sample is.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum MetricValue<'a> {
    /// A count that only grows while its owner lives.
    Counter(u64),
    /// A level that goes up and down (entries in a table).
    Gauge(i64),
    /// A level with a fraction (seconds).
    GaugeF64(f64),
    /// Observations by bucket: their sum, their count, and each bucket's upper bound with the number that
    /// fell into it (not cumulative; the last bound is `f64::MAX`, written `+Inf`).
    Histogram { sum: f64, count: u64, buckets: &'a [(f64, u64)] },
}

impl<'a> Metric<'a> {
    /// A counter without labels of its own.
    pub fn counter(name: &'static str, help: &'static str, value: u64) -> Metric<'a> {
        Metric { name, help, unit: None, labels: &[], value: MetricValue::Counter(value), announce: false }
    }

    /// A gauge without labels of its own.
    pub fn gauge(name: &'static str, help: &'static str, value: i64) -> Metric<'a> {
        Metric { name, help, unit: None, labels: &[], value: MetricValue::Gauge(value), announce: false }
    }

    /// This sample with `labels`.
    pub fn labelled(self, labels: &'a [(&'static str, &'a str)]) -> Metric<'a> {
        Metric { labels, ..self }
    }

    /// This family announced, without the sample (see [`Metric::announce`]).
    pub fn announced(self) -> Metric<'a> {
        Metric { announce: true, ..self }
    }

    /// This sample in `unit`.
    pub fn in_unit(self, unit: MetricUnit) -> Metric<'a> {
        Metric { unit: Some(unit), ..self }
    }
}

/// Where a description goes: called once per sample, in the order an exporter writes the families.
pub type MetricSink<'s> = dyn FnMut(Metric<'_>) + 's;

/// A table size as a gauge's value (a table never holds 2^63 entries).
pub fn level(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Stats {
    /// The endpoint's counters as metrics (`docs/metrics.md`, "Every node").
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        let c = Metric::counter;
        out(c("coap_datagrams_received", "UDP datagrams the endpoint received", self.datagrams_in));
        out(c("coap_malformed_received", "datagrams that did not parse as CoAP", self.malformed_in));
        out(c("coap_duplicates_received", "messages recognised as duplicates (RFC 7252 §4.5)", self.duplicates_in));
        out(c("coap_requests_received", "requests the endpoint received", self.requests_in));
        out(c("coap_responses_received", "responses the endpoint received", self.responses_in));
        out(c("coap_transmissions", "messages the endpoint sent", self.transmits));
        out(c("coap_retransmissions", "confirmable messages sent again", self.retransmissions));
        out(c("coap_timeouts", "exchanges that ended without an answer", self.timeouts));
        out(c("coap_resets_received", "RST messages received", self.resets_in));
        out(c(
            "coap_overload_rejections",
            "requests refused with 5.03 because the inbound table was full",
            self.overload_rejections,
        ));
        out(c(
            "coap_peers_evicted",
            "peers forgotten to make room in the peer table",
            self.peers_evicted + self.peers_purged,
        ));
        out(c("coap_dedup_evicted", "duplicate-detection entries forgotten before their time", self.dedup_evicted));
        out(c("coap_echo_challenges", "4.01 Echo challenges sent (RFC 9175)", self.echo_challenges));
        out(c(
            "coap_observers_lost",
            "observers removed after a rejected or unacknowledged notification",
            self.observers_lost,
        ));
    }
}

impl TableSizes {
    /// How full each bounded table is: one gauge, labelled `table`.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        for (name, v) in [
            ("peers", self.peers),
            ("client_exchanges", self.client_exchanges),
            ("inbound_exchanges", self.inbound_exchanges),
            ("tracked_messages", self.tracked_messages),
            ("dedup", self.dedup_entries),
            ("uploads", self.uploads),
            ("observers", self.observers),
        ] {
            let g = Metric::gauge("coap_table_entries", "entries in each of the endpoint's bounded tables", level(v));
            out(g.labelled(&[("table", name)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter's or a gauge's value (the descriptions borrow; the test keeps numbers).
    fn number(v: MetricValue<'_>) -> Option<i64> {
        match v {
            MetricValue::Counter(n) => i64::try_from(n).ok(),
            MetricValue::Gauge(n) => Some(n),
            _ => None,
        }
    }

    #[test]
    fn the_endpoint_describes_each_counter_once_and_each_table_by_label() {
        let stats = Stats { peers_evicted: 2, peers_purged: 3, timeouts: 7, ..Stats::default() };
        let mut seen = Vec::new();
        stats.describe(&mut |m| seen.push((m.name, number(m.value))));
        assert_eq!(seen.len(), 14);
        assert!(seen.contains(&("coap_peers_evicted", Some(5))));
        assert!(seen.contains(&("coap_timeouts", Some(7))));
        let mut names: Vec<_> = seen.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 14, "a name twice: {names:?}");
        let tables = TableSizes { dedup_entries: 4, ..TableSizes::default() };
        let mut labels = Vec::new();
        tables.describe(&mut |m| labels.push((m.labels[0].1.to_string(), number(m.value))));
        assert_eq!(labels.len(), 7);
        assert!(labels.contains(&("dedup".to_string(), Some(4))));
    }
}
