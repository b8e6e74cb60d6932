//! The member-side multicast membership resource `/mc` of seed 000 §4.1, Table 4, as a sans-IO service.
//!
//! | method | query | payload | answers |
//! |---|---|---|---|
//! | GET | — | — | 2.05: joined groups, one per line (text/plain) or a CBOR array of byte strings (Accept 60) |
//! | POST | `act=add` | the group address, 16 raw bytes (IPv6) or 4 (IPv4) | 2.04 joined (also when already a member); 4.00 bad length or not multicast; 4.03 a reserved group, or not from a manager; 5.03 no free slot |
//! | POST | `act=del` | the group address | 2.02 left; 4.04 not a member; 4.03 not from a manager |
//!
//! Membership changes are accepted only from the node's managers (gateway address prefixes; by default
//! anyone in the library, `corral device` defaults to this machine): a stranger cannot take a device out
//! of its group or fill its slots. An address can be spoofed, so a device that is [`McResource::verifying`]
//! (`corral device` is) answers every change from a manager beyond loopback with 4.01 and an Echo value
//! first (RFC 9175 §2.4): the manager's repetition with it is served (the Entity Manager's endpoint
//! repeats by itself), a blind spoofer's never comes — even one that sends from the gateway's own
//! address and port, which a device that checked the gateway once would otherwise trust. Groups with a fixed meaning (All Nodes, All CoAP Nodes, link-local
//! control — [`crate::policy::reserved_group`]) are refused from anyone: joining them would make the
//! device answer discovery traffic it was never meant to see.
//!
//! Owns: the node's list of joined groups, bounded by a fixed number of slots like Contiki's compile-time
//! limit. Joining and leaving reach the socket (or the simulated network) as [`corral_proto::NodeCommand`]s
//! through `cx.join_group` / `cx.leave_group`. Must never: touch a socket itself.

use crate::policy::{canonical, reserved_group, Prefix};
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{Context, IncomingRequest, ResourceLink, Response, Service};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where a device mounts this resource (seed 000 Table 4), and where the Entity Manager asks for it.
pub const PATH: &str = "mc";

/// Default slots *(decision)*: seed 000's nodes had 6 multicast addresses of which 4 are taken by the
/// automatic link-local groups (Table 3, Table 6); corral's virtual devices allow 4 entity groups so that a
/// testbed can host several multicast entities per device. Configurable (`corral device --mc-slots`).
pub const DEFAULT_SLOTS: usize = 4;

/// The `/mc` resource. Mount it at `mc`.
#[derive(Debug, Clone)]
pub struct McResource {
    slots: usize,
    groups: Vec<IpAddr>,
    /// Who may change memberships; empty: anyone.
    managers: Vec<Prefix>,
    /// Changes from unverified sources beyond loopback are challenged first (see the module docs).
    verify: bool,
}

impl Default for McResource {
    fn default() -> Self {
        McResource::new(DEFAULT_SLOTS)
    }
}

impl McResource {
    pub fn new(slots: usize) -> McResource {
        McResource { slots, groups: Vec::new(), managers: Vec::new(), verify: false }
    }

    /// Accepts membership changes only from these prefixes (the gateways that manage this device).
    pub fn managed_by(mut self, managers: Vec<Prefix>) -> McResource {
        self.managers = managers;
        self
    }

    /// Challenges a membership change from a manager beyond loopback that has not proved its address
    /// (4.01 with an Echo value, RFC 9175 §2.4) before acting on it.
    pub fn verifying(mut self, verify: bool) -> McResource {
        self.verify = verify;
        self
    }

    /// Whether `from` may change memberships.
    fn is_manager(&self, from: IpAddr) -> bool {
        self.managers.is_empty() || self.managers.iter().any(|p| p.contains(from))
    }

    pub fn managers(&self) -> &[Prefix] {
        &self.managers
    }

    /// The groups joined, in join order.
    pub fn groups(&self) -> &[IpAddr] {
        &self.groups
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Joins a group as `POST ?act=add` does (also for memberships configured at start-up): `Err` is the
    /// error answer (4.00 not multicast, 5.03 no free slot). Joining a group twice is not an error.
    pub fn join(&mut self, cx: &mut Context<'_>, group: IpAddr) -> Result<(), Response> {
        if !group.is_multicast() {
            return Err(Response::error(Code::BAD_REQUEST, format!("{group} is not a multicast address")));
        }
        if let Some(why) = reserved_group(group) {
            return Err(Response::error(Code::FORBIDDEN, format!("{group} is not joined: {why}")));
        }
        if self.groups.contains(&group) {
            return Ok(());
        }
        if self.groups.len() >= self.slots {
            return Err(Response::error(
                Code::SERVICE_UNAVAILABLE,
                format!("no free slot ({} of {} in use)", self.groups.len(), self.slots),
            ));
        }
        self.groups.push(group);
        cx.join_group(group);
        Ok(())
    }

    fn handle(&mut self, cx: &mut Context<'_>, req: &IncomingRequest) -> Response {
        if !cx.subpath(&req.request).is_empty() {
            return Response::error(Code::NOT_FOUND, "no such resource below /mc");
        }
        let r = &req.request;
        match r.method {
            Code::GET => match r.options.accept().map(|c| c.0) {
                None | Some(0) => {
                    let mut s = String::new();
                    for g in &self.groups {
                        s.push_str(&g.to_string());
                        s.push('\n');
                    }
                    Response::content(ContentFormat::TEXT_PLAIN, s)
                }
                Some(60) => {
                    let arr = ciborium::Value::Array(
                        self.groups
                            .iter()
                            .map(|g| {
                                ciborium::Value::Bytes(match g {
                                    IpAddr::V4(a) => a.octets().to_vec(),
                                    IpAddr::V6(a) => a.octets().to_vec(),
                                })
                            })
                            .collect(),
                    );
                    let mut out = Vec::new();
                    let _ = ciborium::into_writer(&arr, &mut out);
                    Response::content(ContentFormat::CBOR, out)
                }
                Some(_) => Response::error(Code::NOT_ACCEPTABLE, "/mc offers text/plain (0) or CBOR (60)"),
            },
            Code::POST => {
                if !self.is_manager(req.from.ip()) {
                    tracing::warn!(from = %req.from, "membership change from a stranger refused");
                    return Response::error(
                        Code::FORBIDDEN,
                        format!("{} does not manage this device's groups", req.from.ip()),
                    );
                }
                let act = r.query_value("act");
                let group = match r.payload.len() {
                    16 => {
                        let mut b = [0u8; 16];
                        b.copy_from_slice(&r.payload);
                        IpAddr::V6(Ipv6Addr::from(b))
                    }
                    4 => {
                        let mut b = [0u8; 4];
                        b.copy_from_slice(&r.payload);
                        IpAddr::V4(Ipv4Addr::from(b))
                    }
                    n if matches!(act, Some("add" | "del")) => {
                        return Response::error(
                            Code::BAD_REQUEST,
                            format!("bad length: {n} bytes (expected 16 for IPv6 or 4 for IPv4)"),
                        )
                    }
                    _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                };
                match act {
                    Some("add") => match self.join(cx, group) {
                        Ok(()) => Response::new(Code::CHANGED),
                        Err(resp) => resp,
                    },
                    Some("del") => {
                        if let Some(i) = self.groups.iter().position(|g| *g == group) {
                            self.groups.remove(i);
                            cx.leave_group(group);
                            Response::new(Code::DELETED)
                        } else {
                            Response::error(Code::NOT_FOUND, format!("not a member of {group}"))
                        }
                    }
                    _ => Response::error(Code::BAD_REQUEST, "expected the query act=add or act=del"),
                }
            }
            _ => Response::error(Code::METHOD_NOT_ALLOWED, "/mc supports GET and POST"),
        }
    }
}

impl Service for McResource {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        // Each change needs its own Echo round trip: the gateway manages from a fixed address and port,
        // which a blind spoofer knows, so a source verified once proves nothing about the next datagram.
        let unproven = self.verify
            && req.request.method == Code::POST
            && !req.echoed
            && !req.multicast
            && !canonical(req.from.ip()).is_loopback()
            && self.is_manager(req.from.ip());
        if unproven {
            tracing::debug!(from = %req.from, "membership change from an unverified source: Echo challenge");
            cx.challenge(req.id);
            return;
        }
        let resp = self.handle(cx, &req);
        cx.respond(req.id, resp);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "core.mc").attr("ct", "0 60")]
    }
}
