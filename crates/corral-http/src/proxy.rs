//! The proxy's side of the window (`corral proxy --http`): its status, FIB and cache as JSON, and a
//! console page at `/` with the counters, the next hops, the cache and a purge button. Each is the
//! proxy's own CoAP resource asked through corral-tokio's client from this machine, so the HTTP side reads
//! what a CoAP client on this machine reads and the proxy service decides (the cache listing and the
//! purge are refused to anyone else by the service itself).
//!
//! | HTTP | CoAP |
//! |---|---|
//! | `GET /api/proxy` | `GET /proxy` (counters, cache and table sizes) |
//! | `GET /api/proxy/fib` | `GET /proxy/fib` (host names, rules, destination policy) |
//! | `GET /api/proxy/cache` | `GET /proxy/cache` (the most recently used entries) |
//! | `DELETE /api/proxy/cache` | `DELETE /proxy/cache` (purge) |
//!
//! Owns: that mapping, its OpenAPI document (`openapi-proxy.json`, at `/api/openapi.json`) and the page. Never: a cache or FIB of its own.

use super::mapping::response_of;
use super::page::{esc, STYLE};
use super::{Problem, Shared};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use corral_tokio::uri::base_uri;
use corral_tokio::{Code, ContentFormat};
use serde_json::Value;

const TEMPLATE: &str = include_str!("console-proxy.html");

/// The OpenAPI 3.1 document of the proxy's API, served at `/api/openapi.json`.
const OPENAPI: &str = include_str!("openapi-proxy.json");

pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(page))
        .route(
            "/api/openapi.json",
            get(|| async { ([(axum::http::header::CONTENT_TYPE, "application/json")], OPENAPI).into_response() }),
        )
        .route("/api/proxy", get(|State(app): State<Shared>| async move { reply(ask(&app, Code::GET, "").await) }))
        .route(
            "/api/proxy/fib",
            get(|State(app): State<Shared>| async move { reply(ask(&app, Code::GET, "/fib").await) }),
        )
        .route(
            "/api/proxy/cache",
            get(|State(app): State<Shared>| async move { reply(ask(&app, Code::GET, "/cache").await) }).delete(
                |State(app): State<Shared>| async move {
                    match ask(&app, Code::DELETE, "/cache").await {
                        Ok(r) if r.code.is_success() => StatusCode::NO_CONTENT.into_response(),
                        other => reply(other),
                    }
                },
            ),
        )
        .route("/console/proxy/cache/purge", post(purge))
}

/// A request to the proxy's own `/proxy{sub}`.
async fn ask(app: &Shared, method: Code, sub: &str) -> Result<corral_tokio::Response, Problem> {
    let (Some(side), Some(client)) = (app.window.proxy.as_ref(), app.client.as_ref()) else {
        return Err(Problem::new(StatusCode::NOT_FOUND, "no proxy here"));
    };
    let uri = format!("{}/proxy{sub}", base_uri(side.coap));
    client
        .request(method, &uri)
        .to(side.coap)
        .accept(ContentFormat::JSON)
        .send()
        .await
        .map_err(|e| Problem::new(StatusCode::BAD_GATEWAY, format!("the proxy's CoAP endpoint did not answer: {e}")))
}

fn reply(r: Result<corral_tokio::Response, Problem>) -> Response {
    match r {
        Ok(r) => response_of(&r),
        Err(p) => p.into_response(),
    }
}

/// The JSON of `/proxy{sub}`, or the problem of getting it.
async fn json(app: &Shared, sub: &str) -> Result<Value, Problem> {
    let r = ask(app, Code::GET, sub).await?;
    if !r.code.is_success() {
        return Err(Problem::from_coap(r.code, &r.payload));
    }
    serde_json::from_slice(&r.payload)
        .map_err(|e| Problem::new(StatusCode::BAD_GATEWAY, format!("the proxy's answer is not JSON: {e}")))
}

async fn purge(State(app): State<Shared>) -> Response {
    match ask(&app, Code::DELETE, "/cache").await {
        Ok(r) if r.code.is_success() => Redirect::to("/").into_response(),
        Ok(r) => render(&app, Some(&Problem::from_coap(r.code, &r.payload).detail)).await,
        Err(p) => render(&app, Some(&p.detail)).await,
    }
}

async fn page(State(app): State<Shared>) -> Response {
    render(&app, None).await
}

fn rows(cells: impl Iterator<Item = Vec<String>>) -> String {
    cells
        .map(|c| format!("<tr>{}</tr>", c.iter().map(|v| format!("<td>{}</td>", esc(v))).collect::<String>()))
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}

async fn render(app: &Shared, notice: Option<&str>) -> Response {
    let (status, fib, cache) = (json(app, "").await, json(app, "/fib").await, json(app, "/cache").await);
    let mut failures: Vec<String> = Vec::new();
    let mut counters = String::new();
    let mut hops = String::new();
    match &status {
        Ok(s) => {
            let st = &s["stats"];
            for (label, key) in [
                ("requests", "requests"),
                ("cache hits", "hits"),
                ("cache misses", "misses"),
                ("aggregated", "aggregated"),
                ("refused", "refused"),
                ("overloaded", "overloaded"),
            ] {
                counters.push_str(&format!("<dt>{label}</dt><dd>{}</dd>", esc(&text(&st[key]))));
            }
            counters.push_str(&format!(
                "<dt>pending upstream</dt><dd>{}</dd><dt>observations</dt><dd>{}</dd>",
                esc(&text(&s["pending"])),
                esc(&text(&s["observations"]))
            ));
            if let Some(per) = st["per_hop"].as_object() {
                hops = rows(per.iter().map(|(hop, h)| vec![hop.clone(), text(&h["requests"])]));
            }
        }
        Err(p) => failures.push(p.detail.clone()),
    }
    let rules = match &fib {
        Ok(f) => rows(f["rules"].as_array().into_iter().flatten().map(|r| {
            let next: Vec<String> = r["next"].as_array().into_iter().flatten().map(|n| text(&n["uri"])).collect();
            vec![text(&r["match"]), next.join(", ")]
        })),
        Err(p) => {
            failures.push(p.detail.clone());
            String::new()
        }
    };
    let (summary, entries) = match &cache {
        Ok(c) => (
            format!("{} entries, {} bytes", text(&c["entries"]), text(&c["bytes"])),
            rows(c["listed"].as_array().into_iter().flatten().map(|e| {
                let fresh = e["fresh_s"].as_u64().unwrap_or(0);
                let cf = e["content_format"].as_u64().map(|n| ContentFormat(n as u16).to_string()).unwrap_or_default();
                let state = if fresh > 0 { format!("fresh {fresh} s") } else { "stale (ETag kept)".into() };
                vec![text(&e["target"]), cf, text(&e["bytes"]), state]
            })),
        ),
        Err(p) => {
            failures.push(p.detail.clone());
            (String::new(), String::new())
        }
    };
    let notice = notice.map(str::to_string).or_else(|| (!failures.is_empty()).then(|| failures.join("; ")));
    let coap = app.window.proxy.as_ref().map(|p| p.coap.to_string()).unwrap_or_default();
    let or_none =
        |s: String, cols: usize| if s.is_empty() { format!("<tr><td colspan=\"{cols}\">none</td></tr>") } else { s };
    let html = TEMPLATE
        .replace("{{style}}", STYLE)
        .replace("{{coap}}", &esc(&coap))
        .replace(
            "{{notice}}",
            &notice.map(|n| format!("<p class=\"notice\" role=\"alert\">{}</p>", esc(&n))).unwrap_or_default(),
        )
        .replace("{{counters}}", &counters)
        .replace("{{hops}}", &or_none(hops, 2))
        .replace("{{rules}}", &or_none(rules, 2))
        .replace("{{cache_summary}}", &esc(&summary))
        .replace("{{cache}}", &or_none(entries, 4));
    Html(html).into_response()
}
