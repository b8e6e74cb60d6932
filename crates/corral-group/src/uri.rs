//! Member URIs: parsing the `er` entries of a profile into something the EM can send to.
//!
//! Owns: the subset of CoAP URIs the EM accepts for members (`coap://<ip-literal>[:port]/path[?query]`,
//! the same with `coaps://` for a member the driver reaches over DTLS, and the gateway-relative
//! `/em/<name>`), and how a member is named in SenML output. The grammar itself
//! (percent-decoding, IPv6 literals, dot segments, option bounds) is corral-wire's [`Uri`]; this module
//! only narrows it: scheme `coap` or `coaps`, an IP literal, a non-zero port, no empty path segments or query items.
//! Must never: resolve host names (the EM is sans-IO and does no DNS; members are IP literals) or panic on
//! any input.

use corral_wire::uri::{Host, Scheme, Uri};
use std::fmt;
use std::net::SocketAddr;

/// The default CoAP port (RFC 7252 §6.1).
pub const COAP_PORT: u16 = 5683;

/// A member URI after parsing, before deciding whether it points at this gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberUri {
    /// `coap://host[:port]/path?query` with an IP-literal host, or with `secure` `coaps://` (default port
    /// 5684): the driver reaches it over DTLS with credentials it holds for the address.
    Coap { addr: SocketAddr, path: Vec<String>, query: Vec<String>, secure: bool },
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

/// The longest member URI accepted; far beyond any real one, it bounds the work on hostile input.
const MAX_LEN: usize = 1024;

/// Parses with corral-wire, mapping its error to the EM's wording (`invalid URI: …` would repeat what the
/// EM's own message says).
fn wire_parse(text: &str) -> Result<Uri, UriError> {
    Uri::parse(text).map_err(|e| match e {
        corral_wire::Error::Uri(why) => err(why),
        other => err(other.to_string()),
    })
}

/// Empty path segments (`/s//t`, a trailing `/`) and empty query items are dropped *(decision, kept from
/// the EM's first parser)*: a member list typed by hand often carries a stray `/`, and no device resource
/// of this project has an empty segment.
fn non_empty(items: Vec<String>) -> Vec<String> {
    items.into_iter().filter(|s| !s.is_empty()).collect()
}

/// Parses a member URI. Accepts `coap://` with an IP literal (IPv6 in brackets) and `/`-relative paths.
pub fn parse(text: &str) -> Result<MemberUri, UriError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(err("empty URI"));
    }
    if text.len() > MAX_LEN {
        return Err(err("URI longer than 1024 bytes"));
    }
    if text.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(err("URI contains spaces or control characters"));
    }
    if text.starts_with('/') {
        // A relative reference: let corral-wire decode it against a placeholder authority.
        let uri = wire_parse(&format!("coap://[::]{text}"))?;
        if !non_empty(uri.query).is_empty() {
            return Err(err("a relative member may not carry a query"));
        }
        return Ok(MemberUri::Relative { path: non_empty(uri.path) });
    }
    let Some((scheme, _)) = text.split_once("://") else {
        return Err(err("not an absolute URI (expected coap://host/path or /em/<name>)"));
    };
    let secure = scheme.eq_ignore_ascii_case("coaps");
    if !scheme.eq_ignore_ascii_case("coap") && !secure {
        return Err(err(format!(
            "scheme {scheme:?} is not coap or coaps (only coap:// and coaps:// members are supported)"
        )));
    }
    let uri = wire_parse(text)?;
    debug_assert!(matches!(uri.scheme, Scheme::Coap | Scheme::Coaps));
    let ip = match uri.host {
        Host::Ip(ip) => ip,
        Host::Name(name) => {
            return Err(err(format!("host {name:?} is not an IP literal (the EM does not resolve names)")))
        }
    };
    if uri.port == 0 {
        return Err(err("bad port \"0\""));
    }
    Ok(MemberUri::Coap {
        addr: SocketAddr::new(ip, uri.port),
        path: non_empty(uri.path),
        query: non_empty(uri.query),
        secure,
    })
}

/// Writes `coap://host[:port]/path` for an address and a path (port omitted when it is 5683), percent-encoding
/// what a URI cannot carry plainly (corral-wire's [`Uri`] display form).
pub fn format_coap(addr: SocketAddr, path: &[String]) -> String {
    Uri { scheme: Scheme::Coap, host: Host::Ip(addr.ip()), port: addr.port(), path: path.to_vec(), query: Vec::new() }
        .to_string()
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
        Ok(MemberUri::Coap { addr: SocketAddr::V6(a), path, query, secure }) => {
            let mut s = format!("{}://{}:{}", if secure { "coaps" } else { "coap" }, a.ip(), a.port());
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
                query: vec![],
                secure: false
            }
        );
        let m = parse("coap://10.0.0.2:5684/a/light?x=1").unwrap();
        assert_eq!(
            m,
            MemberUri::Coap {
                addr: "10.0.0.2:5684".parse().unwrap(),
                path: vec!["a".into(), "light".into()],
                query: vec!["x=1".into()],
                secure: false
            }
        );
        let m = parse("coaps://10.0.0.2/s").unwrap();
        assert_eq!(
            m,
            MemberUri::Coap {
                addr: "10.0.0.2:5684".parse().unwrap(),
                path: vec!["s".into()],
                query: vec![],
                secure: true
            }
        );
        assert_eq!(parse("/em/room1").unwrap(), MemberUri::Relative { path: vec!["em".into(), "room1".into()] });
        assert_eq!(format_coap("[::1]:5683".parse().unwrap(), &["s".into()]), "coap://[::1]/s");
        assert_eq!(format_coap("10.0.0.1:6000".parse().unwrap(), &["a b".into()]), "coap://10.0.0.1:6000/a%20b");
    }

    #[test]
    fn normalises_as_corral_wire_does() {
        // Equivalent spellings (RFC 7252 §6.3) give the same member; stray empty segments are dropped.
        let want = parse("coap://10.0.0.2/s/t").unwrap();
        for same in
            ["COAP://10.0.0.2:5683/s/t", "coap://10.0.0.2/s/x/../t", "coap://10.0.0.2/%73/t", "coap://10.0.0.2//s/t/"]
        {
            assert_eq!(parse(same).unwrap(), want, "{same}");
        }
        assert_eq!(parse("/em/./room1").unwrap(), MemberUri::Relative { path: vec!["em".into(), "room1".into()] });
        let e = parse("coap://gw.example/em/x").unwrap_err();
        assert!(e.0.contains("not an IP literal"), "{e}");
        let e = parse("coap://10.0.0.1:0/s").unwrap_err();
        assert!(e.0.contains("port"), "{e}");
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
            "coaps+tcp://10.0.0.1/s",
            "coap+tcp://10.0.0.1/s",
            "coap://[fe80::1%25eth0]/s",
            "coap://10.0.0.1/%FF",
            "/em/room1?x=1",
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
