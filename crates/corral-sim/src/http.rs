//! HTTP baselines for the lab (seed 002's comparison of CoAP with HTTP): a minimal HTTP/1.1 message codec
//! (parsing with `httparse`) and two [`App`]s — a server that answers `GET` with a body of a fixed size,
//! and a client that sends `GET`s one after the other (or at a fixed rate) — over the simulated node's TCP
//! stack (smoltcp, `crate::tcp`) or over bare UDP.
//!
//! Three transports, seed 002's three HTTP schemes (§5):
//! - [`HttpTransport::Tcp`]: a connection per request (`Connection: close`): handshake, request, response,
//!   close — HTTP/TCP.
//! - [`HttpTransport::Persistent`]: one kept-alive connection for every request — HTTP persistent.
//! - [`HttpTransport::Udp`]: one request per datagram, one response per datagram, no retransmission and no
//!   request/response matching (TinyCoAP's HTTP/UDP: "a bare HTTP server able only to reply to GET
//!   requests"). A request whose response does not come within the client's timeout is lost.
//!
//! These are baselines for measurement, not an HTTP implementation for use: no chunked bodies, no
//! pipelining limits, no header size limits beyond the connection buffer ([`MAX_BUFFER`]). Owns: the
//! codec and the two apps. Must never panic on bytes a peer sends (a malformed request closes the
//! connection or is ignored) or read a clock.

use crate::app::{App, AppAction};
use corral_proto::tcp::ConnId;
use corral_proto::{Duration, Instant};
use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

/// The HTTP port.
pub const HTTP_PORT: u16 = 80;

/// The most a connection buffers of an unfinished message; more is a protocol error (the connection is
/// closed).
pub const MAX_BUFFER: usize = 16 * 1024;

const MAX_HEADERS: usize = 16;

/// Why bytes are not an HTTP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// httparse's complaint.
    Syntax(String),
    /// A `Content-Length` that is not a number.
    BadLength,
    /// The message is larger than [`MAX_BUFFER`].
    TooLarge,
}

/// An HTTP/1.1 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub version: u8,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// An HTTP/1.1 response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub reason: String,
    pub version: u8,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

fn header<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
}

/// Whether the connection stays open after this message (HTTP/1.1: unless `Connection: close`; HTTP/1.0:
/// only with `Connection: keep-alive`).
fn keep_alive(version: u8, headers: &[(String, Vec<u8>)]) -> bool {
    match header(headers, "connection") {
        Some(v) if v.eq_ignore_ascii_case(b"close") => false,
        Some(v) if v.eq_ignore_ascii_case(b"keep-alive") => true,
        _ => version >= 1,
    }
}

fn write_head(out: &mut Vec<u8>, first: &str, headers: &[(String, Vec<u8>)], body: &[u8]) {
    out.extend_from_slice(first.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (n, v) in headers {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

fn owned(h: &[httparse::Header<'_>]) -> Vec<(String, Vec<u8>)> {
    h.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect()
}

/// The body length a message's headers announce (0 without `Content-Length`).
fn content_length(headers: &[(String, Vec<u8>)]) -> Result<usize, HttpError> {
    match header(headers, "content-length") {
        None => Ok(0),
        Some(v) => std::str::from_utf8(v).ok().and_then(|s| s.trim().parse().ok()).ok_or(HttpError::BadLength),
    }
}

/// Head length and body length of a complete head, then whether the whole message is there.
fn finish<T>(buf: &[u8], head: usize, headers: &[(String, Vec<u8>)], make: impl FnOnce(Vec<u8>) -> T) -> Parsed<T> {
    let len = content_length(headers)?;
    if head + len > MAX_BUFFER {
        return Err(HttpError::TooLarge);
    }
    if buf.len() < head + len {
        return Ok(None);
    }
    Ok(Some((make(buf[head..head + len].to_vec()), head + len)))
}

/// A message and the bytes it took, `None` if more bytes are needed.
pub type Parsed<T> = Result<Option<(T, usize)>, HttpError>;

impl HttpRequest {
    /// A `GET` of `path` for `host`; `keep_alive` false adds `Connection: close`.
    pub fn get(path: &str, host: &str, keep_alive: bool) -> HttpRequest {
        let mut headers = vec![("Host".to_string(), host.as_bytes().to_vec())];
        if !keep_alive {
            headers.push(("Connection".into(), b"close".to_vec()));
        }
        HttpRequest { method: "GET".into(), path: path.into(), version: 1, headers, body: Vec::new() }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.body.len());
        let mut headers = self.headers.clone();
        if !self.body.is_empty() && header(&headers, "content-length").is_none() {
            headers.push(("Content-Length".into(), self.body.len().to_string().into_bytes()));
        }
        write_head(&mut out, &format!("{} {} HTTP/1.{}", self.method, self.path, self.version), &headers, &self.body);
        out
    }

    /// Parses the first request in `buf`.
    pub fn parse(buf: &[u8]) -> Parsed<HttpRequest> {
        let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Request::new(&mut h);
        match r.parse(buf).map_err(|e| HttpError::Syntax(e.to_string()))? {
            httparse::Status::Partial if buf.len() > MAX_BUFFER => Err(HttpError::TooLarge),
            httparse::Status::Partial => Ok(None),
            httparse::Status::Complete(head) => {
                let headers = owned(r.headers);
                let (method, path, version) =
                    (r.method.unwrap_or_default().to_string(), r.path.unwrap_or_default().to_string(), r.version);
                finish(buf, head, &headers.clone(), |body| HttpRequest {
                    method,
                    path,
                    version: version.unwrap_or(1),
                    headers,
                    body,
                })
            }
        }
    }

    pub fn keep_alive(&self) -> bool {
        keep_alive(self.version, &self.headers)
    }
}

impl HttpResponse {
    /// `200 OK` with `body` and its `Content-Length`; `close` adds `Connection: close`.
    pub fn ok(body: Vec<u8>, close: bool) -> HttpResponse {
        let mut headers = vec![("Content-Length".to_string(), body.len().to_string().into_bytes())];
        if close {
            headers.push(("Connection".into(), b"close".to_vec()));
        }
        HttpResponse { status: 200, reason: "OK".into(), version: 1, headers, body }
    }

    pub fn not_found() -> HttpResponse {
        HttpResponse {
            status: 404,
            reason: "Not Found".into(),
            version: 1,
            headers: vec![("Content-Length".into(), b"0".to_vec())],
            body: Vec::new(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.body.len());
        write_head(
            &mut out,
            &format!("HTTP/1.{} {} {}", self.version, self.status, self.reason),
            &self.headers,
            &self.body,
        );
        out
    }

    /// Parses the first response in `buf` (its body delimited by `Content-Length`).
    pub fn parse(buf: &[u8]) -> Parsed<HttpResponse> {
        let mut h = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut h);
        match r.parse(buf).map_err(|e| HttpError::Syntax(e.to_string()))? {
            httparse::Status::Partial if buf.len() > MAX_BUFFER => Err(HttpError::TooLarge),
            httparse::Status::Partial => Ok(None),
            httparse::Status::Complete(head) => {
                let headers = owned(r.headers);
                let (status, reason, version) =
                    (r.code.unwrap_or_default(), r.reason.unwrap_or_default().to_string(), r.version);
                finish(buf, head, &headers.clone(), |body| HttpResponse {
                    status,
                    reason,
                    version: version.unwrap_or(1),
                    headers,
                    body,
                })
            }
        }
    }
}

/// How the HTTP client reaches the server: seed 002's three HTTP schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpTransport {
    /// A TCP connection per request.
    Tcp,
    /// One persistent TCP connection.
    Persistent,
    /// A datagram per request and per response.
    Udp,
}

/// The server: answers `GET /<path>` with `body_len` bytes, on TCP and UDP port 80.
#[derive(Debug, Default)]
pub struct HttpServer {
    pub path: String,
    pub body: Vec<u8>,
    bufs: HashMap<ConnId, Vec<u8>>,
    actions: VecDeque<AppAction>,
    /// Requests answered.
    pub served: u64,
    /// Connections accepted.
    pub connections: u64,
}

impl HttpServer {
    pub fn new(path: &str, body_len: usize) -> HttpServer {
        HttpServer { path: path.into(), body: vec![b'x'; body_len], ..HttpServer::default() }
    }

    fn answer(&mut self, req: &HttpRequest, close: bool) -> Vec<u8> {
        self.served += 1;
        if req.method == "GET" && req.path.trim_start_matches('/') == self.path.trim_start_matches('/') {
            HttpResponse::ok(self.body.clone(), close).encode()
        } else {
            HttpResponse::not_found().encode()
        }
    }
}

impl App for HttpServer {
    fn tcp_port(&self) -> u16 {
        HTTP_PORT
    }
    fn on_connected(&mut self, _: Instant, conn: ConnId, _: SocketAddr) {
        self.connections += 1;
        self.bufs.insert(conn, Vec::new());
    }
    fn on_connect_failed(&mut self, _: Instant, _: SocketAddr) {}
    fn on_data(&mut self, _: Instant, conn: ConnId, data: &[u8]) {
        let mut buf = self.bufs.remove(&conn).unwrap_or_default();
        buf.extend_from_slice(data);
        loop {
            match HttpRequest::parse(&buf) {
                Ok(Some((req, used))) => {
                    buf.drain(..used);
                    let close = !req.keep_alive();
                    let bytes = self.answer(&req, close);
                    self.actions.push_back(AppAction::Send(conn, bytes));
                    if close {
                        self.actions.push_back(AppAction::Close(conn));
                        return;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    self.actions.push_back(AppAction::Close(conn));
                    return;
                }
            }
        }
        self.bufs.insert(conn, buf);
    }
    fn on_closed(&mut self, _: Instant, conn: ConnId) {
        self.bufs.remove(&conn);
    }
    fn on_datagram(&mut self, _: Instant, src: SocketAddr, payload: &[u8]) {
        if let Ok(Some((req, _))) = HttpRequest::parse(payload) {
            let bytes = self.answer(&req, false);
            self.actions.push_back(AppAction::Datagram(src, bytes));
        }
    }
    fn on_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_action(&mut self) -> Option<AppAction> {
        self.actions.pop_front()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One request of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transaction {
    /// When the client started it (for [`HttpTransport::Tcp`]: when it asked for the connection).
    pub sent: Instant,
    pub answered: Option<Instant>,
    /// Body bytes of the response.
    pub body: usize,
}

/// The client: `count` `GET`s of `path`, each after the previous one's response (`interval` None) or one
/// every `interval` (open loop; for [`HttpTransport::Udp`], seed 002's server workload).
#[derive(Debug)]
pub struct HttpClient {
    pub server: SocketAddr,
    pub transport: HttpTransport,
    pub path: String,
    pub count: usize,
    pub interval: Option<Duration>,
    /// A UDP request unanswered this long is lost (HTTP/UDP has no retransmission).
    pub udp_timeout: Duration,
    pub transactions: Vec<Transaction>,
    conn: Option<ConnId>,
    connecting: bool,
    buf: Vec<u8>,
    /// Index of the transaction in flight (closed loop) or the oldest unanswered one (open loop).
    current: usize,
    wake: Option<Instant>,
    actions: VecDeque<AppAction>,
    /// Connections that failed to open.
    pub failed_connects: u64,
}

impl HttpClient {
    pub fn new(server: SocketAddr, transport: HttpTransport, path: &str, count: usize) -> HttpClient {
        HttpClient {
            server,
            transport,
            path: path.into(),
            count,
            interval: None,
            udp_timeout: Duration::from_secs(2),
            transactions: Vec::new(),
            conn: None,
            connecting: false,
            buf: Vec::new(),
            current: 0,
            wake: None,
            actions: VecDeque::new(),
            failed_connects: 0,
        }
    }

    /// Starts the first request at `now`.
    pub fn start(&mut self, now: Instant) {
        self.next(now);
    }

    /// Every request was sent and has its answer or gave up.
    pub fn done(&self) -> bool {
        self.transactions.len() == self.count && self.current >= self.count
    }

    pub fn answered(&self) -> usize {
        self.transactions.iter().filter(|t| t.answered.is_some()).count()
    }

    fn request(&self) -> Vec<u8> {
        let host = match self.server {
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
            SocketAddr::V4(a) => a.ip().to_string(),
        };
        HttpRequest::get(
            &format!("/{}", self.path.trim_start_matches('/')),
            &host,
            self.transport != HttpTransport::Tcp,
        )
        .encode()
    }

    /// Starts transaction number `transactions.len()`.
    fn next(&mut self, now: Instant) {
        if self.transactions.len() >= self.count {
            return;
        }
        self.transactions.push(Transaction { sent: now, answered: None, body: 0 });
        match self.transport {
            HttpTransport::Udp => {
                let bytes = self.request();
                self.actions.push_back(AppAction::Datagram(self.server, bytes));
                self.wake = Some(match self.interval {
                    Some(d) => now + d,
                    None => now + self.udp_timeout,
                });
            }
            HttpTransport::Persistent if self.conn.is_some() => {
                let bytes = self.request();
                self.actions.push_back(AppAction::Send(self.conn.expect("checked"), bytes));
            }
            HttpTransport::Tcp | HttpTransport::Persistent => {
                if !self.connecting {
                    self.connecting = true;
                    self.actions.push_back(AppAction::Connect(self.server));
                }
            }
        }
    }

    /// Transaction `current` is over (answered or not): the next one (closed loop).
    fn finished(&mut self, now: Instant) {
        self.current += 1;
        if self.interval.is_none() {
            self.next(now);
        }
    }
}

impl App for HttpClient {
    fn tcp_port(&self) -> u16 {
        HTTP_PORT
    }
    fn on_connected(&mut self, _: Instant, conn: ConnId, _: SocketAddr) {
        self.connecting = false;
        self.conn = Some(conn);
        self.buf.clear();
        if self.current < self.transactions.len() {
            let bytes = self.request();
            self.actions.push_back(AppAction::Send(conn, bytes));
        }
    }
    fn on_connect_failed(&mut self, now: Instant, _: SocketAddr) {
        self.connecting = false;
        self.failed_connects += 1;
        self.finished(now);
    }
    fn on_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        if Some(conn) != self.conn {
            return;
        }
        self.buf.extend_from_slice(data);
        while let Ok(Some((resp, used))) = HttpResponse::parse(&self.buf) {
            self.buf.drain(..used);
            if let Some(t) = self.transactions.get_mut(self.current) {
                t.answered = Some(now);
                t.body = resp.body.len();
            }
            if self.transport == HttpTransport::Tcp {
                self.actions.push_back(AppAction::Close(conn));
                self.conn = None;
            }
            self.finished(now);
            if self.conn.is_none() {
                break;
            }
        }
    }
    fn on_closed(&mut self, now: Instant, conn: ConnId) {
        if Some(conn) == self.conn {
            // The server closed before answering: the transaction is lost; the next one reconnects.
            self.conn = None;
            if self.current < self.transactions.len() {
                self.finished(now);
            }
        }
    }
    fn on_datagram(&mut self, now: Instant, _: SocketAddr, payload: &[u8]) {
        if let Ok(Some((resp, _))) = HttpResponse::parse(payload) {
            // No matching in HTTP/UDP: a response answers the oldest open request.
            let from = self.current.min(self.transactions.len());
            if let Some(t) = self.transactions[from..].iter_mut().find(|t| t.answered.is_none()) {
                t.answered = Some(now);
                t.body = resp.body.len();
            }
            if self.interval.is_none() && self.current < self.transactions.len() {
                self.finished(now);
            }
        }
    }
    fn on_timeout(&mut self, now: Instant) {
        self.wake = None;
        match self.interval {
            // Closed loop over UDP: the request is lost.
            None => {
                if self.current < self.transactions.len() {
                    self.finished(now);
                }
            }
            // Open loop: the next request; after the last, its timeout ends the run.
            Some(_) if self.transactions.len() < self.count => {
                self.next(now);
                if self.transactions.len() == self.count {
                    self.wake = Some(now + self.udp_timeout);
                }
            }
            Some(_) => self.current = self.count,
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }
    fn poll_action(&mut self) -> Option<AppAction> {
        self.actions.pop_front()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_parse_incrementally() {
        let r = HttpRequest::get("/test", "[fec0::2]", false);
        let bytes = r.encode();
        assert_eq!(bytes, b"GET /test HTTP/1.1\r\nHost: [fec0::2]\r\nConnection: close\r\n\r\n");
        for cut in 0..bytes.len() {
            assert_eq!(HttpRequest::parse(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        let (back, used) = HttpRequest::parse(&bytes).unwrap().unwrap();
        assert_eq!((back.clone(), used), (r, bytes.len()));
        assert!(!back.keep_alive());
        assert!(HttpRequest::parse(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").unwrap().unwrap().0.keep_alive());
        assert!(!HttpRequest::parse(b"GET /a HTTP/1.0\r\n\r\n").unwrap().unwrap().0.keep_alive());
        // Two pipelined requests: the first, then the second.
        let two = [HttpRequest::get("/a", "h", true).encode(), HttpRequest::get("/b", "h", true).encode()].concat();
        let (a, n) = HttpRequest::parse(&two).unwrap().unwrap();
        assert_eq!(a.path, "/a");
        assert_eq!(HttpRequest::parse(&two[n..]).unwrap().unwrap().0.path, "/b");
        assert!(matches!(HttpRequest::parse(b"GET\x01 / HTTP/1.1\r\n\r\n"), Err(HttpError::Syntax(_))));
    }

    #[test]
    fn responses_round_trip_with_bodies() {
        let r = HttpResponse::ok(vec![b'x'; 300], false);
        let bytes = r.encode();
        assert!(bytes.starts_with(b"HTTP/1.1 200 OK\r\nContent-Length: 300\r\n\r\nxxx"));
        assert_eq!(HttpResponse::parse(&bytes[..bytes.len() - 1]), Ok(None), "the body is not complete");
        let (back, used) = HttpResponse::parse(&bytes).unwrap().unwrap();
        assert_eq!((back, used), (r, bytes.len()));
        let bad = b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n";
        assert_eq!(HttpResponse::parse(bad), Err(HttpError::BadLength));
        let huge = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", MAX_BUFFER);
        assert_eq!(HttpResponse::parse(huge.as_bytes()), Err(HttpError::TooLarge));
        assert_eq!(HttpResponse::parse(&HttpResponse::not_found().encode()).unwrap().unwrap().0.status, 404);
    }

    #[test]
    fn the_server_answers_requests_in_pieces_and_closes_when_asked() {
        let mut s = HttpServer::new("test", 20);
        let c = ConnId(1);
        let peer: SocketAddr = "[fd00::1]:5000".parse().unwrap();
        s.on_connected(Instant::ZERO, c, peer);
        let req = HttpRequest::get("/test", "h", true).encode();
        s.on_data(Instant::ZERO, c, &req[..5]);
        assert_eq!(s.poll_action(), None);
        s.on_data(Instant::ZERO, c, &req[5..]);
        let Some(AppAction::Send(_, bytes)) = s.poll_action() else { panic!("a response") };
        assert_eq!(HttpResponse::parse(&bytes).unwrap().unwrap().0.body.len(), 20);
        s.on_data(Instant::ZERO, c, &HttpRequest::get("/test", "h", false).encode());
        assert!(matches!(s.poll_action(), Some(AppAction::Send(..))));
        assert_eq!(s.poll_action(), Some(AppAction::Close(c)));
        s.on_datagram(Instant::ZERO, peer, &HttpRequest::get("/nope", "h", true).encode());
        let Some(AppAction::Datagram(to, bytes)) = s.poll_action() else { panic!("a datagram") };
        assert_eq!((to, HttpResponse::parse(&bytes).unwrap().unwrap().0.status), (peer, 404));
        assert_eq!(s.served, 3);
    }
}
