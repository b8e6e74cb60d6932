//! Members: member URIs resolved to targets and the member policy (`impl EmConfig`: they need only the
//! configuration), and what the entity table answers about members (`impl Table`): the checks of a new
//! member list (local members exist, no cycle of nested entities, the constraints of multicast entities),
//! the admission of a change, loading a store's entities, installing a committed one.

use super::stats::EmStats;
use super::{bad, EmConfig, Entity, Fail, Flow, HashMap, Item, Table, Target};
use crate::profile::{Ect, Profile};
use crate::store::{StoreError, StoredEntity};
use crate::uri;
use crate::uri::MemberUri;
use corral_proto::wire::Code;
use serde_json::Value as Json;
use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use tracing::warn;

/// Why a member URI names no member ([`EmConfig::resolve_target`]).
#[derive(Debug)]
pub(super) enum BadMember {
    /// The URI does not parse.
    Uri(uri::UriError),
    /// A relative URI that is not `/em/<name>`.
    RelativeNotEntity,
    /// The unspecified or a multicast address.
    NotUnicast(IpAddr),
    /// An entity of this gateway named with a query.
    LocalWithQuery,
}

impl fmt::Display for BadMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadMember::Uri(e) => write!(f, "{e}"),
            BadMember::RelativeNotEntity => {
                f.write_str("a relative member must be /em/<name> (an entity of this gateway)")
            }
            BadMember::NotUnicast(ip) => write!(f, "{ip} is not a unicast address"),
            BadMember::LocalWithQuery => {
                f.write_str("a member that is an entity of this gateway may not carry a query")
            }
        }
    }
}

impl EmConfig {
    /// Parses a member URI into a target. The member policy is not applied here (entities loaded from the
    /// store keep loading when the policy tightens); [`EmConfig::police`] applies it.
    pub(super) fn resolve_target(&self, text: &str) -> Result<Target, BadMember> {
        match uri::parse(text).map_err(BadMember::Uri)? {
            MemberUri::Relative { path } => match path.as_slice() {
                [em, name] if em == "em" => Ok(Target::Local(name.clone())),
                _ => Err(BadMember::RelativeNotEntity),
            },
            MemberUri::Coap { addr, path, query, .. } => {
                let addr = SocketAddr::new(crate::policy::canonical(addr.ip()), addr.port());
                if addr.ip().is_multicast() || addr.ip().is_unspecified() {
                    return Err(BadMember::NotUnicast(addr.ip()));
                }
                let entity = path.len() == 2 && path[0] == "em";
                if entity && (self.local_addrs.contains(&addr) || self.members.is_gateway(addr)) {
                    if !query.is_empty() {
                        return Err(BadMember::LocalWithQuery);
                    }
                    return Ok(Target::Local(path[1].clone()));
                }
                Ok(Target::Remote { addr, path, query, entity })
            }
        }
    }

    /// Parses a member list (no policy; see [`EmConfig::police`]).
    pub(super) fn resolve_items(&self, er: &[String]) -> Result<Vec<Item>, Fail> {
        er.iter()
            .map(|m| {
                self.resolve_target(m)
                    .map(|target| Item { label: m.clone(), target })
                    .map_err(|why| bad(format!("malformed member URI {m}: {why}")))
            })
            .collect()
    }

    /// The member policy over a parsed member list: every remote member in an allowed network and port,
    /// none the gateway itself or a broadcast address, and no member twice — compared after
    /// normalisation (dot segments, default port, case and percent-encoding are gone once parsed), so
    /// `coap://h/s/t`, `coap://h:5683/./s/t` and `coap://h/x/../s/t` are one member. 4.03 names the member.
    pub(super) fn police(&self, items: &[Item]) -> Result<(), Fail> {
        let mut seen: HashMap<&Target, &str> = HashMap::default();
        for it in items {
            if let Target::Remote { addr, .. } = &it.target {
                if self.local_addrs.contains(addr) {
                    return Err((
                        Code::FORBIDDEN,
                        format!("member {}: {addr} is this gateway (name its entities as /em/<name>)", it.label),
                    ));
                }
                self.members.check(*addr).map_err(|why| (Code::FORBIDDEN, format!("member {}: {why}", it.label)))?;
                let secure = matches!(uri::parse(&it.label), Ok(MemberUri::Coap { secure: true, .. }));
                if secure && !self.dtls_members.contains(addr) {
                    return Err((
                        Code::FORBIDDEN,
                        format!(
                            "member {}: the gateway has no DTLS credentials for {addr} (give them with \
                             --member-psk-file)",
                            it.label
                        ),
                    ));
                }
            }
            if let Some(first) = seen.insert(&it.target, &it.label) {
                return Err(bad(format!("member {} is {first} again (the same resource)", it.label)));
            }
        }
        Ok(())
    }
}

impl Table {
    /// Checks of a new member list against the other entities: local members exist, no cycle, and the
    /// constraints of multicast entities.
    pub(super) fn check_members(
        &self,
        config: &EmConfig,
        name: &str,
        profile: &Profile,
        items: &[Item],
    ) -> Result<(), Fail> {
        for it in items {
            if let Target::Local(child) = &it.target {
                if child == name {
                    return Err(bad(format!("cycle: entity {name} cannot be a member of itself ({})", it.label)));
                }
                if !self.contains_key(child) {
                    return Err(bad(format!("member {}: no entity {child} on this gateway", it.label)));
                }
            }
        }
        // A cycle exists if `name` is reachable from one of its new local members.
        for it in items {
            let Target::Local(child) = &it.target else { continue };
            let mut stack = vec![(child.clone(), vec![name.to_string(), child.clone()])];
            let mut seen = HashSet::new();
            while let Some((cur, path)) = stack.pop() {
                if !seen.insert(cur.clone()) {
                    continue;
                }
                let Some(e) = self.get(&cur) else { continue };
                for next in e.local_members() {
                    let mut p = path.clone();
                    p.push(next.to_string());
                    if next == name {
                        return Err(bad(format!("cycle of nested entities: {}", p.join(" → "))));
                    }
                    stack.push((next.to_string(), p));
                }
            }
        }
        if profile.ect == Ect::Multicast {
            let mut first: Option<(&Item, &Vec<String>, &Vec<String>)> = None;
            for it in items {
                let Target::Remote { addr, path, query, entity } = &it.target else {
                    return Err(bad(format!(
                        "member {}: a multicast entity's members must be device resources, not entities",
                        it.label
                    )));
                };
                if *entity {
                    return Err(bad(format!(
                        "member {}: a multicast entity's members must be device resources, not entities",
                        it.label
                    )));
                }
                match first {
                    None => first = Some((it, path, query)),
                    Some((f, fp, fq)) => {
                        if fp != path || fq != query {
                            return Err(bad(format!(
                                "multicast members must share one resource path (seed 000 §4.2): {} and {} differ",
                                f.label, it.label
                            )));
                        }
                        let Target::Remote { addr: fa, .. } = &f.target else { continue };
                        if config.multicast_port.is_none() && fa.port() != addr.port() {
                            return Err(bad(format!(
                                "multicast members must listen on one port, the group's: {} uses {} and {} uses {} (give them one port, or use ect=unicast)",
                                f.label,
                                fa.port(),
                                it.label,
                                addr.port()
                            )));
                        }
                        if fa.is_ipv4() != addr.is_ipv4() {
                            return Err(bad(format!(
                                "multicast members must share an address family: {} and {} differ",
                                f.label, it.label
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

impl Table {
    /// The members of `profile` for entity `name`, if the change may be made: each member parsed and within
    /// the member policy, the member list consistent with the other entities, the fan-out budget (a
    /// refusal is counted in `stats`) and the store's bytes.
    pub(super) fn admit(
        &self,
        config: &EmConfig,
        stats: &mut EmStats,
        name: &str,
        profile: &Profile,
    ) -> Result<Vec<Item>, Fail> {
        let items = config.resolve_items(&profile.er)?;
        config.police(&items)?;
        self.check_members(config, name, profile, &items)?;
        self.check_budget(config, name, profile, &items).inspect_err(|_| stats.budget_refusals += 1)?;
        self.check_store(config, name, profile)?;
        Ok(items)
    }
}

impl EmConfig {
    /// A stored entity with its members parsed; one that breaks the member policy is kept with the reason
    /// (see `Entity::violation`). `Err`: a member URI does not parse.
    pub(super) fn entity(&self, stored: StoredEntity) -> Result<Entity, String> {
        let items = self.resolve_items(&stored.profile.er).map_err(|(_, why)| why)?;
        let violation = self.police(&items).err().map(|(_, why)| why);
        Ok(Entity::new(stored, items.into(), violation))
    }
}

impl Table {
    /// A name for an entity the client did not name: `e<seq>` after the last one the EM gave (`last`),
    /// skipping names in use or in a change (`busy`).
    pub(super) fn fresh_name(&self, last: Option<u64>, busy: &HashSet<String>) -> String {
        let mut seq = last.unwrap_or(0) + 1;
        loop {
            let n = format!("e{seq}");
            if !self.contains_key(&n) && !busy.contains(&n) {
                return n;
            }
            seq += 1;
        }
    }

    /// The entities that have `name` as a local member.
    pub(super) fn parents_of(&self, name: &str) -> Vec<&str> {
        self.values().filter(|e| e.local_members().any(|m| m == name)).map(|e| e.stored.name.as_str()).collect()
    }
}

impl Entity {
    /// The members recorded as joined to the entity's group.
    pub(super) fn joined_items(&self) -> Vec<Item> {
        self.items
            .iter()
            .zip(self.stored.joined.iter().chain(std::iter::repeat(&false)))
            .filter(|(_, j)| **j)
            .map(|(i, _)| i.clone())
            .collect()
    }
}

impl EmConfig {
    /// The members of a directory's lookup result the EM can use, and those it skips (not an IP literal,
    /// outside the member policy) with the reason.
    pub(super) fn usable_members(&self, members: Vec<String>) -> (Vec<Item>, Vec<String>) {
        let mut items = Vec::new();
        let mut skipped = Vec::new();
        for m in members {
            let checked = self
                .resolve_target(&m)
                .map_err(|e| e.to_string())
                .map(|target| Item { label: m.clone(), target })
                .and_then(|it| self.police(std::slice::from_ref(&it)).map(|_| it).map_err(|(_, why)| why));
            match checked {
                Ok(it) => items.push(it),
                Err(why) => skipped.push(format!("{m} ({why})")),
            }
        }
        (items, skipped)
    }
}

impl Table {
    /// The table of the entities a store holds; the multicast creations a crash interrupted (pending
    /// records) are returned apart, to be undone. Fails if an entity's member URI does not parse.
    pub(super) fn load(
        config: &EmConfig,
        entities: Vec<StoredEntity>,
    ) -> Result<(Table, Vec<StoredEntity>), StoreError> {
        let mut table = Table::default();
        let mut recovery = Vec::new();
        for stored in entities {
            if stored.pending {
                warn!(entity = %stored.name, "multicast creation interrupted by a restart: members will be asked to leave");
                recovery.push(stored);
                continue;
            }
            let name = stored.name.clone();
            let entity = config.entity(stored).map_err(|why| StoreError::Entity { name: name.clone(), why })?;
            if let Some(why) = &entity.violation {
                warn!(entity = %name, why = %why, "stored entity breaks the member policy: its uses are refused");
            }
            table.insert(name, entity);
        }
        Ok((table, recovery))
    }

    /// Installs the entity a committed creation or update `flow` made (`new`, the members it resolved and
    /// those that did not answer); its profile, for the client's answer.
    pub(super) fn install(&mut self, flow: &mut Flow, new: StoredEntity) -> Json {
        let profile = new.profile.to_json();
        let mut entity = Entity::new(new, flow.items.clone(), None);
        entity.unreachable = std::mem::take(&mut flow.offline);
        self.insert(flow.name.clone(), entity);
        profile
    }
}
