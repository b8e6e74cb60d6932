//! The invariants: what must hold of the gateway at every restart and at quiescence, whatever the faults.
//!
//! # What it owns
//! One function per invariant, each returning the violations it found as sentences (the seed's report
//! prints them). They read the simulator, the store and the client's model; they change nothing.
//!
//! - [`durable`] (at every restart): every change the gateway acknowledged is in what it restarts from.
//! - [`store_agrees`] (at quiescence): nothing in flight, no pending record or journal entry left, and the
//!   store holds exactly the entities the Entity Manager serves.
//! - [`model_agrees`] (at quiescence): each entity is what the client last had acknowledged.
//! - [`memberships`] (at quiescence): no device is in a group no multicast entity naming it holds, and every
//!   member recorded as joined is in its entity's group.
//! - [`one_outcome`] (at quiescence): every client request got exactly one final outcome.
//! - [`bounded`] (continuously, before each of the client's requests): the gateway's tables are within
//!   their configured bounds — entities, jobs — and its endpoint's exchanges within its limits.
//! - [`drained`] (at quiescence): no exchange, member request or delayed response is left in the gateway's
//!   tables once every job has ended.
//! - [`reflection`] (after every spoofing spell): the gateway sent the victim of spoofed requests no
//!   more than the reflection bound allows.
//! - [`use_values`] (at quiescence): every value a use answered is what its members said during it — each
//!   listed value one its member read in the use's window, an aggregate within its members' range.

use crate::client::{Client, Model, Sent, Want};
use corral_group::{EntityManager, Snapshot, StoredEntity};
use corral_proto::Instant;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// The tag of a violation the harness found in the gateway and that is not fixed yet (see the crate docs,
/// "Known defects"): reported, not failed, unless `CORRAL_DST_STRICT` is set.
pub const KNOWN_JOURNAL: &str = "known defect K1";
/// A member that rebooted (forgetting its groups) after joining is never asked to join again.
pub const KNOWN_REBOOT: &str = "known defect K2";
/// A multicast creation whose commit fails on a store error leaves its pending record in the store.
pub const KNOWN_PENDING: &str = "known defect K3";
/// A member recorded as joined is not in its group, though it never rebooted.
pub const KNOWN_LEFT: &str = "known defect K4";

/// (group, member) of every membership a committed entity records as joined.
fn recorded_memberships(em: &EntityManager) -> Vec<(IpAddr, SocketAddr)> {
    let mut out = Vec::new();
    for name in em.entity_names() {
        let Some(e) = em.entity(&name) else { continue };
        let Some(g) = e.group else { continue };
        for (uri, joined) in e.profile.er.iter().zip(&e.joined) {
            if let (Some(a), true) = (member_addr(uri), joined) {
                out.push((g, a));
            }
        }
    }
    out
}

fn want_of(e: &StoredEntity) -> Want {
    Want { er: e.profile.er.clone(), multicast: e.group.is_some() }
}

fn stored<'a>(snap: &'a Snapshot, name: &str) -> Option<&'a StoredEntity> {
    // A pending record is a creation the gateway undoes at start-up: the entity does not exist.
    snap.entities.iter().find(|e| e.name == name && !e.pending)
}

/// Every acknowledged change survives the crash: for each name without a change in flight or of unknown
/// fate, the store holds what was last acknowledged.
pub fn durable(model: &Model, snap: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (name, st) in &model.names {
        if st.outstanding > 0 || st.uncertain {
            continue;
        }
        let held = stored(snap, name).map(want_of);
        if held != st.acked {
            out.push(format!(
                "durability: {name} was acknowledged as {} at {} but the store holds {} after a crash",
                show(st.acked.as_ref()),
                st.acked_at,
                show(held.as_ref())
            ));
        }
    }
    out
}

fn show(w: Option<&Want>) -> String {
    match w {
        None => "absent".into(),
        Some(w) => format!("{} {} members", if w.multicast { "multicast" } else { "unicast" }, w.er.len()),
    }
}

/// Nothing in flight, no recovery left, and the store and the Entity Manager agree entity by entity.
pub fn store_agrees(em: &EntityManager, snap: &Snapshot, store_in_flight: usize) -> Vec<String> {
    let mut out = Vec::new();
    if em.jobs_in_progress() > 0 {
        out.push(format!("quiescence: {} jobs still in progress", em.jobs_in_progress()));
    }
    if em.writes_in_flight() > 0 || store_in_flight > 0 {
        out.push(format!(
            "quiescence: {} writes in flight in the EM, {store_in_flight} in the store",
            em.writes_in_flight()
        ));
    }
    for e in &snap.entities {
        if e.pending {
            out.push(format!("{KNOWN_PENDING}: quiescence: {} is still a pending record", e.name));
        }
    }
    let recorded = recorded_memberships(em);
    let (settled, strays): (Vec<_>, Vec<_>) = snap.journal.iter().partition(|e| recorded.contains(e));
    if !strays.is_empty() {
        let entries: Vec<String> = strays.iter().map(|(g, m)| format!("{m} in {g}")).collect();
        out.push(format!("quiescence: stray memberships never undone: {}", entries.join(", ")));
    }
    if !settled.is_empty() {
        let entries: Vec<String> = settled.iter().map(|(g, m)| format!("{m} in {g}")).collect();
        out.push(format!(
            "{KNOWN_JOURNAL}: journal entries of memberships an entity records never settled: {}",
            entries.join(", ")
        ));
    }
    let names = em.entity_names();
    for name in &names {
        match stored(snap, name) {
            Some(s) if Some(s) == em.entity(name) => {}
            Some(_) => out.push(format!("agreement: {name} differs between the EM and its store")),
            None => out.push(format!("agreement: the EM serves {name}, the store does not hold it")),
        }
    }
    for e in snap.entities.iter().filter(|e| !e.pending && !names.contains(&e.name)) {
        out.push(format!("agreement: the store holds {}, the EM does not serve it", e.name));
    }
    out
}

/// Each entity whose last change was acknowledged is what was acknowledged.
pub fn model_agrees(em: &EntityManager, model: &Model) -> Vec<String> {
    let mut out = Vec::new();
    for (name, st) in &model.names {
        if st.outstanding > 0 || st.uncertain {
            continue;
        }
        let served = em.entity(name).map(want_of);
        if served != st.acked {
            out.push(format!(
                "model: {name} was acknowledged as {} at {} but the EM serves {}",
                show(st.acked.as_ref()),
                st.acked_at,
                show(served.as_ref())
            ));
        }
    }
    out
}

/// What the harness knows of a device for [`memberships`].
pub struct DeviceView<'a> {
    pub addr: SocketAddr,
    pub groups: &'a [IpAddr],
    /// When it last rebooted (forgetting its groups), if ever: a member that rebooted after its entity's
    /// creation was sent and is missing from the group is known defect K2, not a new failure.
    pub rebooted: Option<Instant>,
}

/// No orphan membership, and every recorded join holds (unless the member rebooted since).
pub fn memberships(em: &EntityManager, devices: &[DeviceView<'_>], model: &Model) -> Vec<String> {
    let mut out = Vec::new();
    let mut naming: BTreeMap<SocketAddr, Vec<(IpAddr, bool, String)>> = BTreeMap::new();
    for name in em.entity_names() {
        let Some(e) = em.entity(&name) else { continue };
        let Some(group) = e.group else { continue };
        for (i, uri) in e.profile.er.iter().enumerate() {
            if let Some(addr) = member_addr(uri) {
                naming.entry(addr).or_default().push((group, e.joined.get(i).copied().unwrap_or(false), name.clone()));
            }
        }
    }
    for d in devices {
        let named = naming.get(&d.addr).map(Vec::as_slice).unwrap_or(&[]);
        for g in d.groups {
            if !named.iter().any(|(ng, _, _)| ng == g) {
                out.push(format!("membership: {} is in group {g}, which no entity naming it holds", d.addr));
            }
        }
        for (g, joined, name) in named {
            let since = model.names.get(name).map_or(Instant::ZERO, |s| s.created_sent);
            let forgot = d.rebooted.is_some_and(|r| r >= since) || model.names.get(name).is_none_or(|s| s.uncertain);
            if *joined && !d.groups.contains(g) {
                let tag = if forgot { format!("{KNOWN_REBOOT}: ") } else { format!("{KNOWN_LEFT}: ") };
                out.push(format!(
                    "{tag}membership: {name} records {} as joined to {g}, the device is not in it",
                    d.addr
                ));
            }
        }
    }
    out
}

fn member_addr(uri: &str) -> Option<SocketAddr> {
    let rest = uri.strip_prefix("coap://")?;
    let host = rest.split('/').next()?;
    // The EM writes members without the default port.
    host.parse().ok().or_else(|| {
        let ip = host.strip_prefix('[')?.strip_suffix(']')?.parse().ok()?;
        Some(SocketAddr::new(ip, corral_sim::COAP_PORT))
    })
}

/// Every request got one final outcome: none lost, none answered twice.
pub fn one_outcome(client: &Client) -> Vec<String> {
    let mut out = Vec::new();
    for (id, (at, sent)) in &client.sent {
        let n = client.outcomes.get(id).map_or(0, Vec::len);
        if n != 1 {
            let what = match sent {
                Sent::Put(n, _) => format!("PUT {n}"),
                Sent::Delete(n) => format!("DELETE {n}"),
                Sent::Use(n) => format!("GET {n}"),
            };
            out.push(format!("outcomes: the request {what} sent at {at} got {n} final outcomes"));
        }
    }
    out
}

/// Every use's answer is made of what members said during it: `sample(member, t)` is the value member
/// `member` reads at `t` (constant within a second).
pub fn use_values(
    client: &Client,
    devices: &[SocketAddr],
    sample: impl Fn(SocketAddr, Instant) -> Option<f64>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (id, (t0, sent)) in &client.sent {
        let Sent::Use(name) = sent else { continue };
        let Some((at, corral_proto::Outcome::Response { response, .. })) =
            client.outcomes.get(id).and_then(|o| o.first())
        else {
            continue;
        };
        if response.code != corral_proto::wire::Code::CONTENT {
            continue;
        }
        let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&response.payload) else {
            out.push(format!("use: {name} at {t0} answered 2.05 with a body that is not JSON"));
            continue;
        };
        // Every second the use spanned: members answer between the request and its answer.
        let seconds: Vec<Instant> = (t0.as_secs()..=at.as_secs()).map(Instant::from_secs).collect();
        let readings = |m: SocketAddr| -> Vec<f64> { seconds.iter().filter_map(|&t| sample(m, t)).collect() };
        if let Some(values) = doc.get("values").and_then(|v| v.as_array()) {
            for v in values {
                let (Some(uri), Some(x)) = (v.get("m").and_then(|m| m.as_str()), v.get("v").and_then(|x| x.as_f64()))
                else {
                    continue;
                };
                let Some(m) = member_addr(uri) else { continue };
                let read = readings(m);
                // A nested entity's value is an aggregate of its own members: only devices read.
                if !read.is_empty() && !read.iter().any(|r| (r - x).abs() < 1e-9) {
                    out.push(format!("use: {name} at {t0} listed {x} for {uri}, which it never read then"));
                }
            }
        } else if let Some(x) = doc.get("v").and_then(|x| x.as_f64()) {
            // An aggregate lies within the range of every device's readings in the window (at the members'
            // precision).
            let all: Vec<f64> = devices.iter().flat_map(|&d| readings(d)).collect();
            let (lo, hi) = all.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
            if !all.is_empty() && (x < lo - 0.01 || x > hi + 0.01) {
                out.push(format!("use: {name} at {t0} answered {x}, outside every reading then ({lo}..{hi})"));
            }
        }
    }
    out
}

/// The reflection bound (corral-proto's `AmplificationLimit`) over a spell from `a` to `b`: what the
/// gateway sent the victim's address then is at most `factor` times all it ever received from that address
/// (every peer's credit) plus the address's bucket, full at `a`, and its refill.
pub fn reflection(
    limit: &corral_proto::AmplificationLimit,
    (sent_a, a): (usize, Instant),
    (sent_b, received_b, b): (usize, usize, Instant),
) -> Vec<String> {
    let secs = (b - a).as_micros().div_ceil(1_000_000) as usize;
    let allowed = limit.factor * received_b + limit.burst + limit.refill * secs;
    let sent = sent_b - sent_a;
    if sent > allowed {
        vec![format!(
            "reflection: the gateway sent a spoofed victim {sent} bytes from {a} to {b}, more than the \
             bound's {allowed} \
             ({received_b} bytes ever received from it)"
        )]
    } else {
        Vec::new()
    }
}

/// Every job ended, so nothing it held is held: the EM follows no member request and the gateway's endpoint
/// has no exchange in either direction, no upload and no delayed response left (observers and duplicate
/// entries may stay: a spoofed observer never leaves, and both are bounded tables of their own).
pub fn drained(em: &EntityManager, t: &corral_proto::TableSizes) -> Vec<String> {
    let mut out = Vec::new();
    if em.stats().in_flight() > 0 {
        out.push(format!("drained: the EM still follows {} member requests", em.stats().in_flight()));
    }
    let held = [
        ("client exchanges", t.client_exchanges),
        ("inbound exchanges", t.inbound_exchanges),
        ("uploads", t.uploads),
        ("delayed responses", t.delayed_responses),
    ];
    for (what, n) in held {
        if n > 0 {
            out.push(format!("drained: the gateway's endpoint still holds {n} {what}"));
        }
    }
    out
}

/// The gateway's tables within their documented bounds, whatever is going on.
pub fn bounded(em: &EntityManager, t: &corral_proto::TableSizes, limits: &corral_proto::Limits) -> Vec<String> {
    let mut out = Vec::new();
    let c = em.config();
    if em.entity_count() > c.max_entities {
        out.push(format!("bounds: {} entities, more than max_entities {}", em.entity_count(), c.max_entities));
    }
    if em.jobs_in_progress() > c.max_jobs {
        out.push(format!("bounds: {} jobs in progress, more than max_jobs {}", em.jobs_in_progress(), c.max_jobs));
    }
    let tables = [
        ("inbound exchanges", t.inbound_exchanges, limits.max_inbound_exchanges),
        ("peers", t.peers, limits.max_peers),
        ("client exchanges", t.client_exchanges, limits.max_client_exchanges),
        ("delayed responses", t.delayed_responses, limits.max_delayed),
    ];
    for (what, n, max) in tables {
        if n > max {
            out.push(format!("bounds: {n} {what}, more than {max}"));
        }
    }
    out
}
