//! The proxy's FIB file, `[destinations]` included, on hostile text: `Fib::parse` must return a FIB or an
//! error naming a line, never panic; a FIB that loads must route and check destinations without panicking,
//! and its rules must each have a next hop.
#![no_main]

use corral_proto::wire::uri::Uri;
use corral_proxy::{Destinations, Fib};
use std::net::{IpAddr, SocketAddr};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let resolve = |name: &str| (name == "known").then(|| IpAddr::from([192, 0, 2, 1]));
    let fib = match Fib::parse(text, &resolve) {
        Ok(fib) => fib,
        Err(e) => {
            assert!(e.line <= text.lines().count() + 1, "line {} of {}", e.line, text.lines().count());
            return;
        }
    };
    assert!(fib.rules.iter().all(|r| !r.next.is_empty()));
    let d = Destinations {
        this_host: vec!["127.0.0.0/8".parse().unwrap(), "10.0.0.1".parse().unwrap()],
        ..fib.destinations.clone().unwrap_or_default()
    };
    for uri in ["coap://known/a/b", "coap://10.0.0.1:5683/x", "coap+tcp://[::1]/", "coap://192.0.2.255/"] {
        let Ok(u) = Uri::parse(uri) else { continue };
        let _ = fib.lookup(&u);
        if let Ok(addr) = fib.hosts.address(&u) {
            for client in ["10.0.0.1", "192.0.2.7", "::1"] {
                let _ = d.check(client.parse().unwrap(), addr);
            }
        }
    }
    let _ = d.check(IpAddr::from([192, 0, 2, 7]), SocketAddr::from(([10, 0, 0, 255], 5683)));
});
