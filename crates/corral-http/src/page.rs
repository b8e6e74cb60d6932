//! What every HTML page of the window shares: the style, escaping, and the page a refused form gets.
//!
//! Owns: those pieces. Must never: decide anything. It sits below the console, the proxy's page and the
//! window's rules, so that the rules can answer a refused form with a page without importing the console.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

/// The style of every console page (the gateway's and the proxy's).
pub(super) const STYLE: &str = include_str!("console.css");

/// `s` for HTML text and attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Not markup, but the template's placeholders: text from a request never becomes one.
            '{' => o.push_str("&#123;"),
            c => o.push(c),
        }
    }
    o
}

/// A form the window's rules refused (role, origin, token), as a page that says so and leads back.
pub(super) fn refused(status: StatusCode, detail: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>corral: refused</title>\
         <style>\n{STYLE}</style></head><body><h1>Refused</h1><p class=\"notice\" role=\"alert\">{}</p>\
         <p><a href=\"/\">Back to the console</a></p></body></html>\n",
        esc(detail)
    );
    (status, Html(html)).into_response()
}
