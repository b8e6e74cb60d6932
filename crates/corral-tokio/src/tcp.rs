//! TCP connections for CoAP over TCP (RFC 8323): listening, connecting, and moving bytes between sockets
//! and the driver. The protocol (framing, CSM, Ping/Pong, Release, Abort, exchanges) is corral-proto's
//! [`TcpEndpoint`](corral_proto::TcpEndpoint); this module only owns sockets.
//!
//! Each connection has a reader task and a writer task on the driver's runtime. Readers hand what they read
//! to the driver over one bounded channel shared by all connections, so a driver that falls behind slows
//! every reader down instead of buffering without bound. Writers take from a per-connection queue whose
//! size in bytes is bounded: a peer that stops reading is disconnected when its queue is over
//! [`MAX_WRITE_QUEUE`], and a write that makes no progress for [`WRITE_STALL`] ends the connection.

use crate::socket::canonical;
use corral_proto::ConnId;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
        outgoing: bool,
        link: ConnLink,
    },
    /// Connecting to `dst` failed.
    ConnectFailed {
        dst: SocketAddr,
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
    writer: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    reader: AbortHandle,
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

/// Starts the reader and writer tasks of a connected stream.
fn start(conn: ConnId, stream: TcpStream, tx: mpsc::Sender<TcpInput>) -> ConnLink {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let reader_tx = tx.clone();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => {
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
            match tokio::time::timeout(WRITE_STALL, wr.write_all(&batch)).await {
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
    ConnLink { writer, queued, reader }
}

/// Connects to `dst` in the background; the outcome arrives as [`TcpInput::Connected`] or
/// [`TcpInput::ConnectFailed`].
pub(crate) fn connect(dst: SocketAddr, timeout: Duration, ids: Arc<AtomicU64>, tx: mpsc::Sender<TcpInput>) {
    tokio::spawn(async move {
        let input = match tokio::time::timeout(timeout, TcpStream::connect(dst)).await {
            Ok(Ok(stream)) => {
                let conn = ConnId(ids.fetch_add(1, Ordering::Relaxed));
                debug!(?conn, %dst, "connected");
                TcpInput::Connected { conn, peer: dst, outgoing: true, link: start(conn, stream, tx.clone()) }
            }
            Ok(Err(e)) => TcpInput::ConnectFailed { dst, reason: e.to_string() },
            Err(_) => TcpInput::ConnectFailed { dst, reason: format!("no connection within {timeout:?}") },
        };
        let _ = tx.send(input).await;
    });
}

/// Accepts connections until the task is aborted.
pub(crate) async fn accept_loop(listener: TcpListener, ids: Arc<AtomicU64>, tx: mpsc::Sender<TcpInput>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let conn = ConnId(ids.fetch_add(1, Ordering::Relaxed));
                let peer = canonical(peer);
                debug!(?conn, %peer, "accepted");
                let link = start(conn, stream, tx.clone());
                if tx.send(TcpInput::Connected { conn, peer, outgoing: false, link }).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                // Out of file descriptors, say: back off instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
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
