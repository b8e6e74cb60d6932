//! Errors of the HTTP side as RFC 9457 problem documents (`application/problem+json`), carrying the CoAP
//! code and diagnostic when a CoAP answer is what went wrong.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use corral_tokio::Code;

/// An RFC 9457 problem: `type` is `about:blank`, so `title` is the status's reason phrase.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: StatusCode,
    pub detail: String,
    /// The CoAP response code behind it (`4.03`), if any.
    pub coap_code: Option<Code>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem { status, detail: detail.into(), coap_code: None }
    }

    /// A CoAP error answer as a problem: the status by RFC 8075's table, the diagnostic payload as detail.
    pub fn from_coap(code: Code, payload: &[u8]) -> Problem {
        let diagnostic = String::from_utf8_lossy(payload).trim().to_string();
        let detail = if diagnostic.is_empty() { format!("the CoAP answer was {code:#}") } else { diagnostic };
        Problem { status: super::mapping::status_of(code), detail, coap_code: Some(code) }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({
            "type": "about:blank",
            "title": self.status.canonical_reason().unwrap_or(""),
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        if let Some(c) = self.coap_code {
            body["coap_code"] = serde_json::Value::String(c.to_string());
        }
        (self.status, [(header::CONTENT_TYPE, "application/problem+json")], format!("{body}\n")).into_response()
    }
}
