//! Rendering a node's resources as `/.well-known/core` (RFC 6690), with the single-attribute query filter.

use crate::service::ResourceLink;

/// Link-format text for `links`, keeping only those matching `filter` (`(name, value)`; a trailing `*` in
/// the value is a prefix match; `href` filters on the path).
pub fn render(links: &[ResourceLink], filter: Option<(&str, &str)>) -> String {
    let mut out = String::new();
    for link in links {
        let target = format!("/{}", link.path);
        if let Some((name, value)) = filter {
            if !matches(&target, link, name, value) {
                continue;
            }
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push('<');
        out.push_str(&target);
        out.push('>');
        for (name, value) in &link.attributes {
            out.push(';');
            out.push_str(name);
            if let Some(v) = value {
                out.push('=');
                let bare = matches!(name.as_str(), "ct" | "sz") && !v.is_empty() && !v.contains(' ');
                if bare {
                    out.push_str(v);
                } else {
                    out.push('"');
                    out.push_str(&v.replace('\\', "\\\\").replace('"', "\\\""));
                    out.push('"');
                }
            }
        }
    }
    out
}

fn value_matches(candidate: &str, pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => candidate.starts_with(prefix),
        None => candidate == pattern,
    }
}

fn matches(target: &str, link: &ResourceLink, name: &str, pattern: &str) -> bool {
    if name == "href" {
        return value_matches(target, pattern);
    }
    link.attributes.iter().filter(|(n, _)| n == name).any(|(_, v)| match v {
        None => pattern.is_empty(),
        Some(v) => value_matches(v, pattern) || v.split(' ').any(|item| value_matches(item, pattern)),
    })
}
