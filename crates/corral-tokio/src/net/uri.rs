//! CoAP URIs for the runtime. Parsing, normalisation and the Uri-* options are corral-wire's [`Uri`]; this
//! module only adds what needs the operating system: the interface index of an IPv6 zone
//! (`coap://[fe80::1%25eth0]/`, RFC 6874), which corral-wire rejects because it never asks the OS, and
//! the address a URI's host resolves to.

pub use corral_proto::wire::uri::{Host, Scheme, Uri};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Why a string is not a usable CoAP URI (the text says what is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError(pub String);

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UriError {}

/// Parses a CoAP URI (`coap`, `coaps`, `coap+tcp`, `coaps+tcp`) with [`Uri::parse`]. An IPv6 zone is
/// accepted and dropped; use [`parse_scoped`] to keep its interface index.
pub fn parse_uri(text: &str) -> Result<Uri, UriError> {
    parse_scoped(text).map(|(uri, _)| uri)
}

/// Parses a CoAP URI and resolves the zone of an IPv6 literal (`[fe80::1%25eth0]`, or `%eth0`, or an index
/// such as `%252`) to an interface index; 0 when there is none.
pub fn parse_scoped(text: &str) -> Result<(Uri, u32), UriError> {
    let text = text.trim();
    let (text, zone) = split_zone(text);
    let uri = Uri::parse(&text).map_err(|e| match e {
        corral_proto::wire::Error::Uri(why) => UriError(format!("`{text}`: {why}")),
        other => UriError(format!("`{text}`: {other}")),
    })?;
    let scope_id = match zone {
        None => 0,
        Some(_) if !matches!(uri.host, Host::Ip(std::net::IpAddr::V6(_))) => {
            return Err(UriError("a zone (%…) is only allowed in an IPv6 literal".into()))
        }
        Some(z) => zone_index(&z)?,
    };
    Ok((uri, scope_id))
}

/// Where an IP-literal `uri` points, with the interface index of an IPv6 zone (see [`parse_scoped`]);
/// `None` for a host name.
pub fn literal_addr(uri: &Uri, scope_id: u32) -> Option<SocketAddr> {
    match &uri.host {
        Host::Ip(IpAddr::V6(ip)) => Some(SocketAddr::V6(std::net::SocketAddrV6::new(*ip, uri.port, 0, scope_id))),
        Host::Ip(ip) => Some(SocketAddr::new(*ip, uri.port)),
        Host::Name(_) => None,
    }
}

/// Where `uri` points: its IP literal ([`literal_addr`]), or the first address the OS resolves its name
/// to (`None` if it resolves to none).
pub async fn lookup(uri: &Uri, scope_id: u32) -> Option<SocketAddr> {
    match &uri.host {
        Host::Name(name) => tokio::net::lookup_host((name.as_str(), uri.port)).await.ok()?.next(),
        Host::Ip(_) => literal_addr(uri, scope_id),
    }
}

/// Removes `%25zone` (or a bare `%zone`) from a bracketed IPv6 literal in the authority.
fn split_zone(text: &str) -> (String, Option<String>) {
    let Some(open) = text.find("://[").map(|i| i + 4) else { return (text.to_string(), None) };
    let Some(close) = text[open..].find(']').map(|i| open + i) else { return (text.to_string(), None) };
    let literal = &text[open..close];
    let Some(pct) = literal.find('%') else { return (text.to_string(), None) };
    let zone = &literal[pct + 1..];
    let zone = zone.strip_prefix("25").filter(|z| !z.is_empty()).unwrap_or(zone);
    let stripped = format!("{}{}", &text[..open + pct], &text[close..]);
    (stripped, Some(zone.to_string()))
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

/// The `coap://` URI a client on this machine uses to reach a socket bound to `local`: a wildcard
/// address (`0.0.0.0`, `[::]`) becomes loopback (`127.0.0.1`, `[::1]`), the default port (5683) is left
/// out. What `corral serve`, `corral device`, the gateway and the proxy print.
pub fn base_uri(local: SocketAddr) -> String {
    let host = match local.ip() {
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    if local.port() == 5683 {
        format!("coap://{host}")
    } else {
        format!("coap://{host}:{}", local.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_resolved_and_removed() {
        let (u, scope) = parse_scoped("coap://[fe80::1%252]:5000/x").unwrap();
        assert_eq!((scope, u.port, u.path.as_slice()), (2, 5000, &["x".to_string()][..]));
        assert_eq!(u.to_string(), "coap://[fe80::1]:5000/x");
        assert_eq!(parse_scoped("coap://[fe80::1%lo]/").unwrap().1, 1);
        assert!(parse_scoped("coap://[fe80::1%25no-such-if0]/").is_err());
        assert_eq!(parse_scoped("coap+tcp://[::1]/a").unwrap().0.scheme, Scheme::CoapTcp);
    }

    #[test]
    fn errors_name_the_uri() {
        let e = parse_uri("http://h/x").unwrap_err();
        assert!(e.0.contains("http://h/x") && e.0.contains("scheme"), "{e}");
        assert!(parse_uri("coap://[::1/x").is_err());
        assert!(parse_uri("coap://h/x#frag").is_err());
    }

    #[test]
    fn base_uri_names_a_wildcard_bind_by_loopback_and_leaves_out_the_default_port() {
        let uri = |a: &str| base_uri(a.parse().unwrap());
        assert_eq!(uri("0.0.0.0:5683"), "coap://127.0.0.1");
        assert_eq!(uri("[::]:5683"), "coap://[::1]");
        assert_eq!(uri("[::]:5701"), "coap://[::1]:5701");
        assert_eq!(uri("0.0.0.0:61616"), "coap://127.0.0.1:61616");
        assert_eq!(uri("[2001:db8::1]:5683"), "coap://[2001:db8::1]");
        assert_eq!(uri("[fe80::1]:5700"), "coap://[fe80::1]:5700");
        assert_eq!(uri("10.1.2.3:5684"), "coap://10.1.2.3:5684");
        // Every one parses back to the address a client sends to.
        for a in ["0.0.0.0:5683", "[::]:5701", "[2001:db8::1]:5683", "10.1.2.3:5684"] {
            let u = parse_uri(&uri(a)).unwrap();
            assert_eq!(u.port, a.parse::<SocketAddr>().unwrap().port(), "{a}");
        }
    }
}
