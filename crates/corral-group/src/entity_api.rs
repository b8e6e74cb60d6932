//! The Entity Manager's interface as a client sees it (`docs/entity-manager.md`): each operation on `/em`
//! as a typed request ([`EntityRequest`], built into a plain CoAP [`Request`]), and the listing of every
//! entity with its profile ([`list`], [`EntityRow`]), so that `corral entity` and the gateway's admin API
//! ask and read the same way. Any CoAP client sends the requests (corral-tokio's `Client::request_with`).
//!
//! Owns: the paths, queries, options and formats of the operations, and how a listing is read. Must never:
//! send anything itself (it is sans-IO: [`list`] is driven by the caller's `send`), or decide what an
//! answer means for the user (the CLI's lines and the admin API's HTTP codes are theirs).

use corral_proto::wire::link_format;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Request, Response};
use serde_json::{json, Value as Json};
use std::future::Future;

/// One operation on the Entity Manager's `/em`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntityRequest {
    /// `GET /em` (link-format): every entity and its `ect`.
    List,
    /// `GET /em/NAME/profile`.
    Profile { name: String },
    /// `PUT /em/NAME` with If-None-Match and a JSON profile: an existing name is refused (4.12), never
    /// replaced; with `allow_offline`, `?offline=allow`.
    Create { name: String, profile: Vec<u8>, allow_offline: bool },
    /// `POST /em/NAME/profile` with the JSON fields to change; with `allow_offline`, `?offline=allow`.
    Update { name: String, fields: Vec<u8>, allow_offline: bool },
    /// `DELETE /em/NAME`.
    Delete { name: String },
    /// `GET /em/NAME?QUERY…` (a use: `eo=avg`, `enr=2`, …), in `accept` (the gateway's default without).
    Use { name: String, query: Vec<String>, accept: Option<ContentFormat> },
    /// `PUT /em/NAME` (or `POST` with `post`) with a value every member gets.
    Actuate { name: String, query: Vec<String>, format: ContentFormat, value: Vec<u8>, post: bool },
}

impl EntityRequest {
    /// The CoAP request, with its Uri-Path and Uri-Query options; the destination is the caller's.
    pub fn to_request(&self) -> Request {
        use EntityRequest as R;
        let (method, path) = match self {
            R::List => (Code::GET, "em".to_string()),
            R::Profile { name } => (Code::GET, format!("em/{name}/profile")),
            R::Create { name, .. } | R::Use { name, .. } => (self.method(), format!("em/{name}")),
            R::Update { name, .. } => (Code::POST, format!("em/{name}/profile")),
            R::Delete { name } => (Code::DELETE, format!("em/{name}")),
            R::Actuate { name, .. } => (self.method(), format!("em/{name}")),
        };
        let mut request = Request::new(method).with_path(&path);
        for q in self.query() {
            request = request.with_query(q);
        }
        match self {
            R::List => request.options.push_uint(OptionNumber::ACCEPT, ContentFormat::LINK_FORMAT.0.into()),
            R::Use { accept: None, .. } => &mut request.options,
            R::Use { accept: Some(cf), .. } => request.options.push_uint(OptionNumber::ACCEPT, cf.0.into()),
            _ => request.options.push_uint(OptionNumber::ACCEPT, ContentFormat::JSON.0.into()),
        };
        if matches!(self, R::Create { .. }) {
            // RFC 7252 §5.10.8.2: only if the entity does not exist yet.
            request.options.push(OptionNumber::IF_NONE_MATCH, &[]);
        }
        let body = match self {
            R::Create { profile: b, .. } | R::Update { fields: b, .. } => Some((ContentFormat::JSON, b)),
            R::Actuate { format, value, .. } => Some((*format, value)),
            _ => None,
        };
        if let Some((cf, b)) = body {
            request.options.push_uint(OptionNumber::CONTENT_FORMAT, cf.0.into());
            request.payload = b.clone();
        }
        request
    }

    fn method(&self) -> Code {
        match self {
            EntityRequest::Create { .. } | EntityRequest::Actuate { post: false, .. } => Code::PUT,
            EntityRequest::Actuate { post: true, .. } | EntityRequest::Update { .. } => Code::POST,
            EntityRequest::Delete { .. } => Code::DELETE,
            _ => Code::GET,
        }
    }

    fn query(&self) -> Vec<&str> {
        match self {
            EntityRequest::Create { allow_offline: true, .. } | EntityRequest::Update { allow_offline: true, .. } => {
                vec!["offline=allow"]
            }
            EntityRequest::Use { query, .. } | EntityRequest::Actuate { query, .. } => {
                query.iter().map(String::as_str).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// One entity of a listing: its name, its `ect`, and its profile document (`None` when it could not be
/// read: gone in between, or not this client's to read).
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRow {
    pub name: String,
    pub ect: String,
    pub profile: Option<Json>,
}

impl EntityRow {
    /// `{"name": …, "ect": …, "profile": …}` (`null` for a profile not read): the CLI's `list --json`
    /// and the admin API's `GET /api/entities` alike.
    pub fn to_json(&self) -> Json {
        json!({ "name": self.name, "ect": self.ect, "profile": self.profile.clone().unwrap_or(Json::Null) })
    }
}

/// Why a listing did not come back.
#[derive(Debug)]
#[non_exhaustive]
pub enum ListError<E> {
    /// The caller's `send` failed (no answer, or no gateway).
    Send(E),
    /// The gateway answered `GET /em` with an error.
    Refused(Response),
    /// The gateway's list was not link-format (RFC 6690).
    NotLinkFormat(corral_proto::wire::Error),
}

/// Every entity with its profile: `GET /em`, then `GET /em/NAME/profile` for each, each sent with `send`.
pub async fn list<E, F, Fut>(mut send: F) -> Result<Vec<EntityRow>, ListError<E>>
where
    F: FnMut(EntityRequest) -> Fut,
    Fut: Future<Output = Result<Response, E>>,
{
    let r = send(EntityRequest::List).await.map_err(ListError::Send)?;
    if !r.code.is_success() {
        return Err(ListError::Refused(r));
    }
    let text = r.payload_text();
    let mut rows = Vec::new();
    for link in link_format::parse(&text) {
        let link = link.map_err(ListError::NotLinkFormat)?;
        let name = link.target().trim_start_matches("/em/").to_string();
        let ect = link.value("ect").unwrap_or("unicast").to_string();
        let profile = match send(EntityRequest::Profile { name: name.clone() }).await {
            Ok(p) if p.code == Code::CONTENT => serde_json::from_slice(&p.payload).ok().filter(|j: &Json| !j.is_null()),
            _ => None,
        };
        rows.push(EntityRow { name, ect, profile });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_and_query(r: &Request) -> (Vec<String>, Vec<String>) {
        let strings =
            |n| r.options.iter().filter(move |(o, _)| *o == n).map(|(_, v)| String::from_utf8_lossy(v).into_owned());
        (strings(OptionNumber::URI_PATH).collect(), strings(OptionNumber::URI_QUERY).collect())
    }

    #[test]
    fn a_creation_is_a_conditional_put_of_json_and_never_a_replacement() {
        let r = EntityRequest::Create { name: "room1".into(), profile: b"{}".to_vec(), allow_offline: true };
        let req = r.to_request();
        assert_eq!(req.method, Code::PUT);
        assert_eq!(path_and_query(&req), (vec!["em".into(), "room1".into()], vec!["offline=allow".into()]));
        assert!(req.options.get(OptionNumber::IF_NONE_MATCH).is_some());
        assert_eq!(req.options.content_format(), Some(ContentFormat::JSON));
        assert_eq!(req.payload, b"{}");
    }

    #[test]
    fn a_use_carries_its_query_and_asks_for_a_format_only_when_told() {
        let r = EntityRequest::Use { name: "t".into(), query: vec!["eo=max".into(), "enr=1".into()], accept: None };
        let req = r.to_request();
        assert_eq!(req.method, Code::GET);
        assert_eq!(path_and_query(&req).1, vec!["eo=max".to_string(), "enr=1".to_string()]);
        assert!(req.options.get(OptionNumber::ACCEPT).is_none());
        let update = EntityRequest::Update { name: "t".into(), fields: b"{}".to_vec(), allow_offline: false };
        assert_eq!(path_and_query(&update.to_request()).0, vec!["em", "t", "profile"]);
        assert_eq!(update.to_request().method, Code::POST);
    }

    #[test]
    fn a_listing_reads_each_profile_and_keeps_an_unreadable_one_as_none() {
        let answers = |req: EntityRequest| {
            let r = match req {
                EntityRequest::List => {
                    Response::new(Code::CONTENT).with_payload(b"</em/a>;ect=multicast,</em/b>".to_vec())
                }
                EntityRequest::Profile { name } if name == "a" => {
                    Response::new(Code::CONTENT).with_payload(b"{\"er\":[]}".to_vec())
                }
                _ => Response::new(Code::NOT_FOUND),
            };
            std::future::ready(Ok::<_, ()>(r))
        };
        let rows = block_on(list(answers)).expect("a listing");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].to_json(), json!({"name": "a", "ect": "multicast", "profile": {"er": []}}));
        assert_eq!(rows[1].to_json(), json!({"name": "b", "ect": "unicast", "profile": null}));
        let refused = block_on(list(|_| std::future::ready(Ok::<_, ()>(Response::new(Code::FORBIDDEN)))));
        assert!(matches!(refused, Err(ListError::Refused(r)) if r.code == Code::FORBIDDEN));
    }

    /// Polls a future whose every await is ready (the test's `send`), without a runtime.
    fn block_on<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
