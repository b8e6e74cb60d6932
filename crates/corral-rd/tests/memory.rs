//! What the directory holds at its maximum content (issue 41 item 8: a flood of 10,880 registrations
//! took a directory to 149 MB), measured with a counting allocator (`stats_alloc`) — alone in its test
//! binary, so that nothing else allocates meanwhile. Each allocation is counted with the most malloc can
//! add to it (its header and rounding), so that [`footprint`]'s count is checked against what the heap
//! really gives. Two shapes fill the directory: the flood's (small registrations
//! until the count bound), the largest (160 links each until the memory bound) and the one with the most
//! attributes for its text (flags). The figures are
//! printed for the record; what is asserted is that the heap holds no more than the directory counts,
//! and the count no more than [`Limits::memory`].

use corral_proto::Instant;
use corral_rd::{footprint, Directory, Limits, Params, RdError, Requester};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::{IpAddr, Ipv4Addr};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes live since `r` began, each allocation counted as the largest malloc chunk it can take: its
/// size, an 8-byte header and rounding up to 16 (at most 32 bytes more than asked).
fn live(r: &Region<System>) -> usize {
    let c = r.change();
    let bytes = c.bytes_allocated as i64 - c.bytes_deallocated as i64 + c.bytes_reallocated as i64;
    let allocations = c.allocations as i64 - c.deallocations as i64;
    usize::try_from(bytes + 32 * allocations).unwrap_or(0)
}

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

const MIB: f64 = (1 << 20) as f64;

/// Fills a directory with `links` registrations, each from an address in a /24 of its own, until it
/// refuses; (registrations, bytes counted, heap bytes it holds).
fn fill(links_text: &str) -> (usize, usize, usize) {
    let limits = Limits::default();
    let region = Region::new(GLOBAL);
    let mut dir = Directory::new(limits);
    let links = dir.parse_links(links_text).unwrap();
    let mut n = 0u32;
    loop {
        let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0001 + (n << 8)));
        let params = Params { ep: Some(format!("node-{n:05}")), lt: Some(600), ..Params::default() };
        let base = format!("coap://{ip}:5683");
        match dir.register(Instant::ZERO, &Requester::plain(ip), base, params, links.clone(), format!("{n:016x}")) {
            Ok(_) => n += 1,
            Err(RdError::Full) => break,
            Err(e) => panic!("after {n}: {e}"),
        }
    }
    drop(links);
    let heap = live(&region);
    let counted: usize = dir.iter().map(footprint).sum();
    let (len, rss) = (dir.len(), rss_mib());
    println!(
        "{len} registrations of {} link(s): counted {:.1} MiB, heap {:.1} MiB, process RSS {rss:.1} MiB",
        dir.iter().next().map_or(0, |r| r.links.len()),
        counted as f64 / MIB,
        heap as f64 / MIB
    );
    assert!(counted <= limits.memory, "{counted}");
    assert!(heap <= counted, "the heap ({heap}) holds more than the directory counts ({counted})");
    drop(dir);
    (len, counted, heap)
}

#[test]
fn at_its_maximum_content_the_heap_holds_no_more_than_the_directory_counts() {
    let (flood, _, _) = fill("</s/t>;rt=temperature;if=sensor");
    assert_eq!(flood, Limits::default().registrations, "the flood's shape stops at the count bound");
    let big: Vec<String> = (0..160)
        .map(|i| format!("</sensors/s{i:03}>;rt=\"temperature\";if=\"core.s\";ct=0;obs;title=\"sensor {i}\""))
        .collect();
    let (largest, counted, _) = fill(&big.join(","));
    assert!(largest < flood && counted > Limits::default().memory * 9 / 10, "the largest stop at the memory bound");
    // The most attributes for the text: flags of two or three characters.
    let flags: Vec<String> =
        (0..16).map(|i| format!("</x{i}>{}", (0..60).map(|j| format!(";f{j}")).collect::<String>())).collect();
    fill(&flags.join(","));
}
