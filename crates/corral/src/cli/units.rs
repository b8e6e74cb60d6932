//! Durations on the command line: the one parser behind every time flag of every verb (`-B`, `-s`,
//! `--timeout`, `--interval`, `--delay`, `--leisure`, …), and how durations are shown back.
//!
//! A duration is a number with a unit — `250ms`, `2s`, `1.5s`, `90us`, `2m`, `1h` — and a bare number is
//! seconds, on every flag (as `--help` says; the flags that once read milliseconds refused a bare number
//! for a while, and no longer do: `--timeout 3` is three seconds).
//!
//! Owns: the syntax and the range checks (with messages that state the range the flag accepts). Never
//! reads a clock.

use std::time::Duration;

/// What a flag accepts.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    /// Zero allowed (`min` is then ignored for zero).
    pub zero: bool,
    pub min: Duration,
    pub max: Duration,
}

pub const DAY: Duration = Duration::from_secs(86_400);
pub const HOUR: Duration = Duration::from_secs(3_600);

impl Range {
    /// Above zero, at most `max`.
    pub const fn positive(max: Duration) -> Range {
        Range { zero: false, min: Duration::from_nanos(1), max }
    }

    /// Zero to `max`.
    pub const fn up_to(max: Duration) -> Range {
        Range { zero: true, min: Duration::ZERO, max }
    }

    /// From `min` to `max` (zero excluded unless `min` is zero).
    pub const fn between(min: Duration, max: Duration) -> Range {
        Range { zero: min.is_zero(), min, max }
    }

    fn describe(&self) -> String {
        if self.zero {
            format!("a duration from 0 to {}", show(self.max))
        } else if self.min <= Duration::from_nanos(1) {
            format!("a duration above 0 and at most {}", show(self.max))
        } else {
            format!("a duration from {} to {}", show(self.min), show(self.max))
        }
    }

    /// Parses `s` (see the module docs) and checks it against the range.
    pub fn parse(&self, s: &str) -> Result<Duration, String> {
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let example = "e.g. 250ms, 2s or 1.5 (a bare number is seconds)";
        let value: f64 = match num.parse() {
            Ok(v) if !num.is_empty() => v,
            _ => return Err(format!("`{s}` is not a duration: give a number and a unit, {example}")),
        };
        let scale = match unit.trim() {
            "" | "s" | "sec" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => return Err(format!("`{s}`: unknown unit `{other}` (use ns, us, ms, s, m or h; {example})")),
        };
        let secs = value * scale;
        let d = if secs.is_finite() && secs <= self.max.as_secs_f64() {
            Duration::from_secs_f64(secs)
        } else {
            self.max + Duration::from_secs(1)
        };
        let ok = if d.is_zero() { self.zero } else { d >= self.min && d <= self.max };
        if ok {
            Ok(d)
        } else {
            Err(format!("`{s}` is out of range: give {}, {example}", self.describe()))
        }
    }
}

/// A clap value parser for a flag kept as seconds in an `f64`.
pub fn secs(range: Range) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s| range.parse(s).map(|d| d.as_secs_f64())
}

/// A clap value parser for a flag kept as whole milliseconds (rounded up, so that 1us is not 0).
pub fn millis(range: Range) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s| range.parse(s).map(|d| u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX))
}

/// A clap value parser for a flag kept as whole seconds (rounded up).
pub fn whole_secs(range: Range) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s| range.parse(s).map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// `0.25` rather than `0.25000000000000006`; no `-0`.
fn trim_float(v: f64) -> String {
    let r = (v * 1e6).round() / 1e6 + 0.0;
    format!("{r}")
}

/// A duration as a person writes it, in a form the parser reads back: `250ms`, `2s`, `1.5s`, `90us`.
pub fn show(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0s".into()
    } else if us < 1_000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{}ms", trim_float(us as f64 / 1e3))
    } else {
        format!("{}s", trim_float(d.as_secs_f64()))
    }
}

/// Seconds (as kept in an `f64` flag) shown as [`show`] does.
pub fn show_secs(secs: f64) -> String {
    show(Duration::from_secs_f64(secs.max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn units_and_bare_seconds() {
        let r = Range::positive(DAY);
        assert_eq!(r.parse("250ms"), Ok(ms(250)));
        assert_eq!(r.parse("2s"), Ok(ms(2000)));
        assert_eq!(r.parse("1.5s"), Ok(ms(1500)));
        assert_eq!(r.parse("1.5"), Ok(ms(1500)), "a bare number is seconds");
        assert_eq!(r.parse("10"), Ok(ms(10_000)));
        assert_eq!(r.parse("90us"), Ok(Duration::from_micros(90)));
        assert_eq!(r.parse("2m"), Ok(ms(120_000)));
        assert_eq!(r.parse(" 1h "), Ok(ms(3_600_000)));
        for bad in ["", "fast", "-1", "1 parsec", "1e3", "ms", "1.2.3s", "NaN", "inf"] {
            assert!(r.parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_say_what_they_accept() {
        let r = Range::positive(DAY);
        let e = r.parse("0").unwrap_err();
        assert!(e.contains("above 0 and at most 86400s"), "no contradiction such as `between 0 and 86400`: {e}");
        assert!(r.parse("86401").unwrap_err().contains("out of range"));
        assert_eq!(r.parse("86400"), Ok(DAY));
        assert_eq!(Range::up_to(HOUR).parse("0"), Ok(Duration::ZERO));
        let e = Range::between(ms(10), DAY).parse("5ms").unwrap_err();
        assert!(e.contains("from 10ms to 86400s"), "{e}");
        assert_eq!(Range::between(ms(10), DAY).parse("10ms"), Ok(ms(10)));
    }

    #[test]
    fn a_bare_number_is_seconds_on_every_flag() {
        // Issue 46: the flags that read milliseconds once refused a bare number; the help says seconds.
        let r = Range::up_to(HOUR);
        assert_eq!(r.parse("3"), Ok(ms(3000)));
        assert_eq!(r.parse("0"), Ok(Duration::ZERO));
        assert_eq!(r.parse("100ms"), Ok(ms(100)));
    }

    #[test]
    fn adapters_and_display() {
        assert_eq!(millis(Range::positive(HOUR))("10ms"), Ok(10));
        assert_eq!(millis(Range::positive(HOUR))("1us"), Ok(1), "rounded up, never 0");
        assert_eq!(secs(Range::positive(HOUR))("250ms"), Ok(0.25));
        assert_eq!(whole_secs(Range::up_to(DAY))("10m"), Ok(600));
        assert_eq!(show(ms(250)), "250ms");
        assert_eq!(show(ms(1500)), "1.5s");
        assert_eq!(show(ms(10_000)), "10s");
        assert_eq!(show(Duration::from_micros(90)), "90us");
        assert_eq!(show_secs(0.1 + 0.2), "300ms");
        for d in [ms(250), ms(1500), Duration::from_micros(90), ms(86_400_000)] {
            assert_eq!(Range::up_to(DAY).parse(&show(d)), Ok(d), "{d:?} reads back");
        }
    }
}
