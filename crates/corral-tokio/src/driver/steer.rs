//! Steering datagrams among the sockets of one SO_REUSEPORT group by their CoAP header (Linux), so that
//! workers that send requests of their own get the answers back (see [`corral_proto::Shard`]).
//!
//! The kernel runs a classic BPF program for every unicast datagram that reaches the group; the program
//! sees the UDP payload and returns the index of the socket (sockets are numbered in the order they
//! joined the group). An index out of range falls back to the kernel's usual hash of the 4-tuple. The
//! program:
//!
//! | datagram | socket |
//! | -------- | ------ |
//! | ACK or RST (empty or piggybacked) | message ID mod N: the shard whose message it answers |
//! | response in a CON or NON, token not empty | token's first byte mod N: the shard whose request it answers |
//! | GET, or an empty CON (ping) | the kernel's hash of the sender's address and port |
//! | any other request (POST, PUT, DELETE, FETCH, PATCH, iPATCH) | the manager, if there is one, else the hash |
//! | shorter than the field it needs | 0 (classic BPF ends a program that reads past the end with 0) |
//!
//! A sharded gateway makes worker 0 its manager: entity changes and OSCORE requests (always POST or
//! FETCH outside) are handled by one worker, which owns the store and the security contexts.
//!
//! [`bind_group`] binds the sockets, attaches the program and then checks that it works: it sends
//! probes to the shared port and fails if one arrives at the wrong socket, so that a kernel that numbers
//! the group differently (or another process's socket in it) is an error at start-up, not lost answers.

use crate::net::socket::{bind_std, SocketOptions};
use nix::libc::{sock_filter, sock_fprog};
use nix::sys::socket::{setsockopt, sockopt::AttachReusePortCbpf};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// How a group of `count` sockets shares one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steering {
    /// Sockets in the group (2 to 64).
    pub count: u8,
    /// The socket that takes every request but GET.
    pub manager: Option<u8>,
}

// Classic BPF opcodes (linux/filter.h).
const LD_B_ABS: u16 = 0x30;
const LD_H_ABS: u16 = 0x28;
const ALU_AND_K: u16 = 0x54;
const ALU_MOD_K: u16 = 0x94;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JGT_K: u16 = 0x25;
const RET_A: u16 = 0x16;
const RET_K: u16 = 0x06;
/// An index no group has: the kernel falls back to its hash.
const HASH: u32 = u32::MAX;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

impl Steering {
    /// The program (see the module docs). Jump offsets count instructions after the jump.
    pub fn program(&self) -> Vec<sock_filter> {
        let n = u32::from(self.count);
        let others = self.manager.map_or(HASH, u32::from);
        vec![
            op(LD_B_ABS, 0, 0, 0),     // 0: A = version | type | token length
            op(ALU_AND_K, 0, 0, 0x20), // 1: ACK (0x20) and RST (0x30) have this bit
            op(JEQ_K, 3, 0, 0),        // 2: CON or NON → 6
            op(LD_H_ABS, 0, 0, 2),     // 3: A = message ID
            op(ALU_MOD_K, 0, 0, n),    // 4
            op(RET_A, 0, 0, 0),        // 5
            op(LD_B_ABS, 0, 0, 1),     // 6: A = code
            op(JGE_K, 0, 6, 0x40),     // 7: a request or empty → 14
            op(LD_B_ABS, 0, 0, 0),     // 8: a response: A = token length
            op(ALU_AND_K, 0, 0, 0x0f), // 9
            op(JEQ_K, 5, 0, 0),        // 10: no token → 16 (hash)
            op(LD_B_ABS, 0, 0, 4),     // 11: A = the token's first byte
            op(ALU_MOD_K, 0, 0, n),    // 12
            op(RET_A, 0, 0, 0),        // 13
            op(JGT_K, 0, 1, 1),        // 14: empty or GET → 16
            op(RET_K, 0, 0, others),   // 15: a request that changes something
            op(RET_K, 0, 0, HASH),     // 16
        ]
    }

    fn attach(&self, socket: &UdpSocket) -> io::Result<()> {
        let mut program = self.program();
        let fprog = sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
        setsockopt(socket, AttachReusePortCbpf, &fprog).map_err(io::Error::from)
    }
}

/// Binds `steering.count` sockets to `addr` in one SO_REUSEPORT group steered as the module docs say,
/// in socket order (socket `i` is shard `i`), and checks the steering with probes. Port 0: the first
/// socket picks the port.
pub fn bind_group(addr: SocketAddr, opts: &SocketOptions, steering: Steering) -> io::Result<Vec<UdpSocket>> {
    if !(2..=64).contains(&steering.count) || steering.manager.is_some_and(|m| m >= steering.count) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a steered group has 2 to 64 sockets"));
    }
    let sockets = bind_unsteered(addr, opts, steering.count)?;
    steering.attach(&sockets[0])?;
    verify(&sockets, steering)?;
    Ok(sockets)
}

/// `count` sockets in one SO_REUSEPORT group on `addr`, in order.
fn bind_unsteered(addr: SocketAddr, opts: &SocketOptions, count: u8) -> io::Result<Vec<UdpSocket>> {
    let opts = SocketOptions { reuse_port: true, ..opts.clone() };
    let mut sockets: Vec<UdpSocket> = Vec::with_capacity(usize::from(count));
    let mut at = addr;
    for _ in 0..count {
        let s = bind_std(at, &opts)?;
        at = s.local_addr()?;
        sockets.push(s);
    }
    Ok(sockets)
}

/// Sends, from a socket of this host, an ACK and a response for every shard and a POST, and checks where
/// each arrives. The probes are consumed here; the workers never see them.
fn verify(sockets: &[UdpSocket], steering: Steering) -> io::Result<()> {
    let local = sockets[0].local_addr()?;
    let target = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), local.port()),
        _ => local,
    };
    let from_ip: IpAddr = if target.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let probe_socket = UdpSocket::bind(SocketAddr::new(from_ip, 0))?;
    let mut probes: Vec<(Vec<u8>, usize)> = Vec::new();
    for shard in 0..steering.count {
        // An empty ACK whose message ID is the shard's, and a NON 2.05 whose token is.
        probes.push((vec![0x60, 0x00, 0x00, shard], usize::from(shard)));
        probes.push((vec![0x51, 0x45, 0xC1, shard, shard], usize::from(shard)));
    }
    if let Some(m) = steering.manager {
        probes.push((vec![0x50, 0x02, 0xC2, 0x00], usize::from(m))); // NON POST
    }
    for (probe, _) in &probes {
        probe_socket.send_to(probe, target)?;
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut pending = probes;
    let mut buf = [0u8; 64];
    while !pending.is_empty() && Instant::now() < deadline {
        let mut any = false;
        for (i, socket) in sockets.iter().enumerate() {
            while let Ok((n, _)) = socket.recv_from(&mut buf) {
                any = true;
                let Some(k) = pending.iter().position(|(p, _)| p[..] == buf[..n]) else { continue };
                let (_, want) = pending.swap_remove(k);
                if want != i {
                    return Err(io::Error::other(format!(
                        "the kernel steered a probe for worker {want} to worker {i}: another socket shares \
                         {local}, or this kernel numbers SO_REUSEPORT groups differently"
                    )));
                }
            }
        }
        if !any {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    if !pending.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{} of the steering probes sent to {target} did not arrive within 500 ms", pending.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_reach_the_shard_that_asked() {
        for (count, manager) in [(2u8, Some(0u8)), (3, None), (4, Some(2))] {
            let steering = Steering { count, manager };
            let sockets = bind_group("127.0.0.1:0".parse().unwrap(), &SocketOptions::default(), steering)
                .unwrap_or_else(|e| panic!("{steering:?}: {e}"));
            assert_eq!(sockets.len(), usize::from(count));
        }
    }

    #[test]
    fn the_check_fails_without_the_program() {
        // The kernel's hash sends every probe from one source to one socket: some land on the wrong one.
        let steering = Steering { count: 2, manager: None };
        let sockets = bind_unsteered("127.0.0.1:0".parse().unwrap(), &SocketOptions::default(), 2).unwrap();
        let e = verify(&sockets, steering).expect_err("probes cannot all reach their shard by hash");
        assert!(e.to_string().contains("steered a probe"), "{e}");
    }

    #[test]
    fn a_group_of_one_is_refused() {
        let e =
            bind_group("127.0.0.1:0".parse().unwrap(), &SocketOptions::default(), Steering { count: 1, manager: None });
        assert!(e.is_err());
    }
}
