//! The forwarding information base of seed 001 (Table I): ordered rules `URI pattern → [next hop …]`.
//!
//! A pattern is an absolute URI (`coap://sensor/temp/**`) or a path alone (`/temp/*`, any server). In the
//! path, `*` matches one segment and a trailing `**` any number (also none); the host `*` matches every
//! host. A next hop is a CoAP endpoint (`coap://192.0.2.7:5683` or `coap+tcp://…`) and the paper's
//! *send host* flag: `true` keeps the full Proxy-Uri for another proxy, `false` rewrites the request to
//! Uri-* options for the origin server. The most specific rule wins (more literal path segments, then a
//! literal host, then an exact length, then fewer wildcards); equally specific rules go by order. A request
//! no rule matches goes straight to the origin in its URI. A multicast group (`coap://239.255.0.1:5683`)
//! may be a rule's one next hop: matching requests go to it as group requests (`crate::ProxyService`, when
//! `ProxyConfig::groups` allows the group). So may a Resource Directory lookup, `"rd:QUERY"` (RFC 9176
//! §7.2 filters, e.g. `rd:rt=temperature&d=floor2`): the rule's next hops are then the endpoints of the
//! resources the directory's lookup lists, followed as devices register and leave (`ProxyConfig::rd`
//! names the directory; the proxy observes `/rd-lookup/res?QUERY`), each sent the plain request (as
//! `send_host = false`).
//!
//! ```toml
//! [hosts]                      # names a Proxy-Uri may use (the proxy has no DNS)
//! sensor = "192.0.2.10"
//!
//! [[rule]]
//! match = "coap://sensor/temp/**"
//! next = ["coap://192.0.2.20:5683", "coap://192.0.2.21:5683"]   # two forwarders: first answer wins
//!
//! [[rule]]
//! match = "/light/*"
//! next = [{ to = "coap://192.0.2.30", send_host = false }]    # the origin itself
//!
//! [[rule]]
//! match = "/temp/**"
//! next = ["rd:rt=temperature"]  # every device the directory lists with a temperature resource
//!
//! [destinations]               # where clients from other hosts may make the proxy send (see destinations)
//! networks = ["192.0.2.0/24"]
//! ports = [5683]
//! this_host = false            # the proxy's own addresses stay out of their reach (the default)
//! ```

use crate::destinations::Destinations;
use crate::target::Hosts;
use corral_proto::wire::uri::{Host, Scheme, Uri};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Where a matching request goes next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextHop {
    /// `coap://IP:PORT` or `coap+tcp://IP:PORT`, as written (names resolved at load).
    pub uri: String,
    #[serde(skip)]
    pub addr: SocketAddr,
    #[serde(skip)]
    pub tcp: bool,
    /// Keep the Proxy-Uri (the next hop is a proxy) or rewrite to Uri-* options (it is the origin).
    pub send_host: bool,
}

/// One FIB entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    #[serde(rename = "match")]
    pub pattern: String,
    pub next: Vec<NextHop>,
    /// Line of the rule in its file (0 when built in code).
    pub line: usize,
    /// The Resource Directory lookup (its query, `rt=temperature&…`) whose endpoints are the next hops:
    /// `next` is then the latest result, replaced by the proxy as the directory changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rd: Option<String>,
    #[serde(skip)]
    matcher: Pattern,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    scheme: Option<Scheme>,
    /// `None`: any host.
    host: Option<Host>,
    port: Option<u16>,
    segments: Vec<String>,
    /// A trailing `**`.
    rest: bool,
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, BadPattern> {
        let bad = |fault| BadPattern { pattern: text.to_string(), fault };
        let (scheme, host, port, path) = if text.starts_with('/') {
            (None, None, None, text)
        } else {
            let (scheme, rest) = text.split_once("://").ok_or_else(|| bad(PatternFault::NotAUriOrPath))?;
            let scheme = Scheme::parse(scheme).ok_or_else(|| bad(PatternFault::UnknownScheme(scheme.to_string())))?;
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            if authority == "*" {
                (Some(scheme), None, None, path)
            } else {
                // Let the URI parser handle hosts, IPv6 literals and ports.
                let uri = Uri::parse(&format!("{scheme}://{authority}/")).map_err(|e| bad(PatternFault::BadHost(e)))?;
                let explicit_port = authority.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
                (Some(scheme), Some(uri.host), explicit_port.then_some(uri.port), path)
            }
        };
        if path.contains(['?', '#']) {
            return Err(bad(PatternFault::QueryOrFragment));
        }
        let mut segments: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
        let rest = segments.last().is_some_and(|s| s == "**");
        if rest {
            segments.pop();
        }
        if segments.iter().any(|s| s == "**") {
            return Err(bad(PatternFault::InnerRest));
        }
        Ok(Pattern { scheme, host, port, segments, rest })
    }

    fn matches(&self, uri: &Uri) -> bool {
        self.scheme.is_none_or(|s| s == uri.scheme)
            && self.host.as_ref().is_none_or(|h| *h == uri.host)
            && self.port.is_none_or(|p| p == uri.port)
            && (uri.path.len() == self.segments.len() || (self.rest && uri.path.len() >= self.segments.len()))
            && self.segments.iter().zip(&uri.path).all(|(p, s)| p == "*" || p == s)
    }

    /// Larger is more specific.
    fn specificity(&self) -> (usize, bool, bool, usize) {
        let literal = self.segments.iter().filter(|s| *s != "*").count();
        let wild = self.segments.len() - literal;
        (literal, self.host.is_some(), !self.rest, usize::MAX - wild)
    }
}

/// Ordered rules plus the host names the proxy knows, and the file's destination policy if it has one
/// (networks, ports and `this_host` only: the driver adds what it knows about the host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fib {
    pub rules: Vec<Rule>,
    pub hosts: Hosts,
    pub destinations: Option<Destinations>,
}

/// A FIB file that does not load: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FibError {
    /// 1-based line, 0 when the error has no place.
    pub line: usize,
    /// What is wrong: the TOML parser's message, or a rule's fault ([`BadPattern`], a next hop) as text —
    /// a String because it is only ever shown to a person, after the line.
    pub message: String,
}

impl fmt::Display for FibError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for FibError {}

/// A `match` pattern that does not parse: the pattern as written and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPattern {
    pub pattern: String,
    pub fault: PatternFault,
}

/// What is wrong with a `match` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatternFault {
    /// Neither `scheme://authority/path` nor `/path`.
    NotAUriOrPath,
    /// A scheme CoAP does not have.
    UnknownScheme(String),
    /// The authority does not parse as a host and port.
    BadHost(corral_proto::wire::Error),
    /// A query or a fragment (patterns match paths).
    QueryOrFragment,
    /// `**` before the last segment.
    InnerRest,
}

impl fmt::Display for BadPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: ", self.pattern)?;
        match &self.fault {
            PatternFault::NotAUriOrPath => f.write_str("expected an absolute URI (coap://host/path) or a path (/path)"),
            PatternFault::UnknownScheme(s) => write!(f, "unknown scheme {s:?}"),
            PatternFault::BadHost(e) => write!(f, "bad host in pattern: {e}"),
            PatternFault::QueryOrFragment => f.write_str("a pattern matches paths; it cannot have a query or fragment"),
            PatternFault::InnerRest => f.write_str("`**` may only end a pattern"),
        }
    }
}

impl std::error::Error for BadPattern {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FibFile {
    #[serde(default)]
    hosts: BTreeMap<String, toml::Spanned<String>>,
    #[serde(default)]
    rule: Vec<toml::Spanned<RuleFile>>,
    destinations: Option<DestinationsFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DestinationsFile {
    #[serde(default)]
    networks: Vec<toml::Spanned<String>>,
    #[serde(default)]
    ports: Vec<u16>,
    #[serde(default)]
    this_host: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(rename = "match")]
    pattern: toml::Spanned<String>,
    next: Vec<toml::Spanned<HopFile>>,
    /// The default for this rule's hops.
    send_host: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum HopFile {
    Uri(String),
    Full { to: String, send_host: Option<bool> },
}

/// The line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

impl Fib {
    /// Parses a FIB file. `resolve` turns a host name of a next hop or of `[hosts]` into an address (the CLI
    /// passes the system resolver; tests a table); every error names its line.
    pub fn parse(text: &str, resolve: &dyn Fn(&str) -> Option<IpAddr>) -> Result<Fib, FibError> {
        let file: FibFile = toml::from_str(text).map_err(|e| FibError {
            line: e.span().map_or(0, |s| line_of(text, s.start)),
            message: e.message().trim().to_string(),
        })?;
        let at = |span: std::ops::Range<usize>, message: String| FibError { line: line_of(text, span.start), message };
        let mut hosts = BTreeMap::new();
        for (name, value) in file.hosts {
            let ip = value
                .get_ref()
                .parse::<IpAddr>()
                .ok()
                .or_else(|| resolve(value.get_ref()))
                .ok_or_else(|| at(value.span(), format!("host {name:?}: cannot resolve {:?}", value.get_ref())))?;
            hosts.insert(name.to_ascii_lowercase(), ip);
        }
        let hosts = Hosts(hosts);
        let mut rules = Vec::new();
        for rule in file.rule {
            let line = line_of(text, rule.span().start);
            let rule = rule.into_inner();
            let matcher =
                Pattern::parse(rule.pattern.get_ref()).map_err(|e| at(rule.pattern.span(), format!("match: {e}")))?;
            if rule.next.is_empty() {
                return Err(at(rule.pattern.span(), "a rule needs at least one next hop in `next`".into()));
            }
            if let Some(query) = rd_lookup(&rule.next) {
                let query = query.map_err(|(span, why)| at(span, why))?;
                rules.push(Rule {
                    pattern: rule.pattern.into_inner(),
                    next: Vec::new(),
                    line,
                    rd: Some(query),
                    matcher,
                });
                continue;
            }
            let mut next = Vec::new();
            for hop in &rule.next {
                let (to, send_host) = match hop.get_ref() {
                    HopFile::Uri(to) => (to, None),
                    HopFile::Full { to, send_host } => (to, *send_host),
                };
                let send_host = send_host.or(rule.send_host).unwrap_or(true);
                next.push(next_hop(to, send_host, &hosts, resolve).map_err(|e| at(hop.span(), e.to_string()))?);
            }
            if next.len() > 1 && next.iter().any(|h| h.addr.ip().is_multicast()) {
                return Err(at(
                    rule.pattern.span(),
                    "a rule with a multicast group for next hop has that one next hop only".into(),
                ));
            }
            rules.push(Rule { pattern: rule.pattern.into_inner(), next, line, rd: None, matcher });
        }
        let destinations = match file.destinations {
            None => None,
            Some(d) => {
                let mut networks = Vec::new();
                for n in d.networks {
                    let p = n.get_ref().parse().map_err(|m| at(n.span(), format!("destinations: {m}")))?;
                    networks.push(p);
                }
                Some(Destinations { networks, ports: d.ports, this_host_open: d.this_host, ..Destinations::default() })
            }
        };
        Ok(Fib { rules, hosts, destinations })
    }

    /// A rule built in code (the lab, tests).
    pub fn push(&mut self, pattern: &str, next: Vec<NextHop>) -> Result<(), BadPattern> {
        let matcher = Pattern::parse(pattern)?;
        self.rules.push(Rule { pattern: pattern.to_string(), next, line: 0, rd: None, matcher });
        Ok(())
    }

    /// A rule built in code whose next hops follow the directory's lookup `query` (`rt=temperature&…`).
    pub fn push_rd(&mut self, pattern: &str, query: &str) -> Result<(), BadPattern> {
        let matcher = Pattern::parse(pattern)?;
        let rd = Some(query.to_string());
        self.rules.push(Rule { pattern: pattern.to_string(), next: Vec::new(), line: 0, rd, matcher });
        Ok(())
    }

    /// The most specific rule for `uri`; equally specific rules go by order.
    pub fn lookup(&self, uri: &Uri) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        for rule in self.rules.iter().filter(|r| r.matcher.matches(uri)) {
            if best.is_none_or(|b| rule.matcher.specificity() > b.matcher.specificity()) {
                best = Some(rule);
            }
        }
        best
    }
}

impl NextHop {
    /// A next hop at an address, over UDP or TCP.
    pub fn new(addr: SocketAddr, tcp: bool, send_host: bool) -> NextHop {
        let scheme = if tcp { Scheme::CoapTcp } else { Scheme::Coap };
        NextHop { uri: format!("{scheme}://{addr}"), addr, tcp, send_host }
    }
}

/// The query of a rule whose next hop is a directory lookup (`"rd:QUERY"`), if it is one; an error (where,
/// and why) for an `rd:` hop beside others, or a query that is no `name=value&…` list.
fn rd_lookup(next: &[toml::Spanned<HopFile>]) -> Option<Result<String, (std::ops::Range<usize>, String)>> {
    let rd = |h: &toml::Spanned<HopFile>| match h.get_ref() {
        HopFile::Uri(to) | HopFile::Full { to, .. } => to.strip_prefix("rd:").map(str::to_string),
    };
    let hop = next.iter().find(|h| rd(h).is_some())?;
    let query = rd(hop).unwrap_or_default();
    if next.len() > 1 {
        return Some(Err((hop.span(), "a directory lookup (rd:…) is a rule's only next hop".into())));
    }
    let well_formed = !query.is_empty()
        && query.split('&').all(|kv| kv.split_once('=').is_some_and(|(k, v)| !k.is_empty() && !v.is_empty()));
    if !well_formed || query.contains(['#', ' ']) {
        return Some(Err((
            hop.span(),
            format!("next hop \"rd:{query}\": expected rd:NAME=VALUE[&NAME=VALUE…] (e.g. rd:rt=temperature)"),
        )));
    }
    Some(Ok(query))
}

/// A next hop of a FIB file that is not usable: the hop as written and why.
struct BadHop<'a> {
    to: &'a str,
    fault: HopFault,
}

enum HopFault {
    Uri(corral_proto::wire::Error),
    HasPath,
    Scheme(Scheme),
    Unresolved(String),
    /// The destination policy refuses the address (its diagnostic).
    Refused(String),
}

impl fmt::Display for BadHop<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "next hop {:?}: ", self.to)?;
        match &self.fault {
            HopFault::Uri(e) => write!(f, "{e}"),
            HopFault::HasPath => f.write_str("a next hop is an endpoint; drop the path"),
            HopFault::Scheme(s) => write!(f, "{s}:// is not supported; use coap://, coaps:// or coap+tcp://"),
            HopFault::Unresolved(name) => write!(f, "cannot resolve {name:?}"),
            HopFault::Refused(diagnostic) => f.write_str(diagnostic),
        }
    }
}

fn next_hop<'a>(
    to: &'a str,
    send_host: bool,
    hosts: &Hosts,
    resolve: &dyn Fn(&str) -> Option<IpAddr>,
) -> Result<NextHop, BadHop<'a>> {
    let bad = |fault| BadHop { to, fault };
    let uri = Uri::parse(to).map_err(|e| bad(HopFault::Uri(e)))?;
    if !uri.path.is_empty() || !uri.query.is_empty() {
        return Err(bad(HopFault::HasPath));
    }
    let tcp = match uri.scheme {
        // coaps://: over DTLS, with the credentials the driver holds for the hop (`corral proxy` checks).
        Scheme::Coap | Scheme::Coaps => false,
        Scheme::CoapTcp => true,
        s => return Err(bad(HopFault::Scheme(s))),
    };
    let ip = match &uri.host {
        Host::Ip(ip) => *ip,
        Host::Name(name) => {
            hosts.resolve(&uri.host).or_else(|| resolve(name)).ok_or_else(|| bad(HopFault::Unresolved(name.clone())))?
        }
    };
    // A group (coap:// only) is a next hop: matching requests go to it as group requests, within
    // ProxyConfig::groups (draft-ietf-core-groupcomm-proxy).
    if !ip.is_multicast() || tcp {
        crate::target::check_destination(ip).map_err(|r| bad(HopFault::Refused(r.diagnostic)))?;
    }
    Ok(NextHop { uri: to.to_string(), addr: SocketAddr::new(ip, uri.port), tcp, send_host })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_dns(_: &str) -> Option<IpAddr> {
        None
    }

    const EXAMPLE: &str = r#"
[hosts]
sensor = "192.0.2.10"

[[rule]]
match = "coap://sensor/temp/**"
next = ["coap://192.0.2.20:5683", "coap://192.0.2.21"]

[[rule]]
match = "/temp/*"
next = [{ to = "coap+tcp://192.0.2.30", send_host = false }]

[[rule]]
match = "coap://*/**"
send_host = false
next = ["coap://192.0.2.40"]
"#;

    fn uri(s: &str) -> Uri {
        Uri::parse(s).unwrap()
    }

    #[test]
    fn example_loads_and_most_specific_wins() {
        let fib = Fib::parse(EXAMPLE, &no_dns).unwrap();
        assert_eq!(fib.rules.len(), 3);
        assert_eq!(fib.rules[0].line, 5);
        assert_eq!(fib.rules[0].next[1].addr, "192.0.2.21:5683".parse().unwrap());
        assert!(fib.rules[0].next[0].send_host);
        assert!(fib.rules[1].next[0].tcp && !fib.rules[1].next[0].send_host);
        assert!(!fib.rules[2].next[0].send_host);
        // /temp/x from sensor: rule 0 has one literal segment and a host; rule 1 one literal segment and an
        // exact length, but no host. The host decides.
        assert_eq!(fib.lookup(&uri("coap://sensor/temp/x")).unwrap().line, 5);
        assert_eq!(fib.lookup(&uri("coap://192.0.2.99/temp/x")).unwrap().line, 9);
        assert_eq!(fib.lookup(&uri("coap://192.0.2.99/other")).unwrap().line, 13);
        assert_eq!(fib.lookup(&uri("coap://sensor/temp")).unwrap().line, 5, "** matches no segment too");
        assert!(fib.lookup(&uri("coap+tcp://192.0.2.99/other")).is_none(), "the scheme must match");
    }

    #[test]
    fn ties_go_by_order_and_ports_match() {
        let mut fib = Fib::default();
        let hop = NextHop::new("192.0.2.1:5683".parse().unwrap(), false, true);
        fib.push("/a/*", vec![hop.clone()]).unwrap();
        fib.push("/*/b", vec![hop.clone()]).unwrap();
        fib.push("coap://192.0.2.5:7000/**", vec![hop]).unwrap();
        assert_eq!(fib.lookup(&uri("coap://h/a/b")).unwrap().pattern, "/a/*");
        assert_eq!(fib.lookup(&uri("coap://192.0.2.5:7000/z")).unwrap().pattern, "coap://192.0.2.5:7000/**");
        assert!(fib.lookup(&uri("coap://192.0.2.5/z")).is_none());
    }

    #[test]
    fn errors_name_their_line() {
        let e = Fib::parse("[[rule]]\nmatch = \"/a\"\nnext = []\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = Fib::parse("\n[[rule]]\nmatch = \"/a\"\nnext = [\"coap://10.0.0.1/x\"]\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("drop the path"), "{e}");
        let e = Fib::parse("[[rule]]\nmatch = \"ftp://a\"\nnext = [\"coap://10.0.0.1\"]\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = Fib::parse("[[rule]]\nmatch = \"/a/**/b\"\nnext = [\"coap://10.0.0.1\"]\n", &no_dns).unwrap_err();
        assert!(e.message.contains("**"), "{e}");
        let e = Fib::parse("[[rule]]\nmatch = \"/a\"\nnext = [\"coap://nowhere\"]\n", &no_dns).unwrap_err();
        assert!(e.message.contains("cannot resolve"), "{e}");
        let e = Fib::parse("[[rule]]\nmatch = \"/a\"\nnext = [\"coap+tcp://224.0.1.187\"]\n", &no_dns).unwrap_err();
        assert!(e.message.contains("multicast"), "{e}");
        let two = "[[rule]]\nmatch = \"/a\"\nnext = [\"coap://239.255.0.1\", \"coap://10.0.0.1\"]\n";
        assert!(Fib::parse(two, &no_dns).unwrap_err().message.contains("one next hop only"));
        let group = Fib::parse("[[rule]]\nmatch = \"/a\"\nnext = [\"coap://239.255.0.1:5700\"]\n", &no_dns).unwrap();
        assert_eq!(group.rules[0].next[0].addr, "239.255.0.1:5700".parse().unwrap(), "a group is a next hop");
        let e = Fib::parse("[[rules]]\nmatch = \"/a\"\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        let e = Fib::parse("[hosts]\nx = \"not-an-address\"\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn a_destinations_section_loads_and_its_errors_name_their_line() {
        let fib = Fib::parse(
            "[destinations]\nnetworks = [\"10.1.0.0/16\", \"fd00::/8\"]\nports = [5683, 5700]\nthis_host = true\n",
            &no_dns,
        )
        .unwrap();
        let d = fib.destinations.unwrap();
        assert_eq!(d.networks, vec!["10.1.0.0/16".parse().unwrap(), "fd00::/8".parse().unwrap()]);
        assert_eq!((d.ports, d.this_host_open), (vec![5683, 5700], true));
        assert_eq!(Fib::parse(EXAMPLE, &no_dns).unwrap().destinations, None, "no section: no policy");
        let e = Fib::parse("[destinations]\nnetworks = [\n  \"10.1.0.0/99\"]\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("prefix length"), "{e}");
        let e = Fib::parse("[destinations]\nports = [70000]\n", &no_dns).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = Fib::parse("[destinations]\nnetwork = []\n", &no_dns).unwrap_err();
        assert!(e.message.contains("unknown field"), "{e}");
    }

    #[test]
    fn a_directory_lookup_is_a_rules_only_next_hop() {
        let fib = Fib::parse("[[rule]]\nmatch = \"/temp/**\"\nnext = [\"rd:rt=temperature&d=f2\"]\n", &no_dns).unwrap();
        assert_eq!(fib.rules[0].rd.as_deref(), Some("rt=temperature&d=f2"));
        assert!(fib.rules[0].next.is_empty(), "the directory fills it");
        let two = "[[rule]]\nmatch = \"/a\"\nnext = [\"coap://10.0.0.1\", \"rd:rt=t\"]\n";
        let e = Fib::parse(two, &no_dns).unwrap_err();
        assert!(e.message.contains("only next hop") && e.line == 3, "{e}");
        let bad = Fib::parse("[[rule]]\nmatch = \"/a\"\nnext = [\"rd:temperature\"]\n", &no_dns).unwrap_err();
        assert!(bad.message.contains("rd:NAME=VALUE"), "{bad}");
    }

    #[test]
    fn names_resolve_through_hosts_then_resolver() {
        let fib = Fib::parse(
            "[hosts]\nfwd = \"10.1.1.1\"\n[[rule]]\nmatch = \"/a\"\nnext = [\"coap://fwd:9\", \"coap://dns\"]\n",
            &|n| (n == "dns").then(|| "10.2.2.2".parse().unwrap()),
        )
        .unwrap();
        assert_eq!(fib.rules[0].next[0].addr, "10.1.1.1:9".parse().unwrap());
        assert_eq!(fib.rules[0].next[1].addr, "10.2.2.2:5683".parse().unwrap());
    }
}
