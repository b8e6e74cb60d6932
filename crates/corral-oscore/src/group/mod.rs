//! Group OSCORE (draft-ietf-core-oscore-groupcomm) and deterministic requests
//! (draft-ietf-core-cacheable-oscore): one security context shared by every member of a group.
//!
//! - **Group mode**: a message is encrypted with its sender's group key and signed with the sender's
//!   Ed25519 key; the signature is encrypted with a keystream from the Signature Encryption Key and
//!   appended to the ciphertext, and the OSCORE option carries the Group Flag.
//! - **Pairwise mode**: keys for one pair of members, derived from their group keys, their credentials and
//!   an X25519 shared secret of their Ed25519 keys (converted to Montgomery form); no signature.
//! - **Deterministic requests**: a pseudo-member (the Deterministic Client) whose Sender ID every member
//!   knows. A request's key is derived from a hash of the request itself, its Partial IV is always 0 and
//!   its outer code FETCH, so every member sends the same bytes for the same GET: a proxy can aggregate
//!   and cache it. The server recomputes the hash, keeps no replay window for it, refuses unsafe methods,
//!   and answers in group mode (signed), so each client verifies the one cached response.
//!
//! What it was checked against: aiocoap 0.4.17's implementation (`aiocoap.oscore.SimpleGroupContext`,
//! `_DeterministicProtectProtoAspect`), byte for byte with fixed keys (`tests/group_vectors.rs`; Ed25519
//! signatures are deterministic, so a whole protected message is a test vector). The keystream, AAD and
//! derivation layouts follow aiocoap where the drafts moved between versions; the module names each.
//!
//! Contexts are static (no Group Manager protocol, no rekeying): the parameters a Group Manager would
//! provide come from a context directory ([`crate::store::GroupDir`]).

mod protect;
mod sign;

pub use protect::{GroupBinding, Mode};

use crate::context::{info, nonce, Aead, CryptoOps, Kdf, Sequence};
use crate::replay::ReplayWindow;
use crate::Error;
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::collections::BTreeMap;

/// The COSE value of EdDSA (RFC 9053), Group OSCORE's signature algorithm here.
pub const EDDSA: i64 = -8;
/// The COSE value of ECDH-SS + HKDF-256 (RFC 9053), the pairwise key agreement algorithm here.
pub const ECDH_SS_HKDF_256: i64 = -27;

/// What a Group Manager gives a member (draft-ietf-core-oscore-groupcomm §2): the Common Context, the
/// member's own Sender ID and private key, and the other members' credentials.
#[derive(Clone)]
pub struct GroupParams {
    pub master_secret: Vec<u8>,
    pub master_salt: Vec<u8>,
    /// The Group Identifier, used as ID Context.
    pub group_id: Vec<u8>,
    pub sender_id: Vec<u8>,
    /// The Ed25519 private key (its 32-byte seed).
    pub private_key: [u8; 32],
    /// Every other member: Sender ID → authentication credential (a CWT Claims Set with the Ed25519
    /// public key, as aiocoap writes it; see [`ccs_for`]).
    pub members: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The Sender ID of the Deterministic Client, if the group has one.
    pub deterministic_id: Option<Vec<u8>>,
    /// The Group Manager's credential, part of every AAD (CBOR null when absent).
    pub gm_cred: Option<Vec<u8>>,
    /// AEAD of pairwise mode and of deterministic requests, and Group Encryption Algorithm of group mode.
    pub aead: Aead,
    pub group_enc: Aead,
    pub kdf: Kdf,
    pub replay_window: usize,
}

impl GroupParams {
    /// A member's parameters with the defaults corral and aiocoap use: no Master Salt, no Deterministic
    /// Client, no Group Manager credential, AES-CCM-16-64-128 for both AEADs, HKDF-SHA256, a 32-entry replay
    /// window. Set the other fields with struct update syntax.
    pub fn new(
        master_secret: Vec<u8>,
        group_id: Vec<u8>,
        sender_id: Vec<u8>,
        private_key: [u8; 32],
        members: BTreeMap<Vec<u8>, Vec<u8>>,
    ) -> GroupParams {
        GroupParams {
            master_secret,
            master_salt: Vec::new(),
            group_id,
            sender_id,
            private_key,
            members,
            deterministic_id: None,
            gm_cred: None,
            aead: Aead::AesCcm16_64_128,
            group_enc: Aead::AesCcm16_64_128,
            kdf: Kdf::HkdfSha256,
            replay_window: 32,
        }
    }
}

impl std::fmt::Debug for GroupParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupParams")
            .field("group_id", &self.group_id)
            .field("sender_id", &self.sender_id)
            .field("members", &self.members.keys().collect::<Vec<_>>())
            .field("deterministic_id", &self.deterministic_id)
            .finish_non_exhaustive()
    }
}

/// The prefix of the CWT Claims Set aiocoap builds for an Ed25519 key: `{8: {1: {1: 1, 3: -8, -1: 6,
/// -2: h'…'}}}` (cnf / COSE_Key / kty OKP, alg EdDSA, crv Ed25519, x), then the 32 key bytes.
const CCS_PREFIX: [u8; 14] = [0xa1, 0x08, 0xa1, 0x01, 0xa4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20];

/// The authentication credential (CCS) of an Ed25519 public key.
pub fn ccs_for(public_key: &[u8; 32]) -> Vec<u8> {
    let mut out = CCS_PREFIX.to_vec();
    out.extend_from_slice(public_key);
    out
}

/// The Ed25519 public key of a private key (its 32-byte seed).
pub fn public_key_of_seed(seed: &[u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(seed).verifying_key().to_bytes()
}

/// The public key in a credential: a CCS of the form [`ccs_for`] writes.
pub fn public_key_of(ccs: &[u8]) -> Result<[u8; 32], Error> {
    match ccs.strip_prefix(&CCS_PREFIX[..]) {
        Some(key) if key.len() == 32 => Ok(key.try_into().unwrap_or([0; 32])),
        _ => Err(Error::Config(
            "a member's credential must be a CWT Claims Set with one Ed25519 key ({8: {1: {1: 1, 3: -8, -1: 6, \
             -2: h'32 bytes'}}})"
                .into(),
        )),
    }
}

/// Another member as this one knows it.
pub(crate) struct Member {
    pub(crate) cred: Vec<u8>,
    pub(crate) public: VerifyingKey,
    /// Its group-mode Sender Key (our Recipient Key for its group messages).
    pub(crate) group_key: Vec<u8>,
    /// Pairwise Sender and Recipient Keys with it (§2.5.1).
    pub(crate) pairwise_sender: Vec<u8>,
    pub(crate) pairwise_recipient: Vec<u8>,
    pub(crate) replay: ReplayWindow,
}

/// A derived group context. See the module docs.
pub struct GroupContext {
    pub(crate) params: GroupParams,
    pub(crate) signing: SigningKey,
    pub(crate) own_cred: Vec<u8>,
    pub(crate) sender_key: Vec<u8>,
    pub(crate) common_iv: Vec<u8>,
    /// The Signature Encryption Key (keystreams for the encrypted signatures).
    pub(crate) sekey: Vec<u8>,
    pub(crate) members: BTreeMap<Vec<u8>, Member>,
    /// The Deterministic Client's Sender Key (every member derives it), by its Sender ID.
    pub(crate) deterministic: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) seq: Sequence,
    pub(crate) ops: CryptoOps,
}

impl std::fmt::Debug for GroupContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupContext").field("params", &self.params).finish_non_exhaustive()
    }
}

/// HMAC computations of one HKDF call producing `len` bytes with SHA-256: an extract and one per block.
pub(crate) fn hkdf_hmacs(len: usize) -> u64 {
    1 + len.div_ceil(32) as u64
}

impl GroupContext {
    /// Derives the Common Context, this member's keys and every member's group and pairwise keys
    /// (draft-ietf-core-oscore-groupcomm §2.2, §2.5.1).
    pub fn derive(params: GroupParams) -> Result<GroupContext, Error> {
        if params.master_secret.is_empty() {
            return Err(Error::Config("the Master Secret is empty".into()));
        }
        let max_id = params.group_enc.nonce_len() - 6;
        let ids = params.members.keys().chain(std::iter::once(&params.sender_id)).chain(&params.deterministic_id);
        if let Some(long) = ids.clone().find(|id| id.len() > max_id) {
            return Err(Error::Config(format!("Sender ID {long:02x?} is longer than {max_id} bytes")));
        }
        if params.members.contains_key(&params.sender_id) || params.deterministic_id.as_ref() == Some(&params.sender_id)
        {
            return Err(Error::Config("another member has this member's own Sender ID".into()));
        }
        let gid = params.group_id.clone();
        let key = |id: &[u8], alg: Aead| -> Result<Vec<u8>, Error> {
            let mut out = vec![0; alg.key_len()];
            let i = info(id, Some(&gid), alg.cose_id(), "Key", alg.key_len());
            params.kdf.derive(&params.master_salt, &params.master_secret, &i, &mut out)?;
            Ok(out)
        };
        let sender_key = key(&params.sender_id, params.group_enc)?;
        let iv_len = params.aead.nonce_len().max(params.group_enc.nonce_len());
        let mut common_iv = vec![0; iv_len];
        let i = info(&[], Some(&gid), params.group_enc.cose_id(), "IV", iv_len);
        params.kdf.derive(&params.master_salt, &params.master_secret, &i, &mut common_iv)?;
        let mut sekey = vec![0; params.group_enc.key_len()];
        let i = info(&[], Some(&gid), params.group_enc.cose_id(), "SEKey", sekey.len());
        params.kdf.derive(&params.master_salt, &params.master_secret, &i, &mut sekey)?;
        let signing = SigningKey::from_bytes(&params.private_key);
        let own_cred = ccs_for(&signing.verifying_key().to_bytes());
        let mut members = BTreeMap::new();
        for (id, cred) in &params.members {
            let public = VerifyingKey::from_bytes(&public_key_of(cred)?)
                .map_err(|_| Error::Config(format!("member {id:02x?}: not an Ed25519 public key")))?;
            let group_key = key(id, params.group_enc)?;
            let shared = sign::shared_secret(&signing, &public);
            let pairwise = |salt: &[u8], first: &[u8], second: &[u8], kid: &[u8]| -> Result<Vec<u8>, Error> {
                let ikm = [first, second, &shared[..]].concat();
                let mut out = vec![0; params.aead.key_len()];
                let i = info(kid, Some(&gid), params.aead.cose_id(), "Key", out.len());
                params.kdf.derive(salt, &ikm, &i, &mut out)?;
                Ok(out)
            };
            let pairwise_sender = pairwise(&sender_key, &own_cred, cred, &params.sender_id)?;
            let pairwise_recipient = pairwise(&group_key, cred, &own_cred, id)?;
            let replay = ReplayWindow::new(params.replay_window);
            members.insert(
                id.clone(),
                Member { cred: cred.clone(), public, group_key, pairwise_sender, pairwise_recipient, replay },
            );
        }
        let deterministic = match &params.deterministic_id {
            Some(id) => Some((id.clone(), key(id, params.group_enc)?)),
            None => None,
        };
        Ok(GroupContext {
            params,
            signing,
            own_cred,
            sender_key,
            common_iv,
            sekey,
            members,
            deterministic,
            seq: Sequence::new(),
            ops: CryptoOps::default(),
        })
    }

    pub fn params(&self) -> &GroupParams {
        &self.params
    }

    /// This member's credential (give it to the other members).
    pub fn own_credential(&self) -> &[u8] {
        &self.own_cred
    }

    pub fn ops(&self) -> CryptoOps {
        self.ops
    }

    pub fn sender_sequence_number(&self) -> u64 {
        self.seq.current()
    }

    pub fn set_sender_sequence_number(&mut self, ssn: u64) {
        self.seq.set(ssn);
    }

    /// After a restart (see [`crate::SecurityContext::restore`]): sending continues from the persisted
    /// reservation, and every member's replay window is unknown until that member proves freshness with
    /// Echo (deterministic requests, which have no window, are unaffected).
    pub fn restore(&mut self, persisted: u64) {
        self.seq.restore(persisted);
        self.lose_replay_windows();
    }

    /// Forgets every member's replay window (see [`crate::SecurityContext::lose_replay_window`]).
    pub fn lose_replay_windows(&mut self) {
        for m in self.members.values_mut() {
            m.replay = ReplayWindow::new(self.params.replay_window);
            m.replay.desynchronise();
        }
    }

    /// See [`crate::SecurityContext::sequence_to_persist`].
    pub fn sequence_to_persist(&mut self) -> Option<u64> {
        self.seq.reservation_due()
    }

    /// Whether `kid` names a member, the Deterministic Client, or neither.
    pub fn knows(&self, kid: &[u8]) -> bool {
        self.members.contains_key(kid) || self.deterministic.as_ref().is_some_and(|(d, _)| d == kid)
    }

    pub(crate) fn nonce(&self, alg: Aead, id_piv: &[u8], piv: &[u8]) -> Vec<u8> {
        nonce(alg, &self.common_iv, id_piv, piv)
    }

    pub(crate) fn member(&self, kid: &[u8]) -> Result<&Member, Error> {
        self.members.get(kid).ok_or(Error::UnknownContext)
    }
}
