//! `corral entity …`: a front end to an Entity Manager gateway. Every verb is one or a few plain CoAP
//! requests of `docs/entity-manager.md` (so `corral put coap://gw/em/room1 …` does the same), with
//! readable output, `--json`, and the exit codes of the client verbs. The requests and the listing are
//! corral-group's `entity_api` (the gateway's admin API asks through it too); this file owns the flags,
//! the lines and the exit codes.
//!
//! | verb | requests |
//! |---|---|
//! | `create NAME MEMBER…` | `PUT /em/NAME` with a JSON profile and If-None-Match (an existing name: 4.12) |
//! | `list` | `GET /em`, then `GET /em/<name>/profile` for each |
//! | `show NAME` | `GET /em/NAME/profile` |
//! | `use NAME` | `GET /em/NAME?eo=…&enr=…` |
//! | `actuate NAME VALUE` | `PUT /em/NAME` with the value |
//! | `update NAME` | `GET /em/NAME/profile`, then `POST /em/NAME/profile` with the changed fields |
//! | `delete NAME` | `DELETE /em/NAME` |
//! | `bench NAME` | `GET /em/NAME` against the same GETs sent to the members directly |

use crate::cli::Verbosity;
use crate::exit::Failure;
use clap::{Args, Subcommand};
use corral_group::entity_api::{self, EntityRequest, EntityRow, ListError};
use corral_group::profile::{Delay, Ect, Emt, Profile, ProfileError, ProfilePatch, Repair};
use corral_tokio::{Client, Code, ContentFormat, Response};
use serde_json::{json, Value as Json};
use std::future::IntoFuture;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub const AFTER_HELP: &str = "\
Examples (a gateway from `corral gateway --testbed 5`):
  corral entity create room1 coap://127.0.0.2/s/t coap://127.0.0.3/s/t \\
      --eo avg,min,max
  corral entity use room1                   # avg: the first operation
  corral entity use room1 --eo lst --enr 1  # the first reading to arrive
  corral entity use room1 --eo max --accept senml+json
  corral entity create lights coap://127.0.0.2/a/light \\
      coap://127.0.0.3/a/light --ect multicast
  corral entity actuate lights on
  corral entity update lights --repair unicast   # silent members: unicast
  corral entity create floor1 /em/room1 /em/room2 --eo avg   # entities nest
  corral entity update room1 --add coap://127.0.0.4/s/t --delay 50ms
  corral entity create hall coap://127.0.0.9/s/t --allow-offline   # not up yet
  corral entity create temps --from-rd 'rt=temperature'   # follows the RD
  corral entity create t2 --from-rd 'rt=temp*' --rd coap://127.0.0.1:5690
  corral entity list
  corral entity show room1 --json
  corral entity delete room1
  corral entity bench room1 --repeat 200    # the EM against direct GETs

`create` never replaces an entity (an existing name: 4.12 Precondition Failed; change it with \
`update`). With --from-rd the members are a Resource Directory's resource lookup \
(RFC 9176) and stay so: the gateway observes the lookup, adds the devices that register and removes \
those that leave or whose registration expires; its observers are told. The directory is --rd, or \
the gateway's own (`corral gateway --rd`); `show` names the lookup. A creation waits at most 20 s for silent members, then answers with each member's \
status; `show` names the members that did not answer their last request.

Operations (--eo): lst avg min max sum count med; the first one listed is the default.
Profile fields: --ect unicast|multicast (at creation only), --emt con|non, --enr N (replies to \
wait for; 1 = anycast), --delay DURATION|auto (between member requests), --timeout DURATION (then \
answer with what arrived), --repair none|unicast (multicast entities: ask the members that stayed \
silent during the multicast window again by unicast CON). Durations take a unit (50ms, 3s); a bare \
number is seconds, as everywhere (the gateway keeps milliseconds). The gateway is \
coap://127.0.0.1 unless --gateway says otherwise; -B (--wait) is how long this command waits for \
it.

A use answers as soon as enr members answered; when fewer did by the entity's timeout, it answers \
with the value over those that did, and names each member that stayed silent or failed on stderr \
(`note: no value from MEMBER: why`; the text answer's `silent:`/`failed:` lines, the JSON answer's \
\"silent\"); with no answer at all, 5.04.

Exit status: 0 for 2.xx; 4 for 4.xx (e.g. a member failed validation); 5 for 5.xx (e.g. 5.04 when \
no member answered); 3 timeout or port unreachable; 2 usage; 1 other. A failed use names each member \
and why on stderr; -v prints the per-member report of other failures.";

#[derive(Args, Debug)]
pub struct EntityArgs {
    /// The gateway: coap://host[:port].
    #[arg(short, long, global = true, value_name = "URI", default_value = "coap://127.0.0.1")]
    pub gateway: String,
    /// How long to wait for the gateway (as -B of the client verbs), e.g. 30, 45s; a bare number is
    /// seconds.
    #[arg(short = 'B', long = "wait", global = true, value_name = "DURATION", default_value = "30",
          value_parser = crate::units::secs(crate::units::Range::positive(crate::units::DAY)))]
    pub wait: f64,
    /// Print the gateway's JSON document instead of the readable form.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Subcommand, Debug)]
pub enum Verb {
    /// Create an entity from member URIs (PUT /em/NAME).
    #[command(after_help = "Examples:
  corral entity create room1 coap://127.0.0.2/s/t coap://127.0.0.3/s/t \\
      --eo avg,min,max
  corral entity create lights coap://127.0.0.2/a/light \\
      coap://127.0.0.3/a/light --ect multicast
  corral entity create floor1 /em/room1 /em/room2 --eo avg --delay auto \\
      --timeout 3s")]
    Create(CreateArgs),
    /// List the gateway's entities (GET /em).
    List,
    /// Show an entity's profile (GET /em/NAME/profile).
    Show { name: String },
    /// Read an entity: one request, every member asked (GET /em/NAME).
    #[command(after_help = "Examples:
  corral entity use room1                    # the default operation, as text
  corral entity use room1 --eo lst --enr 1   # anycast: the first reading
  corral entity use room1 --eo max -A senml+cbor > max.cbor
  corral entity use room1 --json             # {\"entity\":\"room1\",\"v\":21.3,…}")]
    Use(UseArgs),
    /// Send a value to every member (PUT /em/NAME), e.g. `close` to a group of shutters.
    Actuate(ActuateArgs),
    /// Change an entity's members or profile (POST /em/NAME/profile).
    Update(UpdateArgs),
    /// Delete an entity; multicast members leave its group (DELETE /em/NAME).
    Delete { name: String },
    /// Time GET /em/NAME against a client sending the same member GETs itself.
    Bench(BenchArgs),
}

/// The profile fields a use request may also override (all but `eo`, whose form differs, and `ect`): as
/// profile options of create/update, and as URI queries of `use`.
#[derive(Args, Debug, Default)]
pub struct Overrides {
    /// Message type towards the members.
    #[arg(long, value_name = "con|non", value_parser = ["con", "non"])]
    pub emt: Option<String>,
    /// Replies to wait for before answering (1 … members; 1 = anycast).
    #[arg(long, value_name = "N")]
    pub enr: Option<u64>,
    /// Pause between unicast member requests, e.g. 50ms or 1s (a bare number is seconds), or `auto` (seed
    /// 000 Eq. 2).
    #[arg(long, value_name = "DURATION|auto")]
    pub delay: Option<String>,
    /// Longest wait for members, e.g. 3s, 3 or 500ms (a bare number is seconds); the answer then carries
    /// what arrived.
    #[arg(long, value_name = "DURATION", value_parser = crate::units::millis(crate::units::Range::up_to(crate::units::DAY)))]
    pub timeout: Option<u64>,
    /// Multicast entities: ask the members that stayed silent during the window again by unicast CON.
    #[arg(long, value_name = "none|unicast", value_parser = ["none", "unicast"])]
    pub repair: Option<String>,
}

impl Overrides {
    /// The fields given, by their profile names, in their text form (`enr=2`, `delay=auto`): the URI
    /// queries of `use`, and what [`ProfileFields::patch`] reads.
    fn fields(&self) -> Result<Vec<(&'static str, String)>, Failure> {
        let mut out = Vec::new();
        if let Some(emt) = &self.emt {
            out.push(("emt", emt.clone()));
        }
        if let Some(enr) = self.enr {
            out.push(("enr", enr.to_string()));
        }
        if let Some(d) = &self.delay {
            out.push(("delay", delay_text(d)?));
        }
        if let Some(t) = self.timeout {
            out.push(("timeout", t.to_string()));
        }
        if let Some(r) = &self.repair {
            out.push(("repair", r.clone()));
        }
        Ok(out)
    }
}

/// Profile fields, as options.
#[derive(Args, Debug, Default)]
pub struct ProfileFields {
    /// Operations, comma-separated; the first is the default: lst avg min max sum count med.
    #[arg(long, value_name = "OPS")]
    pub eo: Option<String>,
    #[command(flatten)]
    pub overrides: Overrides,
    /// The members follow a Resource Directory: the query of a resource lookup (RFC 9176 §6), e.g.
    /// 'rt=temperature&d=floor1'. The gateway observes the lookup and adds the devices that register and
    /// removes those that leave or expire.
    #[arg(long, value_name = "QUERY")]
    pub from_rd: Option<String>,
    /// The directory --from-rd looks up: coap://HOST[:PORT] [default: the gateway's own, from `corral
    /// gateway --rd`].
    #[arg(long, value_name = "URI")]
    pub rd: Option<String>,
}

impl ProfileFields {
    /// The fields given, read as the EM reads them (corral-group's [`ProfilePatch`]): a value it would
    /// refuse is a usage error here, in its words.
    fn patch(&self) -> Result<ProfilePatch, Failure> {
        let mut patch = ProfilePatch::default();
        let usage = |e: ProfileError| Failure::usage(e.to_string());
        if let Some(eo) = &self.eo {
            let ops: Vec<&str> = eo.split([',', ' ']).filter(|s| !s.is_empty()).collect();
            if ops.is_empty() {
                return Err(Failure::usage("--eo needs at least one operation (lst avg min max sum count med)"));
            }
            patch.set_text("eo", &ops.join(",")).map_err(usage)?;
        }
        for (k, v) in self.overrides.fields()? {
            patch.set_text(k, &v).map_err(usage)?;
        }
        if let Some(q) = &self.from_rd {
            if !corral_group::profile::valid_rd_query(q) {
                return Err(Failure::usage(format!(
                    "--from-rd `{q}`: give a lookup query of name=value pairs joined by & (e.g. 'rt=temperature&d=floor1'), without page or count"
                )));
            }
            patch.set_text("fromRd", q).map_err(usage)?;
        }
        if let Some(u) = &self.rd {
            corral_tokio::parse_uri(u).map_err(|e| Failure::usage(format!("--rd `{u}`: {e}")))?;
            patch.set_text("rd", u).map_err(usage)?;
        }
        Ok(patch)
    }
}

/// `--delay`: a duration (as milliseconds, the profile's unit) or `auto`.
fn delay_text(d: &str) -> Result<String, Failure> {
    if d == "auto" {
        return Ok(d.to_string());
    }
    crate::units::millis(crate::units::Range::up_to(crate::units::DAY))(d)
        .map(|ms| ms.to_string())
        .map_err(|e| Failure::usage(format!("--delay {e}, or `auto`")))
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Entity name: 1-64 of A-Z a-z 0-9 _ . - starting with a letter or digit.
    pub name: String,
    /// Member URIs: coap://ADDR[:PORT]/path, or /em/NAME for an entity of this gateway (none with
    /// --from-rd: the directory gives them).
    #[arg(required_unless_present = "from_rd", conflicts_with = "from_rd", value_name = "MEMBER")]
    pub members: Vec<String>,
    /// unicast (one request per member) or multicast (one group request; members join through /mc).
    #[arg(long, value_name = "unicast|multicast", value_parser = ["unicast", "multicast"])]
    pub ect: Option<String>,
    /// Create the entity even if members do not answer now (unicast entities): `entity show` lists them as
    /// unreachable until they answer.
    #[arg(long)]
    pub allow_offline: bool,
    #[command(flatten)]
    pub fields: ProfileFields,
}

#[derive(Args, Debug)]
pub struct UseArgs {
    pub name: String,
    /// The operation for this request (default: the entity's first).
    #[arg(long, value_name = "OP")]
    pub eo: Option<String>,
    /// For this request only.
    #[command(flatten)]
    pub overrides: Overrides,
    /// Response format: text, json, cbor, senml+json, senml+cbor (or a number).
    #[arg(short = 'A', long, value_name = "FMT", value_parser = parse_format)]
    pub accept: Option<ContentFormat>,
}

#[derive(Args, Debug)]
pub struct ActuateArgs {
    pub name: String,
    /// The value every member gets, as text (e.g. on, off, close, 40).
    #[arg(required_unless_present = "payload")]
    pub value: Option<String>,
    /// The value, as the client verbs take it (`-e on`: `corral put`'s and coap-client's habit).
    #[arg(short = 'e', long = "payload", value_name = "VALUE", conflicts_with = "value")]
    pub payload: Option<String>,
    /// POST instead of PUT.
    #[arg(long)]
    pub post: bool,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    pub name: String,
    /// Add a member (repeatable).
    #[arg(long, value_name = "MEMBER")]
    pub add: Vec<String>,
    /// Remove a member (repeatable).
    #[arg(long, value_name = "MEMBER")]
    pub remove: Vec<String>,
    /// Accept added members that do not answer now (unicast entities; see `create --allow-offline`).
    #[arg(long)]
    pub allow_offline: bool,
    /// Not a change an entity takes: `ect` is chosen at creation (the gateway answers 4.09). Accepted here
    /// only to say what to do instead of clap's "did you mean --emt".
    #[arg(long, hide = true, value_name = "unicast|multicast")]
    pub ect: Option<String>,
    #[command(flatten)]
    pub fields: ProfileFields,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    pub name: String,
    /// Measured repetitions of each of the two ways.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repeat: u32,
    /// Unmeasured repetitions first.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub warmup: u32,
    /// The operation asked of the EM (the members are read the same way either way).
    #[arg(long, value_name = "OP", default_value = "avg")]
    pub eo: String,
}

fn parse_format(s: &str) -> Result<ContentFormat, String> {
    ContentFormat::parse(s).ok_or_else(|| format!("unknown content format `{s}` (e.g. text, json, cbor, senml+json)"))
}

/// Entity names as the EM accepts them; checked here so that a typo is a usage error, not a 4.04.
fn check_name(name: &str) -> Result<(), Failure> {
    if corral_group::em::valid_entity_name(name) {
        Ok(())
    } else {
        Err(Failure::usage(format!(
            "`{name}` is not an entity name (1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit)"
        )))
    }
}

/// The gateway and a client that can reach it.
struct Gateway {
    base: String,
    client: Client,
    wait: f64,
    v: Verbosity,
}

impl Gateway {
    async fn connect(args: &EntityArgs, v: Verbosity) -> Result<Gateway, Failure> {
        let uri = corral_tokio::parse_uri(&args.gateway)
            .map_err(|e| Failure::usage(format!("--gateway: invalid URI: {e}")))?;
        if !uri.path.is_empty() || !uri.query.is_empty() {
            return Err(Failure::usage(format!(
                "--gateway `{}`: give the gateway only (coap://host[:port]), without a path",
                args.gateway
            )));
        }
        let base = args.gateway.trim_end_matches('/').to_string();
        let client = Client::builder()
            .timeout(Duration::from_secs_f64(args.wait))
            .bind_reaching(&uri.host, 0)
            .await
            .map_err(|(_, e)| Failure::other(format!("cannot open a UDP socket: {e}")))?;
        Ok(Gateway { base, client, wait: args.wait, v })
    }

    /// `r`, to this gateway.
    fn ask(&self, r: EntityRequest) -> corral_tokio::RequestBuilder {
        self.client.request_with(&self.base, r.to_request())
    }

    /// `timeout=MS` for a use or an actuation of entity `name`, when this command would stop waiting
    /// before the gateway's own bound (the entity's `timeout`, or CoAP's MAX_TRANSMIT_WAIT, 93 s, for a
    /// silent member): the gateway then answers with what arrived a little before the command gives up,
    /// instead of after it, unseen (issue 27). An entity whose own timeout comes sooner keeps it: the query
    /// would override it, and the answer would wait for this command's patience instead (issue 46).
    async fn patience(&self, name: &str) -> Result<Option<String>, Failure> {
        let ms = (self.wait * 1000.0 - 1500.0).max(1000.0) as u64;
        if ms >= 93_000 {
            return Ok(None);
        }
        let r = self.profile(name).await?;
        let own = match r.code {
            Code::CONTENT => profile_of(name, &parse_json(&r)?)?.timeout,
            // No such entity, or not allowed: the use itself says so.
            _ => None,
        };
        Ok(own.is_none_or(|t| t > ms).then(|| format!("timeout={ms}")))
    }

    /// Sends a request; on a terminal, one still running after two seconds (a multicast entity's window,
    /// a paced fan-out, a creation waiting for its members) shows a line of progress, as the client verbs do.
    async fn send(&self, req: corral_tokio::RequestBuilder) -> Result<Response, Failure> {
        crate::cli::output::send_showing_progress(req, self.v)
            .await
            .map(|(_, r)| r)
            .map_err(|e| Failure::from_client(e, self.wait))
    }

    /// A response that must be a success; an error response becomes the failure (and, with `-v`, its
    /// per-member lines go to stderr first).
    fn check(r: Response, v: Verbosity) -> Result<Response, Failure> {
        Gateway::check_showing(r, v.verbose > 0)
    }

    /// [`Gateway::check`], with the per-member lines of an error shown when `lines` says so: once each,
    /// before the one error line.
    fn check_showing(r: Response, lines: bool) -> Result<Response, Failure> {
        if r.code.is_error() {
            return Err(Gateway::refusal(&r, lines));
        }
        Ok(r)
    }

    /// The failure an error response is: its first line, the rest shown first when `lines` says so.
    fn refusal(r: &Response, lines: bool) -> Failure {
        let text = r.payload_text();
        let mut rest = text.lines();
        let first = rest.next().unwrap_or("");
        if lines {
            for l in rest {
                say!("  {l}");
            }
        }
        Failure::from_response(r.code, first.as_bytes())
    }

    async fn profile(&self, name: &str) -> Result<Response, Failure> {
        self.send(self.ask(EntityRequest::Profile { name: name.to_string() })).await
    }
}

fn parse_json(r: &Response) -> Result<Json, Failure> {
    serde_json::from_slice(&r.payload)
        .map_err(|e| Failure::other(format!("the gateway answered {:#} with a payload that is not JSON ({e})", r.code)))
}

fn print_json(j: &Json) {
    out!("{j}");
}

pub fn run(args: EntityArgs, v: Verbosity) -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async {
        let gw = Gateway::connect(&args, v).await?;
        match &args.verb {
            Verb::Create(a) => create(&gw, a, args.json, v).await,
            Verb::List => list(&gw, args.json, v).await,
            Verb::Show { name } => show(&gw, name, args.json, v).await,
            Verb::Use(a) => use_entity(&gw, a, args.json, v).await,
            Verb::Actuate(a) => actuate(&gw, a, args.json, v).await,
            Verb::Update(a) => update(&gw, a, args.json, v).await,
            Verb::Delete { name } => delete(&gw, name, args.json, v).await,
            Verb::Bench(a) => bench(&gw, a, args.json, v).await,
        }
    })
}

async fn create(gw: &Gateway, a: &CreateArgs, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(&a.name)?;
    let mut patch = a.fields.patch()?;
    if patch.from_rd.is_none() {
        patch.er = Some(a.members.clone());
    }
    patch.ect = a.ect.as_deref().and_then(Ect::parse);
    if !v.quiet && !as_json && a.ect.as_deref() == Some("multicast") && patch.from_rd.is_none() {
        say!("creating {}: asking {} member(s) to join a multicast group…", a.name, a.members.len());
    }
    // An existing entity is refused (4.12), never replaced.
    let profile = patch.to_json().to_string().into_bytes();
    let req = gw.ask(EntityRequest::Create { name: a.name.clone(), profile, allow_offline: a.allow_offline });
    let r = Gateway::check(gw.send(req).await?, v)?;
    let report = parse_json(&r)?;
    if as_json {
        print_json(&report);
        return Ok(());
    }
    if v.quiet {
        return Ok(()); // created: the exit status says it
    }
    out!("created {}: {}", a.name, summary(&report["profile"]));
    print_members(&report);
    Ok(())
}

/// The EM's profile document of entity `name`, read as corral-group reads it.
fn profile_of(name: &str, doc: &Json) -> Result<Profile, Failure> {
    Profile::from_json(doc).map_err(|e| Failure::other(format!("the gateway's profile of {name} is not one: {e}")))
}

/// `unicast, 3 members, eo avg min max` / `multicast coap://239.255.89.1/s/t, 5 members, …`.
fn summary(doc: &Json) -> String {
    let p = match Profile::from_json(doc) {
        Ok(p) => p,
        Err(e) => return format!("(a profile corral cannot read: {e})"),
    };
    let n = p.er.len();
    let eo: Vec<&str> = p.eo.iter().map(|o| o.as_str()).collect();
    let mut s = match &p.mcst_uri {
        Some(g) => format!("multicast {g}"),
        None => p.ect.as_str().to_string(),
    };
    s.push_str(&format!(", {n} member(s), eo {}", eo.join(" ")));
    if p.enr_resolved() != n {
        s.push_str(&format!(", enr {}", p.enr_resolved()));
    }
    match p.delay {
        Delay::Millis(0) => {}
        Delay::Millis(d) => s.push_str(&format!(", delay {d} ms")),
        Delay::Auto => s.push_str(", delay auto"),
    }
    if let Some(t) = p.timeout {
        s.push_str(&format!(", timeout {t} ms"));
    }
    if p.repair == Repair::Unicast {
        s.push_str(", unicast repair");
    }
    if p.emt == Emt::Non && p.ect != Ect::Multicast {
        s.push_str(", NON");
    }
    if let Some(q) = &p.from_rd {
        s.push_str(&format!(", members from the directory ({q})"));
    }
    s
}

/// The per-member lines of a report: `  <uri>  validate: 2.05 Content; join: 2.04 Changed`.
fn print_members(report: &Json) {
    let Some(members) = report["members"].as_array() else { return };
    let width = members.iter().filter_map(|m| m["uri"].as_str()).map(str::len).max().unwrap_or(0);
    for m in members {
        let Some(o) = m.as_object() else { continue };
        let uri = o.get("uri").and_then(Json::as_str).unwrap_or("?");
        let steps: Vec<String> =
            o.iter().filter(|(k, _)| *k != "uri").map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or(""))).collect();
        out!("  {uri:<width$}  {}", steps.join("; "));
    }
}

async fn list(gw: &Gateway, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    let rows = entity_api::list(|r| gw.send(gw.ask(r))).await.map_err(|e| match e {
        ListError::Send(f) => f,
        ListError::Refused(r) => Gateway::refusal(&r, false),
        ListError::NotLinkFormat(e) => Failure::other(format!("the gateway's entity list is not link-format: {e}")),
        _ => Failure::other("the gateway's entity list could not be read"),
    })?;
    if as_json {
        print_json(&Json::Array(rows.iter().map(EntityRow::to_json).collect()));
        return Ok(());
    }
    if rows.is_empty() {
        if !v.quiet {
            say!("no entities (create one with `corral entity create NAME MEMBER…`)");
        }
        return Ok(());
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    out!("{:<width$}  SUMMARY", "NAME");
    for r in &rows {
        let s = r.profile.as_ref().map_or_else(|| r.ect.clone(), summary);
        out!("{:<width$}  {s}", r.name);
    }
    Ok(())
}

async fn show(gw: &Gateway, name: &str, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(name)?;
    let r = Gateway::check(gw.profile(name).await?, v)?;
    let p = parse_json(&r)?;
    if as_json {
        print_json(&json!({"name": name, "profile": p}));
        return Ok(());
    }
    let profile = profile_of(name, &p)?;
    let eo: Vec<&str> = profile.eo.iter().map(|o| o.as_str()).collect();
    out!("{name}");
    out!("  ect      {}", profile.ect.as_str());
    if let Some(g) = &profile.mcst_uri {
        out!("  mcstURI  {g}");
    }
    out!("  emt      {}", profile.emt.as_str());
    out!("  enr      {} of {} member(s)", profile.enr_resolved(), profile.er.len());
    out!("  eo       {} (default {})", eo.join(" "), profile.default_op());
    match profile.delay {
        Delay::Auto => out!("  delay    auto"),
        Delay::Millis(d) => out!("  delay    {d} ms"),
    }
    match profile.timeout {
        Some(t) => out!("  timeout  {t} ms"),
        None => out!("  timeout  none (until every member answered or CoAP gave up)"),
    }
    if profile.repair != Repair::None {
        out!("  repair   {}", profile.repair.as_str());
    }
    match &profile.from_rd {
        Some(q) => {
            let rd = profile.rd.as_deref().unwrap_or("the gateway's own directory");
            out!("  fromRd   {q} (lookup at {rd})");
            if let Some(note) = p["rdNote"].as_str() {
                out!("  note     {note}");
            }
            out!("  members (from the directory):");
            if profile.er.is_empty() {
                out!("    none yet: no resource in the directory matches");
            }
        }
        None => out!("  members:"),
    }
    for m in &profile.er {
        match p["unreachable"][m.as_str()].as_str() {
            // `unreachable (ICMP)` says it already: not `unreachable: unreachable (ICMP)`.
            Some(why) if why.starts_with("unreachable") => out!("    {m}  ({why})"),
            Some(why) => out!("    {m}  (unreachable: {why})"),
            None => out!("    {m}"),
        }
    }
    Ok(())
}

async fn use_entity(gw: &Gateway, a: &UseArgs, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(&a.name)?;
    let mut query = Vec::new();
    if let Some(eo) = &a.eo {
        query.push(format!("eo={eo}"));
    }
    for (k, v) in a.overrides.fields()? {
        query.push(format!("{k}={v}"));
    }
    if a.overrides.timeout.is_none() {
        query.extend(gw.patience(&a.name).await?);
    }
    let accept = a.accept.or(as_json.then_some(ContentFormat::JSON));
    let r = gw.send(gw.ask(EntityRequest::Use { name: a.name.clone(), query, accept })).await?;
    // 5.04/5.02 name each member without a value (and carry what did arrive): shown without -v, since
    // they say what to look at.
    let r = Gateway::check_showing(r, !v.quiet)?;
    // The members that gave no value: lines after the text answer's values (which stay on stdout, so that
    // `$(corral entity use room1)` is the number), or the JSON/CBOR document's `silent`.
    let text = accept.is_none_or(|c| c == ContentFormat::TEXT_PLAIN);
    let (payload, gaps) = if text { split_gaps(&r.payload) } else { (&r.payload[..], silent_of(&r, accept)) };
    if !v.quiet {
        for (member, why) in &gaps {
            say!("note: no value from {member}: {why}");
        }
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(payload);
    let binary = accept.is_some_and(|c| matches!(c.0, 42 | 60 | 112));
    if !payload.ends_with(b"\n") && (stdout.is_terminal() || !binary) {
        let _ = stdout.write_all(b"\n");
    }
    let _ = stdout.flush();
    Ok(())
}

/// A text answer's values, and the members it names after them (corral-group's `UseResult::to_text`:
/// `silent: <member> (<why>)`, `failed: <member> (<why>)`), as (member, why).
fn split_gaps(payload: &[u8]) -> (&[u8], Vec<(String, String)>) {
    let Ok(text) = std::str::from_utf8(payload) else { return (payload, Vec::new()) };
    let gap = |line: &str| {
        let rest = line.strip_prefix("silent: ").or_else(|| line.strip_prefix("failed: "))?;
        let (member, why) = rest.split_once(" (")?;
        Some((member.to_string(), why.strip_suffix(')')?.to_string()))
    };
    // The lines that name members come last: take them from the end.
    let (mut values, mut gaps) = (text.trim_end_matches('\n'), Vec::new());
    while let Some((head, last)) = Some(values.rsplit_once('\n').unwrap_or(("", values))).filter(|(_, l)| !l.is_empty())
    {
        let Some(g) = gap(last) else { break };
        gaps.push(g);
        values = head;
    }
    gaps.reverse();
    if gaps.is_empty() {
        return (payload, gaps);
    }
    (values.as_bytes(), gaps)
}

/// The silent members a JSON answer names (`silent`, with the reason from `errors`). CBOR and SenML go
/// to stdout as they came, for programs.
fn silent_of(r: &Response, accept: Option<ContentFormat>) -> Vec<(String, String)> {
    let doc = match accept {
        Some(ContentFormat::JSON) => serde_json::from_slice::<Json>(&r.payload).unwrap_or(Json::Null),
        _ => return Vec::new(),
    };
    let why = |m: &str| {
        let errors = doc["errors"].as_array().into_iter().flatten();
        errors.filter(|e| e["m"] == m).find_map(|e| e["error"].as_str()).unwrap_or("no answer").to_string()
    };
    let silent = doc["silent"].as_array().into_iter().flatten().filter_map(Json::as_str);
    silent.map(|m| (m.to_string(), why(m))).collect()
}

async fn actuate(gw: &Gateway, a: &ActuateArgs, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(&a.name)?;
    let query = gw.patience(&a.name).await?.into_iter().collect();
    let value = a.value.clone().or_else(|| a.payload.clone()).unwrap_or_default().into_bytes();
    let format = ContentFormat::TEXT_PLAIN;
    let r =
        gw.send(gw.ask(EntityRequest::Actuate { name: a.name.clone(), query, format, value, post: a.post })).await?;
    let report = serde_json::from_slice::<Json>(&r.payload).ok();
    if as_json {
        if let Some(j) = &report {
            print_json(j);
        }
    } else if let Some(j) = report.as_ref().filter(|_| !v.quiet || r.code.is_error()) {
        // -q: the per-member results of a failure only (which members did not act).
        if let Some(m) = j["message"].as_str().filter(|_| !v.quiet) {
            out!("{m}");
        }
        print_members(j);
    }
    if r.code.is_error() {
        let first = report
            .as_ref()
            .and_then(|j| j["message"].as_str().map(String::from))
            .unwrap_or_else(|| r.payload_text().lines().next().unwrap_or("").to_string());
        return Err(Failure::from_response(r.code, first.as_bytes()));
    }
    Ok(())
}

async fn update(gw: &Gateway, a: &UpdateArgs, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(&a.name)?;
    if let Some(ect) = &a.ect {
        return Err(Failure::usage(format!(
            "--ect is chosen when an entity is created and cannot change (seed 000): delete {0} and create it \
             again with --ect {ect} (`corral entity show {0}` lists its members)",
            a.name
        )));
    }
    let mut patch = a.fields.patch()?;
    if !a.add.is_empty() || !a.remove.is_empty() {
        let mut er = profile_of(&a.name, &parse_json(&Gateway::check(gw.profile(&a.name).await?, v)?)?)?.er;
        for r in &a.remove {
            let before = er.len();
            er.retain(|m| m != r);
            if er.len() == before {
                return Err(Failure::usage(format!("--remove {r}: not a member of {}", a.name)));
            }
        }
        for m in &a.add {
            if !er.contains(m) {
                er.push(m.clone());
            }
        }
        patch.er = Some(er);
    }
    if patch == ProfilePatch::default() {
        return Err(Failure::usage("nothing to change: give --add, --remove or a profile field (--eo, --enr, …)"));
    }
    let fields = patch.to_json().to_string().into_bytes();
    let req = gw.ask(EntityRequest::Update { name: a.name.clone(), fields, allow_offline: a.allow_offline });
    let r = Gateway::check(gw.send(req).await?, v)?;
    let report = parse_json(&r)?;
    if as_json {
        print_json(&report);
        return Ok(());
    }
    if v.quiet {
        return Ok(());
    }
    out!("updated {}: {}", a.name, summary(&report["profile"]));
    print_members(&report);
    Ok(())
}

async fn delete(gw: &Gateway, name: &str, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(name)?;
    let r = Gateway::check(gw.send(gw.ask(EntityRequest::Delete { name: name.to_string() })).await?, v)?;
    let report = serde_json::from_slice::<Json>(&r.payload).unwrap_or_else(|_| json!({ "entity": name }));
    if as_json {
        print_json(&report);
        return Ok(());
    }
    if v.quiet {
        return Ok(());
    }
    out!("deleted {name}");
    print_members(&report);
    Ok(())
}

// ------------------------------------------------------------------------------------------------------
// bench
// ------------------------------------------------------------------------------------------------------

/// Milliseconds at a quantile of sorted samples (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

async fn bench(gw: &Gateway, a: &BenchArgs, as_json: bool, v: Verbosity) -> Result<(), Failure> {
    check_name(&a.name)?;
    let p = profile_of(&a.name, &parse_json(&Gateway::check(gw.profile(&a.name).await?, v)?)?)?;
    if p.ect == Ect::Multicast {
        return Err(Failure::usage(format!("{} is a multicast entity: bench compares unicast fan-outs", a.name)));
    }
    let members = p.er;
    if members.iter().any(|m| !m.starts_with("coap://")) {
        return Err(Failure::usage("bench needs members that are coap:// URIs (no nested entities)"));
    }
    let em_uri = format!("{}/em/{}?eo={}&delay=0", gw.base, a.name, a.eo);
    let query = vec![format!("eo={}", a.eo), "delay=0".to_string()];
    let use_it = || EntityRequest::Use { name: a.name.clone(), query: query.clone(), accept: None };
    // The direct client: its own socket, NSTART = 1 per member and all members at once, as the EM does.
    let direct = Client::builder()
        .timeout(Duration::from_secs_f64(gw.wait))
        .bind("0.0.0.0:0")
        .await
        .map_err(|e| Failure::other(format!("cannot open a UDP socket: {e}")))?;
    let n = members.len();
    let total = a.warmup + a.repeat;
    let (mut em_ms, mut direct_ms) = (Vec::new(), Vec::new());
    let mut last_progress = Instant::now();
    for i in 0..total {
        // Alternate which goes first so that neither always runs on a warmer cache.
        for pass in 0..2 {
            let em_turn = (pass == 0) == (i % 2 == 0);
            let t0 = Instant::now();
            if em_turn {
                let r = gw.send(gw.ask(use_it())).await?;
                if r.code != Code::CONTENT {
                    return Err(Failure::from_response(r.code, &r.payload));
                }
            } else {
                let mut set = tokio::task::JoinSet::new();
                for m in &members {
                    let req = direct.get(m);
                    set.spawn(req.into_future());
                }
                while let Some(r) = set.join_next().await {
                    match r {
                        Ok(Ok(resp)) if resp.code == Code::CONTENT => {}
                        Ok(Ok(resp)) => return Err(Failure::from_response(resp.code, &resp.payload)),
                        Ok(Err(e)) => return Err(Failure::from_client(e, gw.wait)),
                        Err(e) => return Err(Failure::other(format!("request task failed: {e}"))),
                    }
                }
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            if i >= a.warmup {
                if em_turn { &mut em_ms } else { &mut direct_ms }.push(ms);
            }
        }
        if !v.quiet && !as_json && last_progress.elapsed() >= Duration::from_secs(1) {
            say!("  {}/{} repetitions", i + 1, total);
            last_progress = Instant::now();
        }
    }
    em_ms.sort_by(f64::total_cmp);
    direct_ms.sort_by(f64::total_cmp);
    let (em_med, em_p99) = (quantile(&em_ms, 0.5), quantile(&em_ms, 0.99));
    let (d_med, d_p99) = (quantile(&direct_ms, 0.5), quantile(&direct_ms, 0.99));
    let per_member_us = (em_med - d_med) * 1e3 / n as f64;
    // Milliseconds from Instant differences: microseconds are what they resolve.
    let ms = |v: f64| crate::output::rounded(v, 3);
    if as_json {
        print_json(&json!({
            "entity": a.name, "members": n, "repetitions": a.repeat, "eo": a.eo,
            "em_ms": {"median": ms(em_med), "p99": ms(em_p99), "min": em_ms.first().map(|v| ms(*v)),
                      "max": em_ms.last().map(|v| ms(*v))},
            "direct_ms": {"median": ms(d_med), "p99": ms(d_p99), "min": direct_ms.first().map(|v| ms(*v)),
                          "max": direct_ms.last().map(|v| ms(*v))},
            "overhead_per_member_us": crate::output::rounded(per_member_us, 1),
        }));
        return Ok(());
    }
    out!("{} member(s), {} repetitions each (after {} warm-up), eo={}", n, a.repeat, a.warmup, a.eo);
    out!("  via the EM   GET {em_uri}: median {em_med:.3} ms, p99 {em_p99:.3} ms");
    out!("  direct       {n} concurrent GETs, NSTART=1 per member: median {d_med:.3} ms, p99 {d_p99:.3} ms");
    out!(
        "  EM overhead  {} ms per request, {} µs per member (medians)",
        crate::output::fixed(em_med - d_med, 3),
        crate::output::fixed(per_member_us, 1)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_fields() {
        for ok in ["room1", "a", "Floor-2.b_c"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a/b", "ä", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        let f = ProfileFields {
            eo: Some("avg,min max".into()),
            overrides: Overrides { enr: Some(2), delay: Some("auto".into()), ..Overrides::default() },
            ..ProfileFields::default()
        };
        assert_eq!(f.patch().unwrap().to_json(), json!({"eo": ["avg", "min", "max"], "enr": 2, "delay": "auto"}));
        assert!(delay_text("soon").is_err());
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.99), 4.0);
    }
}
