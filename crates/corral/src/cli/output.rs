//! How responses are shown: readable text for people, JSON for scripts; where they go (standard output
//! or `-o FILE`); progress lines on a terminal; numbers rounded to what was measured.

use crate::cli::exit::Failure;
use corral_tokio::corral_proto::wire::{BlockValue, OptionFormat, Options};
use corral_tokio::{ContentFormat, OptionNumber, Response, TransferProgress};
use serde_json::{json, Value};
use std::fmt::Write;
use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// An option value rendered by the option's registered format.
pub fn option_value(number: OptionNumber, value: &[u8]) -> String {
    let format = number.def().map(|d| d.format).unwrap_or(OptionFormat::Opaque);
    match format {
        OptionFormat::Empty => String::new(),
        OptionFormat::Uint => {
            let v = corral_tokio::corral_proto::wire::decode_uint(value).unwrap_or(0);
            if number == OptionNumber::BLOCK1 || number == OptionNumber::BLOCK2 {
                // NUM/M/SIZE, as libcoap shows them.
                return match BlockValue::decode(value) {
                    Some(b) => format!("{}/{}/{}", b.num, u8::from(b.more), b.size()),
                    None => v.to_string(),
                };
            }
            if number == OptionNumber::CONTENT_FORMAT || number == OptionNumber::ACCEPT {
                let cf = ContentFormat(u16::try_from(v).unwrap_or(u16::MAX));
                match cf.media_type() {
                    Some(m) => format!("{v} ({m})"),
                    None => v.to_string(),
                }
            } else {
                v.to_string()
            }
        }
        OptionFormat::String => match std::str::from_utf8(value) {
            Ok(s) => s.to_string(),
            Err(_) => format!("0x{}", hex(value)),
        },
        OptionFormat::Opaque => format!("0x{}", hex(value)),
    }
}

pub fn option_name(number: OptionNumber) -> String {
    number.name().map(str::to_string).unwrap_or_else(|| format!("Option {}", number.0))
}

pub fn hex(b: &[u8]) -> String {
    b.iter().fold(String::with_capacity(b.len() * 2), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

pub fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, x)| n | (u32::from(*x) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 0x3f) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Whether a payload is best shown as text.
pub fn is_text(options: &Options, payload: &[u8]) -> bool {
    let declared_binary = options.content_format().is_some_and(|cf| !cf.is_text());
    !declared_binary && std::str::from_utf8(payload).is_ok()
}

/// Whether a response says its payload is text (text/plain, JSON, link-format, XML, …): such a payload
/// ends with a newline on standard output, as libcoap's coap-client prints it. A payload without a
/// Content-Format is shown as it came.
pub fn declares_text(options: &Options) -> bool {
    options.content_format().is_some_and(|cf| cf.is_text())
}

/// The whole response as JSON: code, options by name, payload as text or base64.
pub fn response_json(from: Option<SocketAddr>, r: &Response) -> Value {
    let options: Vec<Value> = r
        .options
        .iter()
        .map(|(n, v)| {
            let format = n.def().map(|d| d.format).unwrap_or(OptionFormat::Opaque);
            let value = match format {
                OptionFormat::Empty => Value::Null,
                OptionFormat::Uint => json!(corral_tokio::corral_proto::wire::decode_uint(v).unwrap_or(0)),
                OptionFormat::String => match std::str::from_utf8(v) {
                    Ok(s) => json!(s),
                    Err(_) => json!(format!("0x{}", hex(v))),
                },
                OptionFormat::Opaque => json!(format!("0x{}", hex(v))),
            };
            json!({ "name": option_name(n), "number": n.0, "value": value })
        })
        .collect();
    let (payload, encoding) = if is_text(&r.options, &r.payload) {
        (json!(String::from_utf8_lossy(&r.payload)), "text")
    } else {
        (json!(base64(&r.payload)), "base64")
    };
    let mut v = json!({
        "code": r.code.to_string(),
        "code_name": r.code.name().unwrap_or(""),
        "options": options,
        "content_format": r.options.content_format().map(|cf| cf.0),
        "payload": payload,
        "payload_encoding": encoding,
        "payload_length": r.payload.len(),
    });
    if let Some(from) = from {
        v["from"] = json!(from.to_string());
    }
    v
}

/// Code and options, one per line, for `-v`.
pub fn response_head(r: &Response) -> String {
    let mut s = format!("{:#}", r.code);
    for (n, v) in r.options.iter() {
        let _ = write!(s, "\n  {}: {}", option_name(n), option_value(n, v));
    }
    s
}

/// Sends the request; on a terminal, a request still running after two seconds (a block-wise transfer over
/// a slow network, a server that is slow to answer) shows one line of progress on stderr, which is cleared
/// when the response arrives.
pub async fn send_showing_progress(
    req: corral_tokio::RequestBuilder,
    v: crate::cli::Verbosity,
) -> Result<(std::net::SocketAddr, corral_tokio::Response), corral_tokio::Error> {
    if v.quiet || !std::io::stderr().is_terminal() {
        return req.send_from().await;
    }
    let started = std::time::Instant::now();
    let mut shown = false;
    let result = req
        .send_with_progress(Duration::from_millis(500), |p| {
            if started.elapsed() >= Duration::from_secs(2) {
                shown = true;
                let mut err = std::io::stderr();
                let _ = write!(err, "\r\x1b[2K{}", progress_line(started.elapsed(), p));
                let _ = err.flush();
            }
        })
        .await;
    if shown {
        eprint!("\r\x1b[2K");
    }
    result
}

/// One line of progress for a request that is taking a while: how far its block-wise transfer has come.
pub fn progress_line(elapsed: std::time::Duration, p: Option<TransferProgress>) -> String {
    let secs = elapsed.as_secs();
    let kib = |b: usize| format!("{:.1} KiB", b as f64 / 1024.0);
    match p {
        None => format!("waiting for the response… {secs} s"),
        Some(p) => {
            let verb = if p.upload { "sent" } else { "received" };
            match p.total.filter(|t| *t > 0) {
                Some(t) => format!("{verb} {} of {} ({} %)… {secs} s", kib(p.done), kib(t), p.done * 100 / t),
                None => format!("{verb} {}… {secs} s", kib(p.done)),
            }
        }
    }
}

/// A measured number for JSON, rounded to `decimals` places (what the measurement resolves) and never
/// `-0`.
pub fn rounded(v: f64, decimals: i32) -> Value {
    if !v.is_finite() {
        return Value::Null;
    }
    let f = 10f64.powi(decimals);
    json!((v * f).round() / f + 0.0)
}

/// A measured number for people, with `decimals` places: `0.0`, never `-0.0` (a difference of two medians
/// that rounds to nothing is no difference).
pub fn fixed(v: f64, decimals: usize) -> String {
    let f = 10f64.powi(i32::try_from(decimals).unwrap_or(0));
    let r = (v * f).round() / f + 0.0;
    format!("{r:.decimals$}")
}

/// The time in UTC as RFC 3339 with milliseconds: `2026-11-26T14:30:01.123Z`.
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Where a client verb's output goes: standard output, or the file `-o` names (created when the first
/// response arrives, so that a failed request leaves no empty file).
pub struct Sink {
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
    /// `-w`: a newline after every payload.
    newline: bool,
}

impl Sink {
    pub fn new(path: Option<&Path>, newline: bool) -> Sink {
        let path = path.filter(|p| *p != Path::new("-")).map(Path::to_path_buf);
        Sink { path, file: None, newline }
    }

    fn write(&mut self, parts: &[&[u8]]) -> Result<(), Failure> {
        let Some(path) = &self.path else {
            // A closed standard output (`corral get … | head -1`) is not an error.
            let mut out = std::io::stdout().lock();
            for p in parts {
                let _ = out.write_all(p);
            }
            let _ = out.flush();
            return Ok(());
        };
        let failed = |e: std::io::Error| Failure::other(format!("cannot write {}: {e}", path.display()));
        if self.file.is_none() {
            self.file = Some(std::fs::File::create(path).map_err(failed)?);
        }
        let file = self.file.as_mut().expect("opened above");
        for p in parts {
            file.write_all(p).map_err(failed)?;
        }
        Ok(())
    }

    /// A payload as received, after `prefix`. A newline follows with `-w`; on standard output also when
    /// the payload does not end with one and is declared text ([`declares_text`]), one of several
    /// (`separate`: notifications), or going to a terminal — so that a shell prompt or the next item
    /// starts on a line of its own, while any other body piped or written to a file stays byte for byte.
    pub fn payload(&mut self, prefix: &str, payload: &[u8], text: bool, separate: bool) -> Result<(), Failure> {
        let to_stdout = self.path.is_none();
        let end: &[u8] = if self.newline
            || (to_stdout
                && !payload.is_empty()
                && !payload.ends_with(b"\n")
                && (text || separate || std::io::stdout().is_terminal()))
        {
            b"\n"
        } else {
            b""
        };
        self.write(&[prefix.as_bytes(), payload, end])
    }

    /// One line of text (JSON, a multicast answer).
    pub fn line(&mut self, line: &str) -> Result<(), Failure> {
        self.write(&[line.as_bytes(), b"\n"])
    }
}

/// Runs `work`; on a terminal (and without -q), once it has taken two seconds, keeps one line of progress
/// on stderr — `what(elapsed)` — up to date, and clears it when `work` is done.
pub async fn with_progress<T>(
    quiet: bool,
    what: impl Fn(Duration) -> String,
    work: impl std::future::Future<Output = T>,
) -> T {
    if quiet || !std::io::stderr().is_terminal() {
        return work.await;
    }
    tokio::pin!(work);
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval_at(started + Duration::from_secs(2), Duration::from_millis(500));
    let mut shown = false;
    loop {
        tokio::select! {
            r = &mut work => {
                if shown {
                    eprint!("\r\x1b[2K");
                }
                return r;
            }
            _ = tick.tick() => {
                shown = true;
                let mut err = std::io::stderr();
                let _ = write!(err, "\r\x1b[2K{}", what(started.elapsed()));
                let _ = err.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known_values() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0xfe, 0xfd, 0xfc]), "//79/A==");
    }

    #[test]
    fn progress_lines() {
        use std::time::Duration;
        let p = |upload, done, total| Some(TransferProgress { upload, done, total });
        assert_eq!(progress_line(Duration::from_secs(3), None), "waiting for the response… 3 s");
        assert_eq!(
            progress_line(Duration::from_millis(4200), p(false, 12_288, Some(1_048_576))),
            "received 12.0 KiB of 1024.0 KiB (1 %)… 4 s"
        );
        assert_eq!(progress_line(Duration::from_secs(5), p(true, 2048, None)), "sent 2.0 KiB… 5 s");
    }

    #[test]
    fn block_options_as_num_more_size() {
        assert_eq!(option_value(OptionNumber::BLOCK1, &[0xf4, 0x26]), "3906/0/1024");
        assert_eq!(option_value(OptionNumber::BLOCK2, &[0x0a]), "0/1/64");
        assert_eq!(option_value(OptionNumber::BLOCK2, &[]), "0/0/16");
    }

    #[test]
    fn measured_numbers_are_rounded_and_never_negative_zero() {
        assert_eq!(rounded(1.4585299999999994, 3).to_string(), "1.459");
        assert_eq!(rounded(2007.5440000000003, 3).to_string(), "2007.544");
        assert_eq!(rounded(-0.0001, 3).to_string(), "0.0");
        assert_eq!(rounded(f64::NAN, 3), Value::Null);
        assert_eq!(fixed(-0.0004, 3), "0.000");
        assert_eq!(fixed(-0.04, 1), "0.0");
        assert_eq!(fixed(-0.06, 1), "-0.1");
        assert_eq!(fixed(21.372, 1), "21.4");
    }

    #[test]
    fn timestamps_in_utc() {
        let t = |ms: u64| timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(t(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(t(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(t(1_795_703_401_007), "2026-11-26T14:30:01.007Z");
    }
}
