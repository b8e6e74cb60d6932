//! Snapshots of a running node for the HTTP side: a service wrapper that copies its endpoint's counters
//! (and whatever its inner service lets it read) into a shared slot every [`PERIOD`].
//!
//! Owns: [`Watched`] and the [`Board`] the HTTP listener reads. Must never make the data path wait for
//! the HTTP side: the node publishes with `try_lock` on its own timer (a publication the reader holds up is
//! skipped, the next one comes a period later) and never on a datagram; the reader clones and lets go.

use corral_tokio::corral_proto::{Context, Duration, IncomingRequest, Instant, Outcome, RequestId, ResourceLink};
use corral_tokio::corral_proto::{LayerCounter, Service, Stats, TableSizes};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// How often a watched node publishes its snapshot: a scrape sees counters at most this old.
pub const PERIOD: Duration = Duration::from_millis(500);

/// One worker's last snapshot.
#[derive(Debug, Clone, Default)]
pub struct Snapshot<T> {
    /// Published at least once (the worker runs its node).
    pub live: bool,
    pub stats: Stats,
    pub tables: TableSizes,
    /// The node's clock at publication (seconds since it started).
    pub uptime_s: u64,
    /// When it was published, on this process's monotonic clock (a worker that stops publishing is not
    /// alive: /readyz).
    pub published: Option<std::time::Instant>,
    /// What the inner service published (the Entity Manager's or the proxy's numbers).
    pub service: T,
    /// The counters of the node's layer (OSCORE's, with --credentials/--oscore).
    pub layer: Vec<LayerCounter>,
}

/// The slots of every worker, shared between the nodes (writers) and the HTTP listener (reader), and the
/// slot the node's coaps:// socket publishes its DTLS counters to (corral-tokio's driver writes it, as
/// the nodes write theirs: on its own timer, never waiting for a reader).
pub struct Board<T> {
    slots: Vec<Arc<Mutex<Snapshot<T>>>>,
    dtls: corral_tokio::DtlsWatch,
}

impl<T: Clone + Default> Board<T> {
    pub fn new(workers: usize) -> Arc<Board<T>> {
        let slots = (0..workers.max(1)).map(|_| Arc::new(Mutex::new(Snapshot::default()))).collect();
        Arc::new(Board { slots, dtls: corral_tokio::DtlsWatch::default() })
    }

    /// The slot worker `i` writes.
    pub fn slot(&self, i: usize) -> Arc<Mutex<Snapshot<T>>> {
        self.slots[i].clone()
    }

    /// Every worker's last snapshot, in worker order.
    pub fn read(&self) -> Vec<Snapshot<T>> {
        self.slots.iter().map(|s| s.lock().map(|g| g.clone()).unwrap_or_default()).collect()
    }

    /// Where the node's coaps:// socket publishes (give it to [`corral_tokio::Server::set_dtls_watch`] or
    /// [`corral_tokio::DtlsMuxConfig::watch`]).
    pub fn dtls(&self) -> corral_tokio::DtlsWatch {
        self.dtls.clone()
    }
}

/// `S` mounted as it is, plus a publication of its node's counters every [`PERIOD`] through `read`.
pub struct Watched<S, T> {
    inner: S,
    slot: Arc<Mutex<Snapshot<T>>>,
    read: fn(&S) -> T,
    next: Option<Instant>,
}

impl<S: Service, T: 'static> Watched<S, T> {
    pub fn new(inner: S, slot: Arc<Mutex<Snapshot<T>>>, read: fn(&S) -> T) -> Watched<S, T> {
        Watched { inner, slot, read, next: None }
    }

    fn publish(&mut self, cx: &Context<'_>) {
        // A reader holding the slot makes this publication wait for the next period, never the node.
        if let Ok(mut s) = self.slot.try_lock() {
            *s = Snapshot {
                live: true,
                stats: cx.endpoint().stats(),
                tables: cx.endpoint().table_sizes(),
                uptime_s: cx.now().as_secs(),
                published: Some(std::time::Instant::now()),
                service: (self.read)(&self.inner),
                layer: cx.layer_counters(),
            };
        }
    }
}

impl<S: Service, T: 'static> Service for Watched<S, T> {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        self.inner.handle_request(cx, request)
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        self.inner.handle_response(cx, id, outcome)
    }

    fn observer_gone(&mut self, cx: &mut Context<'_>, path: &str, peer: SocketAddr, token: corral_tokio::Token) {
        self.inner.observer_gone(cx, path, peer, token)
    }

    fn handle_effect(
        &mut self,
        cx: &mut Context<'_>,
        id: corral_tokio::corral_proto::EffectId,
        done: corral_tokio::corral_proto::EffectDone,
    ) {
        self.inner.handle_effect(cx, id, done)
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        if self.next.is_none_or(|t| t <= now) {
            self.publish(cx);
            self.next = Some(now + PERIOD);
        }
        if self.inner.poll_timeout().is_some_and(|t| t <= now) {
            self.inner.handle_timeout(cx);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // Before any input: at once (the node asks at start), so that /readyz sees a live worker.
        let own = Some(self.next.unwrap_or(Instant::ZERO));
        [own, self.inner.poll_timeout()].into_iter().flatten().min()
    }

    fn links(&self) -> Vec<ResourceLink> {
        self.inner.links()
    }
}

/// A service with no resources of its own, for a node whose services need no watching beyond the
/// endpoint's counters (`corral serve`): any request to its mount point gets 4.04.
pub struct Nothing;

impl Service for Nothing {
    fn handle_request(&mut self, cx: &mut Context<'_>, request: IncomingRequest) {
        cx.respond(request.id, corral_tokio::corral_proto::Response::new(corral_tokio::Code::NOT_FOUND));
    }
}

/// Where a node with no watched service of its own publishes from (answers 4.04, listed nowhere).
pub const PROBE_PATH: &str = ".well-known/corral-watch";

/// Mounts [`Nothing`], watched, at [`PROBE_PATH`]: the endpoint's counters of `corral serve`.
pub fn mount_probe(node: &mut corral_tokio::corral_proto::Node, slot: Arc<Mutex<Snapshot<super::Extra>>>) {
    node.mount(PROBE_PATH, Watched::new(Nothing, slot, |_| super::Extra::None));
}
