//! Groups in the directory (issue 32, seed 001's "inquire groups"): [`Announces`], one registration per
//! multicast entity in the gateway's Resource Directory (`EmConfig::rd`), so that a client can look a group
//! up by name or by its resources and reach it directly with one multicast request.
//!
//! The registration follows RFC 9176 Appendix A ("Groups Registration and Lookup", the RD-Groups usage
//! pattern that draft-ietf-core-groupcomm-bis points to for discovering groups): the group is an endpoint
//! registered by a third party — the EM, as the group's manager — with the entity's name as endpoint name,
//! endpoint type `core.rd-group`, the group's multicast URI as its base, and the links every member serves
//! (the entity's resource path). `GET /rd-lookup/ep?et=core.rd-group` lists the groups;
//! `GET /rd-lookup/res?ep=NAME` gives a group's resource as an absolute multicast URI.
//!
//! The registration is sent again at 90 % of its lifetime (a registration of the same name from the same
//! address replaces the old one), and after a failure with backoff ([`RETRY_FIRST`] doubling to
//! [`RETRY_MAX`]); it is removed (DELETE of its location) when the entity is deleted or stops being
//! multicast. Only the manager (or the only worker) announces.
//!
//! The behaviour is `impl Announces`, given the directory's address and the entity table.
//!
//! Owns: the announcement table, its requests and timers. Must never: announce a group the entity table
//! does not hold, or grow beyond one registration per entity.

use super::follow::{RETRY_FIRST, RETRY_MAX};
use super::owners::Owner;
use super::owners::Owners;
use super::Entity;
use crate::profile::Profile;
use crate::uri;
use crate::uri::MemberUri;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Context, Duration, Instant, Outcome, Request, RequestId, SendParams};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use tracing::{debug, info};

/// The lifetime of a group's registration, in seconds (refreshed at 90 % of it).
pub const GROUP_LIFETIME: u32 = 3600;
/// The endpoint type of a group's registration (RFC 9176 Appendix A).
pub const GROUP_ENDPOINT_TYPE: &str = "core.rd-group";

/// What a group's registration says: its base (the multicast URI without path) and its links.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    base: String,
    links: String,
}

#[derive(Debug)]
struct Announce {
    group: Group,
    /// The registration's location once the directory created it (for its removal).
    location: Option<Vec<String>>,
    rid: Option<RequestId>,
    wake: Option<Instant>,
    backoff: Duration,
}

/// The multicast entities registered in the directory, by name.
#[derive(Debug, Default)]
pub(super) struct Announces {
    by_name: BTreeMap<String, Announce>,
    dirty: bool,
    /// The earliest wake-up of any announcement, kept so that an input does not scan the table.
    due_at: Option<Instant>,
}

impl Announces {
    /// Entities changed: the announcements are matched against them at the next input.
    pub(super) fn touch(&mut self) {
        self.dirty = true;
    }

    pub(super) fn next_wake(&self) -> Option<Instant> {
        if self.dirty {
            return Some(Instant::ZERO);
        }
        self.due_at
    }

    /// Recomputes the earliest wake-up after wake-ups changed.
    fn rearm(&mut self) {
        self.due_at = self.by_name.values().filter_map(|a| a.wake).min();
    }
}

/// The registration of a multicast entity's group: `coap://GROUP:PORT` and `</PATH>` from its `mcstURI`.
fn group_of(profile: &Profile) -> Option<Group> {
    let Ok(MemberUri::Coap { addr, path, .. }) = uri::parse(profile.mcst_uri.as_deref()?) else { return None };
    if !addr.ip().is_multicast() {
        return None;
    }
    let base = uri::format_coap(addr, &[] as &[String]).trim_end_matches('/').to_string();
    let links = format!("</{}>", path.join("/"));
    Some(Group { base, links })
}

impl Announces {
    /// Matches the announcements against the entity table: a new or changed group is registered at once,
    /// the registration of an entity that is gone or no longer multicast is removed.
    fn reconcile(
        &mut self,
        (cx, owners): (&mut Context<'_>, &mut Owners),
        rd: SocketAddr,
        entities: &BTreeMap<String, Entity>,
    ) {
        let now = cx.now();
        let wanted: BTreeMap<String, Group> =
            entities.iter().filter_map(|(name, e)| group_of(&e.stored.profile).map(|g| (name.clone(), g))).collect();
        let gone: Vec<String> =
            self.by_name.iter().filter(|(n, a)| wanted.get(*n) != Some(&a.group)).map(|(n, _)| n.clone()).collect();
        for name in gone {
            let Some(a) = self.by_name.remove(&name) else { continue };
            if let Some(rid) = a.rid {
                owners.remove(rid);
                cx.cancel(rid);
            }
            if let Some(location) = a.location {
                let mut req = Request::new(Code::DELETE);
                for s in &location {
                    req.options.push_str(OptionNumber::URI_PATH, s);
                }
                match cx.request(rd, req, SendParams::default()) {
                    Ok(rid) => {
                        debug!(entity = %name, "removing the group's registration from the directory");
                        owners.insert(rid, Owner::Unannounce);
                    }
                    Err(e) => info!(entity = %name, error = %e, "cannot remove the group's registration"),
                }
            }
        }
        for (name, group) in wanted {
            if self.by_name.contains_key(&name) {
                continue;
            }
            let a = Announce { group, location: None, rid: None, wake: Some(now), backoff: RETRY_FIRST };
            self.by_name.insert(name, a);
        }
        self.rearm();
    }

    /// Sends the registrations that are due (new, refreshed, or retried).
    fn due(&mut self, cx: &mut Context<'_>, owners: &mut Owners, rd: SocketAddr) {
        let now = cx.now();
        let due: Vec<String> = self
            .by_name
            .iter()
            .filter(|(_, a)| a.rid.is_none() && a.wake.is_some_and(|w| w <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            let Some(a) = self.by_name.get_mut(&name) else { continue };
            a.wake = None;
            let mut req = Request::new(Code::POST)
                .with_path("rd")
                .with_query(&format!("ep={name}"))
                .with_query(&format!("et={GROUP_ENDPOINT_TYPE}"))
                .with_query(&format!("base={}", a.group.base))
                .with_query(&format!("lt={GROUP_LIFETIME}"))
                .with_content_format(ContentFormat::LINK_FORMAT);
            req.payload = a.group.links.clone().into_bytes();
            match cx.request(rd, req, SendParams::default()) {
                Ok(rid) => {
                    a.rid = Some(rid);
                    owners.insert(rid, Owner::Announce(name));
                }
                Err(e) => {
                    a.wake = Some(now + a.backoff);
                    a.backoff = a.backoff.saturating_mul(2).min(RETRY_MAX);
                    info!(entity = %name, error = %e, "cannot register the group in the directory; retrying");
                }
            }
        }
        self.rearm();
    }

    /// An answer to entity `name`'s group registration.
    pub(super) fn response(&mut self, cx: &mut Context<'_>, name: String, outcome: &Outcome) {
        let now = cx.now();
        let Some(a) = self.by_name.get_mut(&name) else { return };
        a.rid = None;
        match outcome {
            Outcome::Response { response, .. } if response.code.is_success() => {
                let location: Vec<String> = response
                    .options
                    .get_all(OptionNumber::LOCATION_PATH)
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                if !location.is_empty() {
                    a.location = Some(location);
                }
                debug!(entity = %name, base = %a.group.base, "group registered in the directory");
                a.backoff = RETRY_FIRST;
                a.wake = Some(now + Duration::from_secs(u64::from(GROUP_LIFETIME)).mul_f64(0.9));
            }
            other => {
                let why = match other {
                    Outcome::Response { response, .. } => {
                        format!("{} {}", response.code, String::from_utf8_lossy(&response.payload))
                    }
                    Outcome::Failed(e) => e.to_string(),
                    _ => "no answer".to_string(),
                };
                info!(entity = %name, why = %why, retry_in_s = a.backoff.as_secs(), "the directory refused the group; retrying");
                a.wake = Some(now + a.backoff);
                a.backoff = a.backoff.saturating_mul(2).min(RETRY_MAX);
            }
        }
        self.rearm();
    }

    /// What follows an input: the table is matched against a changed entity table and due registrations
    /// are sent to the directory `rd` (`None`: there is none, or this worker is a replica, which never
    /// announces).
    pub(super) fn tick(
        &mut self,
        (cx, owners): (&mut Context<'_>, &mut Owners),
        rd: Option<SocketAddr>,
        entities: &BTreeMap<String, Entity>,
    ) {
        let dirty = std::mem::take(&mut self.dirty);
        let Some(rd) = rd else { return };
        if dirty {
            self.reconcile((cx, owners), rd, entities);
        }
        // Only when a wake-up is due: a use request to the gateway does not scan the table.
        if self.due_at.is_some_and(|d| d <= cx.now()) {
            self.due(cx, owners, rd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_registration_is_its_multicast_base_and_resource() {
        let mut p = Profile::default();
        assert_eq!(group_of(&p), None, "not multicast");
        p.mcst_uri = Some("coap://239.1.2.3:5683/s/t".into());
        let g = group_of(&p).unwrap();
        assert_eq!(g.base, "coap://239.1.2.3", "the default port is implied");
        assert_eq!(g.links, "</s/t>");
        p.mcst_uri = Some("coap://[ff35::1]:5700/a/light".into());
        assert_eq!(group_of(&p).unwrap().base, "coap://[ff35::1]:5700");
        p.mcst_uri = Some("coap://10.0.0.1/s/t".into());
        assert_eq!(group_of(&p), None, "a unicast URI is no group");
    }
}
