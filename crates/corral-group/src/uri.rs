//! Member URIs: parsing the `er` entries of a profile into something the EM can send to.
//!
//! Owns: the small CoAP URI grammar the EM accepts for members (`coap://<ip-literal>[:port]/path[?query]`
//! and the gateway-relative `/em/<name>`), and how a member is named in SenML output.
//! Must never: resolve host names (the EM is sans-IO and does no DNS; members are IP literals) or panic on
//! any input.
//!
//! corral-wire is growing a full `Uri` type on another branch; this module keeps to the subset the EM needs
//! so that it can switch over without changing behaviour.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// The default CoAP port (RFC 7252 §6.1).
pub const COAP_PORT: u16 = 5683;

/// A member URI after parsing, before deciding whether it points at this gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberUri {
    /// `coap://host[:port]/path?query` with an IP-literal host.
    Coap { addr: SocketAddr, path: Vec<String>, query: Vec<String> },
    /// A gateway-relative path such as `/em/room1`.
    Relative { path: Vec<String> },
}

/// Why a member URI was rejected; the text names the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError(pub String);

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(s: impl Into<String>) -> UriError {
    UriError(s.into())
}

/// Percent-decodes one path segment or query item (RFC 3986 §2.1).
fn pct_decode(s: &str) -> Result<String, UriError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| err("truncated percent-encoding"))?;
            let v = u8::from_str_radix(hex, 16).map_err(|_| err("bad percent-encoding"))?;
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| err("percent-encoding is not UTF-8"))
}

fn split_path_query(rest: &str) -> Result<(Vec<String>, Vec<String>), UriError> {
    if rest.contains('#') {
        return Err(err("fragments are not allowed in CoAP URIs"));
    }
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let path: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(pct_decode).collect::<Result<_, _>>()?;
    if path.iter().any(|s| s == "." || s == "..") {
        return Err(err("dot segments are not allowed"));
    }
    let query = match query {
        Some(q) => q.split('&').filter(|s| !s.is_empty()).map(pct_decode).collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    Ok((path, query))
}

/// Parses a member URI. Accepts `coap://` with an IP literal (IPv6 in brackets) and `/`-relative paths.
pub fn parse(text: &str) -> Result<MemberUri, UriError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(err("empty URI"));
    }
    if text.len() > 1024 {
        return Err(err("URI longer than 1024 bytes"));
    }
    if text.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(err("URI contains spaces or control characters"));
    }
    if text.starts_with('/') {
        let (path, query) = split_path_query(text)?;
        if !query.is_empty() {
            return Err(err("a relative member may not carry a query"));
        }
        return Ok(MemberUri::Relative { path });
    }
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err(err("not an absolute URI (expected coap://host/path or /em/<name>)"));
    };
    if !scheme.eq_ignore_ascii_case("coap") {
        return Err(err(format!("scheme {scheme:?} is not coap (only coap:// members are supported)")));
    }
    let (authority, path_query) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(err("user info is not allowed in CoAP URIs"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (inside, after) = v6.split_once(']').ok_or_else(|| err("unterminated IPv6 literal"))?;
        let ip: std::net::Ipv6Addr = inside.parse().map_err(|_| err(format!("bad IPv6 literal [{inside}]")))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| err("junk after IPv6 literal"))?),
        };
        (IpAddr::V6(ip), port)
    } else {
        let (h, p) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if h.is_empty() {
            return Err(err("missing host"));
        }
        let ip: std::net::Ipv4Addr =
            h.parse().map_err(|_| err(format!("host {h:?} is not an IP literal (the EM does not resolve names)")))?;
        (IpAddr::V4(ip), p)
    };
    let port = match port {
        None | Some("") => COAP_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| err(format!("bad port {p:?}")))?,
    };
    let (path, query) = split_path_query(path_query)?;
    Ok(MemberUri::Coap { addr: SocketAddr::new(host, port), path, query })
}

/// Writes `coap://host[:port]/path` for an address and a path (port omitted when it is 5683).
pub fn format_coap(addr: SocketAddr, path: &[String]) -> String {
    let mut s = String::from("coap://");
    match addr.ip() {
        IpAddr::V6(ip) => s.push_str(&format!("[{ip}]")),
        IpAddr::V4(ip) => s.push_str(&ip.to_string()),
    }
    if addr.port() != COAP_PORT {
        s.push_str(&format!(":{}", addr.port()));
    }
    for seg in path {
        s.push('/');
        s.push_str(seg);
    }
    s
}

/// Whether `c` may appear in a SenML name (RFC 8428 §4.5.1).
pub fn senml_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.' | '/' | '_')
}

/// The SenML name of a member *(decision)*: the member URI with the brackets of an IPv6 literal removed
/// and, for IPv6, the port always written (`coap://2001:db8::1:5683/s/t`), so that the last `:`-group
/// before the path is unambiguously the port. Any other character outside `[A-Za-z0-9-:./_]` (a query's
/// `?`, `=`, `&`) becomes `_`. A relative member `/em/room1` is named `em/room1`.
pub fn senml_name(member: &str) -> String {
    let name = match parse(member) {
        Ok(MemberUri::Coap { addr: SocketAddr::V6(a), path, query }) => {
            let mut s = format!("coap://{}:{}", a.ip(), a.port());
            for seg in &path {
                s.push('/');
                s.push_str(seg);
            }
            if !query.is_empty() {
                s.push('?');
                s.push_str(&query.join("&"));
            }
            s
        }
        Ok(MemberUri::Relative { .. }) => member.trim().trim_start_matches('/').to_string(),
        _ => member.trim().to_string(),
    };
    let mut out: String = name.chars().map(|c| if senml_name_char(c) { c } else { '_' }).collect();
    if !out.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        out.insert(0, 'm');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_members() {
        let m = parse("coap://[2001:db8::1]/s/t").unwrap();
        assert_eq!(
            m,
            MemberUri::Coap {
                addr: "[2001:db8::1]:5683".parse().unwrap(),
                path: vec!["s".into(), "t".into()],
                query: vec![]
            }
        );
        let m = parse("coap://10.0.0.2:5684/a/light?x=1").unwrap();
        assert_eq!(
            m,
            MemberUri::Coap {
                addr: "10.0.0.2:5684".parse().unwrap(),
                path: vec!["a".into(), "light".into()],
                query: vec!["x=1".into()]
            }
        );
        assert_eq!(parse("/em/room1").unwrap(), MemberUri::Relative { path: vec!["em".into(), "room1".into()] });
        assert_eq!(format_coap("[::1]:5683".parse().unwrap(), &["s".into()]), "coap://[::1]/s");
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "http://10.0.0.1/s",
            "coap://sensor.local/s",
            "coap://[::1/s",
            "coap://10.0.0.1:99999/s",
            "coap://10.0.0.1:0/s",
            "coap:/x",
            "s/t",
            "coap://10.0.0.1/s#frag",
            "coap://10.0.0.1/%zz",
            "coap://u@10.0.0.1/",
            "coap://10.0.0.1/a b",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn senml_names_are_legal() {
        assert_eq!(senml_name("coap://[2001:db8::1]/s/t"), "coap://2001:db8::1:5683/s/t");
        assert_eq!(senml_name("coap://10.0.0.1/s/t"), "coap://10.0.0.1/s/t");
        assert_eq!(senml_name("/em/room1"), "em/room1");
        assert_eq!(senml_name("coap://10.0.0.1/s?a=b"), "coap://10.0.0.1/s_a_b");
        for n in ["coap://[::1]:6000/x", "/em/r", "coap://1.2.3.4/x?y"] {
            assert!(senml_name(n).chars().all(senml_name_char));
        }
    }
}
