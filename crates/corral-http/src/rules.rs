//! Who may ask the window what: every request, in one place, before any route runs.
//!
//! 1. **Host**: every request names this listener — its address (with its port), `localhost` when it listens
//!    on loopback, or a name the operator gave (`--http-host`). Anything else is 421 Misdirected Request:
//!    a page on an attacker's domain that re-resolves to this machine (DNS rebinding) reaches the listener
//!    with its own name in `Host`, and gets nothing, reads included.
//! 2. **Role**: the gateway's `--allow` roles, applied to the HTTP client's address as to a CoAP client's
//!    (read: GETs; actuate: actuations and non-GET cross-proxy requests; manage: every other change), 403.
//! 3. **Origin**: a change (`/api`, the console's forms, non-GET `/hc/`) from a browser must come from a page
//!    of this listener: `Origin`, when there is one, names an address or name of rule 1, and
//!    `Sec-Fetch-Site`, when there is one, says `same-origin` (or `none`: typed by the user); 403 otherwise.
//!    Browsers send both with every cross-site request, a `text/plain` form post included (which needs no
//!    preflight); programs such as curl send neither.
//! 4. **Token**: with `--http-token-file`, `/api`, `/hc/` and the console's forms need
//!    `Authorization: Bearer TOKEN`, 401 (so the forms are off: a browser form cannot carry it).
//!
//! Owns: those rules and [`Caller`], what the routes learn about who asked. Must never: let a route run
//! before them, or compare `Origin` with the request's own `Host` (the attacker chooses both).

use super::{Problem, Shared};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, uri::Authority, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use corral_group::policy::{canonical, ClientIdentity, Role};
use corral_group::Prefix;
use std::net::{IpAddr, SocketAddr};

/// Who asked, as the routes see it (a request extension the guard adds).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub peer: SocketAddr,
    pub role: Role,
}

/// The names by which this listener may be asked: its address, and what the operator configured.
#[derive(Debug, Clone)]
pub struct Names {
    /// The listener's address.
    pub listen: SocketAddr,
    /// This machine's addresses (loopback and each interface's), for a listener on a wildcard address.
    pub this_machine: Vec<Prefix>,
    /// `--http-host NAME[:PORT]`: lower case, without a trailing dot; without a port, any port.
    pub names: Vec<(String, Option<u16>)>,
}

/// `--http-host NAME[:PORT]`.
pub fn parse_host(s: &str) -> Result<(String, Option<u16>), String> {
    let a: Authority =
        s.parse().map_err(|_| format!("`{s}`: not a host name, e.g. gw.example.net or gw.example.net:8080"))?;
    if s.contains('@') || s.contains('/') {
        return Err(format!("`{s}`: a host name and an optional port only"));
    }
    Ok((a.host().trim_end_matches('.').to_ascii_lowercase(), a.port_u16()))
}

impl Names {
    /// Whether `authority` (a `Host` value, or an origin's authority whose scheme's default port is
    /// `default_port`) names this listener.
    pub fn allows(&self, authority: &str, default_port: u16) -> bool {
        let Ok(a) = authority.parse::<Authority>() else { return false };
        if authority.contains('@') {
            return false;
        }
        let host = a.host().trim_end_matches('.').to_ascii_lowercase();
        let port = a.port_u16();
        if self.names.iter().any(|(n, p)| *n == host && p.is_none_or(|p| Some(p) == port)) {
            return true;
        }
        if port.unwrap_or(default_port) != self.listen.port() {
            return false;
        }
        let listen = canonical(self.listen.ip());
        let ip = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&host).parse::<IpAddr>();
        match ip {
            Ok(ip) if listen.is_unspecified() => self.this_machine.iter().any(|p| p.contains(canonical(ip))),
            Ok(ip) => canonical(ip) == listen,
            // RFC 6761 §6.3: `localhost` is loopback, whatever any resolver says.
            Err(_) => host == "localhost" && (listen.is_loopback() || listen.is_unspecified()),
        }
    }
}

/// The role a request needs; whether it changes something (the Origin rule); whether the token covers it.
fn needs(method: &Method, path: &str) -> (Role, bool, bool) {
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if let Some(rest) = path.strip_prefix("/console/").filter(|_| !safe) {
        // The console's forms.
        return (if rest.ends_with("/actuate") { Role::Actuate } else { Role::Manage }, true, true);
    }
    if let Some(rest) = path.strip_prefix("/api") {
        let role = if safe {
            Role::Read
        } else if rest.ends_with("/actuate") {
            Role::Actuate
        } else {
            Role::Manage
        };
        return (role, !safe, true);
    }
    if path.starts_with(super::HC_PREFIX) {
        return (if safe { Role::Read } else { Role::Actuate }, !safe, true);
    }
    (Role::Read, false, false)
}

/// A refusal: a problem document, or for the console's forms a page a browser shows.
fn refusal(form: bool) -> impl Fn(StatusCode, String) -> Response {
    move |status, detail| match form {
        true => super::page::refused(status, &detail),
        false => Problem::new(status, detail).into_response(),
    }
}

/// Rules 1 to 4 of the module doc, then the route with a [`Caller`].
pub(super) async fn guard(
    State(app): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    let names = &app.window.names;
    let (role, change, covered) = needs(req.method(), req.uri().path());
    let refuse = refusal(change && req.uri().path().starts_with("/console/"));
    // The authority of an absolute-form request line takes the place of Host (RFC 9112 §3.2.2).
    let host = match req.uri().authority() {
        Some(a) => Some(a.to_string()),
        None => req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string),
    };
    match host {
        None => return refuse(StatusCode::BAD_REQUEST, "the request has no Host header".into()),
        Some(h) if !names.allows(&h, 80) => {
            tracing::debug!(%peer, host = %h, "HTTP request for another host refused");
            return refuse(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this listener is {} and not {h}: name it by its address, or give the name with --http-host",
                    names.listen
                ),
            );
        }
        Some(_) => {}
    }
    let has = app.window.access.role_of(&ClientIdentity::new(peer));
    let Some(has) = has.filter(|r| *r >= role) else {
        tracing::debug!(%peer, path = req.uri().path(), "HTTP request refused by the access policy");
        let have = has.map_or("no role".to_string(), |r| format!("the role {}", r.as_str()));
        return refuse(
            StatusCode::FORBIDDEN,
            format!("{} needs the role {} and {peer} has {have} (--allow)", req.uri().path(), role.as_str()),
        );
    };
    if change {
        if let Err(why) = from_this_listener(req.headers(), names) {
            tracing::debug!(%peer, path = req.uri().path(), why, "a change from another site refused");
            return refuse(StatusCode::FORBIDDEN, format!("a change from a page of another site: {why}"));
        }
    }
    if let Some(token) = app.window.token.as_deref().filter(|_| covered) {
        if !bearer_matches(req.headers(), token) {
            let mut r = refuse(
                StatusCode::UNAUTHORIZED,
                format!("{} needs `Authorization: Bearer TOKEN` (--http-token-file)", req.uri().path()),
            );
            r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    req.extensions_mut().insert(Caller { peer, role: has });
    next.run(req).await
}

/// Rule 3: whether a browser sent the change from one of this listener's pages (a request without either
/// header is not a browser's cross-site request).
fn from_this_listener(headers: &HeaderMap, names: &Names) -> Result<(), String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("");
        if !matches!(site, "same-origin" | "none") {
            return Err(format!("Sec-Fetch-Site is {site}, not same-origin"));
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let origin = origin.to_str().unwrap_or("");
    let ours = match origin.split_once("://") {
        Some(("http", authority)) => names.allows(authority, 80),
        Some(("https", authority)) => names.allows(authority, 443),
        _ => false,
    };
    if ours {
        Ok(())
    } else {
        Err(format!("Origin {origin} is not this listener ({})", names.listen))
    }
}

/// Whether the request carries `Authorization: Bearer <token>`, compared in time independent of where
/// the first difference is.
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
    let Some(given) = given.strip_prefix("Bearer ") else { return false };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(listen: &str, configured: &[&str]) -> Names {
        Names {
            listen: listen.parse().unwrap(),
            this_machine: vec!["127.0.0.0/8".parse().unwrap(), "::1".parse().unwrap(), "192.0.2.7".parse().unwrap()],
            names: configured.iter().map(|n| parse_host(n).unwrap()).collect(),
        }
    }

    #[test]
    fn the_host_names_this_listener_or_a_configured_name() {
        let n = names("127.0.0.1:8080", &["gw.example.net", "Other.Example:9000"]);
        for ok in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "gw.example.net", "gw.example.net.:443"] {
            assert!(n.allows(ok, 80), "{ok}");
        }
        assert!(n.allows("other.example:9000", 80));
        for bad in ["evil.example:8080", "127.0.0.1:8081", "127.0.0.2:8080", "other.example:8080", "[::1]:8080"] {
            assert!(!n.allows(bad, 80), "{bad}");
        }
        assert!(!n.allows("user@127.0.0.1:8080", 80));
        assert!(!n.allows("127.0.0.1", 80), "the default port is not the listener's");
        let any = names("[::]:80", &[]);
        for ok in ["[::1]", "127.0.0.9", "192.0.2.7:80", "localhost"] {
            assert!(any.allows(ok, 80), "{ok}");
        }
        assert!(!any.allows("192.0.2.8", 80), "not an address of this machine");
        assert!(!names("192.0.2.7:80", &[]).allows("localhost", 80), "localhost when it listens on loopback");
    }

    #[test]
    fn a_change_from_another_site_is_refused() {
        let n = names("127.0.0.1:8080", &[]);
        let h = |pairs: &[(&'static str, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, v.parse().unwrap());
            }
            from_this_listener(&m, &n)
        };
        assert!(h(&[]).is_ok(), "curl sends neither");
        assert!(h(&[("origin", "http://127.0.0.1:8080"), ("sec-fetch-site", "same-origin")]).is_ok());
        assert!(h(&[("origin", "http://localhost:8080")]).is_ok());
        assert!(h(&[("origin", "http://evil.example:8080")]).is_err());
        assert!(h(&[("origin", "null")]).is_err());
        assert!(h(&[("origin", "http://127.0.0.1:9999")]).is_err(), "another port of this host");
        assert!(h(&[("sec-fetch-site", "same-site")]).is_err(), "a page on another port is same-site");
        assert!(h(&[("sec-fetch-site", "cross-site")]).is_err());
        assert!(h(&[("sec-fetch-site", "none")]).is_ok());
    }

    #[test]
    fn roles_changes_and_the_token_by_route() {
        assert_eq!(needs(&Method::GET, "/hc/coap://10.0.0.1/s"), (Role::Read, false, true));
        assert_eq!(needs(&Method::POST, "/hc/coap://10.0.0.1/s"), (Role::Actuate, true, true));
        assert_eq!(needs(&Method::GET, "/api/entities"), (Role::Read, false, true));
        assert_eq!(needs(&Method::PUT, "/api/entities/a"), (Role::Manage, true, true));
        assert_eq!(needs(&Method::POST, "/console/entities/a/actuate"), (Role::Actuate, true, true));
        assert_eq!(needs(&Method::POST, "/console/entities/a/delete"), (Role::Manage, true, true));
        assert_eq!(needs(&Method::GET, "/console/live/a"), (Role::Read, false, false));
        assert_eq!(needs(&Method::GET, "/metrics"), (Role::Read, false, false));
    }
}
