//! The gateway's web console at `/`: server-rendered HTML (the template `console.html`, embedded), the
//! entities with their members and live values (server-sent events fed by observing each entity, at
//! `/console/live/NAME`), each member's counters and last latency, the multicast groups, the counters,
//! and forms that create and actuate entities. No JavaScript build chain: a few lines inline open the
//! event streams; the page works without them (values then show as they were at load).
//!
//! Owns: rendering and the forms. The forms go through the admin API's code paths (`admin`), so the
//! Entity Manager decides; a form from another origin is refused (its `Origin` must be this listener), and
//! with `--http-token-file` the forms are off (a browser form cannot carry the bearer token).

use super::admin::{actuate_entity, create_entity, entities, entity, Em};
use super::watch::Snapshot;
use super::{Extra, Problem, Shared};
use axum::extract::{Form, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use corral_tokio::{Code, ContentFormat};
use serde_json::Value;
use std::collections::HashMap;

const TEMPLATE: &str = include_str!("console.html");
/// The style of every console page (the gateway's and the proxy's).
pub(super) const STYLE: &str = include_str!("console.css");

pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(page))
        .route("/console/entities", post(create))
        .route("/console/entities/{name}/actuate", post(actuate))
        .route("/console/live/{name}", get(live))
}

/// `s` for HTML text and attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The member's address (`ADDR:PORT`, the key of the Entity Manager's per-member counters) of a member URI.
fn member_key(uri: &str) -> Option<String> {
    let u = corral_tokio::parse_uri(uri).ok()?;
    match u.host {
        corral_tokio::uri::Host::Ip(ip) => Some(std::net::SocketAddr::new(ip, u.port).to_string()),
        _ => None,
    }
}

fn counters(snaps: &[Snapshot<Extra>]) -> String {
    let sum = |f: &dyn Fn(&Snapshot<Extra>) -> u64| snaps.iter().map(f).sum::<u64>();
    let em = |f: &dyn Fn(&corral_group::em::EmStats) -> u64| {
        snaps.iter().map(|s| if let Extra::Em(e) = &s.service { f(&e.counters) } else { 0 }).sum::<u64>()
    };
    let rows = [
        ("datagrams received", sum(&|s| s.stats.datagrams_in)),
        ("requests received", sum(&|s| s.stats.requests_in)),
        ("retransmissions", sum(&|s| s.stats.retransmissions)),
        ("member requests", em(&|e| e.member_requests)),
        ("member answers", em(&|e| e.member_answers)),
        ("member failures", em(&|e| e.member_failures)),
        ("budget / quota refusals", em(&|e| e.budget_refusals + e.quota_refusals)),
    ];
    rows.iter().map(|(k, v)| format!("<dt>{k}</dt><dd>{v}</dd>")).collect()
}

async fn page(State(app): State<Shared>) -> Response {
    render(&app, None).await
}

async fn render(app: &Shared, notice: Option<&str>) -> Response {
    let snaps = app.window.board.read();
    let members: HashMap<String, corral_group::em::MemberStats> = snaps
        .iter()
        .filter_map(|s| if let Extra::Em(e) = &s.service { Some(e.counters.members.clone()) } else { None })
        .flatten()
        .collect();
    let (rows, groups, failure) = match entities(app).await {
        Ok(list) => {
            let mut rows = String::new();
            let mut groups = String::new();
            for (name, ect, p) in &list {
                let er: Vec<&str> =
                    p["er"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
                let ms: String = er
                    .iter()
                    .map(|m| {
                        let s = member_key(m).and_then(|k| members.get(&k).copied());
                        let detail = match s {
                            Some(s) => format!(
                                "{} answers, {} failures{}",
                                s.answers,
                                s.failures,
                                s.last_latency_us
                                    .map(|us| format!(", last {:.1} ms", us as f64 / 1000.0))
                                    .unwrap_or_default()
                            ),
                            None => "not asked yet".into(),
                        };
                        format!("<li>{}: {}</li>", esc(m), esc(&detail))
                    })
                    .collect();
                let eo = p["eo"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
                    .unwrap_or_default();
                rows.push_str(&format!(
                    "<tr data-entity=\"{n}\"><td><b>{n}</b><br><span class=\"members\">{ect}, eo {eo}</span></td>\
                     <td><output data-live=\"{n}\">…</output></td><td><ul class=\"members\">{ms}</ul></td>\
                     <td><form class=\"inline\" method=\"post\" action=\"/console/entities/{n}/actuate\">\
                     <input name=\"value\" size=\"6\" aria-label=\"value for {n}\"><button>Send</button></form></td></tr>",
                    n = esc(name),
                    ect = esc(ect),
                    eo = esc(&eo),
                ));
                if let Some(g) = p["mcstURI"].as_str() {
                    groups.push_str(&format!("<tr><td>{}</td><td>{}</td></tr>", esc(name), esc(g)));
                }
            }
            (rows, groups, None)
        }
        Err(p) => (String::new(), String::new(), Some(p.detail)),
    };
    let notice = notice.map(str::to_string).or(failure);
    finish(app, &snaps, &rows, &groups, notice.as_deref())
}

fn finish(app: &Shared, snaps: &[Snapshot<Extra>], rows: &str, groups: &str, notice: Option<&str>) -> Response {
    let coap = app.window.gateway.as_ref().map(|g| g.coap.to_string()).unwrap_or_default();
    let html = TEMPLATE
        .replace("{{style}}", STYLE)
        .replace("{{verb}}", app.window.verb)
        .replace("{{coap}}", &esc(&coap))
        .replace(
            "{{notice}}",
            &notice.map(|n| format!("<p class=\"notice\" role=\"alert\">{}</p>", esc(n))).unwrap_or_default(),
        )
        .replace("{{counters}}", &counters(snaps))
        .replace("{{entities}}", if rows.is_empty() { "<tr><td colspan=\"4\">no entities yet</td></tr>" } else { rows })
        .replace("{{groups}}", if groups.is_empty() { "<tr><td>none</td></tr>" } else { groups });
    Html(html).into_response()
}

/// After a form: back to the page (303), or the page with the problem.
async fn after(app: &Shared, r: Result<corral_tokio::Response, Problem>) -> Response {
    let problem = match r {
        Ok(r) if r.code.is_success() => return Redirect::to("/").into_response(),
        Ok(r) => Problem::from_coap(r.code, &r.payload),
        Err(p) => p,
    };
    let mut page = render(
        app,
        Some(&format!("{} {}", problem.coap_code.map(|c| format!("{c:#}:")).unwrap_or_default(), problem.detail)),
    )
    .await;
    *page.status_mut() = problem.status;
    page
}

async fn create(State(app): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    let get = |k: &str| f.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let er: Vec<String> = get("er").split_whitespace().map(str::to_string).collect();
    let eo: Vec<String> = get("eo").split([',', ' ']).filter(|s| !s.is_empty()).map(str::to_string).collect();
    let mut profile = serde_json::json!({ "er": er });
    if !eo.is_empty() {
        profile["eo"] = eo.into();
    }
    if get("ect") == "multicast" {
        profile["ect"] = "multicast".into();
    }
    let r = create_entity(&app, &get("name"), profile.to_string().as_bytes()).await;
    after(&app, r).await
}

async fn actuate(
    State(app): State<Shared>,
    Path(name): Path<String>,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let value = f.get("value").cloned().unwrap_or_default();
    let r = actuate_entity(&app, &name, ContentFormat::TEXT_PLAIN, value.into_bytes()).await;
    after(&app, r).await
}

/// The entity observed (its default operation, as text): one server-sent event per notification.
async fn live(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    let r = async {
        let name = entity(&name)?;
        let permit = super::hc::permit(&app.hc_slots)?;
        let obs = Em::new(&app, Code::GET, format!("/em/{name}")).observe().await?;
        Ok::<_, Problem>(super::hc::events(obs, permit))
    };
    match r.await {
        Ok(r) => r,
        Err(p) => {
            // An event stream that says what went wrong, then ends (EventSource would retry a plain error).
            let body = format!("event: error\ndata: {}\n\n", p.detail.replace('\n', " "));
            (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }
    }
}
