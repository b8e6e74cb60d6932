//! Member replies in, client answers out: reading a member's representation as values, the entity
//! operations over them, and the five response formats of a use request (text/plain, JSON, CBOR, SenML
//! JSON, SenML CBOR), plus the per-member reports of actuation, creation and deletion.
//!
//! Owns: representations. Must never: decide when to answer (the Entity Manager does) or panic on what a
//! member sends — anything unreadable is kept as a string and reported as non-numeric.
//!
//! # Formats *(decisions)*
//! - text/plain: an arithmetic result is the bare number; `lst` is one line per value, `<name> <value>`,
//!   where the name is the member URI (for a nested entity, the member URI followed by the inner names,
//!   separated by spaces), so the value is always the last token. A member that stayed silent or answered
//!   with an error adds a line after the values, `silent: <member> (<why>)` or `failed: <member> (<why>)`,
//!   so the first line of an arithmetic answer is always the number.
//! - JSON / CBOR: `{"entity","eo","replies","enr","members", "v"}` for arithmetic results; `lst` carries
//!   `"values":[{"m":<name>,"v"|"vs"|"vb":…,"u"?}]`; both carry `"errors":[{"m","error"}]` (every member
//!   without a value, with why) and `"silent":[<member>…]` (those of them that were asked and gave no
//!   answer in time). CBOR has the same structure with text keys.
//! - SenML: `lst` gives one record per value named after the member (see [`crate::uri::senml_name`]: IPv6
//!   literals without brackets and with an explicit port); an arithmetic result is one record with
//!   `bn = "em/<entity>/"` and `n = <op>`. SenML carries values only (a record without a value is not
//!   SenML, and a parent gateway reads these records as its member's readings): `replies` of the JSON
//!   form, or the text form's lines, say who was silent.

use crate::profile::Op;
use crate::senml::{self, Record, Value};
use corral_proto::wire::{Code, ContentFormat};
use serde_json::{json, Map, Value as Json};

/// One value a member contributed, named by the path of labels below the member.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub name: Vec<String>,
    pub value: Value,
    pub unit: Option<String>,
}

impl Reading {
    pub fn unnamed(value: Value) -> Reading {
        Reading { name: Vec::new(), value, unit: None }
    }
}

/// Reads a member's response payload as values, by its Content-Format. Never fails: what cannot be read
/// becomes a string (which arithmetic operations then refuse).
pub fn parse_reply(cf: Option<ContentFormat>, payload: &[u8]) -> Vec<Reading> {
    match cf.map(|c| c.0) {
        None | Some(0) => vec![Reading::unnamed(text_value(&String::from_utf8_lossy(payload)))],
        Some(50) => vec![Reading::unnamed(match serde_json::from_slice::<Json>(payload) {
            Ok(j) => json_value(&j),
            Err(_) => Value::Str(String::from_utf8_lossy(payload).into_owned()),
        })],
        Some(60) => vec![Reading::unnamed(match ciborium::from_reader::<ciborium::Value, _>(payload) {
            Ok(c) => cbor_value(&c),
            Err(_) => Value::Str("(undecodable CBOR)".into()),
        })],
        Some(110) | Some(112) => {
            let pack = if cf == Some(ContentFormat::SENML_JSON) {
                senml::decode_json(payload)
            } else {
                senml::decode_cbor(payload)
            };
            match pack.and_then(|p| senml::resolve(&p)) {
                Ok(records) => records
                    .into_iter()
                    .filter_map(|r| {
                        let value = r.value.or(r.sum.map(Value::Num))?;
                        Some(Reading { name: vec![r.name], value, unit: r.unit })
                    })
                    .collect(),
                Err(e) => vec![Reading::unnamed(Value::Str(e.to_string()))],
            }
        }
        Some(_) => vec![Reading::unnamed(Value::Str(String::from_utf8_lossy(payload).into_owned()))],
    }
}

fn text_value(s: &str) -> Value {
    let t = s.trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Value::Num(v),
        _ => match t {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::Str(t.to_string()),
        },
    }
}

fn json_value(j: &Json) -> Value {
    match j {
        Json::Number(n) => n.as_f64().filter(|v| v.is_finite()).map(Value::Num).unwrap_or(Value::Str(n.to_string())),
        Json::Bool(b) => Value::Bool(*b),
        Json::String(s) => Value::Str(s.clone()),
        Json::Object(m) if m.get("v").is_some_and(|v| v.is_number()) => json_value(&m["v"]),
        other => Value::Str(other.to_string()),
    }
}

fn cbor_value(c: &ciborium::Value) -> Value {
    match c {
        ciborium::Value::Integer(i) => Value::Num(i128::from(*i) as f64),
        ciborium::Value::Float(f) if f.is_finite() => Value::Num(*f),
        ciborium::Value::Bool(b) => Value::Bool(*b),
        ciborium::Value::Text(s) => Value::Str(s.clone()),
        _ => Value::Str("(structured CBOR)".into()),
    }
}

/// The single number a member contributes to an arithmetic operation, if it has exactly one.
pub fn single_number(readings: &[Reading]) -> Option<f64> {
    match readings {
        [Reading { value: Value::Num(v), .. }] if v.is_finite() => Some(*v),
        _ => None,
    }
}

/// Applies an operation to numbers. `None` for no values (or `lst`, which has no single result).
pub fn aggregate(op: Op, values: &[f64]) -> Option<f64> {
    if values.is_empty() && op != Op::Count {
        return None;
    }
    let n = values.len() as f64;
    Some(match op {
        Op::Lst => return None,
        Op::Count => n,
        Op::Sum => values.iter().sum(),
        Op::Avg => values.iter().sum::<f64>() / n,
        Op::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Op::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Op::Med => {
            let mut v = values.to_vec();
            v.sort_by(f64::total_cmp);
            let m = v.len() / 2;
            if v.len() % 2 == 1 {
                v[m]
            } else {
                (v[m - 1] + v[m]) / 2.0
            }
        }
    })
}

/// Decimal places of `v` as written in its shortest form (`21.37` → 2, `22` → 0, `1e-7` → 7).
fn decimals(v: f64) -> u32 {
    let s = format!("{v}");
    match s.split_once('.') {
        Some((_, frac)) => frac.len() as u32,
        None => 0,
    }
}

/// An arithmetic result rounded to one decimal place more than the most precise member value (at most
/// 6) *(decision)*: the average of 21.37, 21.40 and 21.33 is 21.367, not 21.366666666666664 — digits
/// beyond the members' own precision are noise, and one more keeps averages of integers (21.5) exact.
pub fn round_to_members(v: f64, members: &[f64]) -> f64 {
    let d = members.iter().map(|m| decimals(*m)).max().unwrap_or(0).saturating_add(1).min(6);
    let f = 10f64.powi(d as i32);
    let r = (v * f).round() / f;
    if r.is_finite() {
        r
    } else {
        v
    }
}

/// What a use request produced, ready to be rendered in any format.
#[derive(Debug, Clone, PartialEq)]
pub struct UseResult {
    pub entity: String,
    pub op: Op,
    pub enr: usize,
    pub members: usize,
    /// Members that answered with a 2.xx.
    pub replies: usize,
    /// The arithmetic result (or the count).
    pub aggregate: Option<f64>,
    /// `lst` values (and, for a 5.04, what did arrive): member label first in each name.
    pub values: Vec<Reading>,
    /// Members without a usable answer, why, and whether they were silent, answered with an error, or were
    /// not waited for.
    pub errors: Vec<MemberError>,
    /// What an update of the entity changed, in the first rendering its observers get after it (JSON and
    /// CBOR carry it as `changed`; text and SenML have no room for it).
    pub changed: Vec<String>,
}

/// A member that gave a use no value.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberError {
    /// The member's label (its URI).
    pub member: String,
    /// Why, as people read it: `no reply before the entity timeout`, `4.04 Not Found: …`.
    pub error: String,
    pub gap: Gap,
}

/// How a member came to give no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gap {
    /// Asked, and no answer came in time (timed out, unreachable, no reply before the deadline or in the
    /// multicast window).
    Silent,
    /// Answered with an error (or a child entity answered one).
    Failed,
    /// Not asked or not waited for: `enr` answers had come, the fan-out budget, the hop limit, the entity
    /// changed meanwhile.
    Skipped,
}

/// The formats a use request may ask for with Accept.
pub const USE_FORMATS: [ContentFormat; 5] = [
    ContentFormat::TEXT_PLAIN,
    ContentFormat::JSON,
    ContentFormat::CBOR,
    ContentFormat::SENML_JSON,
    ContentFormat::SENML_CBOR,
];

/// The formats the management answers (profiles, reports) come in.
pub const REPORT_FORMATS: [ContentFormat; 3] = [ContentFormat::TEXT_PLAIN, ContentFormat::JSON, ContentFormat::CBOR];

fn num_text(v: f64) -> String {
    format!("{v}")
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Num(x) => num_text(*x),
        Value::Str(s) | Value::Data(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
    }
}

fn value_json(m: &mut Map<String, Json>, v: &Value) {
    match v {
        Value::Num(x) => m.insert("v".into(), json!(x)),
        Value::Str(s) => m.insert("vs".into(), json!(s)),
        Value::Bool(b) => m.insert("vb".into(), json!(b)),
        Value::Data(d) => m.insert("vd".into(), json!(d)),
    };
}

/// Converts a JSON tree to CBOR (same structure, text keys).
pub fn json_to_cbor(j: &Json) -> ciborium::Value {
    use ciborium::Value as C;
    match j {
        Json::Null => C::Null,
        Json::Bool(b) => C::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => C::Integer(i.into()),
            (None, Some(u)) => C::Integer(u.into()),
            _ => C::Float(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => C::Text(s.clone()),
        Json::Array(a) => C::Array(a.iter().map(json_to_cbor).collect()),
        Json::Object(m) => C::Map(m.iter().map(|(k, v)| (C::Text(k.clone()), json_to_cbor(v))).collect()),
    }
}

/// Converts CBOR to JSON, for profile documents sent as CBOR. Byte strings and non-text keys are refused.
pub fn cbor_to_json(c: &ciborium::Value) -> Result<Json, CborJsonError> {
    use ciborium::Value as C;
    Ok(match c {
        C::Null => Json::Null,
        C::Bool(b) => Json::Bool(*b),
        C::Integer(i) => {
            let i = i128::from(*i);
            match i64::try_from(i) {
                Ok(v) => json!(v),
                Err(_) => json!(i as f64),
            }
        }
        C::Float(f) => serde_json::Number::from_f64(*f).map(Json::Number).ok_or(CborJsonError::NonFinite)?,
        C::Text(s) => Json::String(s.clone()),
        C::Array(a) => Json::Array(a.iter().map(cbor_to_json).collect::<Result<_, _>>()?),
        C::Map(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let C::Text(k) = k else { return Err(CborJsonError::NonTextKey) };
                out.insert(k.clone(), cbor_to_json(v)?);
            }
            Json::Object(out)
        }
        C::Tag(_, inner) => cbor_to_json(inner)?,
        _ => return Err(CborJsonError::Unsupported),
    })
}

/// Why a CBOR item has no JSON form ([`cbor_to_json`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CborJsonError {
    /// A NaN or infinite float.
    NonFinite,
    /// A map key that is not text.
    NonTextKey,
    /// A byte string or a simple value.
    Unsupported,
}

impl std::fmt::Display for CborJsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CborJsonError::NonFinite => "non-finite number",
            CborJsonError::NonTextKey => "map keys must be text",
            CborJsonError::Unsupported => "unsupported CBOR item (byte string or simple value)",
        })
    }
}

impl std::error::Error for CborJsonError {}

/// Encodes JSON as JSON (50) or CBOR (60) bytes.
pub fn encode_doc(j: &Json, cf: ContentFormat) -> Vec<u8> {
    if cf == ContentFormat::CBOR {
        let mut out = Vec::new();
        let _ = ciborium::into_writer(&json_to_cbor(j), &mut out);
        out
    } else {
        serde_json::to_vec(j).unwrap_or_default()
    }
}

fn label_text(name: &[String]) -> String {
    name.join(" ")
}

fn label_senml(name: &[String]) -> String {
    let mut s = String::new();
    for (i, part) in name.iter().enumerate() {
        if i > 0 {
            s.push('/');
        }
        s.push_str(&crate::uri::senml_name(part));
    }
    if s.is_empty() {
        s.push_str("value");
    }
    s
}

impl UseResult {
    /// Whether the result is rendered as a list (`lst`, or a partial answer).
    fn listed(&self) -> bool {
        self.aggregate.is_none()
    }

    pub fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("entity".into(), json!(self.entity));
        m.insert("eo".into(), json!(self.op.as_str()));
        m.insert("replies".into(), json!(self.replies));
        m.insert("enr".into(), json!(self.enr));
        m.insert("members".into(), json!(self.members));
        if let Some(v) = self.aggregate {
            m.insert("v".into(), json!(v));
        } else {
            let vals: Vec<Json> = self
                .values
                .iter()
                .map(|r| {
                    let mut o = Map::new();
                    o.insert("m".into(), json!(label_text(&r.name)));
                    value_json(&mut o, &r.value);
                    if let Some(u) = &r.unit {
                        o.insert("u".into(), json!(u));
                    }
                    Json::Object(o)
                })
                .collect();
            m.insert("values".into(), Json::Array(vals));
        }
        if !self.errors.is_empty() {
            let errs: Vec<Json> = self.errors.iter().map(|e| json!({"m": e.member, "error": e.error})).collect();
            m.insert("errors".into(), Json::Array(errs));
        }
        let silent: Vec<&str> = self.gaps(Gap::Silent).map(|e| e.member.as_str()).collect();
        if !silent.is_empty() {
            m.insert("silent".into(), json!(silent));
        }
        if !self.changed.is_empty() {
            m.insert("changed".into(), json!(self.changed));
        }
        Json::Object(m)
    }

    pub fn to_senml(&self) -> Vec<Record> {
        if let Some(v) = self.aggregate {
            return vec![Record { bn: Some(format!("em/{}/", self.entity)), ..Record::num(self.op.as_str(), v) }];
        }
        self.values
            .iter()
            .map(|r| {
                let mut rec = Record { n: Some(label_senml(&r.name)), u: r.unit.clone(), ..Record::default() };
                rec = rec.with_value(&r.value);
                rec
            })
            .collect()
    }

    /// The members that gave no value for reason `gap`.
    pub fn gaps(&self, gap: Gap) -> impl Iterator<Item = &MemberError> {
        self.errors.iter().filter(move |e| e.gap == gap)
    }

    /// The values (the bare number, or one line per value), then a line per member that was silent
    /// (`silent: <member> (<why>)`) or answered with an error (`failed: <member> (<why>)`): a partial
    /// answer says whom it lacks. Members not waited for (`enr` reached) are not listed.
    pub fn to_text(&self) -> String {
        let mut s = match self.aggregate {
            Some(v) => num_text(v),
            None => {
                let mut s = String::new();
                for r in &self.values {
                    s.push_str(&label_text(&r.name));
                    s.push(' ');
                    s.push_str(&value_text(&r.value));
                    s.push('\n');
                }
                s
            }
        };
        for (gap, word) in [(Gap::Silent, "silent"), (Gap::Failed, "failed")] {
            for e in self.gaps(gap) {
                if !s.is_empty() && !s.ends_with('\n') {
                    s.push('\n');
                }
                s.push_str(&format!("{word}: {} ({})\n", e.member, e.error));
            }
        }
        s
    }

    /// A diagnostic text for an answer without a value: how many answered, why the others did not, and
    /// what did arrive.
    pub fn diagnostic(&self, code: Code) -> String {
        let mut s = format!("{code:#}: {} of {} members of {} answered", self.replies, self.members, self.entity);
        for e in &self.errors {
            s.push_str(&format!("\n{}: {}", e.member, e.error));
        }
        for r in &self.values {
            s.push_str(&format!("\n{} {}", label_text(&r.name), value_text(&r.value)));
        }
        s
    }

    /// The payload in one of [`USE_FORMATS`].
    pub fn render(&self, cf: ContentFormat) -> Vec<u8> {
        match cf.0 {
            50 | 60 => encode_doc(&self.to_json(), cf),
            110 => senml::encode_json(&self.to_senml()),
            112 => senml::encode_cbor(&self.to_senml()),
            _ => self.to_text().into_bytes(),
        }
    }

    /// The readings a parent entity gets from this (nested) result: the aggregate as one unnamed number,
    /// or the listed values.
    pub fn into_readings(self) -> Vec<Reading> {
        match self.aggregate {
            Some(v) if !self.listed() => vec![Reading::unnamed(Value::Num(v))],
            _ => self.values,
        }
    }
}

/// One member's part in an actuation, a creation or a deletion.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberReport {
    pub member: String,
    /// Steps in order, e.g. `("validate", "2.05 Content")`, `("join", "5.03 no free slot")`.
    pub steps: Vec<(String, String)>,
}

/// Renders per-member reports. Text: one line per member, `<member> <step>: <result>; …`.
pub fn render_reports(head: &Json, reports: &[MemberReport], cf: ContentFormat) -> Vec<u8> {
    match cf.0 {
        50 | 60 => {
            let mut doc = match head {
                Json::Object(m) => m.clone(),
                _ => Map::new(),
            };
            let members: Vec<Json> = reports
                .iter()
                .map(|r| {
                    let mut o = Map::new();
                    o.insert("uri".into(), json!(r.member));
                    for (k, v) in &r.steps {
                        o.insert(k.clone(), json!(v));
                    }
                    Json::Object(o)
                })
                .collect();
            doc.insert("members".into(), Json::Array(members));
            encode_doc(&Json::Object(doc), cf)
        }
        110 | 112 => {
            let pack: Vec<Record> = reports
                .iter()
                .map(|r| {
                    let summary: Vec<String> = r.steps.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    Record {
                        n: Some(crate::uri::senml_name(&r.member)),
                        vs: Some(summary.join("; ")),
                        ..Default::default()
                    }
                })
                .collect();
            if cf.0 == 110 {
                senml::encode_json(&pack)
            } else {
                senml::encode_cbor(&pack)
            }
        }
        _ => {
            let mut s = String::new();
            if let Some(msg) = head.get("message").and_then(|m| m.as_str()) {
                s.push_str(msg);
                s.push('\n');
            }
            for r in reports {
                s.push_str(&r.member);
                for (i, (k, v)) in r.steps.iter().enumerate() {
                    s.push_str(if i == 0 { " " } else { "; " });
                    s.push_str(k);
                    s.push_str(": ");
                    s.push_str(v);
                }
                s.push('\n');
            }
            s.into_bytes()
        }
    }
}

/// `2.05 Content` or `4.04 Not Found: <diagnostic>` for a member's response.
pub fn code_text(code: Code, payload: &[u8]) -> String {
    match std::str::from_utf8(payload) {
        Ok(t) if code.is_error() && !t.trim().is_empty() => {
            // A diagnostic payload (RFC 7252 §5.5.2); a long one (a nested entity's report) is cut on a
            // character boundary.
            let t = t.trim().replace('\n', "; ");
            let cut = t.char_indices().nth(400).map_or(t.len(), |(i, _)| i);
            let more = if cut < t.len() { " …" } else { "" };
            format!("{code:#}: {}{more}", &t[..cut])
        }
        Err(_) if code.is_error() && !payload.is_empty() => {
            format!("{code:#} ({} bytes of non-text payload)", payload.len())
        }
        _ => format!("{code:#}"),
    }
}

/// The format an Accept option selects from `offered`, `default` when absent, `None` when unsupported.
pub fn negotiate(
    accept: Option<ContentFormat>,
    offered: &[ContentFormat],
    default: ContentFormat,
) -> Option<ContentFormat> {
    match accept {
        None => Some(default),
        Some(a) => offered.iter().copied().find(|c| *c == a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_members_precision() {
        let t = [21.37, 21.40, 21.33];
        let avg = aggregate(Op::Avg, &t).unwrap();
        assert_eq!(round_to_members(avg, &t), 21.367);
        assert_eq!(round_to_members(21.5, &[21.0, 22.0]), 21.5);
        assert_eq!(round_to_members(1.0 / 3.0, &[1.0, 0.0, 0.0]), 0.3);
        assert_eq!(round_to_members(2.0 / 3.0, &[0.123456789]), 0.666667, "at most 6 places");
        assert_eq!(format!("{}", round_to_members(avg, &t)), "21.367");
    }

    #[test]
    fn operations() {
        let v = [3.0, 1.0, 2.0, 10.0];
        assert_eq!(aggregate(Op::Avg, &v), Some(4.0));
        assert_eq!(aggregate(Op::Min, &v), Some(1.0));
        assert_eq!(aggregate(Op::Max, &v), Some(10.0));
        assert_eq!(aggregate(Op::Sum, &v), Some(16.0));
        assert_eq!(aggregate(Op::Count, &v), Some(4.0));
        assert_eq!(aggregate(Op::Med, &v), Some(2.5));
        assert_eq!(aggregate(Op::Med, &[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(aggregate(Op::Avg, &[]), None);
        assert_eq!(aggregate(Op::Count, &[]), Some(0.0));
    }

    #[test]
    fn member_representations() {
        assert_eq!(single_number(&parse_reply(None, b" 21.5\n")), Some(21.5));
        assert_eq!(single_number(&parse_reply(Some(ContentFormat::JSON), b"{\"v\":3}")), Some(3.0));
        assert_eq!(single_number(&parse_reply(Some(ContentFormat::CBOR), &[0x18, 0x2a])), Some(42.0));
        assert_eq!(single_number(&parse_reply(None, b"on")), None);
        assert_eq!(single_number(&parse_reply(None, b"NaN")), None);
        assert_eq!(single_number(&parse_reply(Some(ContentFormat::CBOR), &[0xff])), None);
        let s = senml::encode_json(&[Record::num("a", 1.0), Record::num("b", 2.0)]);
        let r = parse_reply(Some(ContentFormat::SENML_JSON), &s);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].name, vec!["b".to_string()]);
    }
}
