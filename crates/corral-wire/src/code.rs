//! Message codes: methods, response codes and RFC 8323 signalling codes.
//!
//! A [`Code`] is the raw `c.dd` byte; it is never invalid, since a peer may send any class. Names come
//! from the IANA "CoAP Method Codes", "CoAP Response Codes" and "CoAP Signaling Codes" registries.

use core::fmt;

/// A CoAP code: 3-bit class and 5-bit detail, written `c.dd`.
///
/// <https://www.rfc-editor.org/rfc/rfc7252#section-3>
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Code(pub u8);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = ($class:literal, $detail:literal, $text:literal);)*) => {
        impl Code {
            $( $(#[$doc])* pub const $name: Code = Code(($class << 5) | $detail); )*

            /// The registered name, e.g. "Not Found" for 4.04; `None` for an unregistered code.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $( Code::$name => Some($text), )*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// 0.00: an Empty message (ACK, RST or ping), never a request.
    EMPTY = (0, 0, "Empty");
    GET = (0, 1, "GET");
    POST = (0, 2, "POST");
    PUT = (0, 3, "PUT");
    DELETE = (0, 4, "DELETE");
    /// RFC 8132.
    FETCH = (0, 5, "FETCH");
    /// RFC 8132.
    PATCH = (0, 6, "PATCH");
    /// RFC 8132.
    IPATCH = (0, 7, "iPATCH");

    CREATED = (2, 1, "Created");
    DELETED = (2, 2, "Deleted");
    VALID = (2, 3, "Valid");
    CHANGED = (2, 4, "Changed");
    CONTENT = (2, 5, "Content");
    /// RFC 7959.
    CONTINUE = (2, 31, "Continue");

    BAD_REQUEST = (4, 0, "Bad Request");
    UNAUTHORIZED = (4, 1, "Unauthorized");
    BAD_OPTION = (4, 2, "Bad Option");
    FORBIDDEN = (4, 3, "Forbidden");
    NOT_FOUND = (4, 4, "Not Found");
    METHOD_NOT_ALLOWED = (4, 5, "Method Not Allowed");
    NOT_ACCEPTABLE = (4, 6, "Not Acceptable");
    /// RFC 7959.
    REQUEST_ENTITY_INCOMPLETE = (4, 8, "Request Entity Incomplete");
    /// RFC 8132.
    CONFLICT = (4, 9, "Conflict");
    PRECONDITION_FAILED = (4, 12, "Precondition Failed");
    REQUEST_ENTITY_TOO_LARGE = (4, 13, "Request Entity Too Large");
    UNSUPPORTED_CONTENT_FORMAT = (4, 15, "Unsupported Content-Format");
    /// RFC 8132.
    UNPROCESSABLE_ENTITY = (4, 22, "Unprocessable Entity");
    /// RFC 8516.
    TOO_MANY_REQUESTS = (4, 29, "Too Many Requests");

    INTERNAL_SERVER_ERROR = (5, 0, "Internal Server Error");
    NOT_IMPLEMENTED = (5, 1, "Not Implemented");
    BAD_GATEWAY = (5, 2, "Bad Gateway");
    SERVICE_UNAVAILABLE = (5, 3, "Service Unavailable");
    GATEWAY_TIMEOUT = (5, 4, "Gateway Timeout");
    PROXYING_NOT_SUPPORTED = (5, 5, "Proxying Not Supported");
    /// RFC 8768.
    HOP_LIMIT_REACHED = (5, 8, "Hop Limit Reached");

    /// RFC 8323 §5.3: Capabilities and Settings Message.
    CSM = (7, 1, "CSM");
    /// RFC 8323 §5.4.
    PING = (7, 2, "Ping");
    /// RFC 8323 §5.4.
    PONG = (7, 3, "Pong");
    /// RFC 8323 §5.5.
    RELEASE = (7, 4, "Release");
    /// RFC 8323 §5.6.
    ABORT = (7, 5, "Abort");
}

impl Code {
    /// Builds `class.detail`; `None` if class > 7 or detail > 31.
    pub const fn new(class: u8, detail: u8) -> Option<Code> {
        if class > 7 || detail > 31 {
            None
        } else {
            Some(Code((class << 5) | detail))
        }
    }

    pub const fn class(self) -> u8 {
        self.0 >> 5
    }

    pub const fn detail(self) -> u8 {
        self.0 & 0x1f
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Class 0 with a non-zero detail: a method.
    pub const fn is_request(self) -> bool {
        self.class() == 0 && self.detail() != 0
    }

    /// Classes 2, 4 and 5 (1, 3 and 6 are reserved; 7 is signalling).
    pub const fn is_response(self) -> bool {
        matches!(self.class(), 2..=5)
    }

    pub const fn is_success(self) -> bool {
        self.class() == 2
    }

    pub const fn is_client_error(self) -> bool {
        self.class() == 4
    }

    pub const fn is_server_error(self) -> bool {
        self.class() == 5
    }

    pub const fn is_error(self) -> bool {
        matches!(self.class(), 4 | 5)
    }

    /// Class 7: RFC 8323 signalling.
    pub const fn is_signal(self) -> bool {
        self.class() == 7
    }

    /// GET, FETCH: methods whose responses may be cached (RFC 7252 §5.6, RFC 8132 §2.3.1).
    pub const fn is_cacheable_method(self) -> bool {
        matches!(self, Code::GET | Code::FETCH)
    }

    /// GET, FETCH, PUT, DELETE, iPATCH are idempotent (RFC 7252 §5.1, RFC 8132).
    pub const fn is_idempotent(self) -> bool {
        matches!(self, Code::GET | Code::FETCH | Code::PUT | Code::DELETE | Code::IPATCH)
    }

    /// Parses `"2.05"`, `"4.04"`, `"GET"` (case-insensitive) or a decimal byte.
    pub fn parse(s: &str) -> Option<Code> {
        if let Some((c, d)) = s.split_once('.') {
            return Code::new(c.parse().ok()?, d.parse().ok()?);
        }
        for m in [Code::GET, Code::POST, Code::PUT, Code::DELETE, Code::FETCH, Code::PATCH, Code::IPATCH] {
            if let Some(name) = m.name() {
                if name.eq_ignore_ascii_case(s) {
                    return Some(m);
                }
            }
        }
        s.parse::<u8>().ok().map(Code)
    }
}

impl fmt::Display for Code {
    /// `2.05`; with `{:#}`, `2.05 Content`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_request() {
            return match self.name() {
                Some(n) => f.write_str(n),
                None => write!(f, "0.{:02}", self.detail()),
            };
        }
        write!(f, "{}.{:02}", self.class(), self.detail())?;
        if f.alternate() {
            if let Some(n) = self.name() {
                write!(f, " {n}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Code({self:#})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::format;

    #[test]
    fn class_detail() {
        assert_eq!(Code::NOT_FOUND.0, 0x84);
        assert_eq!(Code::CONTENT.0, 0x45);
        assert_eq!(Code::CONTINUE.0, 0x5f);
        assert_eq!(Code::CSM.0, 0xe1);
        assert!(Code::GET.is_request());
        assert!(!Code::EMPTY.is_request());
        assert!(Code::BAD_OPTION.is_client_error());
    }

    #[test]
    fn display_and_parse() {
        assert_eq!(format!("{}", Code::NOT_FOUND), "4.04");
        assert_eq!(format!("{:#}", Code::NOT_FOUND), "4.04 Not Found");
        assert_eq!(format!("{}", Code::IPATCH), "iPATCH");
        assert_eq!(Code::parse("4.04"), Some(Code::NOT_FOUND));
        assert_eq!(Code::parse("ipatch"), Some(Code::IPATCH));
        assert_eq!(Code::parse("8.00"), None);
    }
}
