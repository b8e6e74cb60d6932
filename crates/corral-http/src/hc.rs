//! The HTTP→CoAP cross-proxy (RFC 8075) of the gateway's window: `/hc/coap://HOST[:PORT]/PATH?QUERY`
//! and `/hc/coaps://…` (the default mapping, §5.3; coaps:// with the credentials the gateway has for that
//! peer, `--peer-psk-file`, so the HTTP side reaches exactly the coaps:// members the gateway could),
//! methods as they are, Content-Type ↔ Content-Format (§6), the response codes by §7's table, Accept, ETag /
//! If-Match / If-None-Match, Max-Age → Cache-Control; block-wise transfers stay between the gateway and the
//! server (the client reassembles them). A GET that accepts `text/event-stream` observes the resource (RFC
//! 7641) and streams each notification as a server-sent event.
//!
//! Owns: the mapping and what it may reach ([`Reach`]). The target must be an address the gateway's member
//! policy allows (`--member-net`, `--member-port`; never the gateway itself): the same rule as an entity's
//! members, so the cross-proxy reaches nothing an entity could not. On top of it, the proxy's destination
//! rule (corral-proxy's [`Destinations`]): this host — loopback and every address of its interfaces — is
//! no destination for an HTTP client from another host, and no destination at all for a change (non-GET),
//! unless the operator opens those addresses (`--http-hc-this-host`); and a device's `/mc` (its multicast
//! groups, which it changes for its manager, this gateway) is reached by managers only. One request per HTTP
//! request, within the window's bounds (`bounds`: requests and event streams, each with a per-client share).
//! No DNS: the host is an address.
//!
//! # Why (issue 41 item 3)
//! The cross-proxy sends from the gateway's own loopback address, which the services of this host and the
//! devices' `/mc` trust: without these rules a client with only the actuate role moved a device into a
//! group of its choice (`POST /hc/coap://127.0.0.2:5703/mc?act=add`), or out of an entity's group.

use super::bounds::Share;
use super::mapping::{content_format_of, hex, response_of};
use super::rules::Caller;
use super::{Problem, Shared};
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use corral_group::policy::{canonical, Role};
use corral_group::Prefix;
use corral_proxy::Destinations;
use corral_tokio::uri::{Host, Scheme};
use corral_tokio::{Code, ContentFormat, OptionNumber};
use std::net::SocketAddr;

pub(super) fn routes() -> Router<Shared> {
    Router::new().route("/hc/{*target}", any(cross))
}

fn method_of(m: &Method) -> Option<Code> {
    Some(match m.as_str() {
        "GET" => Code::GET,
        "POST" => Code::POST,
        "PUT" => Code::PUT,
        "DELETE" => Code::DELETE,
        "FETCH" => Code::FETCH,
        "PATCH" => Code::PATCH,
        "IPATCH" => Code::IPATCH,
        _ => return None,
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim().trim_start_matches("W/").trim_matches('"');
    if s.len() % 2 != 0 || s.len() > 16 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// `coap%3A%2F%2F…` as RFC 8075 §5.3 allows: the target percent-encoded as one segment.
fn decode_target(raw: &str) -> String {
    if !raw.get(..7).is_some_and(|p| p.eq_ignore_ascii_case("coap%3A")) {
        return raw.to_string();
    }
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], raw.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the cross-proxy may send beyond the member policy (see the module doc).
#[derive(Debug, Clone)]
pub struct Reach {
    /// The proxy's rule: this host closed to clients from other hosts, broadcast addresses to everyone.
    closed: Destinations,
    /// Addresses of this host the operator opened (`--http-hc-this-host`).
    opened: Vec<Prefix>,
}

impl Reach {
    /// `this_machine`: loopback and this host's addresses; `broadcasts`: its networks' directed broadcast
    /// addresses; `opened`: what the operator opened.
    pub fn new(this_machine: Vec<Prefix>, broadcasts: Vec<std::net::IpAddr>, opened: &[Prefix]) -> Reach {
        let closed = Destinations { this_host: this_machine, broadcasts, ..Destinations::default() };
        Reach { closed, opened: opened.to_vec() }
    }

    /// Whether `caller` may make the cross-proxy send `method` to `path` at `dst`.
    fn check(&self, caller: &Caller, method: Code, dst: SocketAddr, path: &[String]) -> Result<(), Problem> {
        if path.first().is_some_and(|p| p == corral_group::mc::PATH) && caller.role < Role::Manage {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                format!(
                    "/{} changes a device's multicast groups, which it does for its manager (this gateway): through \
                     the cross-proxy it needs the role manage, and {} has {}",
                    corral_group::mc::PATH,
                    caller.peer,
                    caller.role.as_str()
                ),
            ));
        }
        let opened = self.opened.iter().any(|p| p.contains(dst.ip()));
        let rule = Destinations { this_host_open: opened, ..self.closed.clone() };
        let this_host = self.closed.is_this_host(dst.ip()) && !opened;
        match rule.check(caller.peer.ip(), dst) {
            Err(_) if this_host => Err(Problem::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} is this gateway's own host: clients from other hosts may not reach it through the \
                     cross-proxy (--http-hc-this-host opens it)",
                    dst.ip()
                ),
            )),
            Err(refusal) => Err(Problem::from_coap(refusal.code, refusal.diagnostic.as_bytes())),
            Ok(()) if this_host && method != Code::GET => Err(Problem::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{} is this gateway's own host, whose services trust it: the cross-proxy sends it no \
                     change (only GET) unless the operator opens it (--http-hc-this-host)",
                    dst.ip()
                ),
            )),
            Ok(()) => Ok(()),
        }
    }
}

/// Where the target is, and whether over coaps://, if the gateway's policy and [`Reach`] let `caller`
/// make the cross-proxy send `method` there.
fn target(app: &Shared, caller: &Caller, method: Code, raw: &str) -> Result<(String, SocketAddr, bool), Problem> {
    let text = decode_target(raw);
    let uri = corral_tokio::parse_uri(&text)
        .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, format!("the target is not a CoAP URI: {e}")))?;
    let secure = match uri.scheme {
        Scheme::Coap => false,
        Scheme::Coaps => true,
        other => {
            return Err(Problem::new(
                StatusCode::NOT_IMPLEMENTED,
                format!("the cross-proxy forwards coap:// and coaps:// only, not {other}"),
            ))
        }
    };
    let Host::Ip(ip) = uri.host else {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "the cross-proxy does not resolve names: give the host as an address",
        ));
    };
    // An IPv4-mapped IPv6 address is its IPv4 address: the socket reports answers and ICMP errors from
    // that one, so a request sent to the mapped form would wait for an answer from an address that never
    // sends one (issue 41 item 10).
    let addr = SocketAddr::new(canonical(ip), uri.port);
    let gw = app.window.gateway.as_ref().ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "no cross-proxy here"))?;
    gw.members.check(addr).map_err(|why| {
        tracing::debug!(%addr, %why, "cross-proxy request refused by the member policy");
        Problem::new(StatusCode::FORBIDDEN, format!("the gateway may not send to {addr}: {why}"))
    })?;
    app.window.reach.check(caller, method, addr, &uri.path).inspect_err(|p| {
        tracing::debug!(%addr, peer = %caller.peer, why = %p.detail, "cross-proxy request refused");
    })?;
    Ok((text, addr, secure))
}

/// The client that reaches the coaps:// peer `addr` with the gateway's credentials for it (made on first
/// use, one per peer the credentials file names), or 502 naming the flag that gives them.
async fn coaps_client(app: &Shared, addr: SocketAddr) -> Result<corral_tokio::Client, Problem> {
    let gw = app.window.gateway.as_ref().ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "no cross-proxy here"))?;
    let canonical = SocketAddr::new(corral_group::policy::canonical(addr.ip()), addr.port());
    let Some((_, config)) = gw.coaps_peers.iter().find(|(a, _)| *a == canonical) else {
        return Err(Problem::new(
            StatusCode::BAD_GATEWAY,
            format!("the gateway has no DTLS credentials for coaps://{addr} (give them with --peer-psk-file)"),
        ));
    };
    let mut clients = app.coaps_clients.lock().await;
    if let Some(c) = clients.get(&canonical) {
        return Ok(c.clone());
    }
    let c = super::client(Some(config.clone()))
        .await
        .map_err(|e| Problem::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    clients.insert(canonical, c.clone());
    Ok(c)
}

async fn cross(
    State(app): State<Shared>,
    Extension(caller): Extension<Caller>,
    uri: axum::http::Uri,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match forward(app, caller, uri, method, headers, body).await {
        Ok(r) => r,
        Err(p) => p.into_response(),
    }
}

async fn forward(
    app: Shared,
    caller: Caller,
    uri: axum::http::Uri,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let raw = uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
    let raw = raw.strip_prefix(super::HC_PREFIX).unwrap_or(raw);
    let code = method_of(&method)
        .ok_or_else(|| Problem::new(StatusCode::NOT_IMPLEMENTED, format!("{method} has no CoAP method")))?;
    let (text, addr, secure) = target(&app, &caller, code, raw)?;
    let client = match secure {
        true => coaps_client(&app, addr).await?,
        false => app.client.clone().ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "no cross-proxy here"))?,
    };
    let mut rb = client.request(code, &text).to(addr);
    let accepts: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let sse = code == Code::GET
        && accepts
            .iter()
            .any(|a| a.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream")));
    // An observation holds a place among the event streams for as long as it runs, a request among the
    // requests until it is answered.
    let place = place(if sse { &app.streams } else { &app.requests }, &caller)?;
    if let Some(cf) = accepts.iter().find_map(|a| content_format_of(a.split(";q=").next().unwrap_or(a))) {
        rb = rb.accept(cf);
    }
    if !body.is_empty() {
        let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/octet-stream");
        let cf = content_format_of(ct).ok_or_else(|| {
            Problem::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("{ct} has no CoAP Content-Format"))
        })?;
        rb = rb.content_format(cf).payload(body.to_vec());
    }
    for v in headers.get_all(header::IF_MATCH).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')) {
        match v.trim() {
            "*" => rb = rb.option(OptionNumber::IF_MATCH, []),
            tag => {
                rb = rb.option(
                    OptionNumber::IF_MATCH,
                    unhex(tag).ok_or_else(|| {
                        Problem::new(StatusCode::BAD_REQUEST, format!("If-Match {tag}: not an ETag of this proxy"))
                    })?,
                )
            }
        }
    }
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() == "*") {
        rb = rb.option(OptionNumber::IF_NONE_MATCH, []);
    } else if let Some(tag) = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).and_then(unhex) {
        // A conditional GET: CoAP's ETag option in a request asks for 2.03 Valid when it still holds.
        rb = rb.option(OptionNumber::ETAG, tag);
    }
    if sse {
        let observation = rb.observe().await.map_err(coap_error)?;
        return Ok(events(observation, place));
    }
    let r = rb.send().await.map_err(coap_error)?;
    drop(place);
    Ok(response_of(&r))
}

/// A place for `caller` in `pool` (the window's event streams or cross-proxy requests), or 503.
pub(super) fn place(pool: &std::sync::Arc<super::bounds::Shares>, caller: &Caller) -> Result<Share, Problem> {
    pool.take(caller.peer.ip()).map_err(|why| {
        let detail = pool.refusal(why);
        tracing::warn!(peer = %caller.peer, "{detail}: refused with 503");
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, detail)
    })
}

/// A CoAP client error as a problem: no answer is 504, a reset or an unreachable server 502.
fn coap_error(e: corral_tokio::Error) -> Problem {
    use corral_tokio::Error as E;
    let status = match e {
        E::Timeout => StatusCode::GATEWAY_TIMEOUT,
        E::InvalidUri(_) => StatusCode::BAD_REQUEST,
        E::Start(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_GATEWAY,
    };
    Problem::new(status, format!("the CoAP request failed: {e}"))
}

/// An observation as server-sent events: each notification one event (`id:` its Observe number, the
/// payload as `data:` lines: text and JSON as they are, other formats in hex), an error answer or a
/// broken observation one `event: error` that ends the stream; a comment after
/// [`STREAM_KEEP_ALIVE`](super::bounds::STREAM_KEEP_ALIVE) of silence.
pub(super) fn events(observation: corral_tokio::Observation, place: Share) -> Response {
    // The place lives with the stream: observations count against the bound until the client goes, and
    // the observation ends (deregistered) when the stream is dropped.
    let stream = futures_util::stream::unfold(Some((observation, place)), |state| async move {
        let (mut o, p) = state?;
        let next = match tokio::time::timeout(super::bounds::STREAM_KEEP_ALIVE, o.next()).await {
            Ok(next) => next?,
            Err(_) => return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), Some((o, p)))),
        };
        let text = match next {
            Ok(r) if r.code.is_success() => {
                return Some((Ok::<_, std::convert::Infallible>(Bytes::from(sse_event(&r))), Some((o, p))))
            }
            Ok(r) => format!(
                "event: error\ndata: {:#} {}\n\n",
                r.code,
                String::from_utf8_lossy(&r.payload).lines().next().unwrap_or("")
            ),
            Err(e) => format!("event: error\ndata: {e}\n\n"),
        };
        Some((Ok(Bytes::from(text)), None))
    });
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (headers, Body::from_stream(stream)).into_response()
}

/// One notification as an event.
pub fn sse_event(r: &corral_tokio::Response) -> String {
    let cf = r.options.content_format();
    let readable = cf.is_none_or(|c| c.is_text() || c == ContentFormat::JSON || c == ContentFormat::SENML_JSON);
    let data = if readable { String::from_utf8_lossy(&r.payload).into_owned() } else { hex(&r.payload) };
    let mut s = String::new();
    if let Some(n) = r.options.observe() {
        s.push_str(&format!("id: {n}\n"));
    }
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line.trim_end_matches('\r'));
        s.push('\n');
    }
    s.push('\n');
    s
}
