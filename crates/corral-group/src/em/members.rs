//! Members: member URIs resolved to targets, and the checks of a new member list (local members exist,
//! no cycle of nested entities, the constraints of multicast entities).

use super::*;
use std::fmt;

/// Why a member URI names no member ([`EntityManager::resolve_target`]).
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

impl EntityManager {
    /// Records whether member `i` of job `id` answered its last request (`failure`: why not), for the
    /// entity's profile to show (see `Entity::unreachable`). Only members of the entity as it is now.
    pub(super) fn note_reach(&mut self, id: JobId, i: usize, failure: Option<String>) {
        let Some(job) = self.jobs.get(&id) else { return };
        let Some(item) = job.spec.items.get(i).filter(|it| matches!(it.target, Target::Remote { .. })) else { return };
        let Some(e) = self.entities.get_mut(&job.spec.entity) else { return };
        match failure {
            None => {
                if !e.unreachable.is_empty() {
                    e.unreachable.remove(&item.label);
                }
            }
            Some(why) => {
                if e.items.iter().any(|it| it.label == item.label) {
                    e.unreachable.insert(item.label.clone(), why);
                }
            }
        }
    }

    /// Parses a member URI into a target. The member policy is not applied here (entities loaded from the
    /// store keep loading when the policy tightens); [`EntityManager::police`] applies it.
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
                if entity && (self.config.local_addrs.contains(&addr) || self.config.members.is_gateway(addr)) {
                    if !query.is_empty() {
                        return Err(BadMember::LocalWithQuery);
                    }
                    return Ok(Target::Local(path[1].clone()));
                }
                Ok(Target::Remote { addr, path, query, entity })
            }
        }
    }

    /// Parses a member list (no policy; see [`EntityManager::police`]).
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
                if self.config.local_addrs.contains(addr) {
                    return Err((
                        Code::FORBIDDEN,
                        format!("member {}: {addr} is this gateway (name its entities as /em/<name>)", it.label),
                    ));
                }
                self.config
                    .members
                    .check(*addr)
                    .map_err(|why| (Code::FORBIDDEN, format!("member {}: {why}", it.label)))?;
                let secure = matches!(uri::parse(&it.label), Ok(MemberUri::Coap { secure: true, .. }));
                if secure && !self.config.dtls_members.contains(addr) {
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

    /// Checks of a new member list against the other entities: local members exist, no cycle, and the
    /// constraints of multicast entities.
    pub(super) fn check_members(&self, name: &str, profile: &Profile, items: &[Item]) -> Result<(), Fail> {
        for it in items {
            if let Target::Local(child) = &it.target {
                if child == name {
                    return Err(bad(format!("cycle: entity {name} cannot be a member of itself ({})", it.label)));
                }
                if !self.entities.contains_key(child) {
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
                let Some(e) = self.entities.get(&cur) else { continue };
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
                        if self.config.multicast_port.is_none() && fa.port() != addr.port() {
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
