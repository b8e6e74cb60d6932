//! The device's side of a Resource Directory (RFC 9176 §5.3): a service that finds the directory's
//! registration resource (§4.3: `GET /.well-known/core?rt=core.rd`, `/rd` when the directory names none —
//! libcoap's and corral's are at `/rd`, aiocoap's at `/resourcedirectory/`), registers its node's links
//! there, refreshes the registration before its lifetime ends, registers again when the directory has
//! forgotten it (4.04 on a refresh, or a restarted directory), and removes it when asked to.
//!
//! Owns: the registration's state (its location, when to refresh, the retry back-off). Mount it on the
//! device's own node, so that the registration comes from the device's address (the directory takes the
//! base URI from the source) and its refreshes and removal come from the address that owns the name.
//!
//! Must never: read a clock (times come in as `now`), or retry without a back-off.

use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{
    Context, Duration, IncomingRequest, Instant, Outcome, Request, RequestId, Response, SendParams, Service,
};
use std::net::SocketAddr;

/// Where a directory that names no registration resource takes registrations (RFC 9176 §4.3's default).
const DEFAULT_REGISTRATION: &str = "/rd";

/// The path of the first link with `rt=core.rd` in a directory's `/.well-known/core`, without scheme and
/// authority (a directory may give an absolute URI); `None` if there is none.
fn registration_resource(links: &str) -> Option<String> {
    let link =
        corral_proto::wire::link_format::parse(links).flatten().find(|l| l.values("rt").any(|v| v == "core.rd"))?;
    let target = link.target();
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    Some(if path.starts_with('/') { path.to_string() } else { format!("/{path}") })
}

/// `req` at `path`, segment by segment, keeping a trailing empty segment (`/resourcedirectory/` and
/// `/reg/1/` are aiocoap's resources, not `/resourcedirectory` and `/reg/1`).
fn at_path(mut req: Request, path: &str) -> Request {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    if !trimmed.is_empty() {
        for seg in trimmed.split('/') {
            req.options.push(OptionNumber::URI_PATH, seg.as_bytes());
        }
    }
    req
}

/// The first retry after a failed registration; doubled up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(5);
const MAX_RETRY: Duration = Duration::from_secs(300);

/// Where the registrant stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrantState {
    /// Waiting until `at` to register (first, or after a failure).
    Waiting { at: Instant },
    /// A registration, refresh or removal is in flight.
    Asking(RequestId, Ask),
    /// Registered at `location` (e.g. `/rd/0123…`); refreshed at `refresh`.
    Registered { location: String, refresh: Instant },
    /// Removed (or told to stop): does nothing more.
    Done,
}

/// What is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Asking the directory where its registration resource is.
    Discover,
    Register,
    Refresh,
    Remove,
}

/// Registers its node with a Resource Directory.
pub struct Registrant {
    rd: SocketAddr,
    ep: String,
    d: Option<String>,
    lt: u32,
    links: String,
    state: RegistrantState,
    /// The directory's registration resource, once discovered (e.g. `/rd`).
    registration: Option<String>,
    location: Option<String>,
    retry: Duration,
    /// Registrations the directory accepted (first and again), for tests and logs.
    pub registrations: u64,
    /// Refreshes the directory accepted.
    pub refreshes: u64,
}

/// The shortest lifetime a registrant asks for, in seconds: it refreshes at 90 % of it, so a shorter one
/// would leave a retransmitted refresh no time to arrive.
pub const MIN_LIFETIME: u32 = 10;

impl Registrant {
    /// A registrant for endpoint `ep` (sector `d`) at the directory `rd`, with lifetime `lt` seconds (at
    /// least [`MIN_LIFETIME`]) and the node's `links` (link-format, e.g.
    /// `corral_proto::render_links(&node.links(), None)`).
    pub fn new(rd: SocketAddr, ep: &str, d: Option<&str>, lt: u32, links: String) -> Registrant {
        Registrant {
            rd,
            ep: ep.to_string(),
            d: d.map(str::to_string),
            lt: lt.max(MIN_LIFETIME),
            links,
            state: RegistrantState::Waiting { at: Instant::ZERO },
            registration: None,
            location: None,
            retry: FIRST_RETRY,
            registrations: 0,
            refreshes: 0,
        }
    }

    pub fn state(&self) -> &RegistrantState {
        &self.state
    }

    /// Asks the directory to remove the registration (on shutdown); afterwards the registrant is done.
    pub fn leave(&mut self, cx: &mut Context<'_>) {
        let Some(location) = self.location.clone() else {
            self.state = RegistrantState::Done;
            return;
        };
        let req = at_path(Request::new(Code::DELETE), &location);
        self.state = match cx.request(self.rd, req, SendParams::default()) {
            Ok(id) => RegistrantState::Asking(id, Ask::Remove),
            Err(_) => RegistrantState::Done,
        };
    }

    /// Whether a removal asked with [`Registrant::leave`] has been answered (or there was nothing to remove).
    pub fn has_left(&self) -> bool {
        self.state == RegistrantState::Done
    }

    /// Refreshes at 90 % of the lifetime, so a retransmitted refresh still arrives in time.
    fn refresh_at(&self, now: Instant) -> Instant {
        now + Duration::from_secs(u64::from(self.lt)).mul_f64(0.9)
    }

    /// Asks the directory where it takes registrations (RFC 9176 §4.3).
    fn discover(&mut self, cx: &mut Context<'_>) {
        let req = Request::get(".well-known/core")
            .with_query("rt=core.rd")
            .with_option(OptionNumber::ACCEPT, &[ContentFormat::LINK_FORMAT.0 as u8]);
        self.ask(cx, req, Ask::Discover);
    }

    fn register(&mut self, cx: &mut Context<'_>) {
        let Some(path) = self.registration.clone() else { return self.discover(cx) };
        let mut req = at_path(Request::new(Code::POST), &path)
            .with_query(&format!("ep={}", self.ep))
            .with_query(&format!("lt={}", self.lt))
            .with_content_format(ContentFormat::LINK_FORMAT)
            .with_payload(self.links.as_bytes().to_vec());
        if let Some(d) = &self.d {
            req = req.with_query(&format!("d={d}"));
        }
        self.ask(cx, req, Ask::Register);
    }

    fn ask(&mut self, cx: &mut Context<'_>, req: Request, ask: Ask) {
        match cx.request(self.rd, req, SendParams::default()) {
            Ok(id) => self.state = RegistrantState::Asking(id, ask),
            Err(e) => self.failed(cx.now(), &format!("cannot send: {e}")),
        }
    }

    fn failed(&mut self, now: Instant, why: &str) {
        tracing::info!(ep = %self.ep, rd = %self.rd, retry_s = self.retry.as_secs(), "registration failed: {why}");
        self.state = RegistrantState::Waiting { at: now + self.retry };
        self.retry = Duration::from_micros((self.retry.as_micros() * 2).min(MAX_RETRY.as_micros()));
    }
}

impl Service for Registrant {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        cx.respond(req.id, Response::error(Code::NOT_FOUND, "no such resource"));
    }

    fn handle_response(&mut self, cx: &mut Context<'_>, id: RequestId, outcome: Outcome) {
        let RegistrantState::Asking(asked, ask) = self.state.clone() else { return };
        if asked != id {
            return;
        }
        let now = cx.now();
        let response = match outcome {
            Outcome::Response { response, .. } => response,
            _ if ask == Ask::Remove => {
                self.state = RegistrantState::Done;
                return;
            }
            _ => return self.failed(now, "the directory did not answer"),
        };
        match (ask, response.code) {
            (Ask::Discover, code) => {
                let found = (code == Code::CONTENT).then(|| registration_resource(&response.payload_text())).flatten();
                tracing::debug!(ep = %self.ep, rd = %self.rd, found = ?found, "asked where to register");
                self.registration = Some(found.unwrap_or_else(|| DEFAULT_REGISTRATION.to_string()));
                self.register(cx);
            }
            (Ask::Register, Code::CREATED) => {
                let segs: Vec<String> = response
                    .options
                    .get_all(OptionNumber::LOCATION_PATH)
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                let location = format!("/{}", segs.join("/"));
                tracing::debug!(ep = %self.ep, rd = %self.rd, %location, "registered");
                self.registrations += 1;
                self.retry = FIRST_RETRY;
                self.location = Some(location.clone());
                self.state = RegistrantState::Registered { location, refresh: self.refresh_at(now) };
            }
            (Ask::Refresh, Code::CHANGED) => {
                self.refreshes += 1;
                let location = self.location.clone().unwrap_or_default();
                self.state = RegistrantState::Registered { location, refresh: self.refresh_at(now) };
            }
            // The directory forgot us (it restarted without its store, or we were late): register again.
            (Ask::Refresh, Code::NOT_FOUND) => {
                self.location = None;
                self.register(cx);
            }
            (Ask::Remove, _) => {
                self.location = None;
                self.state = RegistrantState::Done;
            }
            (_, code) => {
                let why = format!("{code} {}", response.payload_text());
                self.failed(now, &why);
            }
        }
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let now = cx.now();
        match self.state.clone() {
            RegistrantState::Waiting { at } if at <= now => self.register(cx),
            RegistrantState::Registered { location, refresh } if refresh <= now => {
                let req = at_path(Request::new(Code::POST), &location);
                self.ask(cx, req, Ask::Refresh);
            }
            _ => {}
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            RegistrantState::Waiting { at } => Some(*at),
            RegistrantState::Registered { refresh, .. } => Some(*refresh),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registration_resource_is_the_core_rd_link_as_a_path() {
        let aiocoap = "</.well-known/core>;ct=\"40\",</resourcedirectory/>;ct=\"40\";rt=\"core.rd\",\
                       </endpoint-lookup/>;ct=\"40\";rt=\"core.rd-lookup-ep\";obs";
        assert_eq!(registration_resource(aiocoap).as_deref(), Some("/resourcedirectory/"));
        assert_eq!(registration_resource("</rd>;ins=\"default\";rt=\"core.rd\";ct=40").as_deref(), Some("/rd"));
        assert_eq!(
            registration_resource("<coap://[2001:db8::1]:5683/x/rd?a=b>;rt=\"core.rd x\"").as_deref(),
            Some("/x/rd")
        );
        assert_eq!(registration_resource("</rd-lookup/ep>;rt=\"core.rd-lookup-ep\""), None, "not core.rd itself");
        assert_eq!(registration_resource("garbage<<"), None);
    }

    #[test]
    fn paths_keep_a_trailing_empty_segment() {
        let segs = |p: &str| -> Vec<String> {
            at_path(Request::new(Code::POST), p)
                .options
                .get_all(OptionNumber::URI_PATH)
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        };
        assert_eq!(segs("/resourcedirectory/"), ["resourcedirectory", ""]);
        assert_eq!(segs("/rd"), ["rd"]);
        assert_eq!(segs("/reg/1/"), ["reg", "1", ""]);
        assert!(segs("/").is_empty());
    }
}
