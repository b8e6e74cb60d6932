//! SenML (RFC 8428): records and packs in JSON (content format 110) and CBOR (112), with resolution of
//! base fields and the checks of §4 (names, exactly one value).
//!
//! Owns: the SenML data model and its two encodings. The architecture lists SenML under corral-wire, but
//! it needs serde and a CBOR codec and only the Entity Manager produces it, so it lives here *(decision)*;
//! it can move down once another crate needs it.
//!
//! CBOR uses the integer labels of RFC 8428 §6: bver −1, bn −2, bt −3, bu −4, bv −5, bs −6, n 0, u 1, v 2,
//! vs 3, vb 4, s 5, t 6, ut 7, vd 8.

use ciborium::Value as Cbor;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One SenML record. Every field is optional on the wire; [`resolve`] checks the rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bver: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bt: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bu: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bv: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub u: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vb: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ut: Option<f64>,
}

/// A resolved record's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Num(f64),
    Str(String),
    Bool(bool),
    /// Base64url data (`vd`), kept as text.
    Data(String),
}

/// A record after base fields were applied (RFC 8428 §4.6).
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub name: String,
    pub unit: Option<String>,
    pub value: Option<Value>,
    pub sum: Option<f64>,
    pub time: Option<f64>,
}

/// Why a pack is not valid SenML. The decoders' own errors (serde_json, ciborium) are kept as their text:
/// it is only ever shown to a person, in the answer that refuses the pack.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SenmlError {
    /// The JSON does not parse as an array of objects (the parser's message).
    NotJsonArray(String),
    /// A JSON record does not have the SenML fields' types (the parser's message).
    BadRecord(String),
    /// The bytes are not CBOR (the parser's message).
    NotCbor(String),
    /// The CBOR is not an array.
    NotCborArray,
    /// A CBOR record is not a map.
    RecordNotMap,
    /// A CBOR label is neither an integer nor text.
    BadLabel,
    /// A label ending in `_` (RFC 8428 §4.4: must understand), which this decoder does not know.
    MustUnderstand(String),
    /// A label's value is not a number.
    NotANumber(&'static str),
    /// A label's value is not a text string.
    NotText(&'static str),
    /// `vb` is not a boolean.
    VbNotBoolean,
    /// Record `index`'s resolved name is empty or has characters outside the allowed set.
    BadName { index: usize, name: String },
    /// Record `index` has more than one of `v`, `vs`, `vb`, `vd`.
    ManyValues { index: usize, name: String },
    /// Record `index` has neither a value nor a sum.
    NoValue { index: usize, name: String },
}

impl fmt::Display for SenmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid SenML: ")?;
        match self {
            SenmlError::NotJsonArray(e) => write!(f, "not a JSON array of objects: {e}"),
            SenmlError::BadRecord(e) => write!(f, "bad record: {e}"),
            SenmlError::NotCbor(e) => write!(f, "not CBOR: {e}"),
            SenmlError::NotCborArray => f.write_str("not a CBOR array"),
            SenmlError::RecordNotMap => f.write_str("a record is not a map"),
            SenmlError::BadLabel => f.write_str("a label is neither an integer nor text"),
            SenmlError::MustUnderstand(label) => write!(f, "unsupported must-understand label {label}"),
            SenmlError::NotANumber(label) => write!(f, "{label} must be a number"),
            SenmlError::NotText(label) => write!(f, "{label} must be a text string"),
            SenmlError::VbNotBoolean => f.write_str("vb must be a boolean"),
            SenmlError::BadName { index, name } => {
                write!(f, "record {index}: name {name:?} is empty or has characters outside [A-Za-z0-9-:./_]")
            }
            SenmlError::ManyValues { index, name } => {
                write!(f, "record {index} ({name}) has more than one value field")
            }
            SenmlError::NoValue { index, name } => write!(f, "record {index} ({name}) has neither a value nor a sum"),
        }
    }
}

impl std::error::Error for SenmlError {}

/// Whether a resolved name is legal: non-empty, starts with a letter or digit, only `[A-Za-z0-9-:./_]`.
pub fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphanumeric()) && name.chars().all(crate::uri::senml_name_char)
}

impl Record {
    pub fn num(name: impl Into<String>, v: f64) -> Record {
        Record { n: Some(name.into()), v: Some(v), ..Record::default() }
    }

    pub fn with_value(mut self, value: &Value) -> Record {
        match value {
            Value::Num(x) => self.v = Some(*x),
            Value::Str(s) => self.vs = Some(s.clone()),
            Value::Bool(b) => self.vb = Some(*b),
            Value::Data(d) => self.vd = Some(d.clone()),
        }
        self
    }
}

/// Encodes a pack as SenML JSON (110).
pub fn encode_json(pack: &[Record]) -> Vec<u8> {
    // Serialising plain structs of strings and finite numbers cannot fail; non-finite numbers become null.
    serde_json::to_vec(pack).unwrap_or_else(|_| b"[]".to_vec())
}

/// Decodes a SenML JSON pack (no resolution).
pub fn decode_json(bytes: &[u8]) -> Result<Vec<Record>, SenmlError> {
    let raw: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(bytes).map_err(|e| SenmlError::NotJsonArray(e.to_string()))?;
    raw.into_iter()
        .map(|m| {
            if let Some(k) = m.keys().find(|k| k.ends_with('_')) {
                return Err(SenmlError::MustUnderstand(k.clone()));
            }
            serde_json::from_value(serde_json::Value::Object(m)).map_err(|e| SenmlError::BadRecord(e.to_string()))
        })
        .collect()
}

fn f(v: f64) -> Cbor {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Cbor::Integer((v as i64).into())
    } else {
        Cbor::Float(v)
    }
}

/// Encodes a pack as SenML CBOR (112) with the integer labels of RFC 8428 §6.
pub fn encode_cbor(pack: &[Record]) -> Vec<u8> {
    let arr: Vec<Cbor> = pack
        .iter()
        .map(|r| {
            let mut m: Vec<(Cbor, Cbor)> = Vec::new();
            let mut put = |label: i64, v: Cbor| m.push((Cbor::Integer(label.into()), v));
            if let Some(x) = r.bver {
                put(-1, Cbor::Integer(x.into()));
            }
            if let Some(x) = &r.bn {
                put(-2, Cbor::Text(x.clone()));
            }
            if let Some(x) = r.bt {
                put(-3, f(x));
            }
            if let Some(x) = &r.bu {
                put(-4, Cbor::Text(x.clone()));
            }
            if let Some(x) = r.bv {
                put(-5, f(x));
            }
            if let Some(x) = r.bs {
                put(-6, f(x));
            }
            if let Some(x) = &r.n {
                put(0, Cbor::Text(x.clone()));
            }
            if let Some(x) = &r.u {
                put(1, Cbor::Text(x.clone()));
            }
            if let Some(x) = r.v {
                put(2, f(x));
            }
            if let Some(x) = &r.vs {
                put(3, Cbor::Text(x.clone()));
            }
            if let Some(x) = r.vb {
                put(4, Cbor::Bool(x));
            }
            if let Some(x) = r.s {
                put(5, f(x));
            }
            if let Some(x) = r.t {
                put(6, f(x));
            }
            if let Some(x) = r.ut {
                put(7, f(x));
            }
            if let Some(x) = &r.vd {
                put(8, Cbor::Text(x.clone()));
            }
            Cbor::Map(m)
        })
        .collect();
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = ciborium::into_writer(&Cbor::Array(arr), &mut out);
    out
}

fn cbor_num(v: &Cbor, label: &'static str) -> Result<f64, SenmlError> {
    match v {
        Cbor::Integer(i) => Ok(i128::from(*i) as f64),
        Cbor::Float(x) => Ok(*x),
        _ => Err(SenmlError::NotANumber(label)),
    }
}

fn cbor_text(v: &Cbor, label: &'static str) -> Result<String, SenmlError> {
    match v {
        Cbor::Text(s) => Ok(s.clone()),
        _ => Err(SenmlError::NotText(label)),
    }
}

/// Decodes a SenML CBOR pack (no resolution). Text labels (as in JSON) are accepted too.
pub fn decode_cbor(bytes: &[u8]) -> Result<Vec<Record>, SenmlError> {
    let v: Cbor = ciborium::from_reader(bytes).map_err(|e| SenmlError::NotCbor(e.to_string()))?;
    let Cbor::Array(items) = v else { return Err(SenmlError::NotCborArray) };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Cbor::Map(entries) = item else { return Err(SenmlError::RecordNotMap) };
        let mut r = Record::default();
        for (k, v) in entries {
            let label: i128 = match &k {
                Cbor::Integer(i) => i128::from(*i),
                Cbor::Text(t) => match t.as_str() {
                    "bver" => -1,
                    "bn" => -2,
                    "bt" => -3,
                    "bu" => -4,
                    "bv" => -5,
                    "bs" => -6,
                    "n" => 0,
                    "u" => 1,
                    "v" => 2,
                    "vs" => 3,
                    "vb" => 4,
                    "s" => 5,
                    "t" => 6,
                    "ut" => 7,
                    "vd" => 8,
                    other if other.ends_with('_') => return Err(SenmlError::MustUnderstand(other.to_string())),
                    _ => continue,
                },
                _ => return Err(SenmlError::BadLabel),
            };
            match label {
                -1 => r.bver = Some(cbor_num(&v, "bver")? as i64),
                -2 => r.bn = Some(cbor_text(&v, "bn")?),
                -3 => r.bt = Some(cbor_num(&v, "bt")?),
                -4 => r.bu = Some(cbor_text(&v, "bu")?),
                -5 => r.bv = Some(cbor_num(&v, "bv")?),
                -6 => r.bs = Some(cbor_num(&v, "bs")?),
                0 => r.n = Some(cbor_text(&v, "n")?),
                1 => r.u = Some(cbor_text(&v, "u")?),
                2 => r.v = Some(cbor_num(&v, "v")?),
                3 => r.vs = Some(cbor_text(&v, "vs")?),
                4 => {
                    r.vb = Some(match v {
                        Cbor::Bool(b) => b,
                        _ => return Err(SenmlError::VbNotBoolean),
                    })
                }
                5 => r.s = Some(cbor_num(&v, "s")?),
                6 => r.t = Some(cbor_num(&v, "t")?),
                7 => r.ut = Some(cbor_num(&v, "ut")?),
                8 => r.vd = Some(cbor_text(&v, "vd")?),
                _ => {} // unknown labels are ignored (RFC 8428 §12.2)
            }
        }
        out.push(r);
    }
    Ok(out)
}

/// Resolves a pack (RFC 8428 §4.6): applies base name, time, unit, value and sum to each record and checks
/// names and that each record has exactly one value (or a sum).
pub fn resolve(pack: &[Record]) -> Result<Vec<Resolved>, SenmlError> {
    let (mut bn, mut bt, mut bu, mut bv, mut bs) = (String::new(), 0.0, None::<String>, None::<f64>, None::<f64>);
    let mut out = Vec::with_capacity(pack.len());
    for (i, r) in pack.iter().enumerate() {
        if let Some(x) = &r.bn {
            bn = x.clone();
        }
        if let Some(x) = r.bt {
            bt = x;
        }
        if let Some(x) = &r.bu {
            bu = Some(x.clone());
        }
        if let Some(x) = r.bv {
            bv = Some(x);
        }
        if let Some(x) = r.bs {
            bs = Some(x);
        }
        let name = format!("{bn}{}", r.n.as_deref().unwrap_or(""));
        if !valid_name(&name) {
            return Err(SenmlError::BadName { index: i, name });
        }
        let values = [r.v.is_some(), r.vs.is_some(), r.vb.is_some(), r.vd.is_some()].iter().filter(|b| **b).count();
        if values > 1 {
            return Err(SenmlError::ManyValues { index: i, name });
        }
        let value = match (r.v, &r.vs, r.vb, &r.vd) {
            (Some(v), ..) => Some(Value::Num(v + bv.unwrap_or(0.0))),
            (None, Some(s), ..) => Some(Value::Str(s.clone())),
            (None, None, Some(b), _) => Some(Value::Bool(b)),
            (None, None, None, Some(d)) => Some(Value::Data(d.clone())),
            _ => bv.map(Value::Num),
        };
        let sum = r.s.map(|s| s + bs.unwrap_or(0.0));
        if value.is_none() && sum.is_none() {
            return Err(SenmlError::NoValue { index: i, name });
        }
        out.push(Resolved {
            name,
            unit: r.u.clone().or_else(|| bu.clone()),
            value,
            sum,
            time: if r.t.is_some() || bt != 0.0 { Some(bt + r.t.unwrap_or(0.0)) } else { None },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack() -> Vec<Record> {
        vec![
            Record { bn: Some("urn:dev:ow:10e2073a01080063:".into()), ..Record::num("temp", 23.1) },
            Record { vs: Some("on".into()), n: Some("sw".into()), ..Record::default() },
            Record { vb: Some(true), n: Some("door".into()), u: Some("/".into()), ..Record::default() },
        ]
    }

    #[test]
    fn json_round_trip_and_resolution() {
        let bytes = encode_json(&pack());
        let back = decode_json(&bytes).unwrap();
        assert_eq!(back, pack());
        let r = resolve(&back).unwrap();
        assert_eq!(r[0].name, "urn:dev:ow:10e2073a01080063:temp");
        assert_eq!(r[1].value, Some(Value::Str("on".into())));
        assert_eq!(r[1].name, "urn:dev:ow:10e2073a01080063:sw");
    }

    #[test]
    fn cbor_round_trip_uses_integer_labels() {
        let bytes = encode_cbor(&[Record { bn: Some("a/".into()), ..Record::num("b", 1.5) }]);
        // [{-2: "a/", 0: "b", 2: 1.5}]
        let v: Cbor = ciborium::from_reader(&bytes[..]).unwrap();
        let Cbor::Array(a) = v else { panic!() };
        let Cbor::Map(m) = &a[0] else { panic!() };
        let labels: Vec<i128> = m.iter().map(|(k, _)| i128::from(k.as_integer().unwrap())).collect();
        assert_eq!(labels, vec![-2, 0, 2]);
        assert_eq!(decode_cbor(&encode_cbor(&pack())).unwrap(), pack());
    }

    #[test]
    fn rfc8428_json_example_and_bad_packs() {
        // RFC 8428 §5.1.2 (abridged).
        let ex = br#"[{"bn":"urn:dev:ow:10e2073a01080063:","n":"voltage","u":"V","v":120.1},{"n":"current","u":"A","v":1.2}]"#;
        let r = resolve(&decode_json(ex).unwrap()).unwrap();
        assert_eq!(r[1].name, "urn:dev:ow:10e2073a01080063:current");
        assert_eq!(r[1].value, Some(Value::Num(1.2)));
        assert!(resolve(&decode_json(br#"[{"n":"a b","v":1}]"#).unwrap()).is_err());
        assert!(resolve(&decode_json(br#"[{"n":"a","v":1,"vs":"x"}]"#).unwrap()).is_err());
        assert!(resolve(&decode_json(br#"[{"n":"a"}]"#).unwrap()).is_err());
        assert!(decode_json(br#"[{"n":"a","v":1,"x_":2}]"#).is_err());
        assert!(decode_cbor(&[0xff, 0x00]).is_err());
        assert!(decode_json(b"{").is_err());
    }
}
