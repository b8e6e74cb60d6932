//! CoAP URIs and the Uri-* options they map to.
//!
//! This module owns the text form of a request target: parsing a `coap`, `coaps`, `coap+tcp` or `coaps+tcp`
//! URI, decomposing it into Uri-Host, Uri-Port, Uri-Path and Uri-Query (RFC 7252 §6.4), and composing a
//! URI back from those options (RFC 7252 §6.5). It never resolves names: a [`Host::Name`] stays a name.
//!
//! <https://www.rfc-editor.org/rfc/rfc7252#section-6>
//! <https://www.rfc-editor.org/rfc/rfc8323#section-8>

use crate::option::{decode_uint, OptionNumber, Options};
use crate::Error;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write as _};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::str::FromStr;

/// A CoAP URI scheme.
///
/// <https://www.rfc-editor.org/rfc/rfc7252#section-6.1>, <https://www.rfc-editor.org/rfc/rfc8323#section-8.1>
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `coap`: UDP, port 5683.
    Coap,
    /// `coaps`: DTLS, port 5684.
    Coaps,
    /// `coap+tcp`: TCP, port 5683 (RFC 8323 §8.1).
    CoapTcp,
    /// `coaps+tcp`: TLS, port 5684 (RFC 8323 §8.2).
    CoapsTcp,
}

const UNSUPPORTED_SCHEME: Error = Error::Uri("unsupported scheme; use coap, coaps, coap+tcp or coaps+tcp");

impl Scheme {
    /// The port a URI of this scheme means when it names none.
    pub const fn default_port(self) -> u16 {
        match self {
            Scheme::Coap | Scheme::CoapTcp => 5683,
            Scheme::Coaps | Scheme::CoapsTcp => 5684,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::Coap => "coap",
            Scheme::Coaps => "coaps",
            Scheme::CoapTcp => "coap+tcp",
            Scheme::CoapsTcp => "coaps+tcp",
        }
    }

    /// Carried over a reliable transport (RFC 8323): no message layer, no Type or Message ID.
    pub const fn is_reliable(self) -> bool {
        matches!(self, Scheme::CoapTcp | Scheme::CoapsTcp)
    }

    /// Carried over DTLS or TLS.
    pub const fn is_secure(self) -> bool {
        matches!(self, Scheme::Coaps | Scheme::CoapsTcp)
    }

    /// Recognises a scheme name case-insensitively (RFC 3986 §3.1: schemes are case-insensitive).
    pub fn parse(s: &str) -> Option<Scheme> {
        [Scheme::Coap, Scheme::Coaps, Scheme::CoapTcp, Scheme::CoapsTcp]
            .into_iter()
            .find(|scheme| scheme.as_str().eq_ignore_ascii_case(s))
    }
}

impl FromStr for Scheme {
    type Err = Error;

    fn from_str(s: &str) -> Result<Scheme, Error> {
        Scheme::parse(s).ok_or(UNSUPPORTED_SCHEME)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The host of a CoAP URI: an IP literal, or a registered name.
///
/// A `Name` from [`Uri::parse`] or [`Uri::from_options`] is percent-decoded and ASCII-lowercased (RFC 3986
/// §6.2.2.1: reg-names are case-insensitive), and never holds text that reads as an IPv4 address or a
/// bracketed IPv6 literal: those become `Ip`. Internationalised names are kept as given (no IDNA mapping).
///
/// IPv6 zone identifiers (`[fe80::1%25eth0]`, RFC 6874) are rejected: turning an interface name into a
/// scope id needs the operating system, which this crate never asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Ip(IpAddr),
    Name(String),
}

impl Host {
    /// Classifies decoded host text (a reg-name or a Uri-Host value) and normalises it.
    fn from_decoded(text: String) -> Result<Host, Error> {
        if text.is_empty() {
            return Err(Error::Uri("empty host"));
        }
        if text.len() > MAX_OPTION_LEN {
            return Err(Error::Uri("host longer than 255 bytes"));
        }
        if let Ok(v4) = Ipv4Addr::from_str(&text) {
            return Ok(Host::Ip(IpAddr::V4(v4)));
        }
        if let Some(v6) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            if let Ok(v6) = Ipv6Addr::from_str(v6) {
                return Ok(Host::Ip(IpAddr::V6(v6)));
            }
        }
        let mut name = text;
        name.make_ascii_lowercase();
        Ok(Host::Name(name))
    }
}

/// Writes the host as it appears in a URI: IPv6 in brackets, names percent-encoded outside
/// unreserved / sub-delims (RFC 3986 §3.2.2 reg-name).
impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V4(v4)) => write!(f, "{v4}"),
            Host::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Host::Name(name) => write_encoded(f, name, is_reg_name_char),
        }
    }
}

/// A CoAP URI, decoded: the scheme, host, port and the exact Uri-Path / Uri-Query values.
///
/// Two URIs that RFC 7252 §6.3 calls equivalent parse to equal values: the scheme and host are
/// lowercased, an empty or default port becomes the scheme's default, percent-encodings are decoded and
/// `.`/`..` segments are removed (RFC 3986 §5.2.4). `Display` writes the normalised form back.
///
/// Every value from [`Uri::parse`] or [`Uri::from_options`] fits the option bounds of RFC 7252 §5.10 (host
/// and each segment or query item at most 255 bytes), and `Uri::parse(&uri.to_string()) == Ok(uri)`.
///
/// <https://www.rfc-editor.org/rfc/rfc7252#section-6>
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Uri {
    pub scheme: Scheme,
    pub host: Host,
    /// The port, explicit or the scheme's default.
    pub port: u16,
    /// Decoded path segments, one per Uri-Path option. Empty for both `coap://h` and `coap://h/`.
    pub path: Vec<String>,
    /// Decoded query items, one per Uri-Query option. `coap://h/?` has one empty item; `coap://h/` none.
    pub query: Vec<String>,
}

/// The longest Uri-Host, Uri-Path or Uri-Query value (RFC 7252 §5.10).
const MAX_OPTION_LEN: usize = 255;

impl Uri {
    /// The longest text [`Uri::parse`] looks at. Far beyond anything a CoAP request can carry (a Proxy-Uri
    /// is at most 1034 bytes); it only bounds the work done on hostile input.
    pub const MAX_LEN: usize = 64 * 1024;

    /// Parses an absolute CoAP URI, following RFC 7252 §6.4.
    ///
    /// The input must be a URI in the strict RFC 3986 sense: characters outside the allowed sets (spaces,
    /// non-ASCII, `"`, `<`, …) must be percent-encoded, and percent-encoded bytes must decode to UTF-8
    /// because Uri-Host, Uri-Path and Uri-Query are string options. Userinfo (`user@`) is rejected: the
    /// CoAP URI syntax has none (RFC 7252 §6.1).
    ///
    /// <https://www.rfc-editor.org/rfc/rfc7252#section-6.4>
    pub fn parse(text: &str) -> Result<Uri, Error> {
        if text.len() > Self::MAX_LEN {
            return Err(Error::Uri("URI longer than 64 KiB"));
        }
        // Step 1 and 3: an absolute URI with one of our schemes.
        let (scheme, rest) = text.split_once(':').ok_or(Error::Uri("not an absolute URI: missing scheme"))?;
        if !is_scheme_syntax(scheme) {
            return Err(Error::Uri("not an absolute URI: missing scheme"));
        }
        let scheme = Scheme::parse(scheme).ok_or(UNSUPPORTED_SCHEME)?;
        // Step 4.
        if rest.contains('#') {
            return Err(Error::Uri("fragment not allowed in a CoAP URI"));
        }
        let rest = rest.strip_prefix("//").ok_or(Error::Uri("missing authority: expected \"//\" after the scheme"))?;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(authority_end);
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (rest, None),
        };

        // Step 5 and 6.
        let (host, port) = parse_authority(authority)?;
        let port = port.unwrap_or(scheme.default_port());

        // Step 7, after the dot-segment removal that step 2's reference resolution implies. The path is
        // empty or starts with '/' here (path-abempty).
        let mut segments = Vec::new();
        if let Some(path) = path.strip_prefix('/') {
            for raw in remove_dot_segments(path) {
                let segment = decode(raw, is_pchar, "invalid character in path; percent-encode it")?;
                if segment.len() > MAX_OPTION_LEN {
                    return Err(Error::Uri("path segment longer than 255 bytes"));
                }
                segments.push(segment);
            }
        }
        if is_lone_empty(&segments) {
            // "/" alone means no Uri-Path at all.
            segments.clear();
        }

        // Step 8.
        let mut items = Vec::new();
        for raw in query.into_iter().flat_map(|q| q.split('&')) {
            let item = decode(raw, is_query_char, "invalid character in query; percent-encode it")?;
            if item.len() > MAX_OPTION_LEN {
                return Err(Error::Uri("query item longer than 255 bytes"));
            }
            items.push(item);
        }

        Ok(Uri { scheme, host, port, path: segments, query: items })
    }

    /// Reconstructs the request URI from a request's options, following RFC 7252 §6.5.
    ///
    /// `host_fallback` and `port_fallback` stand for the request's destination address, used when Uri-Host
    /// or Uri-Port is absent. A single empty Uri-Path reads as no Uri-Path: both are written `/` and RFC 7252
    /// §6.4 step 7 maps `/` to no option, so no URI tells them apart.
    ///
    /// <https://www.rfc-editor.org/rfc/rfc7252#section-6.5>
    pub fn from_options(
        scheme: Scheme,
        host_fallback: Host,
        port_fallback: u16,
        options: &Options,
    ) -> Result<Uri, Error> {
        let host = match options.get(OptionNumber::URI_HOST) {
            Some(value) => {
                let text = core::str::from_utf8(value).map_err(|_| Error::Uri("Uri-Host is not UTF-8"))?;
                Host::from_decoded(String::from(text))?
            }
            None => host_fallback,
        };
        let port = match options.get(OptionNumber::URI_PORT) {
            Some(value) => decode_uint(value)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or(Error::Uri("Uri-Port is not a 16-bit number"))?,
            None => port_fallback,
        };
        let strings = |number, too_long, not_utf8| {
            options
                .get_all(number)
                .map(|value| {
                    if value.len() > MAX_OPTION_LEN {
                        return Err(Error::Uri(too_long));
                    }
                    core::str::from_utf8(value).map(String::from).map_err(|_| Error::Uri(not_utf8))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let mut path = strings(OptionNumber::URI_PATH, "Uri-Path longer than 255 bytes", "Uri-Path is not UTF-8")?;
        if is_lone_empty(&path) {
            path.clear();
        }
        let query = strings(OptionNumber::URI_QUERY, "Uri-Query longer than 255 bytes", "Uri-Query is not UTF-8")?;
        Ok(Uri { scheme, host, port, path, query })
    }

    /// Replaces the Uri-Host, Uri-Port, Uri-Path and Uri-Query options in `options` with this URI's,
    /// following RFC 7252 §6.4 steps 5 to 8.
    ///
    /// Uri-Host is sent only for a name: an IP literal is the destination address itself. corral sends a
    /// request to the URI's own port, so the destination port always equals `self.port` and step 6 alone
    /// would never add Uri-Port; it is added when the port differs from the scheme's default anyway, so
    /// that the options on their own still name the port (a server or proxy composing the URI with
    /// [`Uri::from_options`] and the default port gets it right). An empty path sends no Uri-Path.
    ///
    /// <https://www.rfc-editor.org/rfc/rfc7252#section-6.4>
    pub fn to_options(&self, options: &mut Options) {
        for number in [OptionNumber::URI_HOST, OptionNumber::URI_PORT, OptionNumber::URI_PATH, OptionNumber::URI_QUERY]
        {
            options.remove(number);
        }
        if let Host::Name(name) = &self.host {
            options.push_str(OptionNumber::URI_HOST, name);
        }
        if self.port != self.scheme.default_port() {
            options.push_uint(OptionNumber::URI_PORT, u64::from(self.port));
        }
        // A lone empty segment is the path "/", which step 7 maps to no option.
        if !is_lone_empty(&self.path) {
            for segment in &self.path {
                options.push_str(OptionNumber::URI_PATH, segment);
            }
        }
        for item in &self.query {
            options.push_str(OptionNumber::URI_QUERY, item);
        }
    }

    /// The path as written in the URI: `/` followed by the percent-encoded segments joined with `/`
    /// (`"/"` for an empty path). Unlike [`Options::path`] this is unambiguous: a `/` inside a segment is
    /// written `%2F`.
    pub fn path_string(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = write_path(&mut out, &self.path);
        out
    }

    /// The authority with an explicit port, as written in a URI: `example.com:5683`, `[2001:db8::1]:5683`.
    pub fn authority(&self) -> String {
        let mut out = String::new();
        let _ = write!(out, "{}:{}", self.host, self.port);
        out
    }

    /// The destination address, when the host is an IP literal (a name needs resolving first).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        match self.host {
            Host::Ip(ip) => Some(SocketAddr::new(ip, self.port)),
            Host::Name(_) => None,
        }
    }
}

impl FromStr for Uri {
    type Err = Error;

    fn from_str(s: &str) -> Result<Uri, Error> {
        Uri::parse(s)
    }
}

/// Writes the normalised URI (RFC 7252 §6.5 steps 1 to 9): lowercase scheme, the port only when it is not
/// the default, `/` for an empty path, and every character outside the allowed sets percent-encoded.
///
/// Segments that are exactly `.` or `..` are written `%2E` / `%2E%2E`, since written plainly they would be
/// removed as dot segments when parsed again.
impl fmt::Display for Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        write_path(f, &self.path)?;
        for (i, item) in self.query.iter().enumerate() {
            f.write_char(if i == 0 { '?' } else { '&' })?;
            write_encoded(f, item, is_query_char)?;
        }
        Ok(())
    }
}

/// The path "/" as segments: RFC 7252 §6.4 step 7 maps it to no Uri-Path at all.
fn is_lone_empty(path: &[String]) -> bool {
    matches!(path, [only] if only.is_empty())
}

fn write_path(out: &mut impl fmt::Write, path: &[String]) -> fmt::Result {
    if path.is_empty() {
        return out.write_char('/');
    }
    for segment in path {
        out.write_char('/')?;
        match segment.as_str() {
            "." => out.write_str("%2E")?,
            ".." => out.write_str("%2E%2E")?,
            _ => write_encoded(out, segment, is_pchar)?,
        }
    }
    Ok(())
}

/// Splits `host[:port]` (RFC 3986 §3.2); the port is `None` when absent or empty (§3.2.3).
fn parse_authority(authority: &str) -> Result<(Host, Option<u16>), Error> {
    if authority.contains('@') {
        return Err(Error::Uri("userinfo not allowed in a CoAP URI"));
    }
    let (host, port) = if let Some(literal) = authority.strip_prefix('[') {
        let (literal, after) = literal.split_once(']').ok_or(Error::Uri("IPv6 literal not terminated by ']'"))?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or(Error::Uri("unexpected character after IPv6 literal"))?),
        };
        if literal.contains('%') {
            return Err(Error::Uri("IPv6 zone identifiers are not supported"));
        }
        if literal.starts_with(['v', 'V']) {
            return Err(Error::Uri("IPvFuture literals are not supported"));
        }
        let v6 = Ipv6Addr::from_str(literal).map_err(|_| Error::Uri("invalid IPv6 literal"))?;
        (Host::Ip(IpAddr::V6(v6)), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        // An IPv4address is also a valid reg-name, so one decoder serves both.
        let host = decode(host, is_reg_name_char, "invalid character in host")?;
        (Host::from_decoded(host)?, port)
    };
    let port = match port {
        None | Some("") => None,
        Some(digits) => Some(parse_port(digits)?),
    };
    Ok((host, port))
}

fn parse_port(digits: &str) -> Result<u16, Error> {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Uri("port is not a number"));
    }
    // Leading zeros are allowed (RFC 3986 port = *DIGIT), so strip them before bounding the length.
    let significant = digits.trim_start_matches('0');
    if significant.len() > 5 {
        return Err(Error::Uri("port out of range"));
    }
    let value = significant.bytes().fold(0u32, |acc, b| acc * 10 + u32::from(b - b'0'));
    u16::try_from(value).map_err(|_| Error::Uri("port out of range"))
}

/// RFC 3986 §5.2.4 on the segments of an absolute path (without its leading `/`). Only literal `.` and `..`
/// are dot segments; `%2E` is data.
fn remove_dot_segments(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut segments = path.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            "." => {}
            ".." => {
                out.pop();
            }
            other => {
                out.push(other);
                continue;
            }
        }
        // "/a/." and "/a/b/.." end in a slash: "/a/".
        if last {
            out.push("");
        }
    }
    out
}

/// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1).
fn is_scheme_syntax(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
}

fn is_reg_name_char(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b)
}

/// A path segment character other than a percent-encoding (RFC 3986 §3.3 pchar).
fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || matches!(b, b':' | b'@')
}

/// A query item character other than a percent-encoding: RFC 3986 §3.4, minus the `&` that separates
/// items (RFC 7252 §6.5 step 9).
fn is_query_char(b: u8) -> bool {
    (is_pchar(b) || matches!(b, b'/' | b'?')) && b != b'&'
}

/// Checks that `raw` holds only `allowed` characters and percent-encodings, and decodes it to UTF-8.
fn decode(raw: &str, allowed: fn(u8) -> bool, disallowed: &'static str) -> Result<String, Error> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = |j: usize| bytes.get(j).and_then(|&h| char::from(h).to_digit(16));
            let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                return Err(Error::Uri("invalid percent-encoding; expected % and two hex digits"));
            };
            // Two hex digits are below 256.
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else if allowed(b) {
            out.push(b);
            i += 1;
        } else {
            return Err(Error::Uri(disallowed));
        }
    }
    String::from_utf8(out).map_err(|_| Error::Uri("percent-encoded bytes are not UTF-8"))
}

/// Writes `text` with every byte outside `allowed` percent-encoded in uppercase hex (RFC 3986 §2.1).
fn write_encoded(out: &mut impl fmt::Write, text: &str, allowed: fn(u8) -> bool) -> fmt::Result {
    for b in text.bytes() {
        if allowed(b) {
            out.write_char(char::from(b))?;
        } else {
            write!(out, "%{b:02X}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use alloc::string::ToString;
    use proptest::prelude::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| String::from(*s)).collect()
    }

    fn option_values(options: &Options, number: OptionNumber) -> Vec<&[u8]> {
        options.get_all(number).collect()
    }

    /// RFC 7252 §6.3: these three URIs are equivalent.
    #[test]
    fn parse_equivalent_uris() {
        let a = Uri::parse("coap://example.com:5683/~sensors/temp.xml").unwrap();
        let b = Uri::parse("coap://EXAMPLE.com/%7Esensors/temp.xml").unwrap();
        let c = Uri::parse("coap://EXAMPLE.com:/%7esensors/temp.xml").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.scheme, Scheme::Coap);
        assert_eq!(a.host, Host::Name("example.com".into()));
        assert_eq!(a.port, 5683);
        assert_eq!(a.path, strings(&["~sensors", "temp.xml"]));
        assert!(a.query.is_empty());
        assert_eq!(c.to_string(), "coap://example.com/~sensors/temp.xml");
        assert_eq!(a.path_string(), "/~sensors/temp.xml");
        assert_eq!(a.authority(), "example.com:5683");
        assert_eq!(a.socket_addr(), None);
    }

    #[test]
    fn emit_options_for_name() {
        let uri = Uri::parse("coap://example.com/~sensors/temp.xml").unwrap();
        let mut options = Options::new();
        options.push_str(OptionNumber::URI_PATH, "stale");
        uri.to_options(&mut options);
        assert_eq!(option_values(&options, OptionNumber::URI_HOST), [b"example.com"]);
        assert!(!options.contains(OptionNumber::URI_PORT));
        assert_eq!(option_values(&options, OptionNumber::URI_PATH), [&b"~sensors"[..], b"temp.xml"]);
        assert!(!options.contains(OptionNumber::URI_QUERY));
    }

    #[test]
    fn parse_ipv6_literal() {
        let uri = Uri::parse("coap://[2001:db8::2:1]/").unwrap();
        let ip: IpAddr = "2001:db8::2:1".parse().unwrap();
        assert_eq!(uri.host, Host::Ip(ip));
        assert_eq!(uri.port, 5683);
        assert!(uri.path.is_empty());
        assert_eq!(uri.socket_addr(), Some(SocketAddr::new(ip, 5683)));
        assert_eq!(uri.authority(), "[2001:db8::2:1]:5683");
        assert_eq!(uri.to_string(), "coap://[2001:db8::2:1]/");
        let mut options = Options::new();
        uri.to_options(&mut options);
        assert!(options.is_empty(), "IP literal, default port, path \"/\": no options at all");
        assert_eq!(Uri::parse("coap://[2001:db8::2:1]").unwrap(), uri);
    }

    /// RFC 7252 §6.6 / Appendix B: empty segments and percent-encoded delimiters.
    #[test]
    fn parse_appendix_b() {
        let text = "coap://198.51.100.1:61616//%2F//?%2F%2F&?%26";
        let uri = Uri::parse(text).unwrap();
        assert_eq!(uri.host, Host::Ip(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1))));
        assert_eq!(uri.port, 61616);
        assert_eq!(uri.path, strings(&["", "/", "", ""]));
        assert_eq!(uri.query, strings(&["//", "?&"]));

        let mut options = Options::new();
        uri.to_options(&mut options);
        assert!(!options.contains(OptionNumber::URI_HOST));
        assert_eq!(options.get_uint(OptionNumber::URI_PORT), Some(61616));
        assert_eq!(option_values(&options, OptionNumber::URI_PATH), [&b""[..], b"/", b"", b""]);
        assert_eq!(option_values(&options, OptionNumber::URI_QUERY), [&b"//"[..], b"?&"]);

        // '/' and '?' need no encoding in a query, '&' does.
        assert_eq!(uri.to_string(), "coap://198.51.100.1:61616//%2F//?//&?%26");
        assert_eq!(uri.path_string(), "//%2F//");
        let back = Uri::from_options(Scheme::Coap, uri.host.clone(), 5683, &options).unwrap();
        assert_eq!(back, uri);
    }

    #[test]
    fn parse_tcp_schemes() {
        let uri = Uri::parse("coap+tcp://example.com:5683/x").unwrap();
        assert_eq!(uri.scheme, Scheme::CoapTcp);
        assert_eq!(uri.to_string(), "coap+tcp://example.com/x");
        let uri = Uri::parse("COAPS+TCP://Example.com").unwrap();
        assert_eq!((uri.scheme, uri.port), (Scheme::CoapsTcp, 5684));
        assert_eq!(uri.to_string(), "coaps+tcp://example.com/");
        let uri = Uri::parse("coaps+tcp://example.com:5683/").unwrap();
        assert_eq!(uri.to_string(), "coaps+tcp://example.com:5683/");
        let mut options = Options::new();
        uri.to_options(&mut options);
        assert_eq!(options.get_uint(OptionNumber::URI_PORT), Some(5683));
    }

    #[test]
    fn scheme_properties() {
        assert_eq!(Scheme::parse("CoAPs"), Some(Scheme::Coaps));
        assert_eq!(Scheme::parse("coap+udp"), None);
        assert_eq!("coap+tcp".parse::<Scheme>(), Ok(Scheme::CoapTcp));
        assert_eq!("http".parse::<Scheme>(), Err(UNSUPPORTED_SCHEME));
        let ports = [Scheme::Coap, Scheme::Coaps, Scheme::CoapTcp, Scheme::CoapsTcp].map(Scheme::default_port);
        assert_eq!(ports, [5683, 5684, 5683, 5684]);
        assert!(Scheme::CoapTcp.is_reliable() && !Scheme::CoapTcp.is_secure());
        assert!(Scheme::Coaps.is_secure() && !Scheme::Coaps.is_reliable());
        assert!(Scheme::CoapsTcp.is_secure() && Scheme::CoapsTcp.is_reliable());
    }

    #[test]
    fn parse_host_normalisation() {
        let uri = Uri::parse("coap://%45xample.COM/").unwrap();
        assert_eq!(uri.host, Host::Name("example.com".into()));
        // A percent-encoded IPv4 address is still an address.
        let uri = Uri::parse("coap://%31.2.3.4/").unwrap();
        assert_eq!(uri.host, Host::Ip(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))));
        // Not dotted-quad: a name (RFC 3986 §3.2.2 "first-match-wins").
        let uri = Uri::parse("coap://1.2.3/").unwrap();
        assert_eq!(uri.host, Host::Name("1.2.3".into()));
        let uri = Uri::parse("coap://caf%C3%A9.example/").unwrap();
        assert_eq!(uri.host, Host::Name("café.example".into()));
        assert_eq!(uri.to_string(), "coap://caf%C3%A9.example/");
        let uri = Uri::parse("coap://h:0005683").unwrap();
        assert_eq!(uri.port, 5683);
        let uri = Uri::parse("coap://[::ffff:192.0.2.1]:1/").unwrap();
        assert_eq!(uri.to_string(), "coap://[::ffff:192.0.2.1]:1/");
    }

    #[test]
    fn parse_query() {
        let uri = Uri::parse("coap://h/.well-known/core?rt=temp*&if=sensor").unwrap();
        assert_eq!(uri.path, strings(&[".well-known", "core"]));
        assert_eq!(uri.query, strings(&["rt=temp*", "if=sensor"]));
        assert_eq!(uri.to_string(), "coap://h/.well-known/core?rt=temp*&if=sensor");
        // A present but empty query is one empty item, so that options with one empty Uri-Query round-trip.
        let uri = Uri::parse("coap://h?").unwrap();
        assert_eq!(uri.query, strings(&[""]));
        assert_eq!(uri.to_string(), "coap://h/?");
        let uri = Uri::parse("coap://h/a?x=%20y&&").unwrap();
        assert_eq!(uri.query, strings(&["x= y", "", ""]));
        assert_eq!(uri.to_string(), "coap://h/a?x=%20y&&");
    }

    #[test]
    fn parse_dot_segments() {
        let path = |text: &str| Uri::parse(text).unwrap().path;
        assert_eq!(path("coap://h/a/b/c/./../../g"), strings(&["a", "g"]));
        assert_eq!(path("coap://h/a/.."), strings(&[]));
        assert_eq!(path("coap://h/a/b/.."), strings(&["a", ""]));
        assert_eq!(path("coap://h/a/./"), strings(&["a", ""]));
        assert_eq!(path("coap://h/../../a"), strings(&["a"]));
        assert_eq!(path("coap://h//"), strings(&["", ""]));
        // Encoded dots are data, and stay encoded when written.
        let uri = Uri::parse("coap://h/%2E/%2e%2E/.a").unwrap();
        assert_eq!(uri.path, strings(&[".", "..", ".a"]));
        assert_eq!(uri.to_string(), "coap://h/%2E/%2E%2E/.a");
    }

    #[test]
    fn parse_errors() {
        let err = |text: &str| match Uri::parse(text) {
            Err(Error::Uri(why)) => why,
            other => panic!("{text}: expected an error, got {other:?}"),
        };
        assert_eq!(err("example.com/x"), "not an absolute URI: missing scheme");
        assert_eq!(err("/sensors/temp"), "not an absolute URI: missing scheme");
        assert_eq!(err("[::1]:5683/x"), "not an absolute URI: missing scheme");
        assert_eq!(err(""), "not an absolute URI: missing scheme");
        assert_eq!(err("http://example.com/"), "unsupported scheme; use coap, coaps, coap+tcp or coaps+tcp");
        assert_eq!(err("coap://example.com/temp#frag"), "fragment not allowed in a CoAP URI");
        assert_eq!(err("coap://example.com#"), "fragment not allowed in a CoAP URI");
        assert_eq!(err("coap:example.com"), "missing authority: expected \"//\" after the scheme");
        assert_eq!(err("coap:///temp"), "empty host");
        assert_eq!(err("coap://:5683/temp"), "empty host");
        assert_eq!(err("coap://user@example.com/"), "userinfo not allowed in a CoAP URI");
        assert_eq!(err("coap://example.com:http/"), "port is not a number");
        assert_eq!(err("coap://example.com:-1/"), "port is not a number");
        assert_eq!(err("coap://example.com:65536/"), "port out of range");
        assert_eq!(err("coap://example.com:99999999999999999999999/"), "port out of range");
        assert_eq!(err("coap://h/%zz"), "invalid percent-encoding; expected % and two hex digits");
        assert_eq!(err("coap://h/a%4"), "invalid percent-encoding; expected % and two hex digits");
        assert_eq!(err("coap://h/?q=%"), "invalid percent-encoding; expected % and two hex digits");
        assert_eq!(err("coap://h/%C3"), "percent-encoded bytes are not UTF-8");
        assert_eq!(err("coap://h/a b"), "invalid character in path; percent-encode it");
        assert_eq!(err("coap://h/é"), "invalid character in path; percent-encode it");
        assert_eq!(err("coap://h/?a b"), "invalid character in query; percent-encode it");
        assert_eq!(err("coap://exa mple/"), "invalid character in host");
        assert_eq!(err("coap://[::1/"), "IPv6 literal not terminated by ']'");
        assert_eq!(err("coap://[::1]x/"), "unexpected character after IPv6 literal");
        assert_eq!(err("coap://[::g]/"), "invalid IPv6 literal");
        assert_eq!(err("coap://[fe80::1%25eth0]/"), "IPv6 zone identifiers are not supported");
        assert_eq!(err("coap://[v1.x]/"), "IPvFuture literals are not supported");
        let long_segment = ["coap://h/", &"a".repeat(256)].concat();
        assert_eq!(err(&long_segment), "path segment longer than 255 bytes");
        let long_host = ["coap://", &"a".repeat(256)].concat();
        assert_eq!(err(&long_host), "host longer than 255 bytes");
        let huge = ["coap://h/", &"a/".repeat(Uri::MAX_LEN)].concat();
        assert_eq!(err(&huge), "URI longer than 64 KiB");
    }

    #[test]
    fn compose_from_options() {
        let mut options = Options::new();
        options.push_str(OptionNumber::URI_HOST, "Example.COM");
        options.push_uint(OptionNumber::URI_PORT, 5683);
        options.push_str(OptionNumber::URI_PATH, "a b");
        options.push_str(OptionNumber::URI_QUERY, "k=v&w");
        let fallback = Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let uri = Uri::from_options(Scheme::Coap, fallback.clone(), 9999, &options).unwrap();
        assert_eq!(uri.host, Host::Name("example.com".into()));
        assert_eq!(uri.to_string(), "coap://example.com/a%20b?k=v%26w");

        // Destination address stands in for missing Uri-Host / Uri-Port.
        let mut options = Options::new();
        options.push_str(OptionNumber::URI_PATH, "");
        let uri = Uri::from_options(Scheme::Coaps, fallback.clone(), 9999, &options).unwrap();
        assert_eq!((&uri.host, uri.port), (&fallback, 9999));
        assert!(uri.path.is_empty(), "a lone empty Uri-Path reads as \"/\"");
        assert_eq!(uri.to_string(), "coaps://127.0.0.1:9999/");

        // A Uri-Host holding an IP literal is an address.
        let mut options = Options::new();
        options.push_str(OptionNumber::URI_HOST, "[2001:db8::1]");
        let uri = Uri::from_options(Scheme::Coap, fallback.clone(), 5683, &options).unwrap();
        assert_eq!(uri.host, Host::Ip("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn compose_errors() {
        let fallback = || Host::Name("h".into());
        let compose = |number, value: &[u8]| {
            let mut options = Options::new();
            options.push(number, value);
            match Uri::from_options(Scheme::Coap, fallback(), 5683, &options) {
                Err(Error::Uri(why)) => why,
                other => panic!("expected an error, got {other:?}"),
            }
        };
        assert_eq!(compose(OptionNumber::URI_HOST, b""), "empty host");
        assert_eq!(compose(OptionNumber::URI_HOST, b"\xff"), "Uri-Host is not UTF-8");
        assert_eq!(compose(OptionNumber::URI_PORT, &[1, 0, 0]), "Uri-Port is not a 16-bit number");
        assert_eq!(compose(OptionNumber::URI_PATH, b"\xc3"), "Uri-Path is not UTF-8");
        assert_eq!(compose(OptionNumber::URI_PATH, &[b'a'; 256]), "Uri-Path longer than 255 bytes");
        assert_eq!(compose(OptionNumber::URI_QUERY, b"\xc3"), "Uri-Query is not UTF-8");
    }

    fn scheme() -> impl Strategy<Value = Scheme> {
        prop_oneof![Just(Scheme::Coap), Just(Scheme::Coaps), Just(Scheme::CoapTcp), Just(Scheme::CoapsTcp)]
    }

    /// Text that stresses the delimiters, escapes and dot segments, plus arbitrary Unicode.
    fn text(max: usize) -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::string::string_regex(&alloc::format!("(?s).{{0,{max}}}")).unwrap(),
            proptest::string::string_regex(&alloc::format!("[/?&%#.:@=\\[\\] aZ09é]{{0,{max}}}")).unwrap(),
            Just(String::from(".")),
            Just(String::from("..")),
        ]
    }

    fn host_option() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            text(20).prop_filter("Uri-Host is never empty", |h| !h.is_empty()).prop_map(Some),
            any::<Ipv4Addr>().prop_map(|ip| Some(ip.to_string())),
            any::<Ipv6Addr>().prop_map(|ip| Some(alloc::format!("[{ip}]"))),
        ]
    }

    proptest! {
        /// Any URI built from options prints as text that parses back to the same URI, and maps back to
        /// options that compose the same URI again.
        #[test]
        fn options_display_parse_roundtrip(
            scheme in scheme(),
            host in host_option(),
            fallback in any::<IpAddr>(),
            port in proptest::option::of(any::<u16>()),
            path in proptest::collection::vec(text(12), 0..5),
            query in proptest::collection::vec(text(12), 0..4),
        ) {
            let mut options = Options::new();
            if let Some(host) = &host {
                options.push_str(OptionNumber::URI_HOST, host);
            }
            if let Some(port) = port {
                options.push_uint(OptionNumber::URI_PORT, u64::from(port));
            }
            for segment in &path {
                options.push_str(OptionNumber::URI_PATH, segment);
            }
            for item in &query {
                options.push_str(OptionNumber::URI_QUERY, item);
            }
            let uri = Uri::from_options(scheme, Host::Ip(fallback), scheme.default_port(), &options).unwrap();
            let text = uri.to_string();
            prop_assert_eq!(Uri::parse(&text), Ok(uri.clone()), "{}", text);

            let mut again = Options::new();
            uri.to_options(&mut again);
            let back = Uri::from_options(scheme, uri.host.clone(), scheme.default_port(), &again).unwrap();
            prop_assert_eq!(back, uri);
        }

        /// Parsing never panics, and whatever parses prints as text that parses to the same URI.
        #[test]
        fn parse_is_total_and_stable(tail in "[a-zA-Z0-9/?&%#.:@=\\[\\]~+!$ -]{0,40}", prefix in 0usize..4) {
            let prefix = ["coap://", "coaps+tcp://", "coap:", ""][prefix];
            let input = [prefix, &tail].concat();
            if let Ok(uri) = Uri::parse(&input) {
                prop_assert_eq!(Uri::parse(&uri.to_string()), Ok(uri));
            }
        }

        #[test]
        fn parse_arbitrary_never_panics(input in "(?s).{0,64}") {
            let _ = Uri::parse(&input);
        }
    }
}
