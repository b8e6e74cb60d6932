//! The Security Context (RFC 8613 §3): what both endpoints derive from a Master Secret, the Sender
//! Sequence Number with its crash-safe reservation (Appendix B.1.1), and the Recipient's replay window.

use crate::cbor;
use crate::replay::ReplayWindow;
use crate::Error;
use aes::Aes128;
use ccm::aead::{Aead as _, KeyInit, Payload};
use ccm::consts::{U13, U8};
use ccm::Ccm;
use hkdf::Hkdf;
use sha2::Sha256;

/// The AEAD algorithm of a context (COSE algorithm values, RFC 8152 §10). An enum so that others can be
/// added; AES-CCM-16-64-128 is OSCORE's mandatory default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aead {
    /// AES-CCM-16-64-128 (COSE 10): 128-bit key, 13-byte nonce, 8-byte tag.
    AesCcm16_64_128,
}

impl Aead {
    pub const fn cose_id(self) -> u64 {
        match self {
            Aead::AesCcm16_64_128 => 10,
        }
    }

    pub const fn key_len(self) -> usize {
        16
    }

    pub const fn nonce_len(self) -> usize {
        13
    }

    pub const fn tag_len(self) -> usize {
        8
    }

    /// The longest plaintext one message can protect: AES-CCM with a 13-byte nonce leaves 15 − 13 = 2
    /// bytes for the length (RFC 3610 §2, RFC 8152 §10.2), so 65,535 bytes — the code, the inner options
    /// and the payload. A larger body goes in inner blocks (RFC 8613 §4.1.3.4.1), each protected on its
    /// own.
    pub const fn max_plaintext(self) -> usize {
        match self {
            Aead::AesCcm16_64_128 => (1 << (8 * (15 - 13))) - 1,
        }
    }

    /// From a COSE algorithm value or name (credentials files use either).
    pub fn from_cose(v: &serde_json::Value) -> Option<Aead> {
        match v {
            serde_json::Value::Number(n) if n.as_u64() == Some(10) => Some(Aead::AesCcm16_64_128),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("AES-CCM-16-64-128") => Some(Aead::AesCcm16_64_128),
            _ => None,
        }
    }

    pub(crate) fn seal(self, key: &[u8], nonce: &[u8], aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, Error> {
        self.check_len(plaintext)?;
        match self {
            Aead::AesCcm16_64_128 => {
                let cipher = Ccm::<Aes128, U8, U13>::new_from_slice(key).map_err(|_| Error::Internal("key length"))?;
                cipher
                    .encrypt(nonce.into(), Payload { msg: plaintext, aad })
                    .map_err(|_| Error::Internal("AEAD encryption"))
            }
        }
    }

    /// [`Error::TooLarge`] for a plaintext longer than [`Aead::max_plaintext`].
    pub(crate) fn check_len(self, plaintext: &[u8]) -> Result<(), Error> {
        match plaintext.len() {
            len if len > self.max_plaintext() => Err(Error::TooLarge { len, max: self.max_plaintext() }),
            _ => Ok(()),
        }
    }

    pub(crate) fn open(self, key: &[u8], nonce: &[u8], aad: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>, Error> {
        match self {
            Aead::AesCcm16_64_128 => {
                if ciphertext.len() < self.tag_len() {
                    return Err(Error::DecryptionFailed);
                }
                let cipher = Ccm::<Aes128, U8, U13>::new_from_slice(key).map_err(|_| Error::Internal("key length"))?;
                cipher.decrypt(nonce.into(), Payload { msg: ciphertext, aad }).map_err(|_| Error::DecryptionFailed)
            }
        }
    }
}

/// The key derivation function (HKDF with a hash, RFC 5869); HKDF-SHA-256 is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kdf {
    HkdfSha256,
}

impl Kdf {
    pub(crate) fn derive(self, salt: &[u8], ikm: &[u8], info: &[u8], out: &mut [u8]) -> Result<(), Error> {
        match self {
            Kdf::HkdfSha256 => Hkdf::<Sha256>::new(Some(salt), ikm)
                .expand(info, out)
                .map_err(|_| Error::Internal("HKDF output length")),
        }
    }
}

/// What the two endpoints share (RFC 8613 §3.2): the input of the derivation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub master_secret: Vec<u8>,
    /// Empty: the default (no salt).
    pub master_salt: Vec<u8>,
    pub sender_id: Vec<u8>,
    pub recipient_id: Vec<u8>,
    pub id_context: Option<Vec<u8>>,
    pub aead: Aead,
    pub kdf: Kdf,
    /// Requests accepted out of order (RFC 8613 §7.4: 32 by default).
    pub replay_window: usize,
}

impl Params {
    pub fn new(master_secret: &[u8], sender_id: &[u8], recipient_id: &[u8]) -> Params {
        Params {
            master_secret: master_secret.to_vec(),
            master_salt: Vec::new(),
            sender_id: sender_id.to_vec(),
            recipient_id: recipient_id.to_vec(),
            id_context: None,
            aead: Aead::AesCcm16_64_128,
            kdf: Kdf::HkdfSha256,
            replay_window: 32,
        }
    }
}

/// How far ahead the Sender Sequence Number is reserved at first (RFC 8613 Appendix B.1.1): the context
/// never uses a number that a crash could make it use again. [`SecurityContext::sequence_to_persist`] says
/// what to write and when; the caller writes it (the gateway to SQLite, the CLI to a small file) and loads
/// it at start-up into [`SecurityContext::restore`]. Each reservation doubles the step, up to
/// [`K_SSN_MAX`], so a busy sender writes rarely and a restart skips at most that many numbers.
pub const K_SSN: u64 = 64;
pub const K_SSN_MAX: u64 = 4096;

/// The largest Sender Sequence Number (Partial IVs are at most 5 bytes, RFC 8613 §7.2.1).
pub const MAX_SSN: u64 = (1 << 40) - 1;

/// A derived Security Context: the Common, Sender and Recipient Contexts of RFC 8613 §3.1.
#[derive(Debug, Clone)]
pub struct SecurityContext {
    pub(crate) params: Params,
    pub(crate) sender_key: Vec<u8>,
    pub(crate) recipient_key: Vec<u8>,
    pub(crate) common_iv: Vec<u8>,
    pub(crate) seq: Sequence,
    pub(crate) replay: ReplayWindow,
    pub(crate) ops: CryptoOps,
}

/// Cryptographic operations a context performed (seed 001's Table III counts them per retrieval):
/// AEAD encryptions and decryptions, signatures made and verified, and HMAC computations inside HKDF at
/// run time (an extract and one per 32 output bytes; the derivation of the context itself is not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CryptoOps {
    pub aead: u64,
    pub signatures: u64,
    pub hmac: u64,
}

/// The Sender Sequence Number with its crash-safe reservation (Appendix B.1.1), shared by pairwise and
/// group contexts.
#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    /// The next Sender Sequence Number to use.
    ssn: u64,
    /// Numbers below this are reserved in persistent storage; reaching it needs a new reservation.
    reserved: u64,
    /// The next reservation's step (doubles up to [`K_SSN_MAX`]).
    step: u64,
}

impl Sequence {
    pub(crate) fn new() -> Sequence {
        Sequence { ssn: 0, reserved: 0, step: K_SSN }
    }

    pub(crate) fn current(&self) -> u64 {
        self.ssn
    }

    pub(crate) fn set(&mut self, ssn: u64) {
        self.ssn = ssn;
        self.reserved = self.reserved.max(ssn);
    }

    pub(crate) fn restore(&mut self, persisted: u64) {
        self.ssn = persisted;
        self.reserved = persisted;
    }

    pub(crate) fn reservation_due(&mut self) -> Option<u64> {
        if self.ssn < self.reserved {
            return None;
        }
        self.reserved = self.ssn.saturating_add(self.step).min(MAX_SSN + 1);
        self.step = (self.step * 2).min(K_SSN_MAX);
        Some(self.reserved)
    }

    /// Takes the next number as a Partial IV (RFC 8613 §7.2), minimal big-endian bytes.
    pub(crate) fn next_piv(&mut self) -> Result<Vec<u8>, Error> {
        if self.ssn > MAX_SSN {
            return Err(Error::SequenceExhausted);
        }
        let piv = piv_bytes(self.ssn);
        self.ssn += 1;
        self.reserved = self.reserved.max(self.ssn);
        Ok(piv)
    }
}

/// The AEAD nonce of RFC 8613 §5.2 for a Partial IV generated by `id_piv`.
pub(crate) fn nonce(aead: Aead, common_iv: &[u8], id_piv: &[u8], piv: &[u8]) -> Vec<u8> {
    let n = aead.nonce_len();
    let mut nonce = vec![0u8; n];
    nonce[0] = id_piv.len() as u8;
    let id_end = n - 5;
    nonce[id_end - id_piv.len()..id_end].copy_from_slice(id_piv);
    nonce[n - piv.len()..].copy_from_slice(piv);
    for (b, iv) in nonce.iter_mut().zip(common_iv) {
        *b ^= iv;
    }
    nonce
}

pub(crate) fn info(id: &[u8], id_context: Option<&[u8]>, alg: u64, kind: &str, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    cbor::array(&mut out, 5);
    cbor::bstr(&mut out, id);
    match id_context {
        Some(c) => cbor::bstr(&mut out, c),
        None => cbor::null(&mut out),
    }
    cbor::uint(&mut out, alg);
    cbor::tstr(&mut out, kind);
    cbor::uint(&mut out, len as u64);
    out
}

impl SecurityContext {
    /// Derives the keys and the Common IV (RFC 8613 §3.2.1). IDs longer than the nonce allows are refused.
    pub fn derive(params: Params) -> Result<SecurityContext, Error> {
        let max_id = params.aead.nonce_len() - 6;
        if params.sender_id.len() > max_id || params.recipient_id.len() > max_id {
            return Err(Error::Config(format!("Sender and Recipient IDs are at most {max_id} bytes")));
        }
        if params.sender_id == params.recipient_id {
            return Err(Error::Config("the Sender ID and the Recipient ID must differ".into()));
        }
        if params.master_secret.is_empty() {
            return Err(Error::Config("the Master Secret is empty".into()));
        }
        let (alg, kl, nl) = (params.aead.cose_id(), params.aead.key_len(), params.aead.nonce_len());
        let ctx = params.id_context.as_deref();
        let derive = |id: &[u8], kind: &str, len: usize| -> Result<Vec<u8>, Error> {
            let mut out = vec![0; len];
            params.kdf.derive(&params.master_salt, &params.master_secret, &info(id, ctx, alg, kind, len), &mut out)?;
            Ok(out)
        };
        let sender_key = derive(&params.sender_id, "Key", kl)?;
        let recipient_key = derive(&params.recipient_id, "Key", kl)?;
        let common_iv = derive(&[], "IV", nl)?;
        let replay = ReplayWindow::new(params.replay_window);
        Ok(SecurityContext {
            params,
            sender_key,
            recipient_key,
            common_iv,
            seq: Sequence::new(),
            replay,
            ops: CryptoOps::default(),
        })
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn sender_key(&self) -> &[u8] {
        &self.sender_key
    }

    pub fn recipient_key(&self) -> &[u8] {
        &self.recipient_key
    }

    pub fn common_iv(&self) -> &[u8] {
        &self.common_iv
    }

    pub fn sender_sequence_number(&self) -> u64 {
        self.seq.current()
    }

    /// The cryptographic operations this context performed so far.
    pub fn ops(&self) -> CryptoOps {
        self.ops
    }

    /// Sets the next Sender Sequence Number (tests, and [`SecurityContext::restore`]).
    pub fn set_sender_sequence_number(&mut self, ssn: u64) {
        self.seq.set(ssn);
    }

    /// After a restart: `persisted` is the last value [`SecurityContext::sequence_to_persist`] asked to
    /// store. Every number below it may have been used, so sending continues from it. The replay window
    /// starts empty and unsynchronised: the first request from the peer is answered with Echo (RFC 9175)
    /// before anything is accepted from it (RFC 8613 Appendix B.1.2).
    pub fn restore(&mut self, persisted: u64) {
        self.seq.restore(persisted);
        self.lose_replay_window();
    }

    /// Forgets the replay window: nothing from the peer is accepted until it proves freshness with Echo
    /// (RFC 8613 Appendix B.1.2). A server does this for every context it did not start fresh (see
    /// [`crate::store`]).
    pub fn lose_replay_window(&mut self) {
        self.replay = ReplayWindow::new(self.params.replay_window);
        self.replay.desynchronise();
    }

    /// Whether the replay window is known (false after [`SecurityContext::lose_replay_window`], until a
    /// request with a returned Echo value re-established it).
    pub fn replay_window_known(&self) -> bool {
        self.replay.is_synchronised()
    }

    /// The value to write to persistent storage before the next message may be protected, if the current
    /// reservation is used up: the caller stores it (durably) and then goes on. `None` when nothing needs
    /// writing.
    pub fn sequence_to_persist(&mut self) -> Option<u64> {
        self.seq.reservation_due()
    }

    /// Takes the next Sender Sequence Number as a Partial IV (RFC 8613 §7.2), minimal big-endian bytes.
    pub(crate) fn next_piv(&mut self) -> Result<Vec<u8>, Error> {
        self.seq.next_piv()
    }

    /// The AEAD nonce of RFC 8613 §5.2 for a Partial IV generated by `id_piv`.
    pub(crate) fn nonce(&self, id_piv: &[u8], piv: &[u8]) -> Vec<u8> {
        nonce(self.params.aead, &self.common_iv, id_piv, piv)
    }
}

/// A sequence number as a Partial IV: big-endian without leading zeros, one zero byte for 0.
pub(crate) fn piv_bytes(n: u64) -> Vec<u8> {
    let bytes = n.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(7);
    bytes[first..].to_vec()
}

pub(crate) fn piv_value(piv: &[u8]) -> u64 {
    piv.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}
