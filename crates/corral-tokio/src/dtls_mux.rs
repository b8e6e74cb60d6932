//! One socket for `coap://` and `coaps://`: a [`Machine`] (the gateway's or the proxy's node) whose socket
//! carries plain CoAP and DTLS records side by side, told apart by their first byte (RFC 7983 §7: 20–63 is
//! DTLS, 64–127 CoAP). Its server layer accepts `coaps://` clients on the node's own port; its client
//! layers reach the peers it has credentials for (`coaps://` members, next hops) over DTLS.
//!
//! Owns: which datagrams go through which DTLS layer (inbound by first byte and source; outbound by
//! destination: a peer with credentials always, a peer with a server session), handing each request the
//! PSK identity its session proved ([`corral_proto::Endpoint::set_datagram_identity`]), and failing a
//! peer's requests with the handshake's reason ([`RequestError::Dtls`]). Plain CoAP from a peer it holds
//! credentials for is dropped: that peer's answers count only inside DTLS. Never implements DTLS
//! (corral-dtls) nor CoAP (corral-proto).

use crate::driver::{Clock, Machine};
use crate::dtls::{delegate_to_inner, new_layer, DtlsWatch, Publisher};
use corral_dtls::{DtlsConfig, DtlsEvent, DtlsLayer, HandshakeFailure};
use corral_proto::tcp::ConnId;
use corral_proto::{
    Endpoint, Event, InboundId, Instant, NodeCommand, RequestError, Response, TcpEndpoint, TcpTransmit, Transmit,
    UnknownExchange,
};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// What a mixed socket speaks DTLS with.
#[derive(Debug, Clone, Default)]
pub struct DtlsMuxConfig {
    /// Accept `coaps://` clients with this (server-role) configuration.
    pub server: Option<DtlsConfig>,
    /// Reach each of these peers over `coaps://` with its own (client-role) configuration.
    pub peers: Vec<(SocketAddr, DtlsConfig)>,
    /// Publish the layers' counters here (summed over the server layer and the peers').
    pub watch: Option<DtlsWatch>,
}

impl DtlsMuxConfig {
    pub fn is_empty(&self) -> bool {
        self.server.is_none() && self.peers.is_empty()
    }
}

/// Whether a datagram is a DTLS record (RFC 7983 §7), not CoAP (whose first byte is 64–127).
fn is_dtls(data: &[u8]) -> bool {
    matches!(data.first(), Some(20..=63))
}

/// A handshake failure in the words of [`RequestError::Dtls`].
pub(crate) fn reason(failure: &HandshakeFailure) -> &'static str {
    match failure {
        HandshakeFailure::UnknownIdentity => "unknown PSK identity",
        HandshakeFailure::BadKey => "the keys do not match, or the identity is unknown",
        HandshakeFailure::NoSharedSuite => "no shared cipher suite",
        HandshakeFailure::BadCertificate => "bad certificate",
        HandshakeFailure::UntrustedCertificate(_) => "the certificate is not signed by a trusted CA",
        HandshakeFailure::UntrustedKey(_) => "the raw public key is not trusted",
        HandshakeFailure::RefusedKey => "the peer does not trust our raw public key",
        HandshakeFailure::NoRawPublicKey => "the peer does not use raw public keys",
        HandshakeFailure::Timeout => "no answer to the handshake",
        HandshakeFailure::Alert(_) | HandshakeFailure::Other(_) => "the peer ended it with a fatal alert",
    }
}

/// See the module docs.
pub(crate) struct DtlsMux<M> {
    inner: M,
    server: Option<DtlsLayer>,
    peers: HashMap<SocketAddr, DtlsLayer>,
    /// The PSK identity of each server session (removed when it closes: at most the server's sessions).
    identities: HashMap<SocketAddr, Arc<[u8]>>,
    publisher: Option<Publisher>,
    /// The latest time the driver gave (sends have none).
    now: Instant,
}

impl<M: Machine> DtlsMux<M> {
    pub(crate) fn new(inner: M, config: DtlsMuxConfig, clock: Clock) -> DtlsMux<M> {
        DtlsMux {
            inner,
            server: config.server.map(|c| new_layer(c, clock)),
            peers: config.peers.into_iter().map(|(peer, c)| (peer, new_layer(c, clock))).collect(),
            identities: HashMap::new(),
            publisher: Publisher::new(config.watch),
            now: Instant::ZERO,
        }
    }

    fn layers(&mut self) -> impl Iterator<Item = &mut DtlsLayer> {
        self.server.iter_mut().chain(self.peers.values_mut())
    }

    /// Hands the layers' events to the endpoint and their plaintext to the machine.
    fn deliver(&mut self, now: Instant, dst_ip: Option<IpAddr>) {
        let mut events = Vec::new();
        let mut plain = Vec::new();
        for layer in self.server.iter_mut().chain(self.peers.values_mut()) {
            events.extend(std::iter::from_fn(|| layer.poll_event()));
            plain.extend(std::iter::from_fn(|| layer.poll_plaintext()));
        }
        for event in events {
            match event {
                DtlsEvent::Connected { peer, identity } => {
                    if let Some(id) = identity.filter(|_| !self.peers.contains_key(&peer)) {
                        self.identities.insert(peer, id.into());
                    }
                }
                DtlsEvent::Failed { peer, reason: why } => {
                    self.identities.remove(&peer);
                    self.inner.endpoint_mut().fail_peer(now, peer, RequestError::Dtls(reason(&why)));
                }
                DtlsEvent::Closed { peer } => {
                    self.identities.remove(&peer);
                }
            }
        }
        for (peer, data) in plain {
            let identity = self.identities.get(&peer).cloned();
            self.inner.endpoint_mut().set_datagram_identity(identity);
            self.inner.handle_datagram(now, peer, dst_ip, &data);
            self.inner.endpoint_mut().set_datagram_identity(None);
        }
    }
}

impl<M: Machine> Machine for DtlsMux<M> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, dst_ip: Option<IpAddr>, data: &[u8]) {
        self.now = now;
        match (is_dtls(data), self.peers.get_mut(&from)) {
            (true, Some(layer)) => layer.handle_datagram(now, from, dst_ip, data),
            (true, None) => match &mut self.server {
                Some(layer) => layer.handle_datagram(now, from, dst_ip, data),
                None => tracing::trace!(%from, "DTLS record on a socket that accepts no coaps:// clients; dropped"),
            },
            (false, Some(_)) => {
                tracing::debug!(%from, "plain CoAP from a peer reached over coaps://; dropped")
            }
            (false, None) => return self.inner.handle_datagram(now, from, dst_ip, data),
        }
        self.deliver(now, dst_ip);
    }
    fn handle_unreachable(&mut self, now: Instant, peer: SocketAddr, quoted: &[u8]) {
        if is_dtls(quoted) {
            // A DTLS record, which the endpoint cannot match: every exchange with the peer fails.
            self.inner.endpoint_mut().handle_unreachable(now, peer, None)
        } else {
            self.inner.handle_unreachable(now, peer, quoted)
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.inner.handle_timeout(now);
        for layer in self.layers() {
            layer.handle_timeout(now);
        }
        self.deliver(now, None);
        Publisher::publish(&mut self.publisher, now, self.server.iter().chain(self.peers.values()));
    }
    fn poll_transmit(&mut self) -> Option<Transmit> {
        loop {
            if let Some(t) = self.layers().find_map(|l| l.poll_transmit()) {
                return Some(t);
            }
            let plain = self.inner.poll_transmit()?;
            let now = self.now;
            let layer = match (self.peers.get_mut(&plain.dst), &mut self.server) {
                (Some(layer), _) => layer,
                (None, Some(server)) if server.is_connected(plain.dst) => server,
                _ => return Some(plain),
            };
            // A layer's clock moves only with its own input: one that saw nothing for a while would start
            // a handshake in the past, and fail it as timed out at its next timer.
            layer.handle_timeout(now);
            layer.send(plain.dst, &plain.payload);
            self.deliver(now, None);
        }
    }
    delegate_to_inner!();
    fn poll_timeout(&self) -> Option<Instant> {
        let layers = self.server.iter().chain(self.peers.values()).filter_map(DtlsLayer::poll_timeout);
        layers.chain(self.inner.poll_timeout()).chain(Publisher::due(&self.publisher)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtls_records_and_coap_are_told_apart_by_their_first_byte() {
        assert!(is_dtls(&[22, 0xfe, 0xfd])); // a handshake record
        assert!(is_dtls(&[23])); // application data
        assert!(!is_dtls(&[0x40, 0x01, 0, 1])); // CoAP version 1
        assert!(!is_dtls(&[]));
        assert!(!is_dtls(&[0x80]));
    }
}
