//! The resource a proxied request asks for (RFC 7252 §5.7.2, §6.4): from Proxy-Uri, or from Proxy-Scheme
//! with the Uri-* options, and the errors a client gets when it cannot be reached.

use corral_proto::wire::uri::{Host, Scheme, Uri};
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Request, Response};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// Why a proxied request cannot be forwarded: the response the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: Code,
    pub diagnostic: String,
}

impl Refusal {
    pub fn new(code: Code, diagnostic: impl Into<String>) -> Refusal {
        Refusal { code, diagnostic: diagnostic.into() }
    }

    pub fn response(&self) -> Response {
        Response::error(self.code, self.diagnostic.clone())
    }
}

/// The requested resource as an absolute URI. Proxy-Uri takes precedence over the Uri-* options (RFC 7252
/// §5.10.2), which are then ignored.
pub fn requested_uri(request: &Request) -> Result<Uri, Refusal> {
    if let Some(raw) = request.options.get(OptionNumber::PROXY_URI) {
        let text = std::str::from_utf8(raw).map_err(|_| Refusal::new(Code::BAD_OPTION, "Proxy-Uri is not UTF-8"))?;
        let scheme = text.split_once(':').map_or("", |(s, _)| s);
        let syntax = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !syntax {
            return Err(Refusal::new(Code::BAD_OPTION, format!("Proxy-Uri {text:?} is not an absolute URI")));
        }
        check_scheme(scheme)?;
        return Uri::parse(text).map_err(|e| Refusal::new(Code::BAD_OPTION, format!("Proxy-Uri {text:?}: {e}")));
    }
    let raw = request.options.get(OptionNumber::PROXY_SCHEME).unwrap_or_default();
    let name = std::str::from_utf8(raw).map_err(|_| Refusal::new(Code::BAD_OPTION, "Proxy-Scheme is not UTF-8"))?;
    let scheme = check_scheme(name)?;
    if !request.options.contains(OptionNumber::URI_HOST) {
        return Err(Refusal::new(Code::BAD_REQUEST, "Proxy-Scheme needs Uri-Host: which server should the proxy ask?"));
    }
    Uri::from_options(scheme, Host::Name(String::new()), scheme.default_port(), &request.options)
        .map_err(|e| Refusal::new(Code::BAD_OPTION, format!("bad Uri-* option with Proxy-Scheme: {e}")))
}

/// The schemes this proxy reaches: coap, coap+tcp and coaps (over DTLS, to the origins its driver holds
/// credentials for: [`crate::ProxyConfig::dtls_peers`]). coaps+tcp needs TLS, which corral does not speak
/// (end-to-end security goes through the proxy as OSCORE instead).
fn check_scheme(name: &str) -> Result<Scheme, Refusal> {
    match Scheme::parse(name) {
        Some(s @ (Scheme::Coap | Scheme::CoapTcp | Scheme::Coaps)) => Ok(s),
        Some(s) => Err(Refusal::new(
            Code::PROXYING_NOT_SUPPORTED,
            format!("{s}:// needs TLS, which this proxy does not speak; use coap://, coaps:// or coap+tcp://"),
        )),
        None => Err(Refusal::new(
            Code::PROXYING_NOT_SUPPORTED,
            format!("cannot proxy to scheme {name:?}; this proxy reaches coap://, coaps:// and coap+tcp://"),
        )),
    }
}

/// Host names the proxy can reach without a resolver (it has no DNS: a sans-IO service cannot block on
/// one). `localhost` is always known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts(pub BTreeMap<String, IpAddr>);

impl Hosts {
    pub fn resolve(&self, host: &Host) -> Option<IpAddr> {
        match host {
            Host::Ip(ip) => Some(*ip),
            Host::Name(name) => self
                .0
                .get(name.as_str())
                .copied()
                .or_else(|| (name == "localhost").then_some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))),
        }
    }

    /// The socket address of a URI's authority, or the refusal the client gets.
    pub fn address(&self, uri: &Uri) -> Result<SocketAddr, Refusal> {
        let ip = self.resolve(&uri.host).ok_or_else(|| {
            Refusal::new(
                Code::BAD_GATEWAY,
                format!("cannot resolve {}: the proxy only knows the names in its FIB's [hosts]", uri.host),
            )
        })?;
        check_destination(ip)?;
        Ok(SocketAddr::new(ip, uri.port))
    }
}

/// A proxy forwards to one server at a time: a multicast, broadcast or unspecified destination would turn
/// one request into many (an amplifier), so it is refused.
pub fn check_destination(ip: IpAddr) -> Result<(), Refusal> {
    let ip = corral_proto::canonical(ip);
    let bad = match ip {
        IpAddr::V4(v4) => v4.is_multicast() || v4.is_broadcast() || v4.is_unspecified(),
        IpAddr::V6(v6) => v6.is_multicast() || v6.is_unspecified(),
    };
    if bad {
        return Err(Refusal::new(
            Code::NOT_IMPLEMENTED,
            format!("{ip} is not a single server; this proxy does not forward to multicast or broadcast addresses"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxied(uri: &str) -> Request {
        let mut r = Request::new(Code::GET);
        r.options.push_str(OptionNumber::PROXY_URI, uri);
        r
    }

    #[test]
    fn proxy_uri_parses_and_wins_over_uri_options() {
        let mut r = proxied("coap://192.0.2.5:5684/a/b?x=1");
        r.options.push_str(OptionNumber::URI_PATH, "ignored");
        let u = requested_uri(&r).unwrap();
        assert_eq!(u.to_string(), "coap://192.0.2.5:5684/a/b?x=1");
    }

    #[test]
    fn proxy_scheme_with_uri_options() {
        let mut r = Request::new(Code::GET).with_path("t/u");
        r.options.push_str(OptionNumber::PROXY_SCHEME, "coap+tcp");
        r.options.push_str(OptionNumber::URI_HOST, "sensor");
        r.options.push_uint(OptionNumber::URI_PORT, 7000);
        assert_eq!(requested_uri(&r).unwrap().to_string(), "coap+tcp://sensor:7000/t/u");
        r.options.remove(OptionNumber::URI_HOST);
        assert_eq!(requested_uri(&r).unwrap_err().code, Code::BAD_REQUEST);
    }

    #[test]
    fn refusals() {
        assert_eq!(requested_uri(&proxied("http://x/")).unwrap_err().code, Code::PROXYING_NOT_SUPPORTED);
        assert_eq!(requested_uri(&proxied("coaps+tcp://x/")).unwrap_err().code, Code::PROXYING_NOT_SUPPORTED);
        assert_eq!(requested_uri(&proxied("coap://x/a b")).unwrap_err().code, Code::BAD_OPTION);
        assert_eq!(requested_uri(&proxied("no scheme")).unwrap_err().code, Code::BAD_OPTION);
        let hosts = Hosts::default();
        let u = Uri::parse("coap://224.0.1.187/x").unwrap();
        assert_eq!(hosts.address(&u).unwrap_err().code, Code::NOT_IMPLEMENTED);
        let u = Uri::parse("coap://[ff02::1]/x").unwrap();
        assert_eq!(hosts.address(&u).unwrap_err().code, Code::NOT_IMPLEMENTED);
        let u = Uri::parse("coap://nowhere/x").unwrap();
        assert_eq!(hosts.address(&u).unwrap_err().code, Code::BAD_GATEWAY);
        let u = Uri::parse("coap://localhost:7/x").unwrap();
        assert_eq!(hosts.address(&u).unwrap(), "127.0.0.1:7".parse().unwrap());
    }
}
