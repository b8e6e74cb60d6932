//! `/metrics`: the published snapshots in the Prometheus text format (OpenMetrics, `prometheus-client`),
//! built at each scrape from the workers' last snapshots (so a scrape costs the data path nothing).
//!
//! Owns: the metric names, their units and help texts (the table in `docs/metrics.md` lists them: keep
//! both the same).

use super::{Extra, Shared};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
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
    let text = render(app.window.verb, &app.window.board.read(), app.window.board.dtls().read());
    match text {
        Ok(t) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], t).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the metrics: {e}\n")).into_response(),
    }
}

/// One counter family with a value per label set.
struct Counters(Vec<(Labels, u64)>);

fn worker(i: usize) -> Labels {
    vec![("worker".into(), i.to_string())]
}

/// Registers `name` (without `_total`, which the encoder adds) with one constant sample per label set.
fn counter(reg: &mut Registry, name: &str, help: &str, unit: Option<Unit>, c: Counters) {
    let fam = Samples(c.0.into_iter().map(|(l, v)| (l, ConstCounter::new(v))).collect());
    register(reg, name, help, unit, fam);
}

fn gauge<N>(reg: &mut Registry, name: &str, help: &str, unit: Option<Unit>, values: Vec<(Labels, N)>)
where
    ConstGauge<N>: prometheus_client::registry::Metric + TypedMetric,
{
    let fam = Samples(values.into_iter().map(|(l, v)| (l, ConstGauge::new(v))).collect());
    register(reg, name, help, unit, fam);
}

fn register(
    reg: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    m: impl prometheus_client::registry::Metric,
) {
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, m),
        None => reg.register(name, help, m),
    }
}

/// A metric family of constant samples, one per label set (the numbers come from snapshots, not from
/// metrics the program updates).
#[derive(Debug)]
struct Samples<M>(Vec<(Labels, M)>);

impl<M: EncodeMetric + TypedMetric> EncodeMetric for Samples<M> {
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

/// Histograms from bucket counts: per label set, the sum (seconds), and each bucket's upper bound with
/// the count that fell into it (the encoder makes them cumulative).
#[derive(Debug)]
struct Histograms(Vec<(Labels, f64, u64, Buckets)>);

/// Each bucket's upper bound and how many observations fell into it.
type Buckets = Vec<(f64, u64)>;

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

fn micros(us: u64) -> f64 {
    us as f64 / 1e6
}

/// The text of a scrape: the workers' snapshots and, with a coaps:// socket, its DTLS counters.
pub fn render(
    verb: &str,
    snaps: &[super::watch::Snapshot<Extra>],
    dtls_numbers: Option<corral_tokio::DtlsNumbers>,
) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::with_prefix("corral");
    let per = |f: &dyn Fn(&corral_tokio::corral_proto::Stats) -> u64| {
        Counters(snaps.iter().enumerate().map(|(i, s)| (worker(i), f(&s.stats))).collect())
    };
    let r = &mut reg;
    gauge(
        r,
        "up",
        "1 while the worker publishes its counters",
        None,
        snaps.iter().enumerate().map(|(i, s)| (worker(i), i64::from(s.live))).collect(),
    );
    gauge(
        r,
        "uptime",
        "time since the worker's node started",
        Some(Unit::Seconds),
        snaps.iter().enumerate().map(|(i, s)| (worker(i), s.uptime_s as i64)).collect(),
    );
    counter(r, "coap_datagrams_received", "UDP datagrams the endpoint received", None, per(&|s| s.datagrams_in));
    counter(r, "coap_malformed_received", "datagrams that did not parse as CoAP", None, per(&|s| s.malformed_in));
    counter(
        r,
        "coap_duplicates_received",
        "messages recognised as duplicates (RFC 7252 §4.5)",
        None,
        per(&|s| s.duplicates_in),
    );
    counter(r, "coap_requests_received", "requests the endpoint received", None, per(&|s| s.requests_in));
    counter(r, "coap_responses_received", "responses the endpoint received", None, per(&|s| s.responses_in));
    counter(r, "coap_transmissions", "messages the endpoint sent", None, per(&|s| s.transmits));
    counter(r, "coap_retransmissions", "confirmable messages sent again", None, per(&|s| s.retransmissions));
    counter(r, "coap_timeouts", "exchanges that ended without an answer", None, per(&|s| s.timeouts));
    counter(r, "coap_resets_received", "RST messages received", None, per(&|s| s.resets_in));
    counter(
        r,
        "coap_overload_rejections",
        "requests refused with 5.03 because the inbound table was full",
        None,
        per(&|s| s.overload_rejections),
    );
    counter(
        r,
        "coap_peers_evicted",
        "peers forgotten to make room in the peer table",
        None,
        per(&|s| s.peers_evicted + s.peers_purged),
    );
    counter(
        r,
        "coap_dedup_evicted",
        "duplicate-detection entries forgotten before their time",
        None,
        per(&|s| s.dedup_evicted),
    );
    counter(r, "coap_echo_challenges", "4.01 Echo challenges sent (RFC 9175)", None, per(&|s| s.echo_challenges));
    counter(
        r,
        "coap_observers_lost",
        "observers removed after a rejected or unacknowledged notification",
        None,
        per(&|s| s.observers_lost),
    );
    let mut tables = Vec::new();
    for (i, s) in snaps.iter().enumerate() {
        let t = &s.tables;
        for (name, v) in [
            ("peers", t.peers),
            ("client_exchanges", t.client_exchanges),
            ("inbound_exchanges", t.inbound_exchanges),
            ("tracked_messages", t.tracked_messages),
            ("dedup", t.dedup_entries),
            ("uploads", t.uploads),
            ("observers", t.observers),
        ] {
            let mut l = worker(i);
            l.push(("table".into(), name.into()));
            tables.push((l, v as i64));
        }
    }
    gauge(r, "coap_table_entries", "entries in each of the endpoint's bounded tables", None, tables);
    layer(r, snaps);
    em(r, snaps);
    proxy(r, snaps);
    if let Some(d) = dtls_numbers {
        dtls(r, &d);
    }
    let mut out = String::new();
    encode(&mut out, &reg)?;
    let _ = verb;
    Ok(out)
}

/// The counters of the nodes' layer (OSCORE), by the names the layer gives them, in its order.
fn layer(r: &mut Registry, snaps: &[super::watch::Snapshot<Extra>]) {
    let mut names: Vec<(&'static str, &'static str)> = Vec::new();
    for c in snaps.iter().flat_map(|s| &s.layer) {
        if !names.iter().any(|(n, _)| *n == c.name) {
            names.push((c.name, c.help));
        }
    }
    for (name, help) in names {
        let values = snaps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.layer.iter().find(|c| c.name == name).map(|c| (worker(i), c.value)))
            .collect();
        counter(r, name, help, None, Counters(values));
    }
}

/// The coaps:// socket's counters (corral-dtls's, summed over its layers; no `worker` label: one socket
/// serves DTLS).
fn dtls(r: &mut Registry, d: &corral_tokio::DtlsNumbers) {
    let s = &d.stats;
    // Unlabelled samples (a family of one would be written `name{} value`).
    let one = |r: &mut Registry, name: &str, help: &str, v: u64| register(r, name, help, None, ConstCounter::new(v));
    let by = |label: &str, values: &[(&'static str, u64)]| {
        Counters(values.iter().map(|(k, v)| (vec![(label.to_string(), k.to_string())], *v)).collect())
    };
    let sessions = ConstGauge::new(d.sessions as i64);
    register(r, "dtls_sessions", "DTLS sessions held (handshakes included)", None, sessions);
    one(
        r,
        "dtls_cookies_sent",
        "HelloVerifyRequests sent: ClientHellos without a valid cookie, answered without keeping state",
        s.cookies_sent,
    );
    one(r, "dtls_handshakes_completed", "DTLS handshakes completed", s.handshakes_done);
    counter(
        r,
        "dtls_handshakes_failed",
        "DTLS handshakes failed, by reason",
        None,
        by("reason", &s.failures_by_reason()),
    );
    counter(
        r,
        "dtls_records_dropped",
        "DTLS records and datagrams dropped without an answer, by reason",
        None,
        by("reason", &s.drops_by_reason()),
    );
    one(r, "dtls_sessions_evicted", "DTLS sessions evicted from a full session table", s.evicted);
    one(r, "dtls_sessions_idle_closed", "DTLS sessions closed after their idle timeout", s.idle_closed);
    one(r, "dtls_sessions_moved", "DTLS sessions that followed their peer to a new address by Connection ID", s.moved);
}

/// The workers whose service published `T`, with their index.
fn workers_of<T>(snaps: &[super::watch::Snapshot<Extra>], pick: impl Fn(&Extra) -> Option<&T>) -> Vec<(usize, &T)> {
    snaps.iter().enumerate().filter_map(|(i, s)| pick(&s.service).map(|t| (i, t))).collect()
}

/// The Entity Manager's metrics (gateway workers).
fn em(r: &mut Registry, snaps: &[super::watch::Snapshot<Extra>]) {
    let ems = workers_of(snaps, |x| if let Extra::Em(e) = x { Some(e) } else { None });
    if ems.is_empty() {
        return;
    }
    let each = |f: &dyn Fn(&super::EmNumbers) -> u64| Counters(ems.iter().map(|(i, e)| (worker(*i), f(e))).collect());
    gauge(
        r,
        "em_entities",
        "entities the worker serves",
        None,
        ems.iter().map(|(i, e)| (worker(*i), e.entities as i64)).collect(),
    );
    gauge(
        r,
        "em_jobs_in_progress",
        "uses, actuations and validations in progress",
        None,
        ems.iter().map(|(i, e)| (worker(*i), e.jobs as i64)).collect(),
    );
    counter(r, "em_member_requests", "unicast requests sent to members", None, each(&|e| e.counters.member_requests));
    counter(
        r,
        "em_multicast_requests",
        "group requests sent to multicast entities' members",
        None,
        each(&|e| e.counters.multicast_requests),
    );
    counter(r, "em_member_answers", "member requests answered", None, each(&|e| e.counters.member_answers));
    counter(
        r,
        "em_multicast_answers",
        "members' answers to group requests",
        None,
        each(&|e| e.counters.multicast_answers),
    );
    counter(
        r,
        "em_member_failures",
        "member requests that ended without an answer",
        None,
        each(&|e| e.counters.member_failures),
    );
    counter(
        r,
        "em_budget_refusals",
        "uses, creations and changes refused by the fan-out budget (4.03)",
        None,
        each(&|e| e.counters.budget_refusals),
    );
    counter(
        r,
        "em_quota_refusals",
        "uses refused by a client's or an entity's exchange quota (5.03)",
        None,
        each(&|e| e.counters.quota_refusals),
    );
    let mut per_member = Vec::new();
    let mut failures = Vec::new();
    let mut group_answers = Vec::new();
    let mut last = Vec::new();
    for (i, e) in &ems {
        for (m, s) in &e.counters.members {
            let mut l = worker(*i);
            l.push(("member".into(), m.clone()));
            per_member.push((l.clone(), s.requests));
            failures.push((l.clone(), s.failures));
            group_answers.push((l.clone(), s.group_answers));
            if let Some(us) = s.last_latency_us {
                last.push((l, micros(us)));
            }
        }
    }
    counter(r, "em_member_requests_by_member", "unicast requests sent to each member", None, Counters(per_member));
    counter(
        r,
        "em_member_failures_by_member",
        "requests to each member that ended without an answer",
        None,
        Counters(failures),
    );
    counter(
        r,
        "em_member_group_answers_by_member",
        "each member's answers to group requests",
        None,
        Counters(group_answers),
    );
    gauge(r, "em_member_last_latency", "latency of each member's last answer", Some(Unit::Seconds), last);
    let bounds = corral_group::em::LATENCY_BOUNDS_US.iter().map(|b| micros(*b)).chain([f64::MAX]); // the encoder writes f64::MAX as +Inf
    let hist = Histograms(
        ems.iter()
            .map(|(i, e)| {
                let l = &e.counters.latency;
                (worker(*i), micros(l.sum_us), l.count(), bounds.clone().zip(l.counts.iter().copied()).collect())
            })
            .collect(),
    );
    r.register_with_unit("em_member_latency", "time from a member request to its answer", Unit::Seconds, hist);
}

/// The proxy's metrics.
fn proxy(r: &mut Registry, snaps: &[super::watch::Snapshot<Extra>]) {
    let ps = workers_of(snaps, |x| if let Extra::Proxy(p) = x { Some(p) } else { None });
    if ps.is_empty() {
        return;
    }
    let each =
        |f: &dyn Fn(&corral_proxy::Stats) -> u64| Counters(ps.iter().map(|(i, p)| (worker(*i), f(&p.stats))).collect());
    counter(r, "proxy_requests", "proxied requests received", None, each(&|s| s.requests));
    counter(r, "proxy_cache_hits", "requests answered from the cache", None, each(&|s| s.hits));
    counter(r, "proxy_cache_misses", "requests forwarded upstream", None, each(&|s| s.misses));
    counter(r, "proxy_aggregated", "requests attached to an identical pending one", None, each(&|s| s.aggregated));
    counter(r, "proxy_refused", "requests refused before forwarding", None, each(&|s| s.refused));
    counter(r, "proxy_overloaded", "requests refused with 5.03 at a bound", None, each(&|s| s.overloaded));
    let mut hops = Vec::new();
    for (i, p) in &ps {
        for (hop, h) in &p.stats.per_hop {
            let mut l = worker(*i);
            l.push(("next_hop".into(), hop.clone()));
            hops.push((l, h.requests));
        }
    }
    counter(r, "proxy_upstream_requests", "requests sent to each next hop", None, Counters(hops));
    gauge(
        r,
        "proxy_cache",
        "bytes the cache holds",
        Some(Unit::Bytes),
        ps.iter().map(|(i, p)| (worker(*i), p.cache_bytes as i64)).collect(),
    );
    gauge(
        r,
        "proxy_cache_entries",
        "responses the cache holds",
        None,
        ps.iter().map(|(i, p)| (worker(*i), p.cache_entries as i64)).collect(),
    );
    gauge(
        r,
        "proxy_pending",
        "requests pending upstream",
        None,
        ps.iter().map(|(i, p)| (worker(*i), p.pending as i64)).collect(),
    );
    gauge(
        r,
        "proxy_observations",
        "upstream observations held",
        None,
        ps.iter().map(|(i, p)| (worker(*i), p.observations as i64)).collect(),
    );
}
