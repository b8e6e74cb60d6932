//! `/.well-known/core` for a node: its services' [`ResourceLink`]s written as RFC 6690 link-format with
//! the single-attribute query filter. The format itself (quoting, list attributes, `*` and `href`
//! matching) is corral-wire's `link_format`; this module only turns service links into wire links.

use crate::service::ResourceLink;
use corral_wire::link_format::{self, Link, LinkOwned};

fn to_wire(link: &ResourceLink) -> LinkOwned {
    link.attributes.iter().fold(Link::new(format!("/{}", link.path)), |l, (name, value)| match value {
        Some(v) => l.attr(name.clone(), v.clone()),
        None => l.flag(name.clone()),
    })
}

/// Link-format text for `links`, keeping only those matching `filter` (`(name, value)`; see
/// [`link_format::matches`]).
pub fn render(links: &[ResourceLink], filter: Option<(&str, &str)>) -> String {
    let wire: Vec<LinkOwned> = links.iter().map(to_wire).collect();
    let mut out = String::new();
    link_format::serialize(wire.iter().filter(|l| filter.is_none_or(|(n, v)| link_format::matches(l, n, v))), &mut out);
    out
}
