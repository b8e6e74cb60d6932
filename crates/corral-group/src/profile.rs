//! Entity profiles (seed 000 §2.3.1): the fields `er emt ect enr eo delay timeout mcstURI` (and `repair`,
//! beyond the paper), their
//! defaults, the three ways a client writes them (JSON, CBOR, link-format member list plus URI queries),
//! the per-request overrides of a use request, and the profile document the EM answers with.
//!
//! Owns: syntax and per-field validity. Must never: look at the network or the store — whether members
//! answer, cycles and multicast membership are the Entity Manager's business.

use serde_json::{Map, Value as Json};
use std::fmt;
use std::time::Duration as StdDuration;

/// An entity operation (`eo`): how member replies combine into one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Every reply, one record per member.
    Lst,
    Avg,
    Min,
    Max,
    /// *(decision)* The sum of the values.
    Sum,
    /// *(decision)* How many members replied (any representation).
    Count,
    /// *(decision)* The median (the mean of the middle two for an even count).
    Med,
}

impl Op {
    pub const ALL: [Op; 7] = [Op::Lst, Op::Avg, Op::Min, Op::Max, Op::Sum, Op::Count, Op::Med];

    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "lst" => Op::Lst,
            "avg" => Op::Avg,
            "min" => Op::Min,
            "max" => Op::Max,
            "sum" => Op::Sum,
            "count" => Op::Count,
            "med" => Op::Med,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Lst => "lst",
            Op::Avg => "avg",
            Op::Min => "min",
            Op::Max => "max",
            Op::Sum => "sum",
            Op::Count => "count",
            Op::Med => "med",
        }
    }

    /// Whether the operation needs one number from every member.
    pub fn is_arithmetic(self) -> bool {
        matches!(self, Op::Avg | Op::Min | Op::Max | Op::Sum | Op::Med)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Entity message type (`emt`): CON or NON from the EM to members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emt {
    Con,
    Non,
}

impl Emt {
    pub fn parse(s: &str) -> Option<Emt> {
        match s.to_ascii_lowercase().as_str() {
            "con" => Some(Emt::Con),
            "non" => Some(Emt::Non),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Emt::Con => "con",
            Emt::Non => "non",
        }
    }
}

/// Entity communication type (`ect`): set at creation only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ect {
    Unicast,
    Multicast,
}

impl Ect {
    pub fn parse(s: &str) -> Option<Ect> {
        match s.to_ascii_lowercase().as_str() {
            "unicast" => Some(Ect::Unicast),
            "multicast" => Some(Ect::Multicast),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Ect::Unicast => "unicast",
            Ect::Multicast => "multicast",
        }
    }
}

/// *(beyond the paper)* What a multicast entity does about members that did not answer its one
/// multicast request within the window: nothing (seed 000), or ask each of them once more by unicast CON —
/// multicast's single datagram when the network is kind, unicast's reliability when it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    None,
    Unicast,
}

impl Repair {
    pub fn parse(s: &str) -> Option<Repair> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Some(Repair::None),
            "unicast" => Some(Repair::Unicast),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Repair::None => "none",
            Repair::Unicast => "unicast",
        }
    }
}

fn parse_repair(s: &str) -> Result<Repair, ProfileError> {
    Repair::parse(s).ok_or_else(|| invalid(Field::Repair, s))
}

/// The pause between successive unicast member requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    Millis(u64),
    /// Seed 000 Eq. (2): `D = S·G / (R·(G−1))`.
    Auto,
}

impl Delay {
    pub fn parse(s: &str) -> Option<Delay> {
        if s == "auto" {
            return Some(Delay::Auto);
        }
        s.parse::<u64>().ok().filter(|v| *v <= MAX_MILLIS).map(Delay::Millis)
    }

    fn to_json(self) -> Json {
        match self {
            Delay::Millis(ms) => Json::from(ms),
            Delay::Auto => Json::from("auto"),
        }
    }

    /// The delay for a group of `g` members (`s` bytes per response, `r` bytes per second).
    pub fn resolve(self, g: usize, s: u32, r: u32) -> StdDuration {
        match self {
            Delay::Millis(ms) => StdDuration::from_millis(ms),
            Delay::Auto => auto_delay(g, s, r),
        }
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delay::Millis(ms) => write!(f, "{ms}"),
            Delay::Auto => f.write_str("auto"),
        }
    }
}

/// Seed 000 Eq. (2), the lower bound of the delay between unicast requests: `D = S·G / (R·(G−1))`, with
/// `S` the response size in bytes, `R` the target rate in bytes per second and `G` the group size. One
/// member needs no spacing, so `G ≤ 1` gives zero. 100 ms for G = 5, 82 ms for G = 40 with S = 80, R = 1000.
pub fn auto_delay(g: usize, s: u32, r: u32) -> StdDuration {
    if g <= 1 || r == 0 {
        return StdDuration::ZERO;
    }
    let g = g as f64;
    let secs = f64::from(s) * g / (f64::from(r) * (g - 1.0));
    StdDuration::from_micros((secs * 1e6).round() as u64)
}

/// The largest delay or timeout accepted, in ms (one day): larger values are surely mistakes.
pub const MAX_MILLIS: u64 = 86_400_000;
/// The most members an entity may have.
pub const MAX_MEMBERS: usize = 1024;

/// An entity profile. `enr = None` means "every member" and follows the member count.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub er: Vec<String>,
    pub emt: Emt,
    pub ect: Ect,
    pub enr: Option<u32>,
    pub eo: Vec<Op>,
    pub delay: Delay,
    /// Entity-level timeout in ms; `None`: CoAP's own (until every exchange completed or failed).
    pub timeout: Option<u64>,
    /// Multicast entities only: the group URI, assigned by the EM.
    pub mcst_uri: Option<String>,
    /// Multicast entities only: unicast repair of the members that did not answer.
    pub repair: Repair,
    /// *(issue 32)* The members follow a Resource Directory: the query of a resource lookup
    /// (`rt=temperature&d=floor1`, RFC 9176 §6); `er` is then the lookup's result, kept so by the EM.
    pub from_rd: Option<String>,
    /// The directory `from_rd` asks (`coap://HOST[:PORT]`, or a lookup resource's URI); `None`: the
    /// gateway's own (`corral gateway --rd`).
    pub rd: Option<String>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            er: Vec::new(),
            emt: Emt::Con,
            ect: Ect::Unicast,
            enr: None,
            eo: vec![Op::Lst, Op::Avg, Op::Min, Op::Max],
            delay: Delay::Millis(0),
            timeout: None,
            mcst_uri: None,
            repair: Repair::None,
            from_rd: None,
            rd: None,
        }
    }
}

/// A profile field that is wrong; its text names the field and the problem (the EM answers 4.00 with it,
/// the CLI prints it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileError {
    /// The document is not a map.
    NotAMap,
    /// `er` is not an array.
    MembersNotAnArray,
    /// An `er` entry is not a string.
    MemberNotAString,
    /// `er` in a URI query (members go in the payload).
    MembersInQuery,
    /// `er` is empty.
    NoMembers,
    /// `er` lists more than [`MAX_MEMBERS`] members (how many).
    TooManyMembers(usize),
    /// `er` lists this member twice.
    DuplicateMember(String),
    /// A link-format member list does not parse.
    LinkFormat(corral_wire::Error),
    /// `enr=0`.
    NoReplies,
    /// `enr` is larger than the number of members.
    TooManyReplies { enr: u32, members: usize },
    /// The profile has no operation.
    NoOperation,
    /// An `eo` list names no operation.
    NoOperationGiven,
    /// `eo` names an operation that does not exist.
    UnknownOperation(String),
    /// `repair=unicast` on a unicast entity.
    RepairNeedsMulticast,
    /// A field's value does not parse.
    Invalid { field: Field, value: String },
    /// A field of a document has neither a string nor a number.
    NotAScalar(String),
    /// `via` names more than [`MAX_VIA`] gateways.
    TooManyVias,
    /// `ect` in a use request (it is fixed at creation).
    EctPerRequest,
    /// `rd` without `fromRd`: a directory but no lookup.
    RdWithoutQuery,
    /// A document or a query names a field that is not a profile field.
    UnknownField(String),
    /// A use request has a query parameter that is not an override.
    UnknownQuery(String),
}

/// A profile field or use override whose value is text to parse ([`ProfileError::Invalid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Field {
    Emt,
    Ect,
    Enr,
    Delay,
    Timeout,
    Repair,
    Budget,
    Via,
    FromRd,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KNOWN_OPS: &str = "known: lst avg min max sum count med";
        match self {
            ProfileError::NotAMap => f.write_str("the profile document must be a JSON/CBOR map"),
            ProfileError::MembersNotAnArray => f.write_str("er: expected an array of member URIs"),
            ProfileError::MemberNotAString => f.write_str("er: every member must be a URI string"),
            ProfileError::MembersInQuery => f.write_str("er: members go in the payload, not in a query"),
            ProfileError::NoMembers => f.write_str("er: an entity needs at least one member"),
            ProfileError::TooManyMembers(n) => write!(f, "er: {n} members, at most {MAX_MEMBERS} are allowed"),
            ProfileError::DuplicateMember(m) => write!(f, "er: member {m} is listed twice"),
            ProfileError::LinkFormat(e) => write!(f, "link-format: {e}"),
            ProfileError::NoReplies => f.write_str("enr=0: the number of replies must be at least 1"),
            ProfileError::TooManyReplies { enr, members } => {
                write!(f, "enr={enr} exceeds the number of members ({members})")
            }
            ProfileError::NoOperation => f.write_str("eo: at least one operation is needed"),
            ProfileError::NoOperationGiven => f.write_str("eo: no operation given"),
            ProfileError::UnknownOperation(op) => write!(f, "eo: unknown operation {op:?} ({KNOWN_OPS})"),
            ProfileError::RepairNeedsMulticast => {
                f.write_str("repair=unicast applies to multicast entities (ect=multicast) only")
            }
            ProfileError::Invalid { field, value: v } => match field {
                Field::Emt => write!(f, "emt={v:?}: expected con or non"),
                Field::Ect => write!(f, "ect={v:?}: expected unicast or multicast"),
                Field::Enr => write!(f, "enr={v:?} is not a number"),
                Field::Delay => write!(f, "delay={v:?} is neither a number of milliseconds nor auto"),
                Field::Timeout => write!(f, "timeout={v:?} is not a number of milliseconds (0 to {MAX_MILLIS})"),
                Field::Repair => write!(f, "repair={v:?}: expected none or unicast"),
                Field::Budget => write!(f, "budget={v:?} is not a number of requests"),
                Field::Via => write!(f, "via={v:?}: expected gateway IDs of 8 hex digits joined by '.'"),
                Field::FromRd => write!(
                    f,
                    "fromRd={v:?}: expected a lookup query of name=value pairs joined by & (rt=temperature&d=floor1), at most {MAX_RD_QUERY} bytes"
                ),
            },
            ProfileError::NotAScalar(field) => write!(f, "{field}: expected a string or a number"),
            ProfileError::TooManyVias => write!(f, "via: more than {MAX_VIA} gateways"),
            ProfileError::RdWithoutQuery => {
                f.write_str("rd names a directory but fromRd gives no lookup query (rt=temperature&…)")
            }
            ProfileError::EctPerRequest => {
                f.write_str("ect cannot be overridden per request: it is fixed at creation (change membership instead)")
            }
            ProfileError::UnknownField(name) => write!(f, "unknown profile field {name:?}"),
            ProfileError::UnknownQuery(name) => {
                write!(f, "unknown query parameter {name:?} (use eo, enr, emt, delay, timeout, repair, budget, via)")
            }
        }
    }
}

impl std::error::Error for ProfileError {}

fn invalid(field: Field, value: &str) -> ProfileError {
    ProfileError::Invalid { field, value: value.to_string() }
}

/// Fields given in a document or a query, each optional: what a client said, before defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfilePatch {
    pub er: Option<Vec<String>>,
    pub emt: Option<Emt>,
    pub ect: Option<Ect>,
    pub enr: Option<Option<u32>>,
    pub eo: Option<Vec<Op>>,
    pub delay: Option<Delay>,
    pub timeout: Option<Option<u64>>,
    pub mcst_uri: Option<String>,
    pub repair: Option<Repair>,
    pub from_rd: Option<String>,
    pub rd: Option<String>,
}

impl Profile {
    /// The default operation: the first of `eo`.
    pub fn default_op(&self) -> Op {
        self.eo.first().copied().unwrap_or(Op::Lst)
    }

    /// The number of replies to wait for.
    pub fn enr_resolved(&self) -> usize {
        self.enr.map(|n| n as usize).unwrap_or(self.er.len())
    }

    /// Applies a patch on top of this profile. `ect` forces `emt=non` for multicast entities.
    pub fn apply(&mut self, p: &ProfilePatch) {
        if let Some(er) = &p.er {
            self.er = er.clone();
        }
        if let Some(v) = p.emt {
            self.emt = v;
        }
        if let Some(v) = p.ect {
            self.ect = v;
        }
        if let Some(v) = p.enr {
            self.enr = v;
        }
        if let Some(v) = &p.eo {
            self.eo = v.clone();
        }
        if let Some(v) = p.delay {
            self.delay = v;
        }
        if let Some(v) = p.timeout {
            self.timeout = v;
        }
        if let Some(v) = p.repair {
            self.repair = v;
        }
        if let Some(v) = &p.from_rd {
            self.from_rd = Some(v.clone());
        }
        if let Some(v) = &p.rd {
            self.rd = Some(v.clone());
        }
        if self.ect == Ect::Multicast {
            // Seed 000 §2.3.1: CoAP multicast requests are NON.
            self.emt = Emt::Non;
        }
    }

    /// Field checks that need no other entity: members present and not duplicated, `enr` in range, `eo`
    /// not empty.
    pub fn check(&self) -> Result<(), ProfileError> {
        if self.rd.is_some() && self.from_rd.is_none() {
            return Err(ProfileError::RdWithoutQuery);
        }
        if self.from_rd.as_deref().is_some_and(|q| !valid_rd_query(q)) {
            return Err(invalid(Field::FromRd, self.from_rd.as_deref().unwrap_or("")));
        }
        // An entity that follows a directory may be empty until a device registers.
        if self.er.is_empty() && self.from_rd.is_none() {
            return Err(ProfileError::NoMembers);
        }
        if self.er.len() > MAX_MEMBERS {
            return Err(ProfileError::TooManyMembers(self.er.len()));
        }
        for (i, m) in self.er.iter().enumerate() {
            if self.er[..i].iter().any(|o| o.trim() == m.trim()) {
                return Err(ProfileError::DuplicateMember(m.clone()));
            }
        }
        if let Some(n) = self.enr {
            if n == 0 {
                return Err(ProfileError::NoReplies);
            }
            if n as usize > self.er.len() {
                return Err(ProfileError::TooManyReplies { enr: n, members: self.er.len() });
            }
        }
        if self.eo.is_empty() {
            return Err(ProfileError::NoOperation);
        }
        if self.repair != Repair::None && self.ect != Ect::Multicast {
            return Err(ProfileError::RepairNeedsMulticast);
        }
        Ok(())
    }

    /// What differs from `old`, one phrase per field, for the observers of an updated entity:
    /// `er: +coap://…/s/t -coap://…/s/h`, `eo: lst avg → max`, `enr: 3 → 2`, `timeout: none → 3000`.
    pub fn changes_from(&self, old: &Profile) -> Vec<String> {
        let mut out = Vec::new();
        let added: Vec<String> = self.er.iter().filter(|m| !old.er.contains(m)).map(|m| format!("+{m}")).collect();
        let gone: Vec<String> = old.er.iter().filter(|m| !self.er.contains(m)).map(|m| format!("-{m}")).collect();
        if !added.is_empty() || !gone.is_empty() {
            out.push(format!("er: {}", [added, gone].concat().join(" ")));
        }
        let ops = |eo: &[Op]| eo.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(" ");
        let opt = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
        let fields = [
            ("emt", old.emt.as_str().to_string(), self.emt.as_str().to_string()),
            ("enr", old.enr_resolved().to_string(), self.enr_resolved().to_string()),
            ("eo", ops(&old.eo), ops(&self.eo)),
            ("delay", old.delay.to_string(), self.delay.to_string()),
            ("timeout", opt(old.timeout), opt(self.timeout)),
            ("repair", old.repair.as_str().to_string(), self.repair.as_str().to_string()),
            ("fromRd", old.from_rd.clone().unwrap_or_default(), self.from_rd.clone().unwrap_or_default()),
        ];
        for (field, was, now) in fields {
            if was != now {
                out.push(format!("{field}: {was} → {now}"));
            }
        }
        out
    }

    /// The profile document (JSON object) the EM answers with; `enr` is always written resolved.
    pub fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("er".into(), Json::from(self.er.clone()));
        m.insert("emt".into(), Json::from(self.emt.as_str()));
        m.insert("ect".into(), Json::from(self.ect.as_str()));
        m.insert("enr".into(), Json::from(self.enr_resolved()));
        m.insert("eo".into(), Json::from(self.eo.iter().map(|o| o.as_str()).collect::<Vec<_>>()));
        m.insert("delay".into(), self.delay.to_json());
        if let Some(t) = self.timeout {
            m.insert("timeout".into(), Json::from(t));
        }
        if let Some(u) = &self.mcst_uri {
            m.insert("mcstURI".into(), Json::from(u.clone()));
        }
        if self.repair != Repair::None {
            m.insert("repair".into(), Json::from(self.repair.as_str()));
        }
        if let Some(q) = &self.from_rd {
            m.insert("fromRd".into(), Json::from(q.clone()));
        }
        if let Some(u) = &self.rd {
            m.insert("rd".into(), Json::from(u.clone()));
        }
        Json::Object(m)
    }
}

impl Profile {
    /// Reads a profile document as the EM answers with it ([`Profile::to_json`]): the fields it does not
    /// give take their defaults; status the EM adds (`unreachable`) is not part of the profile.
    pub fn from_json(doc: &Json) -> Result<Profile, ProfileError> {
        let patch = ProfilePatch::from_json(doc)?;
        let mut p = Profile::default();
        p.apply(&patch);
        p.mcst_uri = patch.mcst_uri;
        Ok(p)
    }
}

fn parse_ops(s: &str) -> Result<Vec<Op>, ProfileError> {
    let mut ops = Vec::new();
    for item in s.split([',', ' ', '+', ';']).filter(|s| !s.is_empty()) {
        let op = Op::parse(item).ok_or_else(|| ProfileError::UnknownOperation(item.to_string()))?;
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    if ops.is_empty() {
        return Err(ProfileError::NoOperationGiven);
    }
    Ok(ops)
}

fn parse_enr(s: &str) -> Result<u32, ProfileError> {
    s.parse::<u32>().map_err(|_| invalid(Field::Enr, s))
}

fn parse_timeout(s: &str) -> Result<u64, ProfileError> {
    s.parse::<u64>().ok().filter(|v| *v <= MAX_MILLIS).ok_or_else(|| invalid(Field::Timeout, s))
}

fn parse_delay(s: &str) -> Result<Delay, ProfileError> {
    Delay::parse(s).ok_or_else(|| invalid(Field::Delay, s))
}

/// A JSON scalar as the string a query would carry, or an error naming the field.
fn scalar(field: &str, v: &Json) -> Result<String, ProfileError> {
    match v {
        Json::String(s) => Ok(s.clone()),
        Json::Number(n) => Ok(n.to_string()),
        Json::Bool(b) => Ok(b.to_string()),
        _ => Err(ProfileError::NotAScalar(field.to_string())),
    }
}

impl ProfilePatch {
    /// Reads a profile document: a JSON object with any of the profile fields. Unknown fields are an error
    /// (a typo must not silently fall back to a default).
    pub fn from_json(doc: &Json) -> Result<ProfilePatch, ProfileError> {
        let Json::Object(m) = doc else {
            return Err(ProfileError::NotAMap);
        };
        let mut p = ProfilePatch::default();
        for (k, v) in m {
            match k.as_str() {
                "er" => {
                    let Json::Array(items) = v else {
                        return Err(ProfileError::MembersNotAnArray);
                    };
                    let mut er = Vec::with_capacity(items.len());
                    for it in items {
                        let Json::String(s) = it else {
                            return Err(ProfileError::MemberNotAString);
                        };
                        er.push(s.trim().to_string());
                    }
                    p.er = Some(er);
                }
                "eo" => {
                    p.eo = Some(match v {
                        Json::Array(items) => {
                            let mut joined = String::new();
                            for it in items {
                                joined.push_str(&scalar("eo", it)?);
                                joined.push(',');
                            }
                            parse_ops(&joined)?
                        }
                        other => parse_ops(&scalar("eo", other)?)?,
                    })
                }
                "enr" => {
                    p.enr = Some(match v {
                        Json::Null => None,
                        other => Some(parse_enr(&scalar("enr", other)?)?),
                    })
                }
                "timeout" => {
                    p.timeout = Some(match v {
                        Json::Null => None,
                        other => Some(parse_timeout(&scalar("timeout", other)?)?),
                    })
                }
                // Status the EM shows with the profile (members that did not answer, what the directory
                // said), not a field.
                "unreachable" | "rdNote" => {}
                other_field => p.set_text(other_field, &scalar(other_field, v)?)?,
            }
        }
        Ok(p)
    }

    /// The profile document of the fields given, as a client sends it (`PUT /em/NAME`, `POST
    /// /em/NAME/profile`) and [`ProfilePatch::from_json`] reads it back; `enr` and `timeout` given as
    /// "every member" and "none" are `null`.
    pub fn to_json(&self) -> Json {
        let mut m = Map::new();
        if let Some(er) = &self.er {
            m.insert("er".into(), Json::from(er.clone()));
        }
        if let Some(v) = self.emt {
            m.insert("emt".into(), Json::from(v.as_str()));
        }
        if let Some(v) = self.ect {
            m.insert("ect".into(), Json::from(v.as_str()));
        }
        if let Some(v) = self.enr {
            m.insert("enr".into(), v.map_or(Json::Null, Json::from));
        }
        if let Some(eo) = &self.eo {
            m.insert("eo".into(), Json::from(eo.iter().map(|o| o.as_str()).collect::<Vec<_>>()));
        }
        if let Some(v) = self.delay {
            m.insert("delay".into(), v.to_json());
        }
        if let Some(v) = self.timeout {
            m.insert("timeout".into(), v.map_or(Json::Null, Json::from));
        }
        if let Some(u) = &self.mcst_uri {
            m.insert("mcstURI".into(), Json::from(u.clone()));
        }
        if let Some(v) = self.repair {
            m.insert("repair".into(), Json::from(v.as_str()));
        }
        if let Some(q) = &self.from_rd {
            m.insert("fromRd".into(), Json::from(q.clone()));
        }
        if let Some(u) = &self.rd {
            m.insert("rd".into(), Json::from(u.clone()));
        }
        Json::Object(m)
    }

    /// Sets one field from its text form, as in a URI query (`enr=2`, `eo=avg,min`, `delay=auto`).
    pub fn set_text(&mut self, key: &str, value: &str) -> Result<(), ProfileError> {
        match key {
            "emt" => self.emt = Some(Emt::parse(value).ok_or_else(|| invalid(Field::Emt, value))?),
            "ect" => self.ect = Some(Ect::parse(value).ok_or_else(|| invalid(Field::Ect, value))?),
            "enr" => self.enr = Some(Some(parse_enr(value)?)),
            "eo" => self.eo = Some(parse_ops(value)?),
            "delay" => self.delay = Some(parse_delay(value)?),
            "timeout" => self.timeout = Some(Some(parse_timeout(value)?)),
            "mcstURI" => self.mcst_uri = Some(value.to_string()),
            "repair" => self.repair = Some(parse_repair(value)?),
            "fromRd" => self.from_rd = Some(value.to_string()),
            "rd" => self.rd = Some(value.to_string()),
            "er" => return Err(ProfileError::MembersInQuery),
            other => return Err(ProfileError::UnknownField(other.to_string())),
        }
        Ok(())
    }

    /// Reads `key=value` URI queries on top of this patch.
    pub fn apply_queries<'a>(
        &mut self,
        queries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), ProfileError> {
        for (k, v) in queries {
            self.set_text(k, v)?;
        }
        Ok(())
    }
}

/// Per-request overrides of a use request: every field but `ect`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UseOverrides {
    pub eo: Option<Op>,
    pub enr: Option<u32>,
    pub emt: Option<Emt>,
    pub delay: Option<Delay>,
    pub timeout: Option<u64>,
    pub repair: Option<Repair>,
    /// `budget=N`: member requests this use may cause at most, passed by a parent gateway (its share of
    /// its own client's budget); the EM uses the smaller of it and its own budget.
    pub budget: Option<u32>,
    /// `via=ID.ID…`: the gateways (8 hex digits each) this request already passed, for loop detection
    /// across gateways (as HTTP's Via, RFC 9110 §7.6.3).
    pub via: Vec<u32>,
}

/// The most gateways a `via` list may name (RFC 8768's default Hop-Limit).
pub const MAX_VIA: usize = 16;

impl UseOverrides {
    /// Reads the URI queries of a use request. `ect` is refused (seed 000 §2.3.1: creation time only).
    pub fn parse<'a>(queries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<UseOverrides, ProfileError> {
        let mut o = UseOverrides::default();
        for (k, v) in queries {
            match k {
                "eo" => o.eo = Some(Op::parse(v).ok_or_else(|| ProfileError::UnknownOperation(v.to_string()))?),
                "enr" => o.enr = Some(parse_enr(v)?),
                "emt" => o.emt = Some(Emt::parse(v).ok_or_else(|| invalid(Field::Emt, v))?),
                "delay" => o.delay = Some(parse_delay(v)?),
                "timeout" => o.timeout = Some(parse_timeout(v)?),
                "repair" => o.repair = Some(parse_repair(v)?),
                "budget" => o.budget = Some(v.parse::<u32>().map_err(|_| invalid(Field::Budget, v))?),
                "via" => {
                    o.via = v
                        .split('.')
                        .map(|id| {
                            u32::from_str_radix(id, 16)
                                .ok()
                                .filter(|_| id.len() == 8)
                                .ok_or_else(|| invalid(Field::Via, v))
                        })
                        .collect::<Result<_, _>>()?;
                    if o.via.len() > MAX_VIA {
                        return Err(ProfileError::TooManyVias);
                    }
                }
                "ect" => return Err(ProfileError::EctPerRequest),
                other => return Err(ProfileError::UnknownQuery(other.to_string())),
            }
        }
        if o.enr == Some(0) {
            return Err(ProfileError::NoReplies);
        }
        Ok(o)
    }
}

/// The longest `fromRd` query accepted, in bytes.
pub const MAX_RD_QUERY: usize = 255;

/// Whether `q` is a resource lookup query: `name=value` pairs (or bare names) joined by `&`, each a valid
/// Uri-Query (no `#`, no empty pair), in all at most [`MAX_RD_QUERY`] bytes. `page` and `count` are
/// refused: the EM follows the whole result.
pub fn valid_rd_query(q: &str) -> bool {
    !q.is_empty()
        && q.len() <= MAX_RD_QUERY
        && q.split('&').all(|pair| {
            let name = pair.split('=').next().unwrap_or("");
            !name.is_empty()
                && !matches!(name, "page" | "count")
                && pair.chars().all(|c| c.is_ascii_graphic() && c != '#')
        })
}

/// Reads a CoRE link-format (RFC 6690) member list: the targets of `<…>` links; attributes are ignored.
/// The parser is corral-wire's [`corral_wire::link_format::parse`].
pub fn parse_link_members(text: &str) -> Result<Vec<String>, ProfileError> {
    corral_wire::link_format::parse(text)
        .map(|link| link.map(|l| l.target().trim().to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ProfileError::LinkFormat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq2_auto_delay() {
        assert_eq!(auto_delay(5, 80, 1000), StdDuration::from_millis(100));
        assert_eq!(auto_delay(40, 80, 1000).as_micros(), 82_051);
        assert_eq!(auto_delay(1, 80, 1000), StdDuration::ZERO);
        assert_eq!(auto_delay(0, 80, 1000), StdDuration::ZERO);
    }

    #[test]
    fn json_document() {
        let doc: Json = serde_json::from_str(
            r#"{"er":["coap://10.0.0.1/s/t"],"eo":"avg min","enr":1,"delay":"auto","emt":"non","timeout":3000}"#,
        )
        .unwrap();
        let patch = ProfilePatch::from_json(&doc).unwrap();
        let mut p = Profile::default();
        p.apply(&patch);
        assert_eq!(p.eo, vec![Op::Avg, Op::Min]);
        assert_eq!(p.enr, Some(1));
        assert_eq!(p.delay, Delay::Auto);
        assert_eq!(p.emt, Emt::Non);
        assert_eq!(p.timeout, Some(3000));
        p.check().unwrap();
        let out = p.to_json();
        assert_eq!(out["eo"], serde_json::json!(["avg", "min"]));
        let bad: Json = serde_json::from_str(r#"{"er":["x"],"eoo":"avg"}"#).unwrap();
        assert!(ProfilePatch::from_json(&bad).unwrap_err().to_string().contains("eoo"));
    }

    #[test]
    fn a_client_document_and_the_ems_answer_read_back_as_written() {
        let patch = ProfilePatch {
            er: Some(vec!["coap://10.0.0.1/s/t".into(), "/em/r1".into()]),
            ect: Some(Ect::Unicast),
            emt: Some(Emt::Non),
            enr: Some(None),
            eo: Some(vec![Op::Avg, Op::Lst]),
            delay: Some(Delay::Auto),
            timeout: Some(Some(2500)),
            repair: Some(Repair::None),
            ..ProfilePatch::default()
        };
        let doc = patch.to_json();
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            r#"{"delay":"auto","ect":"unicast","emt":"non","enr":null,"eo":["avg","lst"],"er":["coap://10.0.0.1/s/t","/em/r1"],"repair":"none","timeout":2500}"#
        );
        assert_eq!(ProfilePatch::from_json(&doc).unwrap(), patch);
        let mut p =
            Profile { ect: Ect::Multicast, mcst_uri: Some("coap://[ff05::fd]/s/t".into()), ..Profile::default() };
        p.apply(&patch);
        p.ect = Ect::Multicast;
        p.emt = Emt::Non;
        let mut answer = p.to_json();
        answer["unreachable"] = serde_json::json!({"/em/r1": "4.04"});
        assert_eq!(Profile::from_json(&answer).unwrap(), Profile { enr: Some(2), ..p });
    }

    #[test]
    fn overrides() {
        let o = UseOverrides::parse([("eo", "avg"), ("enr", "2"), ("delay", "auto")]).unwrap();
        assert_eq!(o.eo, Some(Op::Avg));
        assert!(UseOverrides::parse([("ect", "unicast")]).unwrap_err().to_string().contains("ect"));
        assert!(UseOverrides::parse([("eo", "mode")]).unwrap_err().to_string().contains("unknown operation"));
        assert!(UseOverrides::parse([("enr", "0")]).unwrap_err().to_string().contains("enr=0"));
        assert_eq!(UseOverrides::parse([("repair", "unicast")]).unwrap().repair, Some(Repair::Unicast));
        assert!(UseOverrides::parse([("repair", "yes")]).unwrap_err().to_string().contains("none or unicast"));
    }

    #[test]
    fn link_members() {
        let m = parse_link_members(r#"<coap://[::1]/s/t>;rt="a,b", </em/r1> ,<coap://1.2.3.4/x>"#).unwrap();
        assert_eq!(m, vec!["coap://[::1]/s/t", "/em/r1", "coap://1.2.3.4/x"]);
        assert!(parse_link_members("coap://x").is_err());
        assert!(parse_link_members("<coap://x").is_err());
        assert!(parse_link_members("<coap://x>;rt=\"open").is_err());
        assert!(parse_link_members("<coap://x>,").is_err());
        assert_eq!(parse_link_members(" ").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn checks() {
        let mut p = Profile { er: vec!["a".into(), "b".into()], ..Profile::default() };
        p.enr = Some(3);
        assert!(p.check().unwrap_err().to_string().contains("enr=3"));
        p.enr = Some(0);
        assert!(p.check().unwrap_err().to_string().contains("enr=0"));
        p.enr = None;
        p.er.push("a".into());
        assert!(p.check().unwrap_err().to_string().contains("twice"));
        p.er.pop();
        p.repair = Repair::Unicast;
        assert!(p.check().unwrap_err().to_string().contains("multicast entities"));
        p.ect = Ect::Multicast;
        p.check().unwrap();
        assert_eq!(p.to_json()["repair"], "unicast");
    }
}
