//! The HTTP↔CoAP mapping of RFC 8075 that every HTTP route of the window speaks: a CoAP response code as an
//! HTTP status (§7), Content-Format ↔ media type (§6), a CoAP response as an HTTP one.
//!
//! Owns: those tables and conversions. Must never: decide who may reach what (`hc`, `rules`) or send
//! anything. It sits below every route (the cross-proxy, the admin API, the console, the problem
//! documents), so that none of them imports another for it.

use super::Problem;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use corral_tokio::{Code, ContentFormat, OptionNumber};

/// RFC 8075 §7: the HTTP status for a CoAP response code.
pub fn status_of(code: Code) -> StatusCode {
    let s = match (code.class(), code.detail()) {
        (2, 1) => 201,
        (2, 3) => 304,
        (2, _) => 200,
        (4, 1) | (4, 3) => 403,
        (4, 4) => 404,
        (4, 6) => 406,
        (4, 12) => 412,
        (4, 13) => 413,
        (4, 15) => 415,
        (4, 29) => 429,
        (4, _) => 400,
        (5, 1) => 501,
        (5, 3) => 503,
        (5, 4) => 504,
        (5, 0) => 500,
        (5, _) => 502,
        _ => 502,
    };
    StatusCode::from_u16(s).unwrap_or(StatusCode::BAD_GATEWAY)
}

/// RFC 8075 §6: the Content-Format of an HTTP media type (parameters other than charset=utf-8 of text
/// make it unknown).
pub fn content_format_of(media: &str) -> Option<ContentFormat> {
    let mut parts = media.split(';').map(str::trim);
    let base = parts.next()?.to_ascii_lowercase();
    let params: Vec<String> =
        parts.filter(|p| !p.is_empty()).map(|p| p.to_ascii_lowercase().replace(' ', "")).collect();
    if base == "text/plain" {
        return params
            .iter()
            .all(|p| p == "charset=utf-8" || p == "charset=\"utf-8\"")
            .then_some(ContentFormat::TEXT_PLAIN);
    }
    if !params.is_empty() {
        return None;
    }
    let cf = ContentFormat::parse(&base)?;
    // Only full media types: `json` or `42` are not what an HTTP client means.
    cf.media_type().filter(|m| m.eq_ignore_ascii_case(&base)).map(|_| cf)
}

/// The HTTP media type of a Content-Format (unknown ones are octets).
pub fn media_type_of(cf: ContentFormat) -> &'static str {
    match cf {
        ContentFormat::TEXT_PLAIN => "text/plain; charset=utf-8",
        cf => cf.media_type().unwrap_or("application/octet-stream"),
    }
}

/// Bytes as lowercase hex (ETags).
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An HTTP response for a CoAP one (RFC 8075 §6 and §7); an error answer becomes a problem document with
/// the CoAP diagnostic.
pub fn response_of(r: &corral_tokio::Response) -> Response {
    if !r.code.is_success() {
        return Problem::from_coap(r.code, &r.payload).into_response();
    }
    let status = status_of(r.code);
    let mut h = HeaderMap::new();
    let cf = r.options.content_format();
    if !r.payload.is_empty() || cf.is_some() {
        let media = cf.map_or("application/octet-stream", media_type_of);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    }
    if let Some(tag) = r.options.get(OptionNumber::ETAG) {
        if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", hex(tag))) {
            h.insert(header::ETAG, v);
        }
    }
    // RFC 7252 §5.10.5: no Max-Age means 60 s.
    let max_age = r.options.max_age().unwrap_or(60);
    if let Ok(v) = HeaderValue::from_str(&format!("max-age={max_age}")) {
        h.insert(header::CACHE_CONTROL, v);
    }
    let location: Vec<&str> =
        r.options.get_all(OptionNumber::LOCATION_PATH).filter_map(|s| std::str::from_utf8(s).ok()).collect();
    if !location.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&format!("/{}", location.join("/"))) {
            h.insert(header::LOCATION, v);
        }
    }
    let body = if status == StatusCode::NOT_MODIFIED { Vec::new() } else { r.payload.clone() };
    (status, h, body).into_response()
}
