//! Content-Format numbers (IANA "CoAP Content-Formats").

use core::fmt;

/// A Content-Format (RFC 7252 §12.3), as carried in Content-Format and Accept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentFormat(pub u16);

macro_rules! formats {
    ($($name:ident = $num:literal, $mime:literal;)*) => {
        impl ContentFormat {
            $( pub const $name: ContentFormat = ContentFormat($num); )*

            /// The media type, e.g. `application/json` for 50.
            pub fn media_type(self) -> Option<&'static str> {
                match self.0 {
                    $( $num => Some($mime), )*
                    _ => None,
                }
            }

            /// Looks up a media type or a short name (`text`, `json`, `cbor`, `link`, `senml+json`, …) or a number.
            pub fn parse(s: &str) -> Option<ContentFormat> {
                let s = s.trim();
                if let Ok(n) = s.parse::<u16>() {
                    return Some(ContentFormat(n));
                }
                $( if $mime.eq_ignore_ascii_case(s) { return Some(ContentFormat($num)); } )*
                let short = match s.to_ascii_lowercase().as_str() {
                    "text" | "plain" | "txt" => 0,
                    "link" | "link-format" => 40,
                    "xml" => 41,
                    "octet" | "octet-stream" | "binary" => 42,
                    "exi" => 47,
                    "json" => 50,
                    "json-patch" => 51,
                    "merge-patch" => 52,
                    "cbor" => 60,
                    "senml+json" | "senml-json" | "senml" => 110,
                    "sensml+json" => 111,
                    "senml+cbor" | "senml-cbor" => 112,
                    "sensml+cbor" => 113,
                    "coap-group+json" => 256,
                    _ => return None,
                };
                Some(ContentFormat(short))
            }
        }
    };
}

formats! {
    TEXT_PLAIN = 0, "text/plain;charset=utf-8";
    LINK_FORMAT = 40, "application/link-format";
    XML = 41, "application/xml";
    OCTET_STREAM = 42, "application/octet-stream";
    EXI = 47, "application/exi";
    JSON = 50, "application/json";
    JSON_PATCH = 51, "application/json-patch+json";
    MERGE_PATCH = 52, "application/merge-patch+json";
    CBOR = 60, "application/cbor";
    SENML_JSON = 110, "application/senml+json";
    SENSML_JSON = 111, "application/sensml+json";
    SENML_CBOR = 112, "application/senml+cbor";
    SENSML_CBOR = 113, "application/sensml+cbor";
    COAP_GROUP_JSON = 256, "application/coap-group+json";
}

impl ContentFormat {
    /// Formats whose payload is text a terminal can show.
    pub fn is_text(self) -> bool {
        matches!(self.0, 0 | 40 | 41 | 50 | 51 | 52 | 110 | 111 | 256)
    }
}

impl fmt::Display for ContentFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.media_type() {
            Some(m) => f.write_str(m),
            None => write!(f, "{}", self.0),
        }
    }
}

impl fmt::Debug for ContentFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentFormat({}={self})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lookup() {
        assert_eq!(ContentFormat::parse("json"), Some(ContentFormat::JSON));
        assert_eq!(ContentFormat::parse("application/senml+cbor"), Some(ContentFormat::SENML_CBOR));
        assert_eq!(ContentFormat::parse("112"), Some(ContentFormat(112)));
        assert_eq!(ContentFormat::parse("nope"), None);
        assert_eq!(ContentFormat::LINK_FORMAT.media_type(), Some("application/link-format"));
    }
}
