//! Requests to `/em`: listing and profiles (`impl Table`), parsing a request (functions: profile
//! documents, the report format, what a use asks for), and starting a use (`impl EntityManager`: it
//! reserves quotas, starts a job and may attach a watch).

use super::jobs::{Kind, Sink};
use super::quotas::Client;
use super::{bad, Entity, EntityManager, Fail, Table};
use crate::output;
use crate::policy::Role;
use crate::profile::{ProfilePatch, UseOverrides};
use corral_proto::wire::{Code, ContentFormat, OptionNumber, OBSERVE_REGISTER};
use corral_proto::{Context, IncomingRequest, Request, ResourceLink, Response};
use serde_json::{json, Value as Json};
use tracing::debug;

impl Table {
    /// The entity list (`GET /em`), in link-format.
    pub(super) fn list(&self, req: &Request) -> Response {
        if !matches!(req.options.accept().map(|c| c.0), None | Some(40)) {
            return Response::error(Code::NOT_ACCEPTABLE, "the entity list is link-format (40)");
        }
        let links: Vec<ResourceLink> = self
            .values()
            .map(|e| {
                ResourceLink::new(&format!("em/{}", e.stored.name))
                    .attr("rt", "core.entity")
                    .attr("ect", e.stored.profile.ect.as_str())
            })
            .collect();
        Response::content(ContentFormat::LINK_FORMAT, corral_proto::render_links(&links, None))
    }

    /// Entity `name`'s profile (`GET /em/<name>/profile`), with its members' reachability and the
    /// directory's `note`, if it follows one.
    pub(super) fn read_profile(&self, name: &str, req: &Request, note: Option<&str>) -> Response {
        let Some(e) = self.get(name) else {
            return Response::error(Code::NOT_FOUND, format!("no entity {name}"));
        };
        let Some(cf) =
            output::negotiate(req.options.accept(), &[ContentFormat::JSON, ContentFormat::CBOR], ContentFormat::JSON)
        else {
            return Response::error(Code::NOT_ACCEPTABLE, "profiles are JSON (50) or CBOR (60)");
        };
        let mut doc = e.stored.profile.to_json();
        if let (Json::Object(m), false) = (&mut doc, e.unreachable.is_empty()) {
            // Read-only status (ignored when a client sends the document back): members that did not answer
            // their last request, and why.
            m.insert("unreachable".into(), json!(e.unreachable));
        }
        if let (Json::Object(m), Some(note)) = (&mut doc, note) {
            // Read-only status too: what the directory lookup last said, if something is amiss.
            m.insert("rdNote".into(), json!(note));
        }
        Response::content(cf, output::encode_doc(&doc, cf))
    }
}

impl EntityManager {
    pub(super) fn use_entity(
        &mut self,
        cx: &mut Context<'_>,
        inb: &IncomingRequest,
        name: &str,
        actuate: bool,
        role: Role,
    ) -> Result<(), Fail> {
        let req = &inb.request;
        self.entities.with_members(name)?;
        let (accept, kind, o) = use_request(req, actuate)?;
        if role < Role::Manage {
            self.entities.check_reader_overrides(&self.config, cx, name, &o)?;
        }
        if self.jobs.clients() >= self.config.max_jobs {
            return Err((Code::SERVICE_UNAVAILABLE, "too many entity requests in progress".into()));
        }
        let hop =
            req.options.get_uint(OptionNumber::HOP_LIMIT).map(|h| h.min(255) as u8).unwrap_or(self.config.hop_limit);
        if let Some(why) = self.entities.get(name).and_then(|e| e.violation.clone()) {
            return Err((Code::FORBIDDEN, format!("entity {name} is not used: {why}; update or delete it")));
        }
        let me = self.gateway_id(cx);
        if o.via.contains(&me) {
            return Err((
                Code::HOP_LIMIT_REACHED,
                format!("loop: this request for entity {name} already passed this gateway (a cycle of entities across gateways)"),
            ));
        }
        let (requests, share) =
            self.entities.use_cost(&self.config, name, o.budget).inspect_err(|_| self.stats.budget_refusals += 1)?;
        let client = Client::new(inb.from, inb.verified);
        let amount = usize::try_from(requests).unwrap_or(usize::MAX);
        let jobs = &self.jobs;
        let parts = (&self.config.budget, &mut self.stats);
        let hold =
            match self.quotas.reserve(parts, cx.now(), client, name, amount, || jobs.soonest_deadline(client, name)) {
                Ok(h) => h,
                Err(resp) => {
                    cx.respond(inb.id, resp);
                    return Ok(());
                }
            };
        let register = !actuate
            && req.options.observe() == Some(OBSERVE_REGISTER)
            && self.entities.get(name).is_some_and(Entity::observable);
        let sink = Sink::Client { id: inb.id, accept };
        let id = match self.with_jobs(cx, |jobs, j| jobs.start_use(j, name, sink, &o, kind, hop, 0)) {
            Ok(id) => id,
            Err(e) => {
                self.quotas.release(hold);
                return Err(e);
            }
        };
        let now = cx.now();
        let note = if inb.notification { self.watches.note_for(name, now) } else { None };
        if let Some(job) = self.jobs.get_mut(&id) {
            job.hold = Some(hold);
            job.share = share;
            job.via = o.via.iter().copied().chain([me]).collect();
            job.note = note;
        }
        self.jobs.client_started();
        if register {
            if let Some(e) = self.entities.get(name) {
                self.watches.attach(&mut self.jobs, e, id, req.options.path());
            }
        }
        debug!(entity = %name, job = id, register, "use started");
        self.drive(cx, id);
        Ok(())
    }
}

/// Reads the profile fields of a creation or update request (document or link-format, then queries).
pub(super) fn read_patch(req: &Request) -> Result<ProfilePatch, Fail> {
    let cf = req.options.content_format();
    let body = &req.payload;
    let sniffed = match cf {
        Some(c) => Some(c),
        None if body.is_empty() => None,
        None => match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => Some(ContentFormat::JSON),
            Some(b'<') => Some(ContentFormat::LINK_FORMAT),
            _ => {
                return Err((
                    Code::UNSUPPORTED_CONTENT_FORMAT,
                    "profile documents are JSON (50), CBOR (60) or a link-format member list (40)".into(),
                ))
            }
        },
    };
    let mut patch = match sniffed.map(|c| c.0) {
        None => ProfilePatch::default(),
        Some(50) => {
            let doc: Json =
                serde_json::from_slice(body).map_err(|e| bad(format!("profile document is not valid JSON: {e}")))?;
            ProfilePatch::from_json(&doc).map_err(|e| bad(e.to_string()))?
        }
        Some(60) => {
            let doc: ciborium::Value = ciborium::from_reader(&body[..])
                .map_err(|e| bad(format!("profile document is not valid CBOR: {e}")))?;
            let doc = output::cbor_to_json(&doc).map_err(|e| bad(format!("profile document: {e}")))?;
            ProfilePatch::from_json(&doc).map_err(|e| bad(e.to_string()))?
        }
        Some(40) => {
            let text = std::str::from_utf8(body).map_err(|_| bad("link-format is not UTF-8"))?;
            ProfilePatch {
                er: Some(crate::profile::parse_link_members(text).map_err(|e| bad(e.to_string()))?),
                ..ProfilePatch::default()
            }
        }
        Some(other) => {
            return Err((
                Code::UNSUPPORTED_CONTENT_FORMAT,
                format!("content format {other}: profile documents are JSON (50), CBOR (60) or link-format (40)"),
            ))
        }
    };
    // `offline` is an option of the request, not a profile field (see `allow_offline`).
    patch.apply_queries(req.options.query_pairs().filter(|(k, _)| *k != "offline")).map_err(|e| bad(e.to_string()))?;
    Ok(patch)
}

/// Whether a PUT to an existing entity carries a profile (an update) rather than an actuation value:
/// a link-format member list, or a JSON/CBOR map with an `er` field *(decision)*.
pub(super) fn is_profile_document(req: &Request) -> bool {
    match req.options.content_format().map(|c| c.0) {
        Some(40) => true,
        Some(50) => serde_json::from_slice::<Json>(&req.payload).is_ok_and(|j| j.get("er").is_some()),
        Some(60) => ciborium::from_reader::<ciborium::Value, _>(&req.payload[..])
            .ok()
            .and_then(|v| output::cbor_to_json(&v).ok())
            .is_some_and(|j| j.get("er").is_some()),
        _ => false,
    }
}

pub(super) fn report_accept(req: &Request) -> Result<Option<ContentFormat>, Fail> {
    match req.options.accept() {
        None => Ok(None),
        Some(a) if output::REPORT_FORMATS.contains(&a) => Ok(Some(a)),
        Some(a) => {
            Err((Code::NOT_ACCEPTABLE, format!("reports are text/plain (0), JSON (50) or CBOR (60), not {}", a.0)))
        }
    }
}

/// What a use request asks for: the format of its answer, what to do with the members (read, or actuate
/// with the request's method and payload), and the query's overrides.
fn use_request(req: &Request, actuate: bool) -> Result<(ContentFormat, Kind, UseOverrides), Fail> {
    let (accept, kind) = if actuate {
        let accept = match req.options.accept() {
            None => ContentFormat::TEXT_PLAIN,
            Some(a) if output::USE_FORMATS.contains(&a) => a,
            Some(a) => return Err((Code::NOT_ACCEPTABLE, format!("content format {} not offered", a.0))),
        };
        (accept, Kind::Actuate { method: req.method, payload: req.payload.clone(), cf: req.options.content_format() })
    } else {
        let Some(accept) = output::negotiate(req.options.accept(), &output::USE_FORMATS, ContentFormat::TEXT_PLAIN)
        else {
            return Err((
                Code::NOT_ACCEPTABLE,
                "offered: text/plain (0), JSON (50), CBOR (60), SenML JSON (110), SenML CBOR (112)".into(),
            ));
        };
        (accept, Kind::Read)
    };
    let o = UseOverrides::parse(req.options.query_pairs()).map_err(|e| bad(e.to_string()))?;
    if actuate && o.eo.is_some() {
        return Err(bad("eo applies to reading an entity, not to actuation"));
    }
    Ok((accept, kind, o))
}
