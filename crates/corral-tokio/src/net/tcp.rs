//! TCP connections for CoAP over TCP (RFC 8323), plain (`coap+tcp://`) or inside TLS (`coaps+tcp://`, the
//! handshake and its settings are [`crate::tls`]'s): listening, connecting, and moving bytes between
//! sockets and the driver. The protocol (framing, CSM, Ping/Pong, Release, Abort, exchanges) is corral-proto's
//! [`TcpEndpoint`](corral_proto::TcpEndpoint); this module only owns sockets.
//!
//! Each connection has a reader task and a writer task on the driver's runtime. Readers hand what they read
//! to the driver over one bounded channel shared by all connections, so a driver that falls behind slows
//! every reader down instead of buffering without bound. Writers take from a per-connection queue whose
//! size in bytes is bounded: a peer that stops reading is disconnected when its queue is over
//! [`MAX_WRITE_QUEUE`], and a write that makes no progress for [`WRITE_STALL`] ends the connection.

use crate::net::socket::canonical;
use crate::net::tls::{describe, tls_error, Established, Handshakes, TlsConnect, TlsFailures, HANDSHAKE_TIMEOUT};
use corral_proto::ConnId;
use rustls::pki_types::ServerName;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::{debug, warn};

/// Bytes queued for one connection before it is given up on (its peer does not read).
pub(crate) const MAX_WRITE_QUEUE: usize = 16 << 20;
/// How long one write may make no progress before the connection is given up on.
pub(crate) const WRITE_STALL: Duration = Duration::from_secs(30);
/// Bytes read per system call.
const READ_CHUNK: usize = 16 * 1024;
/// Reads in flight from all connections to the driver (each at most [`READ_CHUNK`] bytes).
pub(crate) const INPUT_QUEUE: usize = 64;
/// Writes coalesced into one system call, at most.
const WRITE_BATCH: usize = 64 * 1024;

/// What the connection tasks tell the driver.
pub(crate) enum TcpInput {
    /// A connection is up: accepted (`outgoing == false`) or connected to `peer` for the client.
    Connected {
        conn: ConnId,
        peer: SocketAddr,
        /// Where a client connection was made to (`None`: accepted).
        to: Option<Remote>,
        link: ConnLink,
    },
    /// Connecting to `dst` (or its TLS handshake) failed.
    ConnectFailed {
        dst: Remote,
        reason: String,
    },
    Data {
        conn: ConnId,
        bytes: Vec<u8>,
    },
    /// The peer closed the connection, or it broke.
    Closed {
        conn: ConnId,
    },
}

/// The driver's handle on a connection. Dropping it closes the connection: the writer sends what is queued
/// (a Release, say), then shuts the socket down; the reader stops at once.
pub(crate) struct ConnLink {
    conn: ConnId,
    writer: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    reader: AbortHandle,
    /// An accepted TLS connection counts for its address's handshakes until the link goes.
    _counted: Option<Established>,
}

impl ConnLink {
    /// Queues bytes for the peer; `false` if the peer has not been reading and the connection must go.
    pub(crate) fn send(&self, bytes: Vec<u8>) -> bool {
        let len = bytes.len();
        if self.queued.fetch_add(len, Ordering::Relaxed) + len > MAX_WRITE_QUEUE {
            return false;
        }
        self.writer.send(bytes).is_ok()
    }
}

impl Drop for ConnLink {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Where a client's connection goes: an address and, for `coaps+tcp://`, the name the server's
/// certificate must carry. Connections are reused per `Remote`: a plain one never carries a TLS request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Remote {
    pub addr: SocketAddr,
    pub tls: Option<ServerName<'static>>,
}

/// A TLS client connection's peer, for naming a TLS alert read after the handshake (a TLS 1.3 server that
/// refuses this client's certificate says so then).
struct Watched {
    failures: Arc<TlsFailures>,
    server: SocketAddr,
    name: ServerName<'static>,
}

/// Starts the reader and writer tasks of a connected stream (plain TCP's halves, or a TLS stream's).
fn start<R, W>(conn: ConnId, (mut rd, mut wr): (R, W), tx: mpsc::Sender<TcpInput>, watched: Option<Watched>) -> ConnLink
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let reader_tx = tx.clone();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) => {
                    let _ = reader_tx.send(TcpInput::Closed { conn }).await;
                    return;
                }
                Err(e) => {
                    if let (Some(w), Some(tls)) = (&watched, tls_error(&e)) {
                        w.failures.record(w.server, describe(tls, &w.name));
                    }
                    debug!(?conn, error = %e, "read failed");
                    let _ = reader_tx.send(TcpInput::Closed { conn }).await;
                    return;
                }
                Ok(n) => {
                    if reader_tx.send(TcpInput::Data { conn, bytes: buf[..n].to_vec() }).await.is_err() {
                        return;
                    }
                }
            }
        }
    })
    .abort_handle();
    let (writer, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
    let queued = Arc::new(AtomicUsize::new(0));
    let counter = queued.clone();
    tokio::spawn(async move {
        let mut batch = Vec::new();
        while let Some(first) = queue.recv().await {
            batch.clear();
            batch.extend_from_slice(&first);
            while batch.len() < WRITE_BATCH {
                match queue.try_recv() {
                    Ok(more) => batch.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            let written = async {
                wr.write_all(&batch).await?;
                wr.flush().await
            };
            match tokio::time::timeout(WRITE_STALL, written).await {
                Ok(Ok(())) => {
                    counter.fetch_sub(batch.len(), Ordering::Relaxed);
                }
                Ok(Err(e)) => {
                    debug!(?conn, error = %e, "write failed");
                    let _ = tx.send(TcpInput::Closed { conn }).await;
                    return;
                }
                Err(_) => {
                    warn!(?conn, "peer has not read for {WRITE_STALL:?}; closing the connection");
                    let _ = tx.send(TcpInput::Closed { conn }).await;
                    return;
                }
            }
        }
        let _ = tokio::time::timeout(WRITE_STALL, wr.shutdown()).await;
    });
    ConnLink { conn, writer, queued, reader, _counted: None }
}

/// Connects to `dst` in the background — and for `coaps+tcp://` makes the TLS handshake with `tls`'s
/// settings —; the outcome arrives as [`TcpInput::Connected`] or [`TcpInput::ConnectFailed`] (a failed
/// handshake's reason is also recorded in the [`TlsFailures`], for the client's error).
pub(crate) fn connect(
    dst: Remote,
    timeout: Duration,
    ids: Arc<AtomicU64>,
    tx: mpsc::Sender<TcpInput>,
    tls: Option<TlsConnect>,
) {
    tokio::spawn(async move {
        let addr = dst.addr;
        let made = async {
            let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            let _ = stream.set_nodelay(true);
            let conn = ConnId(ids.fetch_add(1, Ordering::Relaxed));
            let Some(name) = dst.tls.clone() else { return Ok(start(conn, stream.into_split(), tx.clone(), None)) };
            let Some(tls) = tls else { return Err("coaps+tcp:// needs TLS settings on this client".to_string()) };
            match tls.connector.connect(name.clone(), stream).await {
                Ok(stream) => {
                    tls.failures.forget(addr);
                    let watched = Watched { failures: tls.failures, server: addr, name };
                    Ok(start(conn, tokio::io::split(stream), tx.clone(), Some(watched)))
                }
                Err(e) => {
                    let reason = tls_error(&e).map_or_else(|| e.to_string(), |t| describe(t, &name));
                    tls.failures.record(addr, reason.clone());
                    Err(reason)
                }
            }
        };
        let input = match tokio::time::timeout(timeout, made).await {
            Ok(Ok(link)) => {
                let conn = link.conn;
                debug!(?conn, %addr, tls = dst.tls.is_some(), "connected");
                TcpInput::Connected { conn, peer: addr, to: Some(dst), link }
            }
            Ok(Err(reason)) => TcpInput::ConnectFailed { dst, reason },
            Err(_) => TcpInput::ConnectFailed { dst, reason: format!("no connection within {timeout:?}") },
        };
        let _ = tx.send(input).await;
    });
}

/// Accepts connections until the task is aborted; with `tls`, each makes its TLS handshake on a task of
/// its own ([`HANDSHAKE_TIMEOUT`] each, bounded in all and per address by [`Handshakes`], with
/// `per_address` connections at most from one address) before the driver hears of it, and one that fails
/// is closed and logged at DEBUG.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    ids: Arc<AtomicU64>,
    tx: mpsc::Sender<TcpInput>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    per_address: usize,
) {
    let handshakes = Handshakes::new(per_address);
    let mut gave_way = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, say: back off instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let peer = canonical(peer);
        let _ = stream.set_nodelay(true);
        let Some(acceptor) = tls.clone() else {
            let conn = ConnId(ids.fetch_add(1, Ordering::Relaxed));
            debug!(?conn, %peer, "accepted");
            let link = start(conn, stream.into_split(), tx.clone(), None);
            if tx.send(TcpInput::Connected { conn, peer, to: None, link }).await.is_err() {
                return;
            }
            continue;
        };
        let (pending, closed) = handshakes.admit(peer.ip());
        if closed > 0 {
            // At the first and then once per thousand: a flood would otherwise flood the log.
            let before = gave_way;
            gave_way += closed as u64;
            if before == 0 || before / 1000 != gave_way / 1000 {
                warn!(%peer, gave_way, "TLS handshakes at their bound: the oldest pending give way to new connections");
            }
            debug!(%peer, closed, "TLS handshakes at their bound: the oldest pending gave way");
        }
        let seq = pending.seq();
        let (ids, tx) = (ids.clone(), tx.clone());
        let task = tokio::spawn(async move {
            let counted = pending;
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return debug!(%peer, error = %e, "TLS handshake failed: connection closed"),
                Err(_) => return debug!(%peer, "no TLS handshake within {HANDSHAKE_TIMEOUT:?}: connection closed"),
            };
            let conn = ConnId(ids.fetch_add(1, Ordering::Relaxed));
            debug!(?conn, %peer, "accepted over TLS");
            let mut link = start(conn, tokio::io::split(stream), tx.clone(), None);
            link._counted = Some(counted.established());
            let _ = tx.send(TcpInput::Connected { conn, peer, to: None, link }).await;
        });
        handshakes.attach(seq, task.abort_handle());
    }
}

/// A bound, listening, non-blocking std TCP socket; `[::]` is made dual-stack where the OS allows it.
pub fn bind_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let SocketAddr::V6(v6) = addr {
        if v6.ip().is_unspecified() {
            let _ = socket.set_only_v6(false);
        }
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
