//! The radio medium: every directed radio link (neighbour lists, received power, loss model and state,
//! counters), the channels' random streams, the Wi-Fi interferers and the frames on the air.
//!
//! Owns: the per-link tables, indexed alike (a link's index is its position in the CSR neighbour list of
//! its sender, see `Sim::link_index`), and the slots of frames on the air. Must never: draw from a stream
//! other than the channel's or the interferer's own (the draws are made in the MAC's order, so that a seed
//! gives the same run).

use super::*;

/// A Wi-Fi interferer and its burst process.
pub(super) struct InterfererState {
    pub(super) cfg: Interferer,
    pub(super) process: BurstProcess,
}

pub(super) enum AirKind {
    Data { dg: DgramRef, hops: u8, dst: Option<u32>, frag: u16, frags: u16, dsn: u8, attempt: u8 },
    Ack { to: u32, dsn: u8, datagram: DatagramId },
}

/// A frame on the air.
pub(super) struct Air {
    pub(super) sender: u32,
    pub(super) phy_bytes: u16,
    pub(super) kind: AirKind,
    /// Intended receivers that could not lock onto the frame, and why.
    pub(super) misses: Vec<(u32, DropReason)>,
}

/// The radio medium (see the module docs).
pub(super) struct Medium {
    /// CSR neighbour lists and per-directed-link state, indexed alike.
    pub(super) nbrs: Vec<u32>,
    /// Received power on each directed link, mW ([`crate::propagation`]).
    pub(super) link_power: Vec<f64>,
    /// The capture threshold as a power ratio, if capture is modelled.
    pub(super) capture: Option<f64>,
    /// Each link's loss model, an index into `models`.
    pub(super) link_model: Vec<u16>,
    pub(super) link_state: Vec<LinkState>,
    pub(super) link_counters: Vec<Option<Box<LinkCounters>>>,
    /// The distinct loss models in use.
    pub(super) models: Vec<LinkModel>,
    /// One stream per IEEE 802.15.4 channel: link loss, interference corruption and CCA detection draws.
    pub(super) chan_rng: Vec<Rng>,
    pub(super) interferers: Vec<InterfererState>,
    /// Frames on the air, by slot; `air_free` lists the free slots.
    pub(super) air: Vec<Option<Air>>,
    air_free: Vec<u32>,
}

impl Medium {
    /// The medium of links `nbrs` (CSR) with their received powers, every link on `default_model`.
    pub(super) fn new(
        seed: u64,
        nbrs: Vec<u32>,
        link_power: Vec<f64>,
        capture: Option<f64>,
        default_model: LinkModel,
    ) -> Medium {
        let links = nbrs.len();
        Medium {
            nbrs,
            link_power,
            capture,
            link_model: vec![0; links],
            link_state: vec![LinkState::default(); links],
            link_counters: (0..links).map(|_| None).collect(),
            models: vec![default_model],
            chan_rng: (0..32u64).map(|c| Rng::stream(seed, 0x2_0000_0000 + c)).collect(),
            interferers: Vec::new(),
            air: Vec::new(),
            air_free: Vec::new(),
        }
    }

    /// The index of `model` in the table of models, added if new.
    pub(super) fn intern_model(&mut self, model: LinkModel) -> usize {
        match self.models.iter().position(|m| *m == model) {
            Some(i) => i,
            None => {
                self.models.push(model);
                self.models.len() - 1
            }
        }
    }

    /// Link `k` follows model `idx` from now on, from a fresh state.
    pub(super) fn set_link_model(&mut self, k: usize, idx: usize) {
        self.link_model[k] = idx as u16;
        self.link_state[k] = LinkState::default();
    }

    /// Every link follows `model`.
    pub(super) fn set_all_link_models(&mut self, model: LinkModel) {
        self.models = vec![model];
        self.link_model.iter_mut().for_each(|m| *m = 0);
    }

    /// Link `k`'s counters, created at its first frame.
    pub(super) fn counters_mut(&mut self, k: usize) -> &mut LinkCounters {
        self.link_counters[k].get_or_insert_with(Default::default)
    }

    /// Puts a frame on the air; returns its slot.
    pub(super) fn put_air(&mut self, air: Air) -> u32 {
        match self.air_free.pop() {
            Some(k) => {
                self.air[k as usize] = Some(air);
                k
            }
            None => {
                self.air.push(Some(air));
                (self.air.len() - 1) as u32
            }
        }
    }

    /// Takes the frame in slot `k` off the air (its transmission ended).
    pub(super) fn take_air(&mut self, k: u32) -> Air {
        let air = self.air[k as usize].take().expect("air frame alive");
        self.air_free.push(k);
        air
    }
}
