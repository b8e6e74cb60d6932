//! The gateway's layer in front of its Entity Manager: OSCORE (when the gateway has credentials) and the
//! rule that remote changes need it (`--require-oscore-remote`).
//!
//! Owns: which plain requests are refused before the Entity Manager sees them, and what an OSCORE-protected
//! request tells the Entity Manager about its source. OSCORE itself is corral-oscore's [`OscoreLayer`].
//!
//! A request that OSCORE unprotected is authentic and fresh (its replay window, RFC 8613 §7.4), so it
//! reaches the Entity Manager as proved: [`IncomingRequest::verified`] and [`IncomingRequest::echoed`]
//! set. Without that, the Entity Manager would ask it for an Echo round trip on the outer message, which
//! an OSCORE client answers inside the protection, where the endpoint never sees it.
//!
//! With `--require-oscore-remote`, a change or an actuation (any request but GET) from beyond loopback
//! that is not OSCORE-protected is refused with 4.01: the manage and actuate roles of remote clients then
//! rest on their keys, not on their addresses. Reading stays open to plain CoAP as the access policy says.
//! Must never: decide roles (the Entity Manager's access policy does).

use corral_oscore::OscoreLayer;
use corral_tokio::corral_proto::wire::{Code, OptionNumber};
use corral_tokio::corral_proto::{Inbound, InboundId, IncomingRequest, Instant, Layer, Response};

/// See the module docs.
pub struct Guard {
    pub oscore: Option<OscoreLayer>,
    /// Refuse plain changes and actuations from beyond loopback.
    pub require_remote: bool,
}

impl Guard {
    /// Whether `req` is a plain change or actuation from beyond loopback.
    fn plain_remote_change(&self, req: &IncomingRequest) -> bool {
        self.require_remote
            && !req.notification
            && req.request.method != Code::GET
            && !req.request.options.contains(OptionNumber::OSCORE)
            && !corral_group::policy::canonical(req.from.ip()).is_loopback()
    }
}

impl Layer for Guard {
    fn inbound(&mut self, now: Instant, req: IncomingRequest) -> Inbound {
        if self.plain_remote_change(&req) {
            tracing::debug!(from = %req.from, "plain change from beyond loopback refused: OSCORE required");
            let text = "changes and actuations from beyond this machine need OSCORE (the gateway runs with \
                        --require-oscore-remote)";
            return Inbound::Answer(req.id, Response::error(Code::UNAUTHORIZED, text).with_max_age(0));
        }
        let Some(oscore) = &mut self.oscore else { return Inbound::Pass(req) };
        match oscore.inbound(now, req) {
            Inbound::Replaced(inner) => Inbound::Replaced(IncomingRequest { verified: true, echoed: true, ..inner }),
            other => other,
        }
    }

    fn outbound(&mut self, now: Instant, id: InboundId, response: Response) -> Response {
        match &mut self.oscore {
            Some(oscore) => oscore.outbound(now, id, response),
            None => response,
        }
    }

    fn protects(&self, id: InboundId) -> Option<Code> {
        self.oscore.as_ref().and_then(|o| o.protects(id))
    }

    fn address_proof(&mut self, id: InboundId) -> Option<Vec<u8>> {
        self.oscore.as_mut().and_then(|o| o.address_proof(id))
    }
}
