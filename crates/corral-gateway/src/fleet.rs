//! A fleet of virtual constrained devices on real UDP sockets: what `corral device` and the testbed of
//! `corral gateway --testbed N` run.
//!
//! Each device is a corral [`Node`] with corral-group's sensors (`/s/t /s/h /s/l`), actuators
//! (`/a/shutter /a/light`) and `/mc`, on its own unicast socket: device `i` listens on the `i`-th address
//! after the first (`127.0.0.2:5683`, `127.0.0.3:5683`, …; Linux answers for all of 127.0.0.0/8 on `lo`).
//!
//! Multicast: each device is a corral-tokio [`GroupNode`], which opens one more socket for every group the
//! device joins through `/mc` (bound to `group:port`, joined on the interface of the device's address) and
//! closes it when the device leaves. Nothing binds the wildcard address, so the devices coexist with a
//! gateway on `127.0.0.1:5683`.
//!
//! All devices of a fleet run on one thread: a current-thread runtime with a `LocalSet`, since a `Node`
//! is not `Send`. Must never: implement protocol behaviour (that is corral-proto's and corral-group's).

use corral_group::device::{mount_device, DeviceConfig};
use corral_proto::wire::{Message, MessageType, Packet};
use corral_proto::{Endpoint, EndpointConfig, Node};
use corral_rd::Registrant;
use corral_tokio::group_node::GroupNode;
use corral_tokio::socket::{PreparedSocket, SocketOptions};
use corral_tokio::{os_seed, os_seeded, Clock};
use std::cell::RefCell;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::watch;

/// How to run a fleet of virtual devices.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Address of device 0; device `i` gets the `i`-th address after it, same port.
    pub first: SocketAddr,
    pub count: usize,
    /// `/mc` slots per device.
    pub mc_slots: usize,
    /// Device `i` draws its sensor values from seed `seed + i`.
    pub seed: u64,
    /// DEFAULT_LEISURE: multicast requests are answered after a random delay up to it (RFC 7252 §8.2).
    pub leisure: Option<Duration>,
    /// Port of the multicast groups; `None`: the devices' port.
    pub mcast_port: Option<u16>,
    /// Interface (by IPv4 address) on which groups are joined; `None`: `127.0.0.1` for loopback devices,
    /// the device's own address otherwise.
    pub mcast_if: Option<Ipv4Addr>,
    /// Observable sensors (RFC 7641).
    pub observable: bool,
    /// Append one JSON line per request a device receives (see [`RequestLog`]).
    pub request_log: Option<PathBuf>,
    /// Who may change the devices' multicast memberships through `/mc` (empty: anyone).
    pub managers: Vec<corral_group::Prefix>,
    /// A membership change from beyond loopback first gets an Echo challenge that the manager must return
    /// (corral-group's `McResource::verifying`): a blind spoofer of the manager's address cannot change
    /// the groups.
    pub verify_managers: bool,
    /// Register every device with this Resource Directory (RFC 9176) as `dev-ADDR-PORT`, refresh before
    /// the lifetime (seconds) ends, and remove the registration when the fleet stops.
    pub rd: Option<(SocketAddr, u32)>,
}

impl FleetConfig {
    /// `count` devices from `first` on, whose `/mc` takes changes from `managers`.
    pub fn new(first: SocketAddr, count: usize, managers: Vec<corral_group::Prefix>) -> FleetConfig {
        FleetConfig {
            first,
            count,
            mc_slots: corral_group::mc::DEFAULT_SLOTS,
            seed: 1,
            leisure: None,
            mcast_port: None,
            mcast_if: None,
            observable: true,
            request_log: None,
            managers,
            verify_managers: true,
            rd: None,
        }
    }
}

/// The addresses of `count` devices from `first` on: consecutive IP addresses, one port.
pub fn device_addrs(first: SocketAddr, count: usize) -> Result<Vec<SocketAddr>, String> {
    (0..count)
        .map(|i| {
            let ip = match first.ip() {
                IpAddr::V4(a) => u32::from(a)
                    .checked_add(u32::try_from(i).unwrap_or(u32::MAX))
                    .map(|n| IpAddr::V4(Ipv4Addr::from(n)))
                    .filter(|ip| !first.ip().is_loopback() || ip.is_loopback()),
                IpAddr::V6(a) => u128::from(a).checked_add(i as u128).map(|n| IpAddr::V6(Ipv6Addr::from(n))),
            };
            ip.map(|ip| SocketAddr::new(ip, first.port()))
                .ok_or_else(|| format!("{count} devices from {first} run past the end of the address range"))
        })
        .collect()
}

/// A running fleet. Dropping it stops the devices.
pub struct Fleet {
    addrs: Vec<SocketAddr>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Fleet {
    /// Binds every device's socket (so that an address in use is reported here, naming it) and starts
    /// the devices on their own thread.
    pub fn start(mut cfg: FleetConfig) -> io::Result<Fleet> {
        device_addrs(cfg.first, cfg.count).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let unicast = SocketOptions { batch: 4, recv_buffer: Some(1 << 20), ..SocketOptions::default() };
        let bind = |a: SocketAddr| {
            PreparedSocket::bind(a, unicast.clone()).map_err(|e| {
                let hint = match e.kind() {
                    io::ErrorKind::AddrNotAvailable => {
                        " (only 127.0.0.0/8 gives every device an address without configuring an interface)"
                    }
                    io::ErrorKind::AddrInUse => {
                        " (another gateway or device there? a server on [::] or 0.0.0.0 holds the port on every address)"
                    }
                    _ => "",
                };
                io::Error::new(e.kind(), format!("cannot listen on {a}: {e}{hint}"))
            })
        };
        // Port 0: the first device takes an ephemeral port and the others follow it (the group port too).
        let mut sockets = Vec::with_capacity(cfg.count);
        if cfg.count > 0 {
            let s = bind(cfg.first)?;
            cfg.first = s.local_addr();
            sockets.push(s);
        }
        let addrs = device_addrs(cfg.first, cfg.count).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        for a in addrs.iter().skip(1) {
            sockets.push(bind(*a)?);
        }
        let log = match &cfg.request_log {
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display())))?,
            ),
            None => None,
        };
        let (stop, stop_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_addrs = addrs.clone();
        let thread = std::thread::Builder::new().name("corral-devices".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let clock = Clock::new();
                let shared = Rc::new(Shared { log: log.map(|f| RefCell::new(io::BufWriter::new(f))), cfg });
                let mut tasks = Vec::new();
                for (i, (addr, prepared)) in thread_addrs.into_iter().zip(sockets).enumerate() {
                    let socket = match prepared.into_tokio() {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let (node, registrant) = device_node(&shared.cfg, i, addr);
                    let mut dev =
                        GroupNode::new(addr, node, socket, clock).multicast(shared.cfg.mcast_port, shared.cfg.mcast_if);
                    if let Some(h) = registrant {
                        dev = dev.on_stop(
                            Box::new(move |node, now| {
                                node.with_service(now, h, |r: &mut Registrant, cx| r.leave(cx));
                            }),
                            Box::new(move |node| node.service::<Registrant>(h).is_none_or(Registrant::has_left)),
                        );
                    }
                    if shared.log.is_some() {
                        let shared = shared.clone();
                        dev = dev.on_datagram(Box::new(move |from, group, data| shared.log(addr, from, group, data)));
                    }
                    tasks.push(tokio::task::spawn_local(dev.run(stop_rx.clone())));
                }
                let _ = ready_tx.send(Ok(()));
                for t in tasks {
                    let _ = t.await;
                }
            });
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Fleet { addrs, stop, thread: Some(thread) }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("the device thread stopped while starting")),
        }
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Stops every device and waits for the thread to end.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Device `i` at `addr`, and the handle of its registrant if it registers with a directory.
fn device_node(cfg: &FleetConfig, i: usize, addr: SocketAddr) -> (Node, Option<corral_proto::ServiceHandle>) {
    let mut config = os_seeded(EndpointConfig::default());
    if let Some(l) = cfg.leisure {
        config.params.default_leisure = corral_proto::Duration::from(l);
    }
    let mut node = Node::new(Endpoint::new(config));
    mount_device(
        &mut node,
        DeviceConfig {
            seed: Some(cfg.seed.wrapping_add(i as u64)),
            mc_slots: Some(cfg.mc_slots),
            observable: cfg.observable,
            managers: cfg.managers.clone(),
            verify_managers: cfg.verify_managers,
            ..DeviceConfig::default()
        },
    );
    let registrant = cfg.rd.map(|(rd, lt)| {
        let links = corral_proto::render_links(&node.links(), None);
        // Its address for people, and 48 random bits so that nobody can register the name first (issue 41
        // item 8: a squatter holding `dev-ADDR-PORT` kept the device out of the directory). A new name at
        // each start: a clean stop removes the old registration, a crash leaves it until its lifetime ends.
        let ep = format!("dev-{}-{}-{:012x}", addr.ip(), addr.port(), os_seed() >> 16);
        node.mount("_rd", Registrant::new(rd, &ep, None, lt, links))
    });
    (node, registrant)
}

/// What the devices of a fleet share on their thread.
struct Shared {
    cfg: FleetConfig,
    log: Option<RefCell<io::BufWriter<std::fs::File>>>,
}

impl Shared {
    /// Writes the request log's line for a datagram device `device` read, if it is a request.
    fn log(&self, device: SocketAddr, from: SocketAddr, group: Option<IpAddr>, data: &[u8]) {
        let Some(log) = &self.log else { return };
        if let Some(line) = RequestLog::line(device, from, group, data) {
            let mut w = log.borrow_mut();
            let _ = writeln!(w, "{line}");
            let _ = w.flush();
        }
    }
}

/// The request log: one JSON object per line for every request datagram a device receives, written
/// when it is read from the socket (before the node handles it):
/// `{"t_us":…,"device":"127.0.0.2:5683","from":"127.0.0.1:5683","dst":"239.255.89.1"|null,
/// "type":"CON","mid":1234,"method":"GET","path":"/s/t","query":"…"}`. `t_us` is wall-clock
/// microseconds since the Unix epoch. Retransmissions appear again with the same `mid`.
pub struct RequestLog;

impl RequestLog {
    fn line(device: SocketAddr, from: SocketAddr, group: Option<IpAddr>, data: &[u8]) -> Option<String> {
        let (mtype, code, mid) = Packet::<&[u8]>::peek_header(data)?;
        if !code.is_request() {
            return None;
        }
        let msg = Message::parse(data).ok()?;
        let t_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros();
        let mtype = match mtype {
            MessageType::Con => "CON",
            MessageType::Non => "NON",
            MessageType::Ack => "ACK",
            MessageType::Rst => "RST",
        };
        Some(
            serde_json::json!({
                "t_us": t_us as u64,
                "device": device.to_string(),
                "from": from.to_string(),
                "dst": group.map(|g| g.to_string()),
                "type": mtype,
                "mid": mid.0,
                "method": code.to_string(),
                "path": msg.options.path(),
                "query": msg.options.query(),
            })
            .to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_addresses() {
        let a = device_addrs("127.0.0.254:5683".parse().unwrap(), 3).unwrap();
        let want: Vec<SocketAddr> =
            ["127.0.0.254:5683", "127.0.0.255:5683", "127.0.1.0:5683"].iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(a, want);
        assert!(device_addrs("127.255.255.255:5683".parse().unwrap(), 2).is_err(), "loopback range ends");
        assert!(device_addrs("255.255.255.255:1".parse().unwrap(), 2).is_err());
        let v6 = device_addrs("[2001:db8::ff]:5683".parse().unwrap(), 2).unwrap();
        assert_eq!(v6[1], "[2001:db8::100]:5683".parse().unwrap());
        assert!(device_addrs("127.0.0.2:5683".parse().unwrap(), 0).unwrap().is_empty());
    }
}
