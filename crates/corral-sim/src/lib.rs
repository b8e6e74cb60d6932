//! # corral-sim
//!
//! A deterministic discrete-event simulator of low-power lossy networks that runs corral's own sans-IO
//! nodes — the real `corral_proto::Endpoint` and services, not a model of them — over a simulated
//! IEEE 802.15.4 / 6LoWPAN / RPL-like network with Wi-Fi interference, on a virtual clock.
//!
//! | module | owns |
//! | --- | --- |
//! | [`engine`] | the event queue and its deterministic `(time, sequence)` order |
//! | [`radio`] | IEEE 802.15.4 / 6LoWPAN constants, airtime, fragmentation arithmetic |
//! | [`fault`] | network faults a driver injects while the simulation runs: partitions ([`fault::Cuts`]) |
//! | [`loss`] | Bernoulli, Gilbert–Elliott and SNR (seed 002) loss; the Wi-Fi interferer |
//! | [`propagation`] | received power per link (log-distance path loss, log-normal shadowing) for capture |
//! | [`topology`] | network descriptions, builders (star, line, grid, random geometric, layered, Table 7), routing parents |
//! | [`sim`] | the running network: nodes, CSMA/CA MAC, fragmentation, routing, SMRF multicast, wired links |
//! | `tcp` | TCP inside the simulator: a smoltcp stack per node that speaks CoAP over TCP or runs an app's HTTP |
//! | [`app`] | programs that speak TCP or UDP themselves on a node instead of a CoAP node |
//! | [`http`] | the HTTP baselines (seed 002): an HTTP/1.1 codec (httparse), server and client apps over TCP or UDP |
//! | [`trace`] | records, CoAP-aware datagram records, counters, the trace hash |
//! | [`pcap`] | pcap (LINKTYPE_RAW) writer and reader: UDP with synthesised headers, TCP segments as they are |
//! | [`workload`] | a responder device and a group client service |
//! | [`seed`] | `SEED=` reporting and the determinism check for tests |
//!
//! ## Using it
//! ```
//! use corral_proto::{Endpoint, Instant, Node, Duration};
//! use corral_sim::{Sim, SimConfig, Topology, NodeId, workload::{GroupClient, Pacing, Responder}};
//!
//! let topo = Topology::star(3); // gateway 0 and devices 1..=3 in one collision domain
//! let mut sim = Sim::from_topology(SimConfig::new(42), &topo);
//! for i in 1..=3 {
//!     let mut node = Node::new(Endpoint::new(sim.endpoint_config(NodeId(i))));
//!     node.mount("temp", Responder::new("21.5"));
//!     sim.attach(NodeId(i), node);
//! }
//! let targets = (1..=3).map(|i| sim.addr(NodeId(i))).collect();
//! let mut gw = Node::new(Endpoint::new(sim.endpoint_config(NodeId(0))));
//! let h = gw.mount("client", GroupClient::new(targets, "temp", Pacing::AfterResponse));
//! sim.attach(NodeId(0), gw);
//! sim.with_service(NodeId(0), h, |c: &mut GroupClient, cx| c.start(cx));
//! sim.run_until_cond(Instant::from_secs(60), |s| s.service::<GroupClient>(NodeId(0), h).unwrap().done());
//! let client = sim.service::<GroupClient>(NodeId(0), h).unwrap();
//! assert_eq!(client.successes(), 3);
//! assert!(client.response_time().unwrap() < Duration::from_millis(100));
//! ```
//!
//! ## Design decisions and why
//! - **Event queue on corral's `Instant` with a `(time, sequence)` tie-break** ([`engine`]): integer
//!   microseconds avoid float drift, and the sequence number makes simultaneous events fire in scheduling
//!   order, so a run is a pure function of the seed. Events are small enum values, not closures.
//! - **One RNG stream per node, per channel, per interferer** ([`corral_proto::Rng::stream`]): adding traffic
//!   at one node does not reshuffle the randomness of the others, which keeps A/B comparisons in the lab
//!   paired. Endpoints get their seeds from [`Sim::endpoint_config`].
//! - **Frame-level MAC, not a channel abstraction**: CSMA/CA backoffs, CCA, turnaround, ACK timing and
//!   collisions are what make seed 000's "no delay between requests" three times slower, so they are
//!   simulated per frame with the IEEE 802.15.4 constants ([`radio`] lists them with sources).
//! - **Capture with a 3 dB threshold on per-link powers** ([`propagation`], [`sim`] step 5): CC2420-class
//!   receivers keep the frame they locked on if it is 3 dB above the rest (the CC2420 datasheet's co-channel
//!   rejection), or switch to a stronger one that starts within the preamble. Without it every overlap
//!   would destroy both frames, and seed 000's SMRF re-broadcasts, which siblings send without ACK or retry,
//!   would lose a fifth of the two-hop members of a 30-member group at 0 Mb/s. Powers come from log-distance path
//!   loss and log-normal shadowing (σ 4 dB) seeded by the topology, so one topology is one room; explicit
//!   topologies (Table 7's layers) get shadowing only. RPL's parent is the strongest candidate by default
//!   ([`ParentChoice`]), which is also who wins a child's capture.
//! - **SMRF on the motes' clocks**: the forwarding delay is Contiki's 4 × (1..4) ticks of a 128 Hz clock,
//!   fired on each node's own tick with a seeded phase and a ±20 ppm rate error ([`SimConfig::smrf_delay_ticks`],
//!   [`SimConfig::clock_hz`]); with one shared grid, two siblings drawing the same multiple would fire in the same
//!   microsecond.
//! - **Routing from tree intervals**: RPL storing mode's routing tables are equivalent to "up to the common
//!   ancestor, then down"; computing that from Euler-tour intervals costs no memory per route and no control
//!   traffic. RPL's own DIO/DAO traffic is not simulated (the testbed's was negligible next to CoAP's).
//! - **Wi-Fi as an on/off burst process**: individual Wi-Fi frames as energy bursts with DCF spacing; its
//!   load maps to airtime as documented in [`loss`]. The detection and corruption probabilities are knobs the
//!   lab calibrates against seed 000's curves; the defaults are not calibrated.
//! - **Datagram-level pcap at the source**: one packet per `Transmit`, with synthesised IPv6/UDP headers
//!   (a TCP segment as the IPv6 packet smoltcp made),
//!   so Wireshark shows exactly the CoAP exchanges (retransmissions included) on the virtual clock.
//!
//! ## Limitations
//! Received power serves capture only: there is no noise floor, sensitivity or SINR-dependent bit errors
//! (links are either neighbours or not; [`LinkModel`] does the loss), CCA hears every neighbour regardless of
//! its power, Wi-Fi bursts corrupt by probability rather than by their power, and channels 25 and 26 do not
//! leak into each other (seed 000 §5.2.4 mentions some adjacent-channel interference). The MAC is IEEE
//! 802.15.4 unslotted CSMA/CA, not Contiki's `csma.c` (which sends a first attempt after a bare CCA and,
//! when the channel is busy or an ACK is missing, waits 1-2 × 125 ms or more before trying again, never
//! giving up on a busy channel; modelling it would change every unicast retry, not only SMRF's). No RPL
//! control traffic or parent changes during a run, no radio duty cycling (seed 000 used none), one
//! reassembly buffer per node, and the CPU model does not delay SMRF forwarding. Where the positions are
//! only a drawing (explicit neighbourhoods), powers differ by shadowing alone, so capture is rarer than among
//! nodes at really different distances. Node CPU time is a single constant
//! ([`SimConfig::processing_delay`], zero by default), optionally serial with a bounded receive queue
//! ([`SimConfig::rx_queue`]); with the defaults the best "delay between requests" of seed 000 Fig. 7 comes
//! out shorter than on the testbed's MSP430 motes, and the Wi-Fi detection and corruption probabilities are
//! uncalibrated defaults — corral-lab's `docs/lab.md` gives calibrated values.

pub mod app;
pub mod engine;
pub mod fault;
pub mod http;
pub mod loss;
pub mod pcap;
pub mod propagation;
pub mod radio;
pub mod seed;
pub mod sim;
mod tcp;
pub mod topology;
pub mod trace;
pub mod workload;

pub use loss::{Interferer, LinkModel, Outages, Reach, WifiParams};
pub use propagation::Propagation;
pub use radio::{Layout, RadioParams};
pub use sim::{FrameInfo, Sim, SimConfig, COAP_PORT};
pub use tcp::TcpTimers;
pub use topology::{Neighbors, NodeSpec, ParentChoice, Role, Topology, WiredSpec};
pub use trace::{
    CoapSummary, DatagramId, DatagramInfo, DropReason, LinkCounters, NodeCounters, NodeId, Record, RecordKind,
};
