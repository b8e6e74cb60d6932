//! Sweep points: the axes a scenario can sweep, in their fixed expansion order, one value of an axis, and
//! a point — its index in the full sweep and its value on every swept axis.

use crate::error::ScenarioError;
use std::fmt;

/// The sweep axes, in expansion order (the last varies fastest).
pub const AXES: &[&str] = &[
    "layout",
    "mode",
    "usage",
    "group",
    "ack_timeout_ms",
    "leisure_ms",
    "processing_delay_ms",
    "rx_queue",
    "cca_busy_prob",
    "corruption_prob",
    "wifi_mbps",
    "delay",
    "follow",
    "forwarding",
    "consumers",
    "scheme",
    "protocol",
    "solution",
    "buffer",
    "loss",
    "impairment",
    "payload",
    "rate",
    "snr_db",
    "interval_ms",
    "deployment",
    "lifetime_s",
    "security",
    "hops",
    "replicate",
];

/// One value of an axis.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisValue {
    Num(f64),
    Text(String),
}

impl AxisValue {
    pub(crate) fn from_toml(axis: &str, v: &toml::Value) -> Result<AxisValue, ScenarioError> {
        match v {
            toml::Value::Integer(i) => Ok(AxisValue::Num(*i as f64)),
            toml::Value::Float(f) if f.is_finite() => Ok(AxisValue::Num(*f)),
            toml::Value::String(s) if !s.is_empty() && !s.contains([',', '"', '\n']) => Ok(AxisValue::Text(s.clone())),
            other => Err(ScenarioError::invalid(format!("sweep.{axis}: {other} is not a number or a plain word"))),
        }
    }

    pub fn num(&self) -> Option<f64> {
        match self {
            AxisValue::Num(n) => Some(*n),
            AxisValue::Text(_) => None,
        }
    }

    /// The number of a numeric axis's value, or an error naming the axis (its range was checked when the
    /// scenario parsed: `super::ranges`).
    pub(crate) fn number(&self, axis: &str) -> Result<f64, ScenarioError> {
        self.num().ok_or_else(|| ScenarioError::invalid(format!("sweep.{axis}: {self} is not a number")))
    }

    /// The value of a whole-number axis in the field's type.
    pub(crate) fn whole<T: TryFrom<u64>>(&self, axis: &str) -> Result<T, ScenarioError> {
        let x = self.number(axis)?;
        let bad = || ScenarioError::invalid(format!("sweep.{axis}: {self} is not a whole number in range"));
        if x < 0.0 || x.fract() != 0.0 || x > u64::MAX as f64 {
            return Err(bad());
        }
        T::try_from(x as u64).map_err(|_| bad())
    }

    /// Parses a value as written by `Display` (CSV round trip).
    pub fn parse(s: &str) -> AxisValue {
        match s.parse::<f64>() {
            Ok(n) if n.is_finite() => AxisValue::Num(n),
            _ => AxisValue::Text(s.to_string()),
        }
    }
}

impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisValue::Num(n) => write!(f, "{}", crate::record::num(*n)),
            AxisValue::Text(s) => f.write_str(s),
        }
    }
}

/// One sweep point: its index in the full sweep and its axis values (in [`AXES`] order).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub index: usize,
    pub values: Vec<(String, AxisValue)>,
}

impl Point {
    pub fn get(&self, axis: &str) -> Option<&AxisValue> {
        self.values.iter().find(|(a, _)| a == axis).map(|(_, v)| v)
    }

    /// `delay=50 group=5`.
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return "(single point)".into();
        }
        self.values.iter().map(|(a, v)| format!("{a}={v}")).collect::<Vec<_>>().join(" ")
    }
}
