//! `/metrics`: the published snapshots in the Prometheus text format (OpenMetrics, `prometheus-client`),
//! built at each scrape from the workers' last snapshots (so a scrape costs the data path nothing).
//!
//! Owns: the exposition (families in the order they are first described, a `worker` label on each
//! worker's samples) and the snapshot's own numbers (`up`, `uptime`, the Entity Manager's and the proxy's
//! levels). The names, units and help texts of the rest are said beside the stats they describe
//! (corral-proto's `Metric`: the endpoint's `Stats::describe`, `EmStats::describe`, corral-proxy's and
//! corral-dtls's); `docs/metrics.md` lists them all: keep both the same.

use super::watch::Snapshot;
use super::{EmNumbers, Extra, ProxyNumbers, Shared};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use corral_tokio::corral_proto::metric::level;
use corral_tokio::corral_proto::{Metric, MetricSink, MetricUnit, MetricValue};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(String, String)>;

/// The OpenMetrics media type, which Prometheus asks for and which `prometheus-client` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) async fn metrics(State(app): State<Shared>) -> Response {
    let text = render(&app.window.board.read(), app.window.board.dtls().read());
    match text {
        Ok(t) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], t).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the metrics: {e}\n")).into_response(),
    }
}

/// The families of a scrape, in the order they were first described, each with its samples.
#[derive(Default)]
struct Families(Vec<Family>);

struct Family {
    name: &'static str,
    help: &'static str,
    unit: Option<MetricUnit>,
    samples: Samples,
}

/// A family's samples, one per label set.
enum Samples {
    Counters(Vec<(Labels, u64)>),
    Gauges(Vec<(Labels, i64)>),
    GaugesF64(Vec<(Labels, f64)>),
    /// Per label set: the sum, the count and each bucket's upper bound with the count that fell into it.
    Histograms(Vec<(Labels, f64, u64, Buckets)>),
}

/// Each bucket's upper bound and how many observations fell into it (the encoder makes them cumulative).
type Buckets = Vec<(f64, u64)>;

impl Families {
    /// Takes `m` with `outer` labels before its own (a worker's index).
    fn add(&mut self, outer: &[(&'static str, String)], m: Metric<'_>) {
        let family = match self.0.iter().position(|f| f.name == m.name) {
            Some(i) => &mut self.0[i],
            None => {
                let samples = match m.value {
                    MetricValue::Counter(_) => Samples::Counters(Vec::new()),
                    MetricValue::Gauge(_) => Samples::Gauges(Vec::new()),
                    MetricValue::GaugeF64(_) => Samples::GaugesF64(Vec::new()),
                    MetricValue::Histogram { .. } => Samples::Histograms(Vec::new()),
                    _ => return,
                };
                self.0.push(Family { name: m.name, help: m.help, unit: m.unit, samples });
                self.0.last_mut().expect("just pushed")
            }
        };
        if m.announce {
            return;
        }
        let labels: Labels = outer
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain(m.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        // A value of another kind than the family's first is a describe's bug: it is left out.
        match (&mut family.samples, m.value) {
            (Samples::Counters(v), MetricValue::Counter(n)) => v.push((labels, n)),
            (Samples::Gauges(v), MetricValue::Gauge(n)) => v.push((labels, n)),
            (Samples::GaugesF64(v), MetricValue::GaugeF64(n)) => v.push((labels, n)),
            (Samples::Histograms(v), MetricValue::Histogram { sum, count, buckets }) => {
                v.push((labels, sum, count, buckets.to_vec()))
            }
            _ => tracing::debug!(metric = m.name, "a sample of another kind than its family's, left out"),
        }
    }

    /// Takes what `describe` describes, each sample with `outer` labels first.
    fn describe(&mut self, outer: &[(&'static str, String)], describe: impl FnOnce(&mut MetricSink<'_>)) {
        describe(&mut |m| self.add(outer, m));
    }

    fn register(self, reg: &mut Registry) {
        for Family { name, help, unit, samples } in self.0 {
            let unit = unit.map(|u| match u {
                MetricUnit::Seconds => Unit::Seconds,
                MetricUnit::Bytes => Unit::Bytes,
                _ => Unit::Other(String::new()),
            });
            // A sample without labels is written `name value` (a family of one would be `name{} value`).
            let r = &mut *reg;
            match samples {
                Samples::Counters(v) if single(&v) => put(r, name, help, unit, ConstCounter::new(v[0].1)),
                Samples::Gauges(v) if single(&v) => put(r, name, help, unit, ConstGauge::new(v[0].1)),
                Samples::Counters(v) => put(r, name, help, unit, constants(v, ConstCounter::new)),
                Samples::Gauges(v) => put(r, name, help, unit, constants(v, ConstGauge::new)),
                Samples::GaugesF64(v) => put(r, name, help, unit, constants(v, ConstGauge::new)),
                Samples::Histograms(v) => put(r, name, help, unit, Histograms(v)),
            }
        }
    }
}

fn put(reg: &mut Registry, name: &str, help: &str, unit: Option<Unit>, m: impl prometheus_client::registry::Metric) {
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, m),
        None => reg.register(name, help, m),
    }
}

fn constants<N, M>(v: Vec<(Labels, N)>, f: impl Fn(N) -> M) -> Constants<M> {
    Constants(v.into_iter().map(|(l, n)| (l, f(n))).collect())
}

/// One sample, without labels.
fn single<T>(v: &[(Labels, T)]) -> bool {
    v.len() == 1 && v[0].0.is_empty()
}

/// A metric family of constant samples, one per label set (the numbers come from snapshots, not from
/// metrics the program updates).
#[derive(Debug)]
struct Constants<M>(Vec<(Labels, M)>);

impl<M: EncodeMetric + TypedMetric> EncodeMetric for Constants<M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, m) in &self.0 {
            m.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

#[derive(Debug)]
struct Histograms(Vec<(Labels, f64, u64, Buckets)>);

impl EncodeMetric for Histograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, sum, count, buckets) in &self.0 {
            encoder.encode_family(labels)?.encode_histogram::<Labels>(*sum, *count, buckets, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl<T> Snapshot<T> {
    /// The worker's liveness, uptime, endpoint counters and tables, and its layer's (OSCORE's) counters.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        out(Metric::gauge("up", "1 while the worker publishes its counters", i64::from(self.live)));
        let uptime = level(usize::try_from(self.uptime_s).unwrap_or(usize::MAX));
        out(Metric::gauge("uptime", "time since the worker's node started", uptime).in_unit(MetricUnit::Seconds));
        self.stats.describe(out);
        self.tables.describe(out);
        for c in &self.layer {
            out(Metric::counter(c.name, c.help, c.value));
        }
    }
}

impl EmNumbers {
    /// The entities and jobs of a gateway worker, then its Entity Manager's counters.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        out(Metric::gauge("em_entities", "entities the worker serves", level(self.entities)));
        out(Metric::gauge("em_jobs_in_progress", "uses, actuations and validations in progress", level(self.jobs)));
        self.counters.describe(out);
    }
}

impl ProxyNumbers {
    /// The proxy's counters, then how full its cache and tables are.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        self.stats.describe(out);
        let g = Metric::gauge;
        out(g("proxy_cache", "bytes the cache holds", level(self.cache_bytes)).in_unit(MetricUnit::Bytes));
        out(g("proxy_cache_entries", "responses the cache holds", level(self.cache_entries)));
        out(g("proxy_pending", "requests pending upstream", level(self.pending)));
        out(g("proxy_observations", "upstream observations held", level(self.observations)));
    }
}

impl Extra {
    /// What the worker's inner service published.
    pub fn describe(&self, out: &mut MetricSink<'_>) {
        match self {
            Extra::None => {}
            Extra::Em(e) => e.describe(out),
            Extra::Proxy(p) => p.describe(out),
        }
    }
}

/// The text of a scrape: the workers' snapshots (each sample labelled with its worker) and, with a coaps://
/// socket, its DTLS counters (without a `worker` label: one socket serves DTLS).
pub fn render(
    snaps: &[Snapshot<Extra>],
    dtls_numbers: Option<corral_tokio::DtlsNumbers>,
) -> Result<String, std::fmt::Error> {
    let mut families = Families::default();
    for (i, s) in snaps.iter().enumerate() {
        families.describe(&[("worker", i.to_string())], |out| s.describe(out));
    }
    for (i, s) in snaps.iter().enumerate() {
        families.describe(&[("worker", i.to_string())], |out| s.service.describe(out));
    }
    if let Some(d) = dtls_numbers {
        families.describe(&[], |out| d.describe(out));
    }
    let mut reg = Registry::with_prefix("corral");
    families.register(&mut reg);
    let mut out = String::new();
    encode(&mut out, &reg)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker() -> Snapshot<Extra> {
        Snapshot { live: true, service: Extra::Em(EmNumbers::default()), ..Snapshot::default() }
    }

    #[test]
    fn a_family_without_rows_is_announced_and_each_worker_labels_its_samples() {
        let text = render(&[worker(), worker()], None).expect("a scrape");
        // No member asked yet: the family is there, without a sample.
        assert!(text.contains("# TYPE corral_em_member_requests_by_member counter\n# HELP"), "{text}");
        assert!(text.contains("corral_up{worker=\"1\"} 1\n"), "{text}");
        assert!(text.contains("corral_coap_table_entries{worker=\"0\",table=\"dedup\"} 0\n"), "{text}");
        assert!(text.contains("corral_em_member_latency_seconds_bucket{le=\"+Inf\",worker=\"1\"} 0\n"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_dtls_socket_has_no_worker_label() {
        let d = corral_tokio::DtlsNumbers { sessions: 3, ..Default::default() };
        let text = render(&[worker()], Some(d)).expect("a scrape");
        assert!(text.contains("\ncorral_dtls_sessions 3\n"), "{text}");
        assert!(text.contains("\ncorral_dtls_handshakes_failed_total{reason=\"timeout\"} 0\n"), "{text}");
    }
}
