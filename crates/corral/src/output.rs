//! How responses are shown: readable text for people, JSON for scripts.

use corral_tokio::corral_proto::wire::{OptionFormat, Options};
use corral_tokio::{ContentFormat, OptionNumber, Response, TransferProgress};
use serde_json::{json, Value};
use std::fmt::Write;
use std::net::SocketAddr;

/// An option value rendered by the option's registered format.
pub fn option_value(number: OptionNumber, value: &[u8]) -> String {
    let format = number.def().map(|d| d.format).unwrap_or(OptionFormat::Opaque);
    match format {
        OptionFormat::Empty => String::new(),
        OptionFormat::Uint => {
            let v = corral_tokio::corral_proto::wire::decode_uint(value).unwrap_or(0);
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
}
