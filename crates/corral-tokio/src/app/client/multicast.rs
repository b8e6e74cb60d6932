//! The responses to a multicast request: a stream that verifies each one with Group OSCORE when the request
//! was protected, and a collection that keeps the verified ones (with the member that signed each) and
//! counts the rest, and reads a proxy's relayed answers as their members'.

use super::{CancelGuard, Error, OscoreError};
use crate::driver::Outcome;
use crate::secure::oscore::{verify, Binding, SharedContext};
use corral_proto::wire::OptionNumber;
use corral_proto::Response;
use std::net::SocketAddr;
use tokio::sync::mpsc;

/// One response to a multicast request.
#[derive(Debug, Clone)]
pub struct MulticastResponse {
    pub from: SocketAddr,
    pub response: Response,
    /// With Group OSCORE: the Sender ID of the member that signed it.
    pub member: Option<Vec<u8>>,
    /// When it was read from the collection: how late in the window its member answered.
    pub arrived: std::time::Instant,
}

/// What [`MulticastResponses::collect_verified`] gathered.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub responses: Vec<MulticastResponse>,
    /// Responses that failed OSCORE verification (each logged at WARN with its source).
    pub refused: usize,
}

impl Collected {
    /// Reads the answers a forward proxy relayed for a group request (seed 001): each names the member
    /// that sent it in Reply-From and becomes that member's answer; one without Reply-From is the proxy's
    /// own (a refusal, or 5.04 when no member answered) and is taken out and returned (the first such);
    /// one with a malformed Reply-From is dropped (logged at WARN).
    pub fn attribute_relayed(&mut self) -> Option<Response> {
        let mut own = None;
        self.responses.retain_mut(|r| {
            match r.response.options.get(OptionNumber::REPLY_FROM).map(corral_proto::wire::decode_reply_from) {
                Some(Ok((_, member))) => {
                    r.from = member;
                    true
                }
                Some(Err(e)) => {
                    tracing::warn!(proxy = %r.from, "answer with a bad Reply-From dropped: {e}");
                    false
                }
                None => {
                    own.get_or_insert_with(|| r.response.clone());
                    false
                }
            }
        });
        own
    }
}

/// The responses to a multicast request, as they arrive.
pub struct MulticastResponses {
    rx: mpsc::UnboundedReceiver<Outcome>,
    guard: Option<CancelGuard>,
    /// The group context and the request's binding: every response is verified with them.
    oscore: Option<(SharedContext, Binding)>,
    refused: usize,
}

impl MulticastResponses {
    pub(super) fn new(rx: mpsc::UnboundedReceiver<Outcome>, guard: CancelGuard) -> MulticastResponses {
        MulticastResponses { rx, guard: Some(guard), oscore: None, refused: 0 }
    }

    /// Verify every response with this group context and the request's binding.
    pub(super) fn verify_with(&mut self, oscore: Option<(SharedContext, Binding)>) {
        self.oscore = oscore;
    }

    /// The next response; `None` once the collection window has closed. With OSCORE, a response that does
    /// not verify is an `Err` naming its source, and the stream goes on.
    pub async fn next(&mut self) -> Option<Result<(SocketAddr, Response), Error>> {
        self.next_response().await.map(|r| r.map(|r| (r.from, r.response)))
    }

    /// Waits for the window to close and returns every response. Responses that fail OSCORE verification
    /// are left out (and logged at WARN: a peer that misbehaves); [`MulticastResponses::refused`] counts
    /// them. Any other error ends the collection.
    pub async fn collect(mut self) -> Result<Vec<(SocketAddr, Response)>, Error> {
        Ok(self.collect_verified().await?.responses.into_iter().map(|r| (r.from, r.response)).collect())
    }

    /// As [`MulticastResponses::collect`], with the Group OSCORE member that signed each response and the
    /// number of responses that failed verification.
    pub async fn collect_verified(&mut self) -> Result<Collected, Error> {
        let mut responses = Vec::new();
        while let Some(r) = self.next_response().await {
            match r {
                Ok(r) => responses.push(r),
                Err(Error::Oscore(why)) if self.oscore.is_some() => tracing::warn!("{why}"),
                Err(e) => return Err(e),
            }
        }
        Ok(Collected { responses, refused: self.refused })
    }

    /// The next response, verified when the request was protected, with the member that signed it (the
    /// kid of its OSCORE option: several members may share an address).
    async fn next_response(&mut self) -> Option<Result<MulticastResponse, Error>> {
        let (from, response) = match self.rx.recv().await {
            Some(Ok(r)) => r,
            Some(Err(e)) => return Some(Err(Error::from(e))),
            None => {
                if let Some(g) = self.guard.take() {
                    g.disarm();
                }
                return None;
            }
        };
        let arrived = std::time::Instant::now();
        let Some((ctx, binding)) = &self.oscore else {
            return Some(Ok(MulticastResponse { from, response, member: None, arrived }));
        };
        let member = response
            .options
            .get(OptionNumber::OSCORE)
            .and_then(|v| corral_oscore::OscoreOption::decode(v).ok())
            .and_then(|o| o.kid);
        Some(match verify(ctx, binding, response) {
            Ok((response, _)) => Ok(MulticastResponse { from, response, member, arrived }),
            Err(e) => {
                self.refused += 1;
                match e {
                    Error::Oscore(e) => Err(Error::Oscore(OscoreError::Unverified { from, error: Box::new(e) })),
                    other => Err(other),
                }
            }
        })
    }

    /// How many responses so far failed OSCORE verification.
    pub fn refused(&self) -> usize {
        self.refused
    }
}
