//! Requests to `/em`: listing, profiles (read, parse), and starting a use.

use super::*;

impl EntityManager {
    pub(super) fn list(&self, req: &Request) -> Response {
        if !matches!(req.options.accept().map(|c| c.0), None | Some(40)) {
            return Response::error(Code::NOT_ACCEPTABLE, "the entity list is link-format (40)");
        }
        let links: Vec<ResourceLink> = self
            .entities
            .values()
            .map(|e| {
                ResourceLink::new(&format!("em/{}", e.stored.name))
                    .attr("rt", "core.entity")
                    .attr("ect", e.stored.profile.ect.as_str())
            })
            .collect();
        Response::content(ContentFormat::LINK_FORMAT, corral_proto::render_links(&links, None))
    }

    pub(super) fn read_profile(&self, name: &str, req: &Request) -> Response {
        let Some(e) = self.entities.get(name) else {
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
        if let (Json::Object(m), Some(note)) = (&mut doc, self.follows.note(name)) {
            // Read-only status too: what the directory lookup last said, if something is amiss.
            m.insert("rdNote".into(), json!(note));
        }
        Response::content(cf, output::encode_doc(&doc, cf))
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
                let doc: Json = serde_json::from_slice(body)
                    .map_err(|e| bad(format!("profile document is not valid JSON: {e}")))?;
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
        patch
            .apply_queries(req.options.query_pairs().filter(|(k, _)| *k != "offline"))
            .map_err(|e| bad(e.to_string()))?;
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

    pub(super) fn use_entity(
        &mut self,
        cx: &mut Context<'_>,
        inb: &IncomingRequest,
        name: &str,
        actuate: bool,
        role: Role,
    ) -> Result<(), Fail> {
        let req = &inb.request;
        let Some(e) = self.entities.get(name) else {
            return Err((Code::NOT_FOUND, format!("no entity {name}")));
        };
        if e.items.is_empty() {
            let q = e.stored.profile.from_rd.as_deref().unwrap_or("");
            return Err((
                Code::SERVICE_UNAVAILABLE,
                format!("entity {name} has no members yet: no resource in the directory matches {q}"),
            ));
        }
        let (accept, kind) = if actuate {
            let accept = match req.options.accept() {
                None => ContentFormat::TEXT_PLAIN,
                Some(a) if output::USE_FORMATS.contains(&a) => a,
                Some(a) => return Err((Code::NOT_ACCEPTABLE, format!("content format {} not offered", a.0))),
            };
            (
                accept,
                Kind::Actuate { method: req.method, payload: req.payload.clone(), cf: req.options.content_format() },
            )
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
        if role < Role::Manage {
            self.check_reader_overrides(cx, name, &o)?;
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
        // The fan-out budget: this gateway's own, or the smaller share a parent gateway passed down.
        let budget = u64::from(o.budget.map_or(self.config.budget.datagrams, |b| b.min(self.config.budget.datagrams)));
        let cost = self.cost_of(name, None);
        if cost.requests > budget {
            self.stats.budget_refusals += 1;
            return Err((
                Code::FORBIDDEN,
                format!(
                    "a use of entity {name} sends {} member requests; this request may cause at most {budget}",
                    cost.requests
                ),
            ));
        }
        let share = (budget - cost.requests)
            .checked_div(cost.remote_entities)
            .map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX));
        let client = Client::new(inb.from, inb.verified);
        let hold = match self.reserve(cx.now(), client, name, usize::try_from(cost.requests).unwrap_or(usize::MAX)) {
            Ok(h) => h,
            Err(resp) => {
                cx.respond(inb.id, resp);
                return Ok(());
            }
        };
        let register = !actuate && req.options.observe() == Some(OBSERVE_REGISTER) && self.observable(name);
        let id = match self.start_use(cx, name, Sink::Client { id: inb.id, accept }, &o, kind, hop, 0) {
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
            self.attach_watch(id, name, req.options.path());
        }
        debug!(entity = %name, job = id, register, "use started");
        self.drive(cx, id);
        Ok(())
    }
}
