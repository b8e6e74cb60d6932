//! The demo resources of `corral serve`: `/hello`, `/echo` and `/stats`.

use super::{not_allowed, text};
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{Context, IncomingRequest, ResourceLink, Response, Service};

/// `/hello`: a greeting.
pub struct Hello;

impl Service for Hello {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let response = match (req.request.method, cx.subpath(&req.request).is_empty()) {
            (Code::GET, true) => text(Code::CONTENT, "Hello from corral!"),
            (_, false) => Response::error(Code::NOT_FOUND, "no such resource"),
            (m, true) => not_allowed(m),
        };
        cx.respond(req.id, response);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "demo.hello").attr("ct", "0").attr("title", "Greeting")]
    }
}

/// `/echo`: answers any method with the request's payload and content format.
pub struct Echo;

impl Service for Echo {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let r = &req.request;
        let mut response = Response::new(Code::CONTENT).with_payload(r.payload.clone());
        if let Some(cf) = r.options.content_format() {
            response = response.with_content_format(cf);
        }
        cx.respond(req.id, response);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "demo.echo").attr("title", "Echo")]
    }
}

/// `/stats`: the endpoint's counters and table sizes as JSON (how a flood shows its effect).
pub struct Stats;

impl Service for Stats {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        if req.request.method != Code::GET {
            cx.respond(req.id, not_allowed(req.request.method));
            return;
        }
        let s = cx.endpoint().stats();
        let t = cx.endpoint().table_sizes();
        let body = serde_json::json!({
            "uptime_s": cx.now().as_secs(),
            "datagrams_in": s.datagrams_in,
            "malformed_in": s.malformed_in,
            "duplicates_in": s.duplicates_in,
            "requests_in": s.requests_in,
            "transmits": s.transmits,
            "retransmissions": s.retransmissions,
            "overload_rejections": s.overload_rejections,
            "peers_evicted": s.peers_evicted,
            "peers_purged": s.peers_purged,
            "displaced": s.displaced,
            "echo_challenges": s.echo_challenges,
            "tables": {
                "peers": t.peers,
                "client_exchanges": t.client_exchanges,
                "inbound_exchanges": t.inbound_exchanges,
                "sent": t.tracked_messages,
                "dedup": t.dedup_entries,
                "observers": t.observers,
                "uploads": t.uploads,
            },
        })
        .to_string();
        cx.respond(req.id, Response::content(ContentFormat::JSON, body).with_max_age(0));
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![ResourceLink::new("").attr("rt", "demo.stats").attr("ct", "50").attr("title", "Counters")]
    }
}
