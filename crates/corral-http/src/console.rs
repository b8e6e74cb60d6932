//! The gateway's web console at `/`: server-rendered HTML (the template `console.html`, embedded), the
//! entities with their members and live values (server-sent events fed by observing each entity, at
//! `/console/live/NAME`), each entity member's counters and last latency, the multicast groups, the
//! counters, and forms that create, actuate, edit and delete entities. No JavaScript build chain: a few
//! lines inline open the event streams; the page works without them (values then show as they were at
//! load).
//!
//! Owns: rendering and the forms. The forms go through the admin API's code paths (`admin`), so the
//! Entity Manager decides; what happened is said in words: a success on the page the form leads back to
//! (`/?said=…`: what was done, never text from the request), a failure on the page it renders at once, with
//! the refused creation's or edit's input kept in its form. Who may post a form is `rules`' (a form from
//! another site is refused, and with `--http-token-file` the forms are off: a browser form cannot carry the
//! bearer token); a refusal of a form is a page too ([`refused`]), not a problem document.

use super::admin::{actuate_entity, ask, create_entity, entities, entity, observe};
use super::page::{esc, STYLE};
use super::rules::Caller;
use super::watch::Snapshot;
use super::{Extra, Problem, Shared};
use axum::extract::{Extension, Form, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use corral_group::em::{EntityMember, MemberStats};
use corral_group::entity_api::EntityRequest;
use corral_tokio::{Code, ContentFormat};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

const TEMPLATE: &str = include_str!("console.html");

/// The operations a new entity's form proposes.
const DEFAULT_EO: &str = "avg,min,max,lst";

pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(page))
        .route("/console/entities", post(create))
        .route("/console/entities/{name}/actuate", post(actuate))
        .route("/console/entities/{name}/edit", post(edit))
        .route("/console/entities/{name}/delete", post(delete))
        .route("/console/live/{name}", get(live))
}

/// A line the page shows above everything: what a form did, or why it did not.
struct Notice {
    ok: bool,
    text: String,
}

/// The new-entity form's fields, as typed (kept when the creation is refused).
#[derive(Debug, Clone, Default, Deserialize)]
struct Fields {
    #[serde(default)]
    name: String,
    #[serde(default)]
    eo: Option<String>,
    #[serde(default)]
    ect: String,
    #[serde(default)]
    er: String,
}

impl Fields {
    /// The profile the fields describe (members one URI a line or space-separated, operations by commas).
    fn profile(&self, with_ect: bool) -> Value {
        let er: Vec<&str> = self.er.split_whitespace().collect();
        let eo: Vec<&str> = self.eo.as_deref().unwrap_or("").split([',', ' ']).filter(|s| !s.is_empty()).collect();
        let mut profile = serde_json::json!({ "er": er });
        if !eo.is_empty() {
            profile["eo"] = eo.into();
        }
        if with_ect && self.ect.trim() == "multicast" {
            profile["ect"] = "multicast".into();
        }
        profile
    }
}

/// What the page shows besides the entities: a notice, the new-entity form's input, an entity's edit form
/// left open with its input.
#[derive(Default)]
struct View {
    notice: Option<Notice>,
    create: Fields,
    editing: Option<(String, Fields)>,
}

/// `/?said=…`: what a form did, for the page it leads back to. Only names and counts: the sentence is
/// the console's.
#[derive(Debug, Default, Deserialize)]
struct Said {
    said: Option<String>,
    entity: Option<String>,
    changed: Option<usize>,
    of: Option<usize>,
}

impl Said {
    fn words(&self) -> Option<String> {
        let e = self.entity.as_deref().filter(|e| corral_group::em::valid_entity_name(e))?;
        Some(match (self.said.as_deref()?, self.changed, self.of) {
            ("created", _, Some(n)) => format!("Entity {e} created with {n} member{}.", if n == 1 { "" } else { "s" }),
            ("actuated", Some(c), Some(n)) => format!("Sent to {e}: {c} of {n} members changed."),
            ("updated", _, _) => format!("Entity {e} saved."),
            ("deleted", _, _) => format!("Entity {e} deleted."),
            _ => return None,
        })
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
        ("group requests", em(&|e| e.multicast_requests)),
        ("answers to group requests", em(&|e| e.multicast_answers)),
        ("budget / quota refusals", em(&|e| e.budget_refusals + e.quota_refusals)),
    ];
    rows.iter().map(|(k, v)| format!("<dt>{k}</dt><dd>{v}</dd>")).collect()
}

/// Every worker's counters of each entity member, summed (a use may run on any worker).
fn entity_members(snaps: &[Snapshot<Extra>]) -> HashMap<EntityMember, MemberStats> {
    let mut all: HashMap<EntityMember, MemberStats> = HashMap::new();
    for s in snaps {
        let Extra::Em(e) = &s.service else { continue };
        for (k, m) in &e.counters.entity_members {
            let t = all.entry(k.clone()).or_default();
            t.requests += m.requests;
            t.answers += m.answers;
            t.failures += m.failures;
            t.group_requests += m.group_requests;
            t.group_answers += m.group_answers;
            t.last_latency_us = m.last_latency_us.or(t.last_latency_us);
        }
    }
    all
}

/// One member's line: its counters as this entity's member.
fn member_line(s: Option<&MemberStats>) -> String {
    let Some(s) = s else { return "not asked yet".into() };
    let mut parts = vec![format!("{} answers, {} failures", s.answers, s.failures)];
    if s.group_requests > 0 {
        parts.push(format!("{} of {} group requests answered", s.group_answers, s.group_requests));
    }
    if let Some(us) = s.last_latency_us {
        parts.push(format!("last {:.1} ms", us as f64 / 1000.0));
    }
    parts.join(", ")
}

async fn page(State(app): State<Shared>, Query(said): Query<Said>) -> Response {
    let notice = said.words().map(|text| Notice { ok: true, text });
    render(&app, View { notice, ..View::default() }).await
}

async fn render(app: &Shared, view: View) -> Response {
    let snaps = app.window.board.read();
    let members = entity_members(&snaps);
    let (rows, groups, failure) = match entities(app).await {
        Ok(list) => {
            let mut rows = String::new();
            let mut groups = String::new();
            for r in &list {
                let (name, p) = (&r.name, r.profile.as_ref().unwrap_or(&Value::Null));
                rows.push_str(&row(name, &r.ect, p, &members, view.editing.as_ref()));
                if let Some(g) = p["mcstURI"].as_str() {
                    groups.push_str(&format!("<tr><td>{}</td><td>{}</td></tr>", esc(name), esc(g)));
                }
            }
            (rows, groups, None)
        }
        Err(p) => (String::new(), String::new(), Some(Notice { ok: false, text: p.detail })),
    };
    let notice = view.notice.or(failure);
    let coap = app.window.gateway.as_ref().map(|g| g.coap.to_string()).unwrap_or_default();
    let c = &view.create;
    let notice = notice
        .map(|n| {
            let (class, role) = if n.ok { ("notice done", "status") } else { ("notice", "alert") };
            format!("<p class=\"{class}\" role=\"{role}\">{}</p>", esc(&n.text))
        })
        .unwrap_or_default();
    let html = TEMPLATE
        .replace("{{style}}", STYLE)
        .replace("{{verb}}", app.window.verb)
        .replace("{{coap}}", &esc(&coap))
        .replace("{{notice}}", &notice)
        .replace("{{counters}}", &counters(&snaps))
        .replace(
            "{{entities}}",
            if rows.is_empty() { "<tr><td colspan=\"4\">no entities yet</td></tr>" } else { &rows },
        )
        .replace("{{groups}}", if groups.is_empty() { "<tr><td>none</td></tr>" } else { &groups })
        .replace("{{create_name}}", &esc(&c.name))
        .replace("{{create_eo}}", &esc(c.eo.as_deref().unwrap_or(DEFAULT_EO)))
        .replace("{{create_multicast}}", if c.ect.trim() == "multicast" { " selected" } else { "" })
        .replace("{{create_er}}", &esc(&c.er));
    Html(html).into_response()
}

/// An entity's row: name and type, live value, members with their counters, the actuate form, and the
/// edit and delete forms.
fn row(
    name: &str,
    ect: &str,
    p: &Value,
    members: &HashMap<EntityMember, MemberStats>,
    editing: Option<&(String, Fields)>,
) -> String {
    let er: Vec<&str> = p["er"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let ms: String = er
        .iter()
        .map(|m| {
            let s = members.get(&(name.to_string(), m.to_string()));
            format!("<li>{}: {}</li>", esc(m), esc(&member_line(s)))
        })
        .collect();
    let eo = p["eo"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
        .unwrap_or_default();
    // The edit form shows the stored profile, or the input of a refused edit (left open).
    let (open, edit_er, edit_eo) = match editing.filter(|(n, _)| n == name) {
        Some((_, f)) => (" open", f.er.clone(), f.eo.clone().unwrap_or_default()),
        None => ("", er.join("\n"), eo.clone()),
    };
    format!(
        "<tr data-entity=\"{n}\"><td><b>{n}</b><br><span class=\"members\">{ect}, eo {eo}</span></td>\
         <td><output data-live=\"{n}\">…</output></td><td><ul class=\"members\">{ms}</ul>\
         <details{open}><summary>Edit {n}</summary><form class=\"edit\" method=\"post\" action=\"/console/entities/{n}/edit\">\
         <label>Members, one URI a line<br><textarea name=\"er\" rows=\"3\" required>{edit_er}</textarea></label>\
         <label>Operations <input name=\"eo\" value=\"{edit_eo}\"></label> <button>Save</button></form></details></td>\
         <td><form class=\"inline\" method=\"post\" action=\"/console/entities/{n}/actuate\">\
         <input name=\"value\" size=\"6\" aria-label=\"value for {n}\"><button>Send</button></form>\
         <form class=\"inline delete\" method=\"post\" action=\"/console/entities/{n}/delete\" \
         onsubmit=\"return confirm('Delete entity {n}?')\"><button>Delete</button></form></td></tr>",
        n = esc(name),
        ect = esc(ect),
        eo = esc(&eo),
        edit_er = esc(&edit_er),
        edit_eo = esc(&edit_eo),
    )
}

/// A failed form's page: the notice says what was tried and why it failed, in words; `view` keeps the
/// input; the status is the failure's.
async fn failed(app: &Shared, what: &str, r: Result<corral_tokio::Response, Problem>, mut view: View) -> Response {
    let (status, why) = match r {
        Ok(r) => (super::mapping::status_of(r.code), why_not(r.code, &r.payload)),
        Err(p) => (p.status, p.detail),
    };
    view.notice = Some(Notice { ok: false, text: format!("{what} failed: {why}") });
    let mut page = render(app, view).await;
    *page.status_mut() = status;
    page
}

/// The Entity Manager's refusal in words: its report's message and each member that did not succeed (a
/// JSON report), or its diagnostic text.
fn why_not(code: Code, payload: &[u8]) -> String {
    let Ok(doc) = serde_json::from_slice::<Value>(payload) else {
        let text = String::from_utf8_lossy(payload);
        let text = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
        return if text.is_empty() { format!("{code:#}") } else { format!("{text} ({code:#})") };
    };
    let message = doc["message"].as_str().map(|m| m.split_once(": ").map_or(m, |(_, rest)| rest)).unwrap_or("");
    let mut out = format!("{message} ({code:#})");
    for m in doc["members"].as_array().into_iter().flatten() {
        let result = m["result"].as_str().unwrap_or("");
        if !result.starts_with("2.") {
            out.push_str(&format!("; {}: {result}", m["uri"].as_str().unwrap_or("?")));
        }
    }
    out.trim_start_matches(' ').to_string()
}

/// Back to the page with what was done (303).
fn done(said: &str, name: &str, counts: Option<(usize, usize)>) -> Response {
    let mut to = format!("/?said={said}&entity={name}");
    if let Some((changed, of)) = counts {
        to.push_str(&format!("&changed={changed}&of={of}"));
    }
    Redirect::to(&to).into_response()
}

async fn create(State(app): State<Shared>, Form(f): Form<Fields>) -> Response {
    let name = f.name.trim().to_string();
    let profile = f.profile(true);
    let n = profile["er"].as_array().map_or(0, Vec::len);
    let r = create_entity(&app, &name, profile.to_string().as_bytes()).await;
    match r {
        Ok(r) if r.code.is_success() => done("created", &name, Some((n, n))),
        other => failed(&app, &format!("Creating {name}"), other, View { create: f, ..View::default() }).await,
    }
}

async fn actuate(
    State(app): State<Shared>,
    Path(name): Path<String>,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let value = f.get("value").cloned().unwrap_or_default();
    let r = actuate_entity(&app, &name, ContentFormat::TEXT_PLAIN, value.into_bytes()).await;
    match r {
        Ok(r) if r.code.is_success() => {
            let doc: Value = serde_json::from_slice(&r.payload).unwrap_or(Value::Null);
            let results = doc["members"].as_array().map(|m| m.iter().map(|m| m["result"].as_str().unwrap_or("")));
            let of = results.clone().map_or(0, Iterator::count);
            let changed = results.map_or(0, |r| r.filter(|t| t.starts_with("2.")).count());
            done("actuated", &name, Some((changed, of)))
        }
        other => failed(&app, &format!("Sending to {name}"), other, View::default()).await,
    }
}

async fn edit(State(app): State<Shared>, Path(name): Path<String>, Form(f): Form<Fields>) -> Response {
    let r = async {
        let fields = f.profile(false).to_string().into_bytes();
        ask(&app, &EntityRequest::Update { name: entity(&name)?, fields, allow_offline: false }).await
    };
    match r.await {
        Ok(r) if r.code.is_success() => done("updated", &name, None),
        other => {
            failed(&app, &format!("Saving {name}"), other, View { editing: Some((name, f)), ..View::default() }).await
        }
    }
}

async fn delete(State(app): State<Shared>, Path(name): Path<String>) -> Response {
    let r = async { ask(&app, &EntityRequest::Delete { name: entity(&name)? }).await };
    match r.await {
        Ok(r) if r.code.is_success() => done("deleted", &name, None),
        other => failed(&app, &format!("Deleting {name}"), other, View::default()).await,
    }
}

/// The entity observed (its default operation, as text): one server-sent event per notification, within
/// the window's event streams (`bounds`).
async fn live(State(app): State<Shared>, Extension(caller): Extension<Caller>, Path(name): Path<String>) -> Response {
    let r = async {
        let name = entity(&name)?;
        let place = super::hc::place(&app.streams, &caller)?;
        let use_it = EntityRequest::Use { name, query: Vec::new(), accept: Some(ContentFormat::TEXT_PLAIN) };
        let obs = observe(&app, &use_it).await?;
        Ok::<_, Problem>(super::hc::events(obs, place))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actuation_refused_by_members_is_said_in_words() {
        let report = br#"{"entity":"hall","message":"5.04: 1 of 2 members changed","members":[
            {"uri":"coap://127.0.0.2/a/light","result":"2.04 Changed"},
            {"uri":"coap://127.0.0.3/a/light","result":"no response"}]}"#;
        assert_eq!(
            why_not(Code::GATEWAY_TIMEOUT, report),
            "1 of 2 members changed (5.04 Gateway Timeout); coap://127.0.0.3/a/light: no response"
        );
        assert_eq!(why_not(Code::NOT_FOUND, b"no entity hall\n"), "no entity hall (4.04 Not Found)");
        assert_eq!(why_not(Code::NOT_FOUND, b""), "4.04 Not Found");
    }

    #[test]
    fn what_was_done_is_said_from_names_and_counts_only() {
        let said = |q: &str| serde_urlencoded_said(q).words();
        assert_eq!(
            said("said=actuated&entity=hall&changed=2&of=3").as_deref(),
            Some("Sent to hall: 2 of 3 members changed.")
        );
        assert_eq!(
            said("said=created&entity=hall&changed=1&of=1").as_deref(),
            Some("Entity hall created with 1 member.")
        );
        assert_eq!(said("said=deleted&entity=hall").as_deref(), Some("Entity hall deleted."));
        assert_eq!(said("said=deleted&entity=%3Cb%3E"), None, "not an entity name");
        assert_eq!(said("said=pwned&entity=hall"), None);
    }

    fn serde_urlencoded_said(q: &str) -> Said {
        let uri: axum::http::Uri = format!("/?{q}").parse().unwrap();
        Query::<Said>::try_from_uri(&uri).unwrap().0
    }
}
