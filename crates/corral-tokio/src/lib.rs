//! # corral-tokio
//!
//! The tokio runtime for corral: it runs the sans-IO [`corral_proto::Endpoint`], [`corral_proto::TcpEndpoint`]
//! and [`corral_proto::Node`] over real UDP sockets and TCP connections, and offers an async [`Client`] and
//! [`Server`] to library users.
//!
//! - [`socket`]: UDP over IPv4 and IPv6 (one dual-stack `[::]` socket), batched receive (`recvmmsg`, GRO)
//!   with the local destination address of every datagram (IP_PKTINFO / IPV6_RECVPKTINFO, via `quinn-udp`)
//!   so that multicast requests are recognised, multicast joins and leaves. Sends stay one `sendmsg` per
//!   datagram: a `sendmmsg` batch of each turn's replies was measured (branch `sendmmsg`, 2026-11-22,
//!   16 and 64 bench clients, server pinned to one core) at 8.52-9.44 µs of server CPU per request
//!   against 8.49-9.02 µs without it — no gain on loopback, where the kernel's per-datagram work
//!   dominates — so it was not merged.
//! - ICMP errors (`icmp`, Linux): both drivers read the socket's error queue (IP_RECVERR /
//!   IPV6_RECVERR) and hand each port, host or network unreachable to the endpoint, which fails the
//!   exchange the quoted datagram belongs to at once.
//! - The driver maps corral's [`Instant`](corral_proto::Instant) onto a `std::time::Instant` epoch taken
//!   at start, keys each endpoint from the OS's CSPRNG ([`os_seeded`]), and drains `poll_transmit` / `poll_event` /
//!   `poll_command` / `poll_timeout` after every input.
//! - CoAP over TCP (RFC 8323): a listener and connection tasks with bounded buffers (`tcp`); the
//!   protocol itself is corral-proto's.
//! - [`Client`]: `client.get("coap://[::1]/s/t").await`, `coap+tcp://` URIs, a request builder with
//!   block sizes, [`Observation`] streams (RFC 7641), multicast response streams.
//! - [`Server`]: sans-IO services at path prefixes and async handlers with path patterns,
//!   `/.well-known/core`, UDP and optionally TCP, graceful shutdown.
//! - [`uri`]: corral-wire's [`Uri`] plus the OS lookup of IPv6 zones.
//! - [`group_node`]: a node on one unicast socket that opens a socket per multicast group it joins
//!   (a group member, such as `corral device`'s virtual devices).
//!
//! This crate never implements protocol behaviour: retransmission, deduplication, separate responses and
//! leisure all happen in corral-proto, identically under the simulator.
//!
//! ## Where a request's CPU goes (issue #18, 2026-11-24)
//!
//! `corral serve` answering `GET /` to go-coap's `coap-load` (16 closed-loop clients, server pinned to one
//! core, generator to the other), `perf record --call-graph dwarf`, samples grouped by the innermost
//! frame that names a phase:
//!
//! | phase | share of the server's CPU |
//! | ----- | ------------------------: |
//! | `sendmsg`, one per answer (includes loopback delivery and waking the client) | 46 % |
//! | parked in `epoll_wait` and the wake-up | 18 % |
//! | `recvmmsg` | 18 % |
//! | tokio (readiness, timer wheel, task polling) | 8 % |
//! | parsing and the message layer (`Endpoint::on_datagram`, building the owned `Options`) | 2.8 % |
//! | response encoding (`Endpoint::respond`, `Message::encode`) | 1.6 % |
//! | duplicate detection (`Endpoint::dedup`) | 1.4 % |
//! | allocator | 1.3 % |
//! | the plugtest service | 1.2 % |
//! | routing (`Node::route`, `dispatch`) | 0.9 % |
//! | timers (`poll_timeout`, `handle_timeout`) | 0.7 % |
//!
//! Four fifths are the kernel's, as for the bare echo floor (`scripts/coap-echo-floor.c`), so what
//! separates corral from the floor is how often it enters the kernel, not its protocol code (about a
//! tenth, no phase above 3 %). `perf stat` per request with one client showed 2 `epoll_wait` and 2
//! `recvmmsg` (the floor: 1 blocking `recvmmsg` and 1 `sendmmsg`): every answer sent made the socket
//! writable, which woke the driver for nothing, and every wake-up ended with a `recvmmsg` that only said
//! `WouldBlock`. Sockets are now registered for readability only and a short batch ends the read
//! ([`socket::CoapSocket`]): 5.0 → 2.9 system calls per request. What is left above the floor: one
//! `sendmsg` per answer (now `sendmmsg` per batch, see below), the control messages
//! quinn-udp asks for on every datagram (`IP_PKTINFO`, which multicast and wildcard binds need;
//! `SO_TIMESTAMPNS`, which corral never reads; `IP_RECVTOS` is now off), and tokio's bookkeeping.
//! Measured side by side with `scripts/bench-latency.sh`.
//!
//! Turning `SO_TIMESTAMPNS` off (through `nix`'s safe `setsockopt`) measured no better (7.67 µs/request
//! against 7.34, within the rounds' spread) and was not kept. Answering a whole receive batch with one
//! `sendmmsg` (`nix::sys::socket::sendmmsg`, one run per source address, about 2.3 answers per call at 16
//! clients) was kept: 7.41 against 7.67 µs/request in an A/B run of four rounds (`BASE=old/corral
//! scripts/bench-latency.sh`), 1.33× the floor against 1.38×. A first try that allocated its vectors per
//! call measured worse. What `sendmmsg` cannot remove is the loopback delivery and the peer's wake-up, the
//! bulk of a send's cost on this machine.
//!
//! With one client the server parks after every request, and waking a parked thread on a virtual machine
//! costs tens of microseconds: `corral serve --busy-poll` ([`socket::SocketOptions::busy_poll`]) spins
//! that long before parking, for latency at the price of the idle time.
//!
//! ## A second driver: [`blocking`] (a design change, 2026-11-24)
//!
//! What was left above the floor was the runtime itself: a tokio worker sleeps in `epoll_wait` and then
//! reads (two system calls per wake-up, ~28,000 wake-ups/s at 16 clients) and keeps its task, timer and
//! readiness bookkeeping (~8 % of the CPU). The floor sleeps inside `recvmmsg`. Because the protocol is a
//! sans-IO [`corral_proto::Node`], nothing stops a second driver from having the floor's shape: one thread,
//! one socket, asleep in `recvmmsg(MSG_WAITFORONE)` with SO_RCVTIMEO set to the node's next timer, a whole
//! batch answered with `sendmmsg`. `corral serve` uses it on Linux for CoAP over UDP (each `--workers`
//! worker one such thread); CoAP over TCP, busy polling and clients keep the tokio driver. Since
//! 2026-11-25 `corral gateway` runs on it too (its Entity Manager is a sans-IO service like any other):
//! 50.5 µs of CPU per client request of a three-member entity against 67.0 µs on the tokio driver, the
//! tokio driver 1.22–1.58× in each of four rounds of `scripts/bench-gateway.sh`. Measured with
//! `scripts/bench-latency.sh` at 16 clients, CPU per request over the floor's in the same run: 1.20×,
//! 1.30×, 1.17× in three runs (medians of 4, 4 and 6 rounds), against 1.41×, 1.35×, 1.35× for the tokio
//! driver and 1.78×, 1.88× for libcoap; at one client p50 73 µs (tokio driver 70 µs, libcoap 80 µs, floor
//! 72 µs). Requests/s at 16 clients are bound by the generator's core and vary by several per cent from
//! round to round for every server on this virtual machine.
//!
//! ## Shards of one port: [`steer`] (2026-11-25)
//!
//! SO_REUSEPORT spreads datagrams by a hash of the sender's address, which keeps a client on one worker but
//! sends a *member's* answer to whichever worker its address hashes to. A worker that sends requests of
//! its own (the gateway) therefore uses a [`corral_proto::Shard`] of the message IDs and tokens, and
//! [`steer`] attaches a classic BPF program to the socket group that reads the CoAP header: ACK and RST
//! by message ID, responses by the token's first byte, requests by the kernel's hash (or, for every
//! method but GET, to a manager). [`ServerBuilder::bind_shards`] and [`blocking::BoundSocket::bind_group`]
//! bind such groups and check them with probes before anything is served.
//!
//! ## What a wake-up costs in user space (2026-11-25, second pass)
//!
//! `perf stat` shows the blocking driver making as many `recvmmsg`/`sendmmsg` calls and context switches
//! per request as the floor (1.18 against 1.20 requests per call): what is left above the floor is user
//! space. Timing it on this virtual machine cannot see a 2 % change (the floor itself moves by a fifth
//! from run to run), so `scripts/profile-serve.sh` counts instead: callgrind inside the serving loop, one
//! closed-loop client, so that every request is one wake-up. On the code of the first pass it counted
//! 9,670 instructions and 10 heap allocations per request, and showed where they went:
//!
//! - `nix`'s `MultiHeaders::preallocate`, made afresh for every `recvmmsg` and every `sendmmsg`: five
//!   allocations, about a thousand instructions with their zeroing and frees (the 1 KiB block of
//!   addresses also made `free` run `malloc_consolidate`), and `nix::cmsg_space!`, which allocates a buffer
//!   only to give its size, a sixth;
//! - one piggyback deadline per request, due one window (1 s) later: under a steady load a timer fell due
//!   at nearly every turn and ran `Node::handle_timeout` and every service's `poll_timeout` for nothing;
//! - `poll_timeout` and the clock, each read twice per turn.
//!
//! The driver now keeps its headers across calls ([`blocking`] says when that is sound: a dual-stack
//! socket still gets fresh receive headers for every call, found by a test that alternates IPv4 and IPv6
//! clients), the endpoint drops the deadlines of requests it has answered, and a turn reads the clock and
//! the timers once: 6,897 instructions and 4 allocations per request. The four left are the response's
//! options, its payload, its encoding and the copy of it kept for duplicate detection: owned values of the
//! `Service` API, about 600 instructions together.
//!
//! In the kernel, `perf` then showed one thing the floor does not pay: the IP_PKTINFO control message
//! written for every datagram (`ip_cmsg_recv_offset`, `put_cmsg`: 1.5 % of the CPU). A socket bound to
//! one address receives only datagrams sent to that address, so [`blocking::BoundSocket`] asks for
//! destinations only on a wildcard socket. (A first try, before the headers were kept, measured no gain
//! inside the rounds' spread, 11.01 µs/request against 10.84 in six rounds; the profile is the better
//! witness for a 1.5 % change.) That also ends the parsing of control messages: 6,833 instructions per
//! request. Where they go now (`scripts/profile-serve.sh`, inclusive, per request):
//!
//! | part of a turn | instructions |
//! | -------------- | -----------: |
//! | `Node::handle_datagram`, all of the protocol and the service | 4,627 |
//! | — parsing, duplicate detection and the server layer (`Endpoint::handle_datagram`) | 1,981 |
//! | — routing and the plugtest service, answering included (`Plugtest::handle_request`) | 2,188 |
//! | — of that, the answer: Block2/Observe checks, encoding, the copy for duplicates (`Endpoint::respond`) | 1,621 |
//! | sending: `poll_transmit`, `sendmmsg` headers and addresses (`flush`) | 1,302 |
//! | the rest of the loop: `recvmmsg`, addresses, the clock, `poll_timeout` | 904 |
//!
//! The allocator's share (four allocations and their frees) is about 800 of them; `memcpy` of owned messages
//! about 500. See the README for the CPU time against the floor.

#[cfg(target_os = "linux")]
pub mod blocking;
mod client;
mod driver;
pub mod event_loop;
pub mod group_node;
#[cfg(target_os = "linux")]
mod icmp;
pub mod oscore;
mod server;
pub mod socket;
#[cfg(target_os = "linux")]
pub mod steer;
mod tcp;
pub mod uri;
pub mod workers;

pub use client::{
    Client, ClientBuilder, Collected, Error, MulticastResponse, MulticastResponses, Observation, RequestBuilder,
};
pub use driver::{os_seed, os_seeded, Clock, DriverStats, OsSeeded};
pub use server::{RouteConfig, Server, ServerBuilder, ServerHandle, ServerRequest};
pub use tcp::bind_listener;
pub use uri::{parse_uri, Scheme, Uri, UriError};

pub use corral_proto;
pub use corral_proto::wire::{Code, ContentFormat, OptionNumber, Token};
pub use corral_proto::{
    BlockConfig, EndpointConfig, Limits, ObservePolicy, Request, Response, SendParams, Service, TcpConfig,
    TransferProgress, TransmissionParams,
};
