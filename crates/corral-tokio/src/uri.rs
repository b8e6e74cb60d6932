//! `coap://` URIs ⇄ request options (RFC 7252 §6.4, §6.5).
//!
//! A stop-gap: `corral_wire::uri::Uri` (parse, to_options, Display) is being written on a parallel branch.
//! Everything in corral-tokio and the `corral` binary goes through [`parse_uri`] alone, so that swapping
//! in `Uri::parse` is a change in this one file.

use corral_proto::wire::{OptionNumber, Options};
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// The default CoAP port (RFC 7252 §6.1).
pub const DEFAULT_PORT: u16 = 5683;

/// The host part of a URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An IP literal; `scope_id` is the interface of an IPv6 zone (`[fe80::1%25eth0]`), 0 if none.
    Ip { ip: IpAddr, scope_id: u32 },
    /// A registered name, lowercased; resolved when the request is sent and carried in Uri-Host.
    Name(String),
}

/// A parsed `coap://` URI: where to send a request and the Uri-* options it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uri {
    pub host: Host,
    pub port: u16,
    /// Uri-Path segments, percent-decoded (a trailing `/` yields a final empty segment, RFC 7252 §6.4).
    pub path: Vec<String>,
    /// Uri-Query items, percent-decoded.
    pub query: Vec<String>,
}

/// Why a string is not a usable CoAP URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError(pub String);

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UriError {}

fn err<T>(s: impl Into<String>) -> Result<T, UriError> {
    Err(UriError(s.into()))
}

/// Parses a `coap://host[:port]/path?query` URI. The one place corral parses URIs; see the module docs.
pub fn parse_uri(s: &str) -> Result<Uri, UriError> {
    let s = s.trim();
    let Some((scheme, rest)) = s.split_once("://") else {
        return err(format!("`{s}` is not a URI: expected coap://host/path"));
    };
    if !scheme.eq_ignore_ascii_case("coap") {
        return err(format!("unsupported scheme `{scheme}`: only coap:// (CoAP over UDP) is supported"));
    }
    if rest.contains('#') {
        return err("a CoAP URI must not have a fragment (#…) (RFC 7252 §6.4)");
    }
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    if authority.contains('@') {
        return err("user information (user@host) is not allowed in a CoAP URI");
    }
    let (host, port) = parse_authority(authority)?;
    let (path_part, query_part) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let mut path = Vec::new();
    if !path_part.is_empty() && path_part != "/" {
        for seg in path_part.trim_start_matches('/').split('/') {
            path.push(percent_decode(seg)?);
        }
    }
    let mut query = Vec::new();
    if let Some(q) = query_part {
        for item in q.split('&').filter(|i| !i.is_empty()) {
            query.push(percent_decode(item)?);
        }
    }
    for seg in path.iter().chain(&query) {
        if seg.len() > 255 {
            return err("a path segment or query item is longer than 255 bytes");
        }
    }
    Ok(Uri { host, port, path, query })
}

fn parse_authority(a: &str) -> Result<(Host, u16), UriError> {
    if a.is_empty() {
        return err("the URI has no host");
    }
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return err("unterminated `[` in the host");
        };
        let (addr, zone) = match inside.split_once('%') {
            Some((addr, zone)) => (addr, Some(zone.strip_prefix("25").unwrap_or(zone))),
            None => (inside, None),
        };
        let ip: Ipv6Addr = addr.parse().map_err(|_| UriError(format!("`{addr}` is not an IPv6 address")))?;
        let scope_id = match zone {
            None => 0,
            Some(z) => zone_index(z)?,
        };
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| UriError(format!("unexpected `{p}` after the host")))?),
        };
        (Host::Ip { ip: IpAddr::V6(ip), scope_id }, port)
    } else {
        let (h, p) = match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        };
        let host = match h.parse::<std::net::Ipv4Addr>() {
            Ok(ip) => Host::Ip { ip: IpAddr::V4(ip), scope_id: 0 },
            Err(_) => {
                let name = percent_decode(h)?.to_ascii_lowercase();
                if name.is_empty() || name.len() > 255 || name.contains([':', ' ', '[', ']']) {
                    return err(format!("`{h}` is not a host name (IPv6 addresses go in brackets: [::1])"));
                }
                Host::Name(name)
            }
        };
        (host, p)
    };
    let port = match port {
        None | Some("") => DEFAULT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| UriError(format!("bad port `{p}`")))?,
    };
    Ok((host, port))
}

/// An IPv6 zone: an interface index, or a Linux interface name looked up in sysfs.
fn zone_index(zone: &str) -> Result<u32, UriError> {
    if let Ok(n) = zone.parse::<u32>() {
        return Ok(n);
    }
    let valid = !zone.is_empty() && zone.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    let index = valid
        .then(|| std::fs::read_to_string(format!("/sys/class/net/{zone}/ifindex")).ok())
        .flatten()
        .and_then(|s| s.trim().parse().ok());
    index.ok_or_else(|| UriError(format!("unknown network interface `{zone}` in the IPv6 zone")))
}

fn percent_decode(s: &str) -> Result<String, UriError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(v) = hex else {
                return err(format!("bad percent-encoding in `{s}`"));
            };
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| UriError(format!("`{s}` does not decode to UTF-8")))
}

fn percent_encode(s: &str, out: &mut String, keep: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$'()*+,;=:@".contains(&b) || keep.as_bytes().contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

impl Uri {
    /// Uri-Host (for a name), Uri-Path and Uri-Query, as RFC 7252 §6.4 derives them.
    pub fn to_options(&self) -> Options {
        let mut o = Options::new();
        self.apply_to(&mut o);
        o
    }

    /// Adds this URI's options to `options`.
    pub fn apply_to(&self, options: &mut Options) {
        if let Host::Name(name) = &self.host {
            options.push_str(OptionNumber::URI_HOST, name);
        }
        for seg in &self.path {
            options.push_str(OptionNumber::URI_PATH, seg);
        }
        for q in &self.query {
            options.push_str(OptionNumber::URI_QUERY, q);
        }
    }

    /// The host as it would be written in a URI (IPv6 in brackets).
    pub fn host_str(&self) -> String {
        match &self.host {
            Host::Ip { ip: IpAddr::V6(ip), scope_id: 0 } => format!("[{ip}]"),
            Host::Ip { ip: IpAddr::V6(ip), scope_id } => format!("[{ip}%25{scope_id}]"),
            Host::Ip { ip, .. } => ip.to_string(),
            Host::Name(n) => n.clone(),
        }
    }

    /// The same URI with another path and no query (for `/.well-known/core` and friends).
    pub fn with_path(&self, path: &str) -> Uri {
        let path = path.trim_start_matches('/').split('/').map(str::to_string).collect();
        Uri { path, query: Vec::new(), ..self.clone() }
    }
}

impl fmt::Display for Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = format!("coap://{}", self.host_str());
        if self.port != DEFAULT_PORT {
            s.push_str(&format!(":{}", self.port));
        }
        if self.path.is_empty() {
            s.push('/');
        }
        for seg in &self.path {
            s.push('/');
            percent_encode(seg, &mut s, "");
        }
        for (i, q) in self.query.iter().enumerate() {
            s.push(if i == 0 { '?' } else { '&' });
            percent_encode(q, &mut s, "/?");
        }
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_literals_names_ports_paths_queries() {
        let u = parse_uri("coap://[::1]/s/t").unwrap();
        assert_eq!(u.host, Host::Ip { ip: "::1".parse().unwrap(), scope_id: 0 });
        assert_eq!((u.port, u.path.as_slice()), (5683, &["s".to_string(), "t".to_string()][..]));
        let u = parse_uri("COAP://Example.COM:61616/a%20b/?x=1&y").unwrap();
        assert_eq!(u.host, Host::Name("example.com".into()));
        assert_eq!(u.port, 61616);
        assert_eq!(u.path, ["a b", ""]);
        assert_eq!(u.query, ["x=1", "y"]);
        let o = u.to_options();
        assert_eq!(o.get(OptionNumber::URI_HOST), Some(&b"example.com"[..]));
        assert_eq!(o.get_all(OptionNumber::URI_PATH).count(), 2);
        let u = parse_uri("coap://127.0.0.1").unwrap();
        assert!(u.path.is_empty());
        assert!(u.to_options().is_empty(), "IP literals send no Uri-Host");
        assert_eq!(parse_uri("coap://[fe80::1%251]:5000/x").unwrap().host_str(), "[fe80::1%251]");
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "/just/a/path",
            "http://h/x",
            "coaps://h/x",
            "coap:///x",
            "coap://h:0/",
            "coap://h:99999/",
            "coap://h:x/",
            "coap://[::1/x",
            "coap://[zz]/x",
            "coap://h/x#frag",
            "coap://u@h/",
            "coap://h/%zz",
            "coap://::1/x",
        ] {
            assert!(parse_uri(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["coap://[::1]/s/t", "coap://example.com:1234/a%20b?x=1&y=%26", "coap://10.0.0.1/"] {
            let u = parse_uri(s).unwrap();
            assert_eq!(parse_uri(&u.to_string()).unwrap(), u, "{s}");
        }
    }
}
