//! CoRE Link Format (RFC 6690): the `application/link-format` (Content-Format 40) documents that
//! `/.well-known/core` serves, their parser and serializer, and the query filtering of RFC 6690 §4.1.
//!
//! ```text
//! </sensors/temp>;rt="temperature-c";if="sensor";ct=0;obs,</sensors/light>;rt="light-lux"
//! ```
//!
//! One type, [`Link`], serves both directions: parsing borrows from the text (a value is copied only
//! when it contains `\` escapes), and a server builds `Link<'static>` values from string literals without
//! allocating for names. This module never decides which resources a server lists; it only writes,
//! reads and filters links.
//!
//! <https://www.rfc-editor.org/rfc/rfc6690>

use crate::{ContentFormat, Error};
use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write as _};
use core::iter::FusedIterator;

/// One link: a target URI-reference and its attributes (link-params), in document order.
///
/// Attribute names compare case-insensitively (RFC 8288 §3), values exactly. An attribute may appear
/// without a value (`obs`), which is different from an empty value (`title=""`).
///
/// <https://www.rfc-editor.org/rfc/rfc6690#section-2>
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Link<'a> {
    target: Cow<'a, str>,
    attrs: Vec<Attr<'a>>,
}

/// One link-param: its name and, unless it stands alone like `obs`, its (unescaped) value.
type Attr<'a> = (Cow<'a, str>, Option<Cow<'a, str>>);

/// A link that owns its text, e.g. one kept in a server's resource list.
pub type LinkOwned = Link<'static>;

/// Attributes whose value is a space-separated list, matched item by item when filtering: relation
/// types (`rel`, `rt`, `if`; RFC 6690 §3.1-3.2) and Content-Formats (`ct`, RFC 7252 §7.2.1).
const LIST_ATTRS: [&str; 4] = ["rel", "rt", "if", "ct"];

/// Attributes written as quoted-strings even when a token would do: `anchor` and `title` must be
/// (RFC 6690 §2 grammar). Every other value is quoted too unless it is a bare number (`ct=0`, `sz=512`),
/// as in the RFC 6690 examples and the Entity Manager's `ect="multicast"`.
const QUOTED_ATTRS: [&str; 2] = ["anchor", "title"];

fn is_one_of(name: &str, set: &[&str]) -> bool {
    set.iter().any(|s| s.eq_ignore_ascii_case(name))
}

impl<'a> Link<'a> {
    /// A link to `target` with no attributes.
    pub fn new(target: impl Into<Cow<'a, str>>) -> Link<'a> {
        Link { target: target.into(), attrs: Vec::new() }
    }

    /// The target URI-reference, exactly as written between `<` and `>`.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Every attribute as `(name, value)`, in order; repeated attributes appear repeatedly.
    pub fn attrs(&self) -> impl Iterator<Item = (&str, Option<&str>)> + '_ {
        self.attrs.iter().map(|(n, v)| (n.as_ref(), v.as_deref()))
    }

    /// Whether the attribute is present, with or without a value.
    pub fn has(&self, name: &str) -> bool {
        self.attrs().any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// The value of the first occurrence of `name` that has one.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.attrs().filter(|(n, _)| n.eq_ignore_ascii_case(name)).find_map(|(_, v)| v)
    }

    /// The space-separated items of every value of `name`: `rt="a b";rt=c` gives `a`, `b`, `c`.
    pub fn values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s str> + 's {
        self.attrs().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).flat_map(|(_, v)| split_list(v))
    }

    /// The Content-Formats listed in `ct` (RFC 7252 §7.2.1); items that are not numbers are skipped.
    pub fn content_formats(&self) -> impl Iterator<Item = ContentFormat> + '_ {
        self.values("ct").filter_map(|v| v.parse().ok().map(ContentFormat))
    }

    /// Whether this link passes the `/.well-known/core` filter `name=value`; see [`matches()`].
    pub fn matches(&self, name: &str, value: &str) -> bool {
        matches(self, name, value)
    }

    /// Copies every borrowed string, so the link outlives the text it was parsed from.
    pub fn into_owned(self) -> LinkOwned {
        Link {
            target: Cow::Owned(self.target.into_owned()),
            attrs: self
                .attrs
                .into_iter()
                .map(|(n, v)| (Cow::Owned(n.into_owned()), v.map(|v| Cow::Owned(v.into_owned()))))
                .collect(),
        }
    }

    // Builder methods, for servers describing their resources.

    /// Adds a resource type (`rt`, RFC 6690 §3.1); repeated calls extend the space-separated list.
    pub fn rt(self, resource_type: impl Into<Cow<'a, str>>) -> Self {
        self.append_item("rt", resource_type.into())
    }

    /// Adds an interface description (`if`, RFC 6690 §3.2); repeated calls extend the list.
    pub fn interface(self, interface: impl Into<Cow<'a, str>>) -> Self {
        self.append_item("if", interface.into())
    }

    /// Adds a Content-Format (`ct`, RFC 7252 §7.2.1); repeated calls give `ct="0 40"`.
    pub fn ct(self, format: ContentFormat) -> Self {
        self.append_item("ct", Cow::Owned(format.0.to_string()))
    }

    /// Adds a relation type (`rel`, RFC 8288 §3.3); repeated calls extend the list.
    pub fn rel(self, relation: impl Into<Cow<'a, str>>) -> Self {
        self.append_item("rel", relation.into())
    }

    /// Sets the estimated size in bytes (`sz`, RFC 6690 §3.3).
    pub fn sz(self, size: u64) -> Self {
        self.replace("sz", Some(Cow::Owned(size.to_string())))
    }

    /// Marks the resource observable (`obs`, RFC 7641 §6).
    pub fn obs(self) -> Self {
        self.replace("obs", None)
    }

    /// Sets the human-readable title (`title`, RFC 8288 §3.4.1).
    pub fn title(self, title: impl Into<Cow<'a, str>>) -> Self {
        self.replace("title", Some(title.into()))
    }

    /// Sets the context the link is about, instead of the resource serving the document (`anchor`).
    pub fn anchor(self, anchor: impl Into<Cow<'a, str>>) -> Self {
        self.replace("anchor", Some(anchor.into()))
    }

    /// Appends any attribute with a value, without merging with an earlier one of the same name.
    ///
    /// `name` must be a token (RFC 7230 §3.2.6 tchar); an attribute with another name cannot be written
    /// and is left out when serializing.
    pub fn attr(mut self, name: impl Into<Cow<'a, str>>, value: impl Into<Cow<'a, str>>) -> Self {
        self.attrs.push((name.into(), Some(value.into())));
        self
    }

    /// Appends any attribute without a value, like `obs`. The same rule for `name` as in [`Link::attr`].
    pub fn flag(mut self, name: impl Into<Cow<'a, str>>) -> Self {
        self.attrs.push((name.into(), None));
        self
    }

    fn append_item(mut self, name: &'static str, item: Cow<'a, str>) -> Self {
        let existing = self.attrs.iter_mut().find(|(n, v)| n.eq_ignore_ascii_case(name) && v.is_some());
        match existing {
            Some((_, Some(list))) => {
                let list = list.to_mut();
                list.push(' ');
                list.push_str(&item);
            }
            _ => self.attrs.push((Cow::Borrowed(name), Some(item))),
        }
        self
    }

    fn replace(mut self, name: &'static str, value: Option<Cow<'a, str>>) -> Self {
        self.attrs.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.attrs.push((Cow::Borrowed(name), value));
        self
    }
}

/// Writes the link in link-format: `<target>;name=value;name="quoted";flag`.
///
/// `anchor`, `title`, `rt` and `if` are always quoted; other values only when they are empty or not a
/// ptoken (RFC 8288 §3), so `ct=40` and `sz=262144` stay bare numbers while `ct="0 40"` is quoted. `"` and
/// `\` inside quotes are escaped with `\`. In the target, `<`, `>`, whitespace and control characters
/// are percent-encoded, since they cannot occur in a URI-reference and would break the framing.
impl fmt::Display for Link<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('<')?;
        for c in self.target.chars() {
            if c == '<' || c == '>' || c.is_whitespace() || c.is_control() {
                let mut utf8 = [0u8; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    write!(f, "%{b:02X}")?;
                }
            } else {
                f.write_char(c)?;
            }
        }
        f.write_char('>')?;
        for (name, value) in self.attrs() {
            if name.is_empty() || !name.bytes().all(is_tchar) {
                continue;
            }
            write!(f, ";{name}")?;
            let Some(value) = value else { continue };
            f.write_char('=')?;
            let bare_number = value.bytes().all(|b| b.is_ascii_digit());
            if value.is_empty() || is_one_of(name, &QUOTED_ATTRS) || !bare_number || !value.bytes().all(is_ptokenchar) {
                f.write_char('"')?;
                for c in value.chars() {
                    if c == '"' || c == '\\' {
                        f.write_char('\\')?;
                    }
                    f.write_char(c)?;
                }
                f.write_char('"')?;
            } else {
                f.write_str(value)?;
            }
        }
        Ok(())
    }
}

/// Appends `links` to `out` as one link-format document, separated by `,`.
///
/// A `/.well-known/core` handler filters with [`filter_query`] and [`matches()`] on the way:
///
/// ```
/// use corral_wire::link_format::{filter_query, matches, serialize, Link};
/// use corral_wire::ContentFormat;
///
/// let resources = [
///     Link::new("/sensors/temp").rt("temperature-c").interface("sensor").obs(),
///     Link::new("/sensors/light").rt("light-lux").interface("sensor").ct(ContentFormat::TEXT_PLAIN),
/// ];
/// let filter = filter_query("rt=temp*"); // the request's Uri-Query, if any
/// let mut body = String::new();
/// serialize(resources.iter().filter(|l| filter.is_none_or(|(n, v)| matches(l, n, v))), &mut body);
/// assert_eq!(body, r#"</sensors/temp>;rt="temperature-c";if="sensor";obs"#);
/// ```
///
/// <https://www.rfc-editor.org/rfc/rfc6690#section-2>
pub fn serialize<'l, 'a: 'l>(links: impl IntoIterator<Item = &'l Link<'a>>, out: &mut String) {
    for (i, link) in links.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Writing into a String cannot fail.
        let _ = write!(out, "{link}");
    }
}

/// Parses a link-format document lazily, one link per item.
///
/// Whitespace (including line breaks) is accepted around `,` and `;` and around `=`, as the RFC 6690
/// examples are written across lines. After the first error the iterator ends.
///
/// ```
/// use corral_wire::link_format;
///
/// let text = "</sensors/temp>;rt=\"temperature-c\";if=\"sensor\";obs,\n</sensors/light>;ct=\"0 40\"";
/// let links = link_format::parse(text).collect::<Result<Vec<_>, _>>().unwrap();
/// assert_eq!(links[0].target(), "/sensors/temp");
/// assert_eq!(links[0].value("rt"), Some("temperature-c"));
/// assert!(links[0].has("obs"));
/// assert_eq!(links[1].values("ct").collect::<Vec<_>>(), ["0", "40"]);
/// ```
///
/// <https://www.rfc-editor.org/rfc/rfc6690#section-2>
pub fn parse(text: &str) -> LinkIter<'_> {
    LinkIter { text, pos: 0, state: State::Start }
}

/// The links of a link-format document; see [`parse`].
#[derive(Debug, Clone)]
pub struct LinkIter<'a> {
    text: &'a str,
    pos: usize,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first link: an empty document is valid.
    Start,
    /// After a `,`: another link must follow.
    ExpectLink,
    Done,
}

impl<'a> Iterator for LinkIter<'a> {
    type Item = Result<Link<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.state == State::Done {
            return None;
        }
        self.skip_whitespace();
        if self.peek().is_none() {
            let expected_link = self.state == State::ExpectLink;
            self.state = State::Done;
            return expected_link.then_some(Err(Error::LinkFormat("expected a link after ','")));
        }
        let link = self.link();
        if link.is_err() {
            self.state = State::Done;
        }
        Some(link)
    }
}

impl FusedIterator for LinkIter<'_> {}

impl<'a> LinkIter<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// Advances over bytes matching `accept` and returns them. `accept` only takes ASCII, so the slice
    /// ends on a char boundary.
    fn take_while(&mut self, accept: fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(accept) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    /// `"<" URI-Reference ">" *( ";" link-param )`, then `,` or the end.
    fn link(&mut self) -> Result<Link<'a>, Error> {
        if self.peek() != Some(b'<') {
            return Err(Error::LinkFormat("expected '<' to start a link"));
        }
        let rest = &self.text[self.pos + 1..];
        let len = rest.find('>').ok_or(Error::LinkFormat("unterminated '<': no '>' ends the target"))?;
        let mut link = Link::new(&rest[..len]);
        self.pos += 1 + len + 1;
        loop {
            self.skip_whitespace();
            match self.peek() {
                None => {
                    self.state = State::Done;
                    return Ok(link);
                }
                Some(b',') => {
                    self.pos += 1;
                    self.state = State::ExpectLink;
                    return Ok(link);
                }
                Some(b';') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    let attr = self.link_param()?;
                    link.attrs.push(attr);
                }
                Some(_) => return Err(Error::LinkFormat("expected ';' or ',' after a target or attribute")),
            }
        }
    }

    /// `parmname [ "=" ( ptoken / quoted-string ) ]` (RFC 6690 §2 link-extension).
    fn link_param(&mut self) -> Result<Attr<'a>, Error> {
        let name = self.take_while(is_tchar);
        if name.is_empty() {
            return Err(Error::LinkFormat("expected an attribute name after ';'"));
        }
        self.skip_whitespace();
        if self.peek() != Some(b'=') {
            return Ok((Cow::Borrowed(name), None));
        }
        self.pos += 1;
        self.skip_whitespace();
        let value = if self.peek() == Some(b'"') {
            self.quoted_string()?
        } else {
            Cow::Borrowed(self.take_while(is_ptokenchar))
        };
        Ok((Cow::Borrowed(name), Some(value)))
    }

    /// A quoted-string with `\` escapes (RFC 7230 §3.2.6); borrowed unless it contains an escape.
    fn quoted_string(&mut self) -> Result<Cow<'a, str>, Error> {
        const UNTERMINATED: Error = Error::LinkFormat("unterminated quoted string");
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        // Byte-wise is safe: '"' and '\' never occur inside a multi-byte UTF-8 sequence.
        loop {
            match self.peek().ok_or(UNTERMINATED)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    if self.pos + 1 >= self.text.len() {
                        return Err(UNTERMINATED);
                    }
                    self.pos += 2;
                }
                _ => self.pos += 1,
            }
        }
        let raw = &self.text[start..self.pos];
        self.pos += 1;
        if !escaped {
            return Ok(Cow::Borrowed(raw));
        }
        let mut value = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            // A quoted-pair: the escaped character stands for itself.
            let c = if c == '\\' { chars.next().unwrap_or(c) } else { c };
            value.push(c);
        }
        Ok(Cow::Owned(value))
    }
}

/// Whether `link` passes one `/.well-known/core` query filter `name=value` (RFC 6690 §4.1).
///
/// - A trailing `*` in `value` makes it a prefix match: `rt=temp*` matches `rt="temperature-c"`, and
///   `rt=*` matches any link that has `rt`.
/// - `href` filters on the link target instead of an attribute.
/// - For the list-valued attributes `rel`, `rt`, `if` and `ct`, the filter matches when any one item of
///   the space-separated value does: `if=sensor` matches `if="sensor actuator"`.
/// - An attribute present without a value compares as the empty string, so `obs` is matched by the
///   queries `obs`, `obs=` and `obs=*`, and by nothing else.
/// - A link without the attribute never matches; repeated attributes match if any occurrence does.
///
/// Names compare case-insensitively, values exactly. The value is a decoded Uri-Query, so no
/// percent-decoding happens here.
///
/// <https://www.rfc-editor.org/rfc/rfc6690#section-4.1>
pub fn matches(link: &Link<'_>, name: &str, value: &str) -> bool {
    let (pattern, prefix) = match value.strip_suffix('*') {
        Some(pattern) => (pattern, true),
        None => (value, false),
    };
    let hit = |candidate: &str| if prefix { candidate.starts_with(pattern) } else { candidate == pattern };
    if name.eq_ignore_ascii_case("href") {
        return hit(link.target());
    }
    let list = is_one_of(name, &LIST_ATTRS);
    link.attrs().filter(|(n, _)| n.eq_ignore_ascii_case(name)).any(|(_, v)| {
        let v = v.unwrap_or("");
        if !list {
            return hit(v);
        }
        let mut items = split_list(Some(v)).peekable();
        if items.peek().is_none() {
            hit("")
        } else {
            items.any(hit)
        }
    })
}

/// Splits one Uri-Query item of a `/.well-known/core` request into a filter `(name, value)`:
/// `rt=temp*` gives `("rt", "temp*")`, `obs` gives `("obs", "")`. `None` for an item without a name.
///
/// RFC 6690 §4.1 allows one filter per request; which item to use when there are several is the
/// server's choice.
pub fn filter_query(query: &str) -> Option<(&str, &str)> {
    let (name, value) = query.split_once('=').unwrap_or((query, ""));
    (!name.is_empty()).then_some((name, value))
}

fn split_list(value: Option<&str>) -> impl Iterator<Item = &str> {
    value.unwrap_or("").split_ascii_whitespace()
}

/// RFC 7230 §3.2.6 tchar: the characters of a parmname.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 8288 (RFC 5988 §5) ptokenchar: the characters of an unquoted attribute value.
fn is_ptokenchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'()*+-./:<=>?@[]^_`{|}~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;

    fn parse_all(text: &str) -> Vec<Link<'_>> {
        parse(text).collect::<Result<_, _>>().unwrap()
    }

    fn parse_err(text: &str) -> &'static str {
        let mut links = parse(text);
        let err = links.by_ref().find_map(Result::err);
        assert!(links.next().is_none(), "{text}: the iterator must end after an error");
        match err {
            Some(Error::LinkFormat(why)) => why,
            other => panic!("{text}: expected an error, got {other:?}"),
        }
    }

    fn targets<'a>(links: impl IntoIterator<Item = &'a Link<'a>>) -> Vec<&'a str> {
        links.into_iter().map(Link::target).collect()
    }

    /// RFC 6690 §5 example 1, with the line break of the RFC's layout.
    #[test]
    fn parse_rfc6690_interfaces() {
        let links = parse_all("</sensors/temp>;if=\"sensor\",\n</sensors/light>;if=\"sensor\"");
        assert_eq!(targets(&links), ["/sensors/temp", "/sensors/light"]);
        assert!(links.iter().all(|l| l.value("if") == Some("sensor")));
        assert!(links.iter().all(|l| l.matches("if", "sensor")));
    }

    /// RFC 6690 §5: the index with anchors and relations, written across lines as in the RFC.
    const RFC6690_INDEX: &str = "</sensors>;ct=40;title=\"Sensor Index\",\n\
        </sensors/temp>;rt=\"temperature-c\";if=\"sensor\",\n\
        </sensors/light>;rt=\"light-lux\";if=\"sensor\",\n\
        <http://www.example.com/sensors/t123>;anchor=\"/sensors/temp\"\n\
        ;rel=\"describedby\",\n\
        </t>;anchor=\"/sensors/temp\";rel=\"alternate\"";

    #[test]
    fn parse_rfc6690_index() {
        let links = parse_all(RFC6690_INDEX);
        assert_eq!(
            targets(&links),
            ["/sensors", "/sensors/temp", "/sensors/light", "http://www.example.com/sensors/t123", "/t"]
        );
        let index = &links[0];
        assert_eq!(index.attrs().collect::<Vec<_>>(), [("ct", Some("40")), ("title", Some("Sensor Index"))]);
        assert_eq!(index.content_formats().collect::<Vec<_>>(), [ContentFormat::LINK_FORMAT]);
        assert_eq!(links[1].value("rt"), Some("temperature-c"));
        assert_eq!(links[3].value("anchor"), Some("/sensors/temp"));
        assert_eq!(links[3].value("rel"), Some("describedby"));
        assert_eq!(links[4].value("REL"), Some("alternate"));
        // Nothing was unescaped, so nothing was copied.
        assert!(matches!(links[0].attrs[1].1, Some(Cow::Borrowed(_))));
    }

    #[test]
    fn filter_rfc6690_index() {
        let links = parse_all(RFC6690_INDEX);
        let pick = |query: &str| {
            let (name, value) = filter_query(query).unwrap();
            targets(links.iter().filter(|l| matches(l, name, value)))
        };
        assert_eq!(pick("rt=light-lux"), ["/sensors/light"]);
        assert_eq!(pick("rt=temp*"), ["/sensors/temp"]);
        assert_eq!(pick("rt=*"), ["/sensors/temp", "/sensors/light"]);
        assert_eq!(pick("rt=temperature"), Vec::<&str>::new());
        assert_eq!(pick("if=sensor"), ["/sensors/temp", "/sensors/light"]);
        assert_eq!(pick("ct=40"), ["/sensors"]);
        assert_eq!(pick("href=/sensors"), ["/sensors"]);
        assert_eq!(pick("href=/sensors*"), ["/sensors", "/sensors/temp", "/sensors/light"]);
        assert_eq!(pick("href=http*"), ["http://www.example.com/sensors/t123"]);
        assert_eq!(pick("anchor=/sensors/temp"), ["http://www.example.com/sensors/t123", "/t"]);
        assert_eq!(pick("title=Sensor*"), ["/sensors"]);
        assert_eq!(pick("TITLE=Sensor Index"), ["/sensors"]);
        assert_eq!(pick("sz=*"), Vec::<&str>::new());
    }

    #[test]
    fn filter_lists_and_flags() {
        let link = parse_all("</s>;rt=\"a.b temp-c\";ct=\"0 40\";obs;title=\"\";sz=10;sz=20").remove(0);
        assert!(link.matches("rt", "temp-c"));
        assert!(link.matches("rt", "a.b"));
        assert!(link.matches("rt", "te*"));
        assert!(!link.matches("rt", "a.b temp-c"), "list attributes match item by item");
        assert!(link.matches("ct", "0") && link.matches("ct", "40") && !link.matches("ct", "4"));
        assert!(link.matches("ct", "4*"));
        assert!(link.matches("obs", "") && link.matches("obs", "*") && !link.matches("obs", "1"));
        assert!(!link.matches("rt", ""), "an attribute with a value does not match an empty filter");
        assert!(link.matches("title", ""), "an empty value matches an empty filter");
        assert!(link.matches("sz", "20"), "any occurrence of a repeated attribute");
        assert!(!link.matches("if", "*"), "absent attribute");
        assert_eq!(link.values("ct").collect::<Vec<_>>(), ["0", "40"]);
        assert_eq!(link.content_formats().collect::<Vec<_>>(), [ContentFormat(0), ContentFormat(40)]);
        assert_eq!(link.value("obs"), None);
        assert!(link.has("OBS"));
    }

    #[test]
    fn filter_query_forms() {
        assert_eq!(filter_query("rt=temp*"), Some(("rt", "temp*")));
        assert_eq!(filter_query("obs"), Some(("obs", "")));
        assert_eq!(filter_query("href="), Some(("href", "")));
        assert_eq!(filter_query("a=b=c"), Some(("a", "b=c")));
        assert_eq!(filter_query("=x"), None);
        assert_eq!(filter_query(""), None);
    }

    #[test]
    fn parse_quoted_values() {
        let text = r#"</a>;title="x, y; \"z\" \\ ok";ct=40;obs,</b>;title="<c>,;""#;
        let links = parse_all(text);
        assert_eq!(links[0].value("title"), Some(r#"x, y; "z" \ ok"#));
        assert!(matches!(links[0].attrs[0].1, Some(Cow::Owned(_))));
        assert_eq!(links[0].value("ct"), Some("40"));
        assert_eq!(links[0].attrs().nth(2), Some(("obs", None)));
        assert_eq!(links[1].value("title"), Some("<c>,;"));
    }

    #[test]
    fn parse_whitespace_and_empty() {
        assert!(parse("").next().is_none());
        assert!(parse(" \r\n\t").next().is_none());
        let links = parse_all("  </a> ; rt = \"x\" ; obs ;ct= 0 ,\r\n\t</b>  ");
        assert_eq!(targets(&links), ["/a", "/b"]);
        assert_eq!(links[0].attrs().collect::<Vec<_>>(), [("rt", Some("x")), ("obs", None), ("ct", Some("0"))]);
        let links = parse_all("</a>;x=;y=\"\"");
        assert_eq!(links[0].attrs().collect::<Vec<_>>(), [("x", Some("")), ("y", Some(""))]);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(parse_err("</sensors"), "unterminated '<': no '>' ends the target");
        assert_eq!(parse_err("</a>,</b"), "unterminated '<': no '>' ends the target");
        assert_eq!(parse_err("</a>;title=\"Sensor"), "unterminated quoted string");
        assert_eq!(parse_err("</a>;title=\"Sensor\\"), "unterminated quoted string");
        assert_eq!(parse_err("</a>;title=\"\\\""), "unterminated quoted string");
        assert_eq!(parse_err("/a"), "expected '<' to start a link");
        assert_eq!(parse_err("</a>,"), "expected a link after ','");
        assert_eq!(parse_err("</a>,,</b>"), "expected '<' to start a link");
        assert_eq!(parse_err("</a>;"), "expected an attribute name after ';'");
        assert_eq!(parse_err("</a>;=x"), "expected an attribute name after ';'");
        assert_eq!(parse_err("</a>;ct=4\"0\""), "expected ';' or ',' after a target or attribute");
        assert_eq!(parse_err("</a> </b>"), "expected ';' or ',' after a target or attribute");
        assert_eq!(parse_err("</a>;title=Ünquoted"), "expected ';' or ',' after a target or attribute");
        // Links before the error are still delivered.
        let mut links = parse("</a>,</b>;;");
        assert_eq!(links.next().map(|l| l.unwrap().target), Some(Cow::Borrowed("/a")));
        assert!(links.next().unwrap().is_err());
        assert!(links.next().is_none());
    }

    #[test]
    fn build_and_serialize() {
        let temp = Link::new("/sensors/temp")
            .rt("temperature-c")
            .interface("sensor")
            .ct(ContentFormat::TEXT_PLAIN)
            .ct(ContentFormat::LINK_FORMAT)
            .obs()
            .sz(42)
            .sz(262144)
            .title("Temp \"inside\" \\ C");
        let firmware = Link::new("/firmware/v2.1").rt("firmware").rt("x").ct(ContentFormat::LINK_FORMAT).flag("obs");
        let described = Link::new("http://www.example.com/sensors/t123").anchor("/sensors/temp").rel("describedby");
        let mut out = String::new();
        serialize([&temp, &firmware, &described], &mut out);
        assert_eq!(
            out,
            concat!(
                r#"</sensors/temp>;rt="temperature-c";if="sensor";ct="0 40";obs;sz=262144;title="Temp \"inside\" \\ C","#,
                r#"</firmware/v2.1>;rt="firmware x";ct=40;obs,"#,
                r#"<http://www.example.com/sensors/t123>;anchor="/sensors/temp";rel="describedby""#,
            )
        );
        let back = parse_all(&out);
        assert_eq!(back, [temp, firmware, described]);
        assert_eq!(back[0].content_formats().collect::<Vec<_>>(), [ContentFormat(0), ContentFormat(40)]);
    }

    #[test]
    fn serialize_keeps_framing() {
        let link = Link::new("/a>b c").attr("bad name", "x").attr("v", "a,b").flag("").attr("ok", "");
        let text = link.to_string();
        assert_eq!(text, r#"</a%3Eb%20c>;v="a,b";ok="""#);
        assert_eq!(parse_all(&text), [Link::new("/a%3Eb%20c").attr("v", "a,b").attr("ok", "")]);
        let mut out = String::from("x");
        serialize(&[] as &[Link<'_>], &mut out);
        assert_eq!(out, "x");
    }

    #[test]
    fn into_owned_outlives_text() {
        let owned: LinkOwned = {
            let text = String::from("</a>;rt=\"b\";obs");
            parse(&text).next().unwrap().unwrap().into_owned()
        };
        assert_eq!(owned, Link::new("/a").rt("b").obs());
    }

    fn link() -> impl Strategy<Value = LinkOwned> {
        let name = "[a-zA-Z][a-zA-Z0-9!#$&'*+.^_`|~-]{0,6}";
        let value = proptest::option::of("(?s).{0,12}");
        ("[a-zA-Z0-9/:.?=&%_~-]{0,16}", proptest::collection::vec((name, value), 0..5)).prop_map(|(target, attrs)| {
            attrs.into_iter().fold(Link::new(target), |link, (name, value)| match value {
                Some(value) => link.attr(name, value),
                None => link.flag(name),
            })
        })
    }

    proptest! {
        #[test]
        fn serialize_parse_roundtrip(links in proptest::collection::vec(link(), 0..4)) {
            let mut text = String::new();
            serialize(&links, &mut text);
            let back = parse(&text).collect::<Result<Vec<_>, _>>();
            prop_assert_eq!(back, Ok(links), "{}", text);
        }

        #[test]
        fn parse_never_panics(text in "(?s).{0,64}") {
            for link in parse(&text) {
                let _ = link.map(|l| l.to_string());
            }
        }

        #[test]
        fn parse_grammar_soup_never_panics(text in "[<>;,=\"\\\\ \na/*é]{0,48}") {
            let count = parse(&text).count();
            prop_assert!(count <= text.len() + 1);
        }
    }
}
