//! A pcap writer (and a small reader for tests and the lab) for the datagrams of a run.
//!
//! # What it owns
//! The classic libpcap file format (magic `0xa1b2c3d4`, version 2.4, microsecond timestamps) with link type
//! `LINKTYPE_RAW` (101): every packet is a bare IP packet, IPv4 or IPv6 by its version nibble, so Wireshark
//! dissects the UDP and the CoAP inside (port 5683), and TCP segments (written as the whole IPv6 packets
//! the simulator's TCP stack made, [`PcapWriter::write_raw`]) with HTTP on port 80. For UDP (the simulator
//! carries only the payloads) this module synthesises the IP and UDP headers: correct lengths, hop limit 64, the UDP checksum computed over the
//! IPv6 pseudo-header (RFC 8200 §8.1; mandatory for IPv6), and for IPv4 a correct header checksum and a zero
//! UDP checksum (allowed by RFC 768). Timestamps are the virtual clock. It never reads a clock.

use corral_proto::Instant;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `LINKTYPE_RAW`.
pub const LINKTYPE_RAW: u32 = 101;

/// Writes packets to any [`Write`] sink.
pub struct PcapWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header.
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
        h.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, buf: Vec::with_capacity(2048) })
    }

    /// Writes one UDP datagram from `src` to `dst` at virtual time `at`. Mixed address families are written
    /// as IPv6 with IPv4-mapped addresses.
    pub fn write_udp(&mut self, at: Instant, src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> io::Result<()> {
        self.buf.clear();
        udp_packet(&mut self.buf, src, dst, payload);
        self.write_buf(at)
    }

    /// Writes one whole IP packet as it is (a TCP segment of the simulator's TCP stack, whose IPv6 and TCP
    /// headers and checksums smoltcp made).
    pub fn write_raw(&mut self, at: Instant, packet: &[u8]) -> io::Result<()> {
        self.buf.clear();
        self.buf.extend_from_slice(packet);
        self.write_buf(at)
    }

    fn write_buf(&mut self, at: Instant) -> io::Result<()> {
        let us = at.as_micros();
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(self.buf.len() as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(self.buf.len() as u32).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&self.buf)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

fn to_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V6(a) => a,
        IpAddr::V4(a) => a.to_ipv6_mapped(),
    }
}

fn sum16(mut acc: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Appends an IP + UDP packet carrying `payload` to `out`.
pub fn udp_packet(out: &mut Vec<u8>, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
    let udp_len = (8 + payload.len()) as u16;
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = 20 + udp_len;
            let start = out.len();
            out.extend_from_slice(&[0x45, 0]);
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]); // id, DF, TTL 64, UDP, checksum
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            let c = fold(sum16(0, &out[start..start + 20]));
            out[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
            out.extend_from_slice(&src.port().to_be_bytes());
            out.extend_from_slice(&dst.port().to_be_bytes());
            out.extend_from_slice(&udp_len.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(payload);
        }
        (s, d) => {
            let (s, d) = (to_v6(s), to_v6(d));
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&udp_len.to_be_bytes());
            out.extend_from_slice(&[17, 64]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            let udp = out.len();
            out.extend_from_slice(&src.port().to_be_bytes());
            out.extend_from_slice(&dst.port().to_be_bytes());
            out.extend_from_slice(&udp_len.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(payload);
            let mut acc = sum16(0, &s.octets());
            acc = sum16(acc, &d.octets());
            acc += u32::from(udp_len) + 17;
            acc = sum16(acc, &out[udp..]);
            let c = match fold(acc) {
                0 => 0xffff,
                c => c,
            };
            out[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// One packet read back from a pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapPacket {
    pub at: Instant,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: Vec<u8>,
    /// Whether the UDP checksum verifies (always true for a zero IPv4 checksum).
    pub checksum_ok: bool,
}

/// Reads a `LINKTYPE_RAW` pcap of UDP packets as written by [`PcapWriter`], skipping TCP segments (see
/// [`read_raw`]). `None` on anything else.
pub fn read(bytes: &[u8]) -> Option<Vec<PcapPacket>> {
    let mut out = Vec::new();
    for (at, pkt) in read_raw(bytes)? {
        let tcp = match pkt.first()? >> 4 {
            6 => pkt.get(6) == Some(&6),
            _ => pkt.get(9) == Some(&6),
        };
        if !tcp {
            out.push(parse_ip_udp(at, &pkt)?);
        }
    }
    Some(out)
}

/// Every packet of a `LINKTYPE_RAW` pcap with its timestamp, as bytes.
pub fn read_raw(bytes: &[u8]) -> Option<Vec<(Instant, Vec<u8>)>> {
    if bytes.len() < 24 || bytes[0..4] != 0xa1b2_c3d4u32.to_le_bytes() {
        return None;
    }
    if u32::from_le_bytes(bytes[20..24].try_into().ok()?) != LINKTYPE_RAW {
        return None;
    }
    let mut out = Vec::new();
    let mut pos = 24;
    while pos < bytes.len() {
        let h = bytes.get(pos..pos + 16)?;
        let secs = u64::from(u32::from_le_bytes(h[0..4].try_into().ok()?));
        let usecs = u64::from(u32::from_le_bytes(h[4..8].try_into().ok()?));
        let len = u32::from_le_bytes(h[8..12].try_into().ok()?) as usize;
        let pkt = bytes.get(pos + 16..pos + 16 + len)?;
        pos += 16 + len;
        let at = Instant::from_micros(secs * 1_000_000 + usecs);
        out.push((at, pkt.to_vec()));
    }
    Some(out)
}

fn parse_ip_udp(at: Instant, pkt: &[u8]) -> Option<PcapPacket> {
    match pkt.first()? >> 4 {
        4 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*pkt.get(2)?, *pkt.get(3)?]));
            if total != pkt.len() || pkt.get(9)? != &17 || fold(sum16(0, pkt.get(..ihl)?)) != 0 {
                return None;
            }
            let s = Ipv4Addr::from(<[u8; 4]>::try_from(pkt.get(12..16)?).ok()?);
            let d = Ipv4Addr::from(<[u8; 4]>::try_from(pkt.get(16..20)?).ok()?);
            let udp = pkt.get(ihl..)?;
            let (sp, dp, ulen) = udp_header(udp)?;
            (ulen == udp.len()).then(|| PcapPacket {
                at,
                src: SocketAddr::new(s.into(), sp),
                dst: SocketAddr::new(d.into(), dp),
                payload: udp[8..].to_vec(),
                checksum_ok: true,
            })
        }
        6 => {
            let plen = usize::from(u16::from_be_bytes([*pkt.get(4)?, *pkt.get(5)?]));
            if plen + 40 != pkt.len() || pkt[6] != 17 {
                return None;
            }
            let s: [u8; 16] = pkt.get(8..24)?.try_into().ok()?;
            let d: [u8; 16] = pkt.get(24..40)?.try_into().ok()?;
            let udp = &pkt[40..];
            let (sp, dp, ulen) = udp_header(udp)?;
            let mut acc = sum16(0, &s);
            acc = sum16(acc, &d);
            acc += ulen as u32 + 17;
            acc = sum16(acc, udp);
            Some(PcapPacket {
                at,
                src: SocketAddr::new(Ipv6Addr::from(s).into(), sp),
                dst: SocketAddr::new(Ipv6Addr::from(d).into(), dp),
                payload: udp[8..].to_vec(),
                checksum_ok: ulen == udp.len() && fold(acc) == 0,
            })
        }
        _ => None,
    }
}

fn udp_header(udp: &[u8]) -> Option<(u16, u16, usize)> {
    let h = udp.get(..8)?;
    Some((
        u16::from_be_bytes([h[0], h[1]]),
        u16::from_be_bytes([h[2], h[3]]),
        usize::from(u16::from_be_bytes([h[4], h[5]])),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_and_ipv4_round_trip() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let a: SocketAddr = "[fd00::1]:5683".parse().unwrap();
        let b: SocketAddr = "[ff05::fd]:5683".parse().unwrap();
        w.write_udp(Instant::from_micros(1_500_000), a, b, b"\x50\x01\x12\x34").unwrap();
        let c: SocketAddr = "10.0.0.1:5683".parse().unwrap();
        let d: SocketAddr = "10.0.0.2:40000".parse().unwrap();
        w.write_udp(Instant::from_micros(7), c, d, b"odd").unwrap();
        let bytes = w.into_inner();
        let pkts = read(&bytes).unwrap();
        assert_eq!(pkts.len(), 2);
        assert_eq!((pkts[0].src, pkts[0].dst, pkts[0].at), (a, b, Instant::from_micros(1_500_000)));
        assert!(pkts[0].checksum_ok);
        assert_eq!(pkts[0].payload, b"\x50\x01\x12\x34");
        assert_eq!((pkts[1].src, pkts[1].dst, pkts[1].payload.as_slice()), (c, d, &b"odd"[..]));
        // Corrupting a payload byte breaks the IPv6 UDP checksum.
        let mut bad = bytes.clone();
        let last = 24 + 16 + 40 + 8 + 3;
        bad[last] ^= 1;
        assert!(!read(&bad).unwrap()[0].checksum_ok);
    }
}
