//! What the window holds at most, and for how long: HTTP connections (in all and per client, counted when
//! a connection is accepted, before any request is read or any role checked), how long a client may take
//! to send a request's header (a silent or trickling connection is closed, idle keep-alive ones too), and
//! the places for cross-proxy requests and for event streams (the console's live values and `/hc/`
//! observations share one pool), each with a per-client share so that one client cannot hold them all.
//!
//! Owns: the accept loop ([`serve`]) and [`Shares`]. A client is an IPv4 address or an IPv6 /64 (one
//! host's privacy addresses are one client). Must never: keep anything after its connection or stream ends
//! (a share is given back when its holder is dropped), or wait for a client while holding a lock.
//!
//! # Why (issue 41 item 6)
//! One client without any role held 8,321 file descriptors with idle connections, and 8,000 console streams
//! (159 MB); one client holding the cross-proxy's 64 places made every other client's request 503.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a client may take to send a request's header, from the connection's start or from the end of
/// its previous response (an idle keep-alive connection is closed after it too).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an event stream may stay silent: then a comment line is sent, so that a stream whose client
/// has gone (a half-open connection) fails its write and gives its place back rather than waiting for a
/// notification that may not come for hours.
pub const STREAM_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// HTTP connections open at once; beyond it a new connection is closed at once.
pub const MAX_CONNECTIONS: usize = 512;

/// HTTP connections one client may have open at once (a browser opens at most 6 to one host).
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 32;

/// Event streams open at once: the console's live values and the cross-proxy's observations together.
pub const MAX_STREAMS: usize = 64;

/// Cross-proxy requests in progress at once (observations are streams).
pub const MAX_REQUESTS: usize = 64;

/// The share of one client in each pool (streams, requests): a quarter.
pub const PER_CLIENT_SHARE: usize = 16;

/// Who counts as one client: its IPv4 address, or its IPv6 address's /64.
pub fn client_of(ip: IpAddr) -> IpAddr {
    match corral_group::policy::canonical(ip) {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

/// A pool of places (connections, streams, requests) with a bound in all and a share per client.
pub struct Shares {
    /// What the places are, for refusals and logs ("event streams").
    pub what: &'static str,
    pub total: usize,
    pub per_client: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// Why a place was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every place is taken.
    All,
    /// The client holds its share.
    Client,
}

impl Shares {
    pub fn new(what: &'static str, total: usize, per_client: usize) -> Arc<Shares> {
        Arc::new(Shares { what, total, per_client, held: Mutex::new(Held::default()) })
    }

    /// A place for the client at `ip`, given back when the [`Share`] is dropped.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Result<Share, Full> {
        let client = client_of(ip);
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = h.by_client.get(&client).copied().unwrap_or(0);
        if mine >= self.per_client {
            return Err(Full::Client);
        }
        if h.total >= self.total {
            return Err(Full::All);
        }
        h.total += 1;
        h.by_client.insert(client, mine + 1);
        Ok(Share { shares: self.clone(), client })
    }

    /// Places taken: in all, and by the client at `ip`.
    #[cfg(test)]
    pub fn held(&self, ip: IpAddr) -> (usize, usize) {
        let h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        (h.total, h.by_client.get(&client_of(ip)).copied().unwrap_or(0))
    }

    /// What a refusal says: which bound, and how to get a place.
    pub fn refusal(&self, why: Full) -> String {
        match why {
            Full::Client => format!(
                "this client holds its share of the window's {} ({} of {}); end one first",
                self.what, self.per_client, self.total
            ),
            Full::All => format!("all {} of the window's {} are taken; try again later", self.total, self.what),
        }
    }
}

/// One place of a [`Shares`] pool, given back on drop.
pub struct Share {
    shares: Arc<Shares>,
    client: IpAddr,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut h = self.shares.held.lock().unwrap_or_else(|e| e.into_inner());
        h.total = h.total.saturating_sub(1);
        if let Some(n) = h.by_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                h.by_client.remove(&self.client);
            }
        }
    }
}

/// Accepts connections until the listener fails: each within [`MAX_CONNECTIONS`] and the client's
/// [`MAX_CONNECTIONS_PER_CLIENT`] (otherwise closed at once, before a byte is read), served as HTTP/1.1
/// with [`HEADER_READ_TIMEOUT`], the client's address given to the routes as `ConnectInfo`.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) {
    let connections = Shares::new("connections", MAX_CONNECTIONS, MAX_CONNECTIONS_PER_CLIENT);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors (or another transient error): the pending connection waits in
                // the backlog instead of spinning the loop.
                tracing::warn!(error = %e, "the HTTP listener cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let place = match connections.take(peer.ip()) {
            Ok(p) => p,
            Err(why) => {
                tracing::debug!(%peer, "HTTP connection closed at once: {}", connections.refusal(why));
                drop(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                let mut app = app.clone();
                async move { tower_service::Service::call(&mut app, req.map(Body::new)).await }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "HTTP connection ended");
            }
            drop(place);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_holds_its_share_and_gives_it_back() {
        let pool = Shares::new("event streams", 4, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "::ffff:10.0.0.2".parse().unwrap();
        let held: Vec<Share> = (0..2).map(|_| pool.take(a).unwrap()).collect();
        assert_eq!(pool.take(a).err(), Some(Full::Client));
        let hers: Vec<Share> = (0..2).map(|_| pool.take(b).unwrap()).collect();
        assert_eq!(pool.take("10.0.0.3".parse().unwrap()).err(), Some(Full::All));
        assert_eq!(pool.held("10.0.0.2".parse().unwrap()), (4, 2), "a mapped address is its IPv4 client");
        drop(held);
        assert_eq!(pool.held(a), (2, 0));
        assert!(pool.take(a).is_ok());
        drop(hers);
        assert!(pool.refusal(Full::Client).contains("2 of 4"), "{}", pool.refusal(Full::Client));
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let a = client_of("2001:db8:1:2::1".parse().unwrap());
        assert_eq!(a, client_of("2001:db8:1:2:ffff::9".parse().unwrap()));
        assert_ne!(a, client_of("2001:db8:1:3::1".parse().unwrap()));
        assert_eq!(client_of("::ffff:192.0.2.1".parse().unwrap()), "192.0.2.1".parse::<IpAddr>().unwrap());
    }
}
