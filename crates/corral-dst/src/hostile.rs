//! The hostile actors: a spoofer on a wired host that sends the gateway requests in a victim's name (uses
//! and observations, CON and NON, to turn the gateway into a reflector) and malformed datagrams, and the
//! ledger of bytes between the gateway and the victim that the reflection bound is checked against.
//!
//! # What it owns
//! [`Spoofer`] (what it sends, drawn from its own seeded stream) and [`Ledger`] (bytes per direction,
//! counted at delivery by the datagram rule the world installs). Adding a hostile actor: a kind of
//! datagram here, a fault that switches it on in `fault`, its step in `world`.

use crate::client::NAMES;
use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::Rng;
use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;

/// A spoofer's datagrams.
pub struct Spoofer {
    rng: Rng,
    /// The address it writes as the source of its requests (the victim's).
    pub victim: IpAddr,
}

impl Spoofer {
    pub fn new(rng: Rng, victim: IpAddr) -> Spoofer {
        Spoofer { rng, victim }
    }

    /// A use or an observation of a random entity in the victim's name: (source, datagram).
    pub fn spoofed_read(&mut self) -> (SocketAddr, Vec<u8>) {
        let r = &mut self.rng;
        let mtype = if r.chance(0.5) { MessageType::Con } else { MessageType::Non };
        let mut token = [0u8; 4];
        r.fill(&mut token);
        let mut m = Message::new(mtype, Code::GET, MessageId(r.next_u16()), Token::new(&token).expect("4 bytes"));
        if r.chance(0.3) {
            m.options.push(OptionNumber::OBSERVE, &[]);
        }
        m.options.push_str(OptionNumber::URI_PATH, "em");
        m.options.push_str(OptionNumber::URI_PATH, NAMES[r.below(NAMES.len() as u64) as usize]);
        m.options.push_str(OptionNumber::URI_QUERY, "eo=lst");
        let port = 1024 + r.below(60_000) as u16;
        (SocketAddr::new(self.victim, port), m.encode())
    }

    /// Bytes that may or may not parse: random, or a real header with a broken rest.
    pub fn garbage(&mut self) -> Vec<u8> {
        let r = &mut self.rng;
        let mut b = vec![0u8; r.below(80) as usize];
        r.fill(&mut b);
        if r.chance(0.5) && b.len() >= 4 {
            b[0] = 0x40 | (b[0] & 0x3f); // version 1, any type and token length
        }
        b
    }
}

/// CoAP bytes the gateway sent to the victim's address and received from it (spoofed), counted at their
/// delivery.
#[derive(Debug, Clone, Default)]
pub struct Ledger(Rc<RefCell<(usize, usize)>>);

impl Ledger {
    pub fn count(&self, from_gateway: bool, len: usize) {
        let mut l = self.0.borrow_mut();
        if from_gateway {
            l.0 += len;
        } else {
            l.1 += len;
        }
    }

    /// (sent to the victim, received from it).
    pub fn totals(&self) -> (usize, usize) {
        *self.0.borrow()
    }
}
