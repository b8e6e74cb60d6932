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
//! Owns: that mapping and the OpenAPI document (`openapi.json`) that describes it. The requests themselves
//! and the listing are corral-group's `entity_api`, which `corral entity` asks through too.

use super::mapping::{content_format_of, response_of};
use super::{Problem, Shared};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use corral_group::entity_api::{self, EntityRequest, EntityRow, ListError};
use corral_tokio::uri::base_uri;
use corral_tokio::{Code, ContentFormat};
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

/// `r` to the gateway's own `/em`.
fn em(app: &Shared, r: &EntityRequest) -> Result<corral_tokio::RequestBuilder, Problem> {
    let none = || Problem::new(StatusCode::NOT_FOUND, "no Entity Manager here");
    let gw = app.window.gateway.as_ref().ok_or_else(none)?;
    let client = app.client.as_ref().ok_or_else(none)?;
    Ok(client.request_with(&base_uri(gw.coap), r.to_request()).to(gw.coap))
}

fn no_answer(e: corral_tokio::Error) -> Problem {
    Problem::new(StatusCode::BAD_GATEWAY, format!("the gateway's CoAP endpoint did not answer: {e}"))
}

/// Asks the gateway's own `/em` `r`.
pub(super) async fn ask(app: &Shared, r: &EntityRequest) -> Result<corral_tokio::Response, Problem> {
    em(app, r)?.send().await.map_err(no_answer)
}

/// Observes `r` (a use, a GET) on the gateway's own `/em`.
pub(super) async fn observe(app: &Shared, r: &EntityRequest) -> Result<corral_tokio::Observation, Problem> {
    em(app, r)?.observe().await.map_err(no_answer)
}

/// An entity name from the path, checked as the Entity Manager checks it (a `/` cannot sneak in).
pub(super) fn entity(name: &str) -> Result<String, Problem> {
    if corral_group::em::valid_entity_name(name) {
        Ok(name.to_string())
    } else {
        Err(Problem::new(StatusCode::BAD_REQUEST, format!("{name:?} is not an entity name (letters, digits, _ . -)")))
    }
}

fn json_body(body: &[u8]) -> Result<Vec<u8>, Problem> {
    serde_json::from_slice::<Value>(body)
        .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, format!("the body is not JSON: {e}")))?;
    Ok(body.to_vec())
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

/// Every entity (`GET /em`) with its type and profile.
pub(super) async fn entities(app: &Shared) -> Result<Vec<EntityRow>, Problem> {
    entity_api::list(|r| async move { ask(app, &r).await }).await.map_err(|e| match e {
        ListError::Send(p) => p,
        ListError::Refused(r) => Problem::from_coap(r.code, &r.payload),
        ListError::NotLinkFormat(e) => {
            Problem::new(StatusCode::BAD_GATEWAY, format!("the gateway's entity list is not link-format: {e}"))
        }
        _ => Problem::new(StatusCode::BAD_GATEWAY, "the gateway's entity list could not be read"),
    })
}

async fn list(State(app): State<Shared>) -> Response {
    match entities(&app).await {
        Ok(rows) => json_line(rows.iter().map(EntityRow::to_json).collect::<Vec<_>>()),
        Err(p) => p.into_response(),
    }
}

async fn show(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    let name = match entity(&name) {
        Ok(n) => n,
        Err(p) => return p.into_response(),
    };
    reply(ask(&app, &EntityRequest::Profile { name }).await)
}

async fn create(State(app): State<Shared>, Path(name): Path<String>, body: Bytes) -> Response {
    reply(create_entity(&app, &name, &body).await)
}

/// `PUT /em/NAME` with If-None-Match and the JSON profile `body`.
pub(super) async fn create_entity(app: &Shared, name: &str, body: &[u8]) -> Result<corral_tokio::Response, Problem> {
    let name = entity(name)?;
    ask(app, &EntityRequest::Create { name, profile: json_body(body)?, allow_offline: false }).await
}

async fn update(State(app): State<Shared>, Path(name): Path<String>, body: Bytes) -> Response {
    let r = async {
        let name = entity(&name)?;
        ask(&app, &EntityRequest::Update { name, fields: json_body(&body)?, allow_offline: false }).await
    };
    reply(r.await)
}

async fn delete(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    let r = async { ask(&app, &EntityRequest::Delete { name: entity(&name)? }).await };
    match r.await {
        Ok(r) if r.code == Code::DELETED => StatusCode::NO_CONTENT.into_response(),
        other => reply(other),
    }
}

async fn value(State(app): State<Shared>, Path(name): Path<String>, RawQuery(q): RawQuery) -> Response {
    let r = async {
        let name = entity(&name)?;
        // The query's items as a CoAP URI reads them (split at `&`, percent-decoded).
        let query = match q.filter(|q| !q.is_empty()) {
            None => Vec::new(),
            Some(q) => {
                corral_tokio::parse_uri(&format!("coap://localhost/?{q}"))
                    .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, format!("the query is not one: {e}")))?
                    .query
            }
        };
        ask(&app, &EntityRequest::Use { name, query, accept: Some(ContentFormat::JSON) }).await
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
    ask(app, &EntityRequest::Actuate { name, query: Vec::new(), format: cf, value, post: false }).await
}

async fn groups(State(app): State<Shared>) -> Response {
    match entities(&app).await {
        Ok(rows) => json_line(
            rows.into_iter()
                .filter(|r| r.ect == "multicast")
                .map(|r| {
                    let field = |k: &str| r.profile.as_ref().and_then(|p| p.get(k)).cloned().unwrap_or(Value::Null);
                    json!({ "entity": r.name, "group": field("mcstURI"), "members": field("er") })
                })
                .collect::<Vec<_>>(),
        ),
        Err(p) => p.into_response(),
    }
}
