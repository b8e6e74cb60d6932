//! ICMP errors on UDP sockets (Linux `IP_RECVERR` / `IPV6_RECVERR`): a datagram sent to a port where
//! nothing listens, or to a host or network that cannot be reached, comes back as an entry of the socket's
//! error queue, read with `MSG_ERRQUEUE`. Each entry names the destination the datagram was sent to and
//! quotes its start (the CoAP header and token), which is what
//! [`Endpoint::handle_unreachable`](corral_proto::Endpoint::handle_unreachable) matches exchanges by; so a
//! dead peer fails its requests at once instead of after every retransmission.
//!
//! What it must never do: act on an error for anything but the datagram it quotes. An unconnected socket
//! (a server's wildcard socket, a worker of a shared port) talks to many peers; an error names one, and
//! the endpoint ignores it unless its message ID *and* token are of an exchange with that peer — which an
//! off-path attacker who spoofs ICMP would have to guess. Errors that are not about reachability (a local
//! "message too long", a fragmentation-needed report) are skipped.

use nix::libc;
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use tracing::{debug, trace};

/// Error-queue entries read per call at most, so that a flood of ICMP cannot hold the driver.
const MAX_PER_DRAIN: usize = 64;
/// The quoted start of a datagram that is kept: CoAP's header and the longest token.
const QUOTE: usize = 4 + 8;

/// Asks the kernel to queue ICMP errors for the datagrams this socket sends: `IP_RECVERR` for IPv4 (and
/// for the IPv4 side of a dual-stack socket), `IPV6_RECVERR` for IPv6.
pub(crate) fn enable<F: AsFd>(socket: &F, local: SocketAddr, dual_stack: bool) {
    let v4 = local.is_ipv4() || dual_stack;
    if v4 {
        if let Err(e) = setsockopt(socket, sockopt::Ipv4RecvErr, &true) {
            debug!(error = %e, "cannot enable IP_RECVERR: ICMP errors stay unseen");
        }
    }
    if local.is_ipv6() {
        if let Err(e) = setsockopt(socket, sockopt::Ipv6RecvErr, &true) {
            debug!(error = %e, "cannot enable IPV6_RECVERR: ICMP errors stay unseen");
        }
    }
}

/// Reads what waits in the socket's error queue (without blocking, at most [`MAX_PER_DRAIN`] entries)
/// and hands each unreachability error to `f` with the peer the datagram went to (canonical: an IPv4 peer
/// of a dual-stack socket as IPv4) and the quoted start of the datagram. Returns how many entries were
/// read; `WouldBlock` when the queue was empty.
pub(crate) fn drain<F: AsFd>(socket: &F, mut f: impl FnMut(SocketAddr, &[u8])) -> io::Result<usize> {
    let fd = socket.as_fd().as_raw_fd();
    let mut read = 0;
    while read < MAX_PER_DRAIN {
        let mut data = [0u8; QUOTE];
        // The error and its offender, and whatever else the socket asks for on every datagram (the
        // destination address, a timestamp): a truncated buffer would hide the error.
        let mut cmsg = nix::cmsg_space!(
            libc::sock_extended_err,
            libc::sockaddr_in6,
            libc::in_pktinfo,
            libc::in6_pktinfo,
            libc::timespec,
            [u8; 64]
        );
        let mut iov = [IoSliceMut::new(&mut data)];
        let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
        let (peer, len, reachability) = match recvmsg::<SockaddrStorage>(fd, &mut iov, Some(&mut cmsg), flags) {
            Ok(msg) => {
                let peer = msg.address.as_ref().and_then(crate::net::addr::to_socket_addr);
                let mut reachability = false;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        match c {
                            ControlMessageOwned::Ipv4RecvErr(ee, _) | ControlMessageOwned::Ipv6RecvErr(ee, _) => {
                                reachability |= is_unreachable(&ee);
                            }
                            _ => {}
                        }
                    }
                }
                (peer, msg.bytes, reachability)
            }
            Err(nix::errno::Errno::EAGAIN) if read == 0 => return Err(io::ErrorKind::WouldBlock.into()),
            Err(nix::errno::Errno::EAGAIN) => return Ok(read),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io::Error::from(e)),
        };
        read += 1;
        match peer {
            Some(peer) if reachability => {
                trace!(%peer, "ICMP: unreachable");
                f(crate::net::addr::canonical(peer), &data[..len.min(QUOTE)]);
            }
            _ => trace!(?peer, "error-queue entry that is not about reachability; skipped"),
        }
    }
    Ok(read)
}

/// A send that failed because this host has no route to the destination's network or host (`sendto`'s
/// ENETUNREACH, EHOSTUNREACH): the datagram never left, and no retransmission will get further, so the
/// driver treats it as the ICMP error it would have brought — with the start of the datagram as the quote
/// ([`quote`]) — and the request fails at once instead of after its whole timeout.
pub(crate) fn unreachable_send(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NetworkUnreachable | io::ErrorKind::HostUnreachable)
}

/// The start of a datagram, as an ICMP error would quote it (see [`drain`]).
pub(crate) fn quote(datagram: &[u8]) -> &[u8] {
    &datagram[..datagram.len().min(QUOTE)]
}

/// An ICMP (or ICMPv6) destination-unreachable for a port, host or network — not a local error, not a
/// fragmentation-needed report.
fn is_unreachable(ee: &libc::sock_extended_err) -> bool {
    let from_icmp = ee.ee_origin == libc::SO_EE_ORIGIN_ICMP || ee.ee_origin == libc::SO_EE_ORIGIN_ICMP6;
    let errno = i32::try_from(ee.ee_errno).unwrap_or(0);
    from_icmp && matches!(errno, libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH)
}
