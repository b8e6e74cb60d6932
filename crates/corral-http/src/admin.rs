//! The gateway's admin API: JSON over HTTP for the operations of `/em` (docs/entity-manager.md), each
//! one the same CoAP request `corral entity` sends, to the gateway's own endpoint, so that the Entity
//! Manager decides exactly as it does for CoAP clients; its answers come back as they are (JSON), its
//! errors as problem documents carrying the CoAP code and diagnostic.
//!
//! | HTTP | CoAP |
//! |---|---|
//! | `GET /api/entities` | `GET /em`, then `GET /em/NAME/profile` for each |
//! | `GET /api/entities/NAME` | `GET /em/NAME/profile` |
//! | `PUT /api/entities/NAME` (profile JSON) | `PUT /em/NAME` with If-None-Match (create) |
//! | `PATCH /api/entities/NAME` (fields) | `POST /em/NAME/profile` (update) |
//! | `DELETE /api/entities/NAME` | `DELETE /em/NAME` |
//! | `GET /api/entities/NAME/value?eo=…` | `GET /em/NAME?eo=…` (use) |
//! | `POST /api/entities/NAME/actuate` (any body) | `PUT /em/NAME` (actuate) |
//! | `GET /api/groups` | the multicast entities' groups, from their profiles |
//!
//! Owns: that mapping and the OpenAPI document (`openapi.json`) that describes it.

use super::mapping::{content_format_of, response_of};
use super::{Problem, Shared};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use corral_tokio::uri::base_uri;
use corral_tokio::{Code, ContentFormat, OptionNumber};
use serde_json::{json, Value};

/// The OpenAPI 3.1 document of the admin API, served at `/api/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/openapi.json", get(openapi))
        .route("/api/entities", get(list))
        .route("/api/entities/{name}", get(show).put(create).patch(update).delete(delete))
        .route("/api/entities/{name}/value", get(value))
        .route("/api/entities/{name}/actuate", post(actuate))
        .route("/api/groups", get(groups))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// A request to the gateway's own `/em…` (`path` starts with `/em`).
pub(super) struct Em<'a> {
    app: &'a Shared,
    method: Code,
    path: String,
    pub payload: Option<(ContentFormat, Vec<u8>)>,
    pub if_none_match: bool,
    /// What to ask for [JSON; the entity list is link-format].
    pub accept: ContentFormat,
}

impl<'a> Em<'a> {
    pub fn new(app: &'a Shared, method: Code, path: String) -> Em<'a> {
        Em { app, method, path, payload: None, if_none_match: false, accept: ContentFormat::JSON }
    }

    pub async fn send(self) -> Result<corral_tokio::Response, Problem> {
        let accept = self.accept;
        self.build(accept)?.send().await.map_err(|e| {
            Problem::new(StatusCode::BAD_GATEWAY, format!("the gateway's CoAP endpoint did not answer: {e}"))
        })
    }

    /// Observes the resource (a GET), its representation as text.
    pub async fn observe(self) -> Result<corral_tokio::Observation, Problem> {
        self.build(ContentFormat::TEXT_PLAIN)?.observe().await.map_err(|e| {
            Problem::new(StatusCode::BAD_GATEWAY, format!("the gateway's CoAP endpoint did not answer: {e}"))
        })
    }

    fn build(self, accept: ContentFormat) -> Result<corral_tokio::RequestBuilder, Problem> {
        let gw = self
            .app
            .window
            .gateway
            .as_ref()
            .ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "no Entity Manager here"))?;
        let client =
            self.app.client.as_ref().ok_or_else(|| Problem::new(StatusCode::NOT_FOUND, "no Entity Manager here"))?;
        let uri = format!("{}{}", base_uri(gw.coap), self.path);
        let mut rb = client.request(self.method, &uri).to(gw.coap).accept(accept);
        if let Some((cf, body)) = self.payload {
            rb = rb.content_format(cf).payload(body);
        }
        if self.if_none_match {
            rb = rb.option(OptionNumber::IF_NONE_MATCH, []);
        }
        Ok(rb)
    }
}

/// An entity name from the path, checked as the Entity Manager checks it (a `/` cannot sneak in).
pub(super) fn entity(name: &str) -> Result<String, Problem> {
    if corral_group::em::valid_entity_name(name) {
        Ok(name.to_string())
    } else {
        Err(Problem::new(StatusCode::BAD_REQUEST, format!("{name:?} is not an entity name (letters, digits, _ . -)")))
    }
}

fn json_body(body: &[u8]) -> Result<(ContentFormat, Vec<u8>), Problem> {
    serde_json::from_slice::<Value>(body)
        .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, format!("the body is not JSON: {e}")))?;
    Ok((ContentFormat::JSON, body.to_vec()))
}

fn reply(r: Result<corral_tokio::Response, Problem>) -> Response {
    match r {
        Ok(mut r) => {
            // A JSON document ends with a newline, as a line of output does (`curl …` at a prompt, `| jq`).
            if r.options.content_format() == Some(ContentFormat::JSON) && !r.payload.ends_with(b"\n") {
                r.payload.push(b'\n');
            }
            response_of(&r)
        }
        Err(p) => p.into_response(),
    }
}

/// `value` as an `application/json` body ending with a newline.
pub(super) fn json_line(value: impl serde::Serialize) -> Response {
    let mut body = serde_json::to_vec(&value).unwrap_or_default();
    body.push(b'\n');
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Every entity (`GET /em`) with its type and profile (`Null` if it could not be read).
pub(super) async fn entities(app: &Shared) -> Result<Vec<(String, String, Value)>, Problem> {
    let mut em = Em::new(app, Code::GET, "/em".into());
    em.accept = ContentFormat::LINK_FORMAT;
    let r = em.send().await?;
    if !r.code.is_success() {
        return Err(Problem::from_coap(r.code, &r.payload));
    }
    let text = String::from_utf8_lossy(&r.payload).into_owned();
    let mut rows = Vec::new();
    for link in corral_tokio::corral_proto::wire::link_format::parse(&text).flatten() {
        let name = link.target().trim_start_matches("/em/").to_string();
        let ect = link.value("ect").unwrap_or("unicast").to_string();
        let profile = profile(app, &name).await.unwrap_or(Value::Null);
        rows.push((name, ect, profile));
    }
    Ok(rows)
}

async fn list(State(app): State<Shared>) -> Response {
    match entities(&app).await {
        Ok(rows) => json_line(
            rows.into_iter()
                .map(|(name, ect, profile)| json!({ "name": name, "ect": ect, "profile": profile }))
                .collect::<Vec<_>>(),
        ),
        Err(p) => p.into_response(),
    }
}

async fn profile(app: &Shared, name: &str) -> Option<Value> {
    let r = Em::new(app, Code::GET, format!("/em/{name}/profile")).send().await.ok()?;
    r.code.is_success().then(|| serde_json::from_slice(&r.payload).ok()).flatten()
}

async fn show(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    let name = match entity(&name) {
        Ok(n) => n,
        Err(p) => return p.into_response(),
    };
    reply(Em::new(&app, Code::GET, format!("/em/{name}/profile")).send().await)
}

async fn create(State(app): State<Shared>, Path(name): Path<String>, body: Bytes) -> Response {
    reply(create_entity(&app, &name, &body).await)
}

/// `PUT /em/NAME` with If-None-Match and the JSON profile `body`.
pub(super) async fn create_entity(app: &Shared, name: &str, body: &[u8]) -> Result<corral_tokio::Response, Problem> {
    let name = entity(name)?;
    let mut em = Em::new(app, Code::PUT, format!("/em/{name}"));
    em.payload = Some(json_body(body)?);
    em.if_none_match = true;
    em.send().await
}

async fn update(State(app): State<Shared>, Path(name): Path<String>, body: Bytes) -> Response {
    let r = async {
        let name = entity(&name)?;
        let mut em = Em::new(&app, Code::POST, format!("/em/{name}/profile"));
        em.payload = Some(json_body(&body)?);
        em.send().await
    };
    reply(r.await)
}

async fn delete(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    let r = async { Em::new(&app, Code::DELETE, format!("/em/{}", entity(&name)?)).send().await };
    match r.await {
        Ok(r) if r.code == Code::DELETED => StatusCode::NO_CONTENT.into_response(),
        other => reply(other),
    }
}

async fn value(State(app): State<Shared>, Path(name): Path<String>, RawQuery(q): RawQuery) -> Response {
    let r = async {
        let name = entity(&name)?;
        let query = q.filter(|q| !q.is_empty()).map(|q| format!("?{q}")).unwrap_or_default();
        Em::new(&app, Code::GET, format!("/em/{name}{query}")).send().await
    };
    reply(r.await)
}

async fn actuate(State(app): State<Shared>, Path(name): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("text/plain");
    let r = match content_format_of(ct) {
        Some(cf) => actuate_entity(&app, &name, cf, body.to_vec()).await,
        None => Err(Problem::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("{ct} has no CoAP Content-Format"))),
    };
    reply(r)
}

/// `PUT /em/NAME` with `value`: every member gets it.
pub(super) async fn actuate_entity(
    app: &Shared,
    name: &str,
    cf: ContentFormat,
    value: Vec<u8>,
) -> Result<corral_tokio::Response, Problem> {
    let name = entity(name)?;
    let mut em = Em::new(app, Code::PUT, format!("/em/{name}"));
    em.payload = Some((cf, value));
    em.send().await
}

async fn groups(State(app): State<Shared>) -> Response {
    match entities(&app).await {
        Ok(rows) => json_line(
            rows.into_iter()
                .filter(|(_, ect, _)| ect == "multicast")
                .map(|(name, _, p)| json!({ "entity": name, "group": p.get("mcstURI").cloned().unwrap_or(Value::Null), "members": p.get("er").cloned().unwrap_or(Value::Null) }))
                .collect::<Vec<_>>(),
        ),
        Err(p) => p.into_response(),
    }
}
