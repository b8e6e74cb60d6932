//! A small RFC 6690 link-format reader for `corral discover`.
//!
//! Stop-gap until `corral_wire::link_format` lands on its parallel branch; `discover` only calls [`parse`].
//! It never fails: what it cannot read it skips.

/// One link: its target and attributes (values unquoted; `None` for a bare flag such as `obs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub target: String,
    pub attributes: Vec<(String, Option<String>)>,
}

impl Link {
    /// Every value of an attribute, joined by spaces.
    pub fn attr(&self, name: &str) -> Option<String> {
        let vals: Vec<&str> = self
            .attributes
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_deref().unwrap_or(""))
            .collect();
        (!vals.is_empty()).then(|| vals.join(" "))
    }

    pub fn has(&self, name: &str) -> bool {
        self.attributes.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    }
}

/// Splits `s` on `sep` outside `<…>` and `"…"` (with `\` escapes inside quotes).
fn split_outside(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut in_quotes, mut in_angle, mut escaped) = (0, false, false, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if in_quotes => escaped = true,
            '"' if !in_angle => in_quotes = !in_quotes,
            '<' if !in_quotes => in_angle = true,
            '>' if !in_quotes => in_angle = false,
            c if c == sep && !in_quotes && !in_angle => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else {
                    out.push(c);
                }
            }
            out
        }
        None => v.to_string(),
    }
}

/// Parses link-format text.
pub fn parse(text: &str) -> Vec<Link> {
    let mut links = Vec::new();
    for item in split_outside(text, ',') {
        let mut parts = split_outside(item.trim(), ';').into_iter();
        let Some(target) = parts.next().map(str::trim) else { continue };
        let Some(target) = target.strip_prefix('<').and_then(|t| t.strip_suffix('>')) else { continue };
        let attributes = parts
            .filter(|p| !p.trim().is_empty())
            .map(|p| match p.split_once('=') {
                Some((n, v)) => (n.trim().to_string(), Some(unquote(v))),
                None => (p.trim().to_string(), None),
            })
            .collect();
        links.push(Link { target: target.to_string(), attributes });
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_attributes_quotes_and_flags() {
        let links = parse("</a>;rt=\"x y\";ct=0;obs,</b,c>;title=\"a, \\\"q\\\"; z\",</c>\n");
        assert_eq!(links.len(), 3);
        assert_eq!(links[0].target, "/a");
        assert_eq!(links[0].attr("rt").as_deref(), Some("x y"));
        assert_eq!(links[0].attr("ct").as_deref(), Some("0"));
        assert!(links[0].has("obs"));
        assert_eq!(links[1].target, "/b,c");
        assert_eq!(links[1].attr("title").as_deref(), Some("a, \"q\"; z"));
        assert_eq!(links[2].attributes, vec![]);
        assert!(parse("garbage, <unterminated").is_empty());
    }
}
