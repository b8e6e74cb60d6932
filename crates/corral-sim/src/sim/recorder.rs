//! The recorder: what happened in a run — the datagram ids, the records and the hash over them, the
//! datagrams as their sources sent them, the events of endpoints driven directly, and the pcap capture.
//!
//! Owns: everything a run leaves behind for its reader. Must never: change what happens (it is written
//! to, never read by the network; records are hashed whether or not they are kept).

use super::*;

pub(super) enum PcapSink {
    Memory(PcapWriter<Vec<u8>>),
    Writer(PcapWriter<Box<dyn Write>>),
}

/// The records of a run (see the module docs).
#[derive(Default)]
pub(super) struct Recorder {
    next_dgram: u64,
    pub(super) hash: TraceHash,
    pub(super) records: Vec<Record>,
    pub(super) datagrams: Vec<DatagramInfo>,
    pub(super) node_events: Vec<(Instant, NodeId, Event)>,
    pcap: Option<PcapSink>,
}

impl Recorder {
    /// The id the next datagram gets.
    pub(super) fn peek_id(&self) -> DatagramId {
        DatagramId(self.next_dgram)
    }

    /// An id for a new datagram.
    pub(super) fn next_id(&mut self) -> DatagramId {
        let id = DatagramId(self.next_dgram);
        self.next_dgram += 1;
        id
    }

    /// Hashes `r`, and keeps it if `keep`.
    pub(super) fn record(&mut self, r: Record, keep: bool) {
        r.hash_into(&mut self.hash);
        if keep {
            self.records.push(r);
        }
    }

    /// Captures a datagram as its source sends it, if a capture runs.
    pub(super) fn capture(&mut self, now: Instant, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        if let Some(p) = &mut self.pcap {
            // A TCP segment is already a whole IP packet: captured as it is, not wrapped in UDP.
            let raw = dst.port() == crate::tcp::RAW_IP_PORT;
            let _ = match p {
                PcapSink::Memory(w) if raw => w.write_raw(now, payload),
                PcapSink::Writer(w) if raw => w.write_raw(now, payload),
                PcapSink::Memory(w) => w.write_udp(now, src, dst, payload),
                PcapSink::Writer(w) => w.write_udp(now, src, dst, payload),
            };
        }
    }

    /// Starts an in-memory capture.
    pub(super) fn capture_pcap(&mut self) {
        self.pcap = PcapWriter::new(Vec::new()).ok().map(PcapSink::Memory);
    }

    /// Starts a capture into `out`.
    pub(super) fn capture_pcap_to(&mut self, out: Box<dyn Write>) -> std::io::Result<()> {
        self.pcap = Some(PcapSink::Writer(PcapWriter::new(out)?));
        Ok(())
    }

    /// The in-memory capture so far (capture stops).
    pub(super) fn take_pcap(&mut self) -> Option<Vec<u8>> {
        match self.pcap.take()? {
            PcapSink::Memory(w) => Some(w.into_inner()),
            PcapSink::Writer(mut w) => {
                let _ = w.flush();
                None
            }
        }
    }

    pub(super) fn take_node_events(&mut self) -> Vec<(Instant, NodeId, Event)> {
        std::mem::take(&mut self.node_events)
    }
}
