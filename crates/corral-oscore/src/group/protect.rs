//! Protecting and verifying messages with a [`GroupContext`]: group mode (signed), pairwise mode and
//! deterministic requests, for clients and servers.
//!
//! The external AAD of Group OSCORE (draft-ietf-core-oscore-groupcomm §4.3) is
//! `[1, [alg_aead, alg_group_enc, alg_signature, alg_pairwise_key_agreement], request_kid, request_piv,
//! class_I_options, request_kid_context, OSCORE_option, sender_cred, gm_cred]`; the same bytes are the
//! AEAD's external AAD and the signature's. A deterministic request's `sender_cred` is the empty byte
//! string, and its response carries the Request-Hash as a Class I option (elided on the wire, rebuilt by
//! both ends: draft-ietf-core-cacheable-oscore §3.3).

use super::sign::{self, SIGNATURE_LEN};
use super::{hkdf_hmacs, GroupContext, ECDH_SS_HKDF_256, EDDSA};
use crate::cbor;
use crate::context::{info, piv_value, Aead};
use crate::option::OscoreOption;
use crate::protect::{parse_plaintext, plaintext, split, OUTER_ONLY};
use crate::{Error, Plain, Refusal};
use corral_wire::{encode_options, Code, OptionNumber, Options};
use sha2::{Digest, Sha256};

/// How a request was protected, which decides how its response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Group mode: signed, readable by every member. Answered in pairwise mode (as aiocoap does).
    Group,
    /// Pairwise mode, between two members.
    Pairwise,
    /// A deterministic request (sent as the Deterministic Client). Answered in group mode, signed, with a
    /// Partial IV of the server's: the response any member can verify, so a proxy may cache it.
    Deterministic,
}

/// What binds a response to its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupBinding {
    pub mode: Mode,
    /// The request's kid and Partial IV.
    pub kid: Vec<u8>,
    pub piv: Vec<u8>,
    /// The server a pairwise request was meant for (a client's binding).
    pub server: Option<Vec<u8>>,
    /// A deterministic request's hash (its Request-Hash option).
    pub request_hash: Option<Vec<u8>>,
    pub observe: bool,
}

/// The Enc_structure of COSE over an external AAD.
fn enc_structure(external_aad: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(external_aad.len() + 12);
    cbor::array(&mut out, 3);
    cbor::tstr(&mut out, "Encrypt0");
    cbor::bstr(&mut out, &[]);
    cbor::bstr(&mut out, external_aad);
    out
}

/// A Request-Hash as the Class I options of a response's AAD.
fn class_i(request_hash: Option<&[u8]>) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    if let Some(h) = request_hash {
        let mut o = Options::new();
        o.push(OptionNumber::REQUEST_HASH, h);
        encode_options(&o, &mut out).map_err(|_| Error::Internal("Request-Hash encoding"))?;
    }
    Ok(out)
}

fn outer_code(request: bool, fetch: bool) -> Code {
    match (request, fetch) {
        (true, true) => Code::FETCH,
        (true, false) => Code::POST,
        (false, true) => Code::CONTENT,
        (false, false) => Code::CHANGED,
    }
}

/// Puts the outer Class U options back under the decrypted ones.
fn merge_outer(options: &mut Options, outer: &Options) {
    for (n, v) in outer.iter() {
        if OUTER_ONLY.contains(&n) && n != OptionNumber::OSCORE {
            options.push(n, v);
        }
    }
}

impl GroupContext {
    fn external_aad(
        &self,
        request_kid: &[u8],
        request_piv: &[u8],
        class_i: &[u8],
        option: &[u8],
        sender_cred: &[u8],
    ) -> Vec<u8> {
        let p = &self.params;
        let mut out = Vec::with_capacity(96 + sender_cred.len());
        cbor::array(&mut out, 9);
        cbor::uint(&mut out, 1);
        cbor::array(&mut out, 4);
        cbor::uint(&mut out, p.aead.cose_id());
        cbor::uint(&mut out, p.group_enc.cose_id());
        cbor::int(&mut out, EDDSA);
        cbor::int(&mut out, ECDH_SS_HKDF_256);
        cbor::bstr(&mut out, request_kid);
        cbor::bstr(&mut out, request_piv);
        cbor::bstr(&mut out, class_i);
        cbor::bstr(&mut out, &p.group_id);
        cbor::bstr(&mut out, option);
        cbor::bstr(&mut out, sender_cred);
        match &p.gm_cred {
            Some(c) => cbor::bstr(&mut out, c),
            None => cbor::null(&mut out),
        }
        out
    }

    fn seal(&mut self, alg: Aead, key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> Result<Vec<u8>, Error> {
        self.ops.aead += 1;
        alg.seal(key, nonce, &enc_structure(aad), pt)
    }

    fn open(&mut self, alg: Aead, key: &[u8], nonce: &[u8], aad: &[u8], ct: &[u8]) -> Result<Vec<u8>, Error> {
        self.ops.aead += 1;
        alg.open(key, nonce, &enc_structure(aad), ct)
    }

    /// Appends the encrypted signature over `ct` (group mode).
    fn append_signature(&mut self, ct: &mut Vec<u8>, aad: &[u8], piv: &[u8], request: bool) -> Result<(), Error> {
        let mut sig = sign::sign(&self.signing, aad, ct);
        let ks = sign::keystream(&self.sekey, piv, &self.params.sender_id, &self.params.group_id, request)?;
        sign::xor(&mut sig, &ks);
        self.ops.signatures += 1;
        self.ops.hmac += hkdf_hmacs(SIGNATURE_LEN);
        ct.extend_from_slice(&sig);
        Ok(())
    }

    /// Splits the encrypted signature off `payload` and verifies it as `kid`'s.
    fn check_signature<'a>(
        &mut self,
        kid: &[u8],
        payload: &'a [u8],
        aad: &[u8],
        piv: &[u8],
        request: bool,
    ) -> Result<&'a [u8], Error> {
        if payload.len() < SIGNATURE_LEN + self.params.group_enc.tag_len() {
            return Err(Error::DecryptionFailed);
        }
        let (ct, enc_sig) = payload.split_at(payload.len() - SIGNATURE_LEN);
        let mut sig = enc_sig.to_vec();
        sign::xor(&mut sig, &sign::keystream(&self.sekey, piv, kid, &self.params.group_id, request)?);
        self.ops.signatures += 1;
        self.ops.hmac += hkdf_hmacs(SIGNATURE_LEN);
        sign::verify(&self.member(kid)?.public, &sig, aad, ct)?;
        Ok(ct)
    }

    /// The key of a deterministic request with hash `h` (draft-ietf-core-cacheable-oscore §3.4.2 step 3).
    fn deterministic_key(&mut self, h: &[u8]) -> Result<Vec<u8>, Error> {
        let (id, base) = self.deterministic.clone().ok_or(Error::UnknownContext)?;
        let alg = self.params.aead;
        let mut key = vec![0; alg.key_len()];
        let i = info(&id, Some(&self.params.group_id), alg.cose_id(), "Key", key.len());
        self.params.kdf.derive(&base, h, &i, &mut key)?;
        self.ops.hmac += hkdf_hmacs(key.len());
        Ok(key)
    }

    /// `H = SHA-256(base key ‖ external AAD ‖ plaintext)` (§3.4.2 step 2).
    fn request_hash(&self, aad: &[u8], pt: &[u8]) -> Result<Vec<u8>, Error> {
        let (_, base) = self.deterministic.as_ref().ok_or(Error::UnknownContext)?;
        Ok(Sha256::new().chain_update(base).chain_update(aad).chain_update(pt).finalize().to_vec())
    }

    // ----- client side -----

    /// Protects a request in group mode (signed; every member can verify it).
    pub fn protect_group_request(&mut self, plain: &Plain) -> Result<(Plain, GroupBinding), Error> {
        self.protect_request(plain, None)
    }

    /// Protects a request in pairwise mode for the member `server`.
    pub fn protect_pairwise_request(&mut self, plain: &Plain, server: &[u8]) -> Result<(Plain, GroupBinding), Error> {
        self.member(server)?;
        self.protect_request(plain, Some(server))
    }

    fn protect_request(&mut self, plain: &Plain, server: Option<&[u8]>) -> Result<(Plain, GroupBinding), Error> {
        let (inner, mut outer) = split(&plain.options, true)?;
        let piv = self.seq.next_piv()?;
        let kid = self.params.sender_id.clone();
        let option = OscoreOption {
            piv: piv.clone(),
            kid_context: Some(self.params.group_id.clone()),
            kid: Some(kid.clone()),
            group: server.is_none(),
        }
        .encode();
        let aad = self.external_aad(&kid, &piv, &[], &option, &self.own_cred.clone());
        let pt = plaintext(plain.code, &inner, &plain.payload)?;
        let (alg, key) = match server {
            None => (self.params.group_enc, self.sender_key.clone()),
            Some(s) => (self.params.aead, self.member(s)?.pairwise_sender.clone()),
        };
        let nonce = self.nonce(alg, &kid, &piv);
        let mut ct = self.seal(alg, &key, &nonce, &aad, &pt)?;
        if server.is_none() {
            self.append_signature(&mut ct, &aad, &piv, true)?;
        }
        outer.push(OptionNumber::OSCORE, &option);
        let observe = plain.options.contains(OptionNumber::OBSERVE);
        let mode = if server.is_some() { Mode::Pairwise } else { Mode::Group };
        let binding = GroupBinding { mode, kid, piv, server: server.map(<[u8]>::to_vec), request_hash: None, observe };
        Ok((Plain { code: outer_code(true, observe), options: outer, payload: ct }, binding))
    }

    /// Protects a safe request as the Deterministic Client (draft-ietf-core-cacheable-oscore §3.4.2):
    /// Partial IV 0, no signature, the key derived from the request's hash, outer FETCH with Request-Hash.
    /// Every member of the group produces the same bytes for the same request.
    pub fn protect_deterministic(&mut self, plain: &Plain) -> Result<(Plain, GroupBinding), Error> {
        if !matches!(plain.code, Code::GET | Code::FETCH) {
            return Err(Error::UnsafeDeterministic);
        }
        let kid = self.deterministic.as_ref().map(|(id, _)| id.clone()).ok_or_else(|| {
            Error::Config("the group has no Deterministic Client (deterministic-id_hex in its settings)".into())
        })?;
        let (inner, mut outer) = split(&plain.options, true)?;
        let piv = vec![0];
        let option = OscoreOption {
            piv: piv.clone(),
            kid_context: Some(self.params.group_id.clone()),
            kid: Some(kid.clone()),
            group: false,
        }
        .encode();
        let aad = self.external_aad(&kid, &piv, &[], &option, &[]);
        let pt = plaintext(plain.code, &inner, &plain.payload)?;
        let h = self.request_hash(&aad, &pt)?;
        let key = self.deterministic_key(&h)?;
        let alg = self.params.aead;
        let nonce = self.nonce(alg, &kid, &piv);
        let ct = self.seal(alg, &key, &nonce, &aad, &pt)?;
        outer.push(OptionNumber::OSCORE, &option);
        outer.push(OptionNumber::REQUEST_HASH, &h);
        let observe = plain.options.contains(OptionNumber::OBSERVE);
        let binding =
            GroupBinding { mode: Mode::Deterministic, kid, piv, server: None, request_hash: Some(h), observe };
        Ok((Plain { code: Code::FETCH, options: outer, payload: ct }, binding))
    }

    /// Verifies a response to the request `binding` describes. Returns the response and its Partial IV's
    /// value when it has one. The answering member's Sender ID is in [`GroupContext::responder`].
    pub fn unprotect_response(&mut self, binding: &GroupBinding, outer: &Plain) -> Result<(Plain, Option<u64>), Error> {
        let value = outer.options.get(OptionNumber::OSCORE).ok_or(Error::NotOscore)?;
        let o = OscoreOption::decode(value)?;
        let server = match (&o.kid, &binding.server) {
            (Some(k), Some(s)) if k != s => return Err(Error::DecryptionFailed),
            (Some(k), _) => k.clone(),
            (None, Some(s)) => s.clone(),
            (None, None) => return Err(Error::BadOption("a group response needs the server's kid")),
        };
        let (piv_id, piv) = if o.piv.is_empty() {
            if binding.mode == Mode::Deterministic {
                // A deterministic request's nonce is shared by every member: never reused for a response.
                return Err(Error::BadOption("a response to a deterministic request needs its own Partial IV"));
            }
            (binding.kid.clone(), binding.piv.clone())
        } else {
            (server.clone(), o.piv.clone())
        };
        let cred = self.member(&server)?.cred.clone();
        let aad =
            self.external_aad(&binding.kid, &binding.piv, &class_i(binding.request_hash.as_deref())?, value, &cred);
        let pt = if o.group {
            let ct = self.check_signature(&server, &outer.payload, &aad, &piv, false)?.to_vec();
            let alg = self.params.group_enc;
            let (key, nonce) = (self.member(&server)?.group_key.clone(), self.nonce(alg, &piv_id, &piv));
            self.open(alg, &key, &nonce, &aad, &ct)?
        } else {
            if binding.mode == Mode::Deterministic {
                return Err(Error::DecryptionFailed);
            }
            let alg = self.params.aead;
            let (key, nonce) = (self.member(&server)?.pairwise_recipient.clone(), self.nonce(alg, &piv_id, &piv));
            self.open(alg, &key, &nonce, &aad, &outer.payload)?
        };
        let (code, mut options, payload) = parse_plaintext(&pt)?;
        let number = (!o.piv.is_empty()).then(|| piv_value(&o.piv));
        if options.contains(OptionNumber::OBSERVE) {
            if !binding.observe {
                return Err(Error::DecryptionFailed);
            }
            options.set_uint(OptionNumber::OBSERVE, number.map_or(0, |n| n & 0xff_ffff));
        }
        merge_outer(&mut options, &outer.options);
        Ok((Plain { code, options, payload }, number))
    }

    /// The Sender ID of the member that answered (the kid of a response's OSCORE option).
    pub fn responder(outer: &Plain) -> Option<Vec<u8>> {
        OscoreOption::decode(outer.options.get(OptionNumber::OSCORE)?).ok()?.kid
    }

    // ----- server side -----

    /// Verifies a request: group mode (signature, the sender's replay window), pairwise mode (the sender's
    /// replay window), or deterministic (hash recomputed, no replay window, safe methods only).
    pub fn unprotect_request(&mut self, outer: &Plain) -> Result<(Plain, GroupBinding), Error> {
        let (plain, binding, window) = self.open_request(outer)?;
        match window {
            Ok(()) => {}
            Err(Refusal::Unsynchronised) => return Err(Error::Unsynchronised),
            Err(_) => return Err(Error::Replay),
        }
        self.replay_accept(&binding);
        Ok((plain, binding))
    }

    /// Verifies a request without touching the sender's replay window, like
    /// [`crate::SecurityContext::open_request`]: the request, its binding and what the window says of it
    /// (always `Ok` for a deterministic request, which has no window).
    pub fn open_request(&mut self, outer: &Plain) -> Result<(Plain, GroupBinding, Result<(), Refusal>), Error> {
        let value = outer.options.get(OptionNumber::OSCORE).ok_or(Error::NotOscore)?;
        let o = OscoreOption::decode(value)?;
        let kid = o.kid.clone().ok_or(Error::BadOption("a request needs a kid"))?;
        if o.piv.is_empty() {
            return Err(Error::BadOption("a request needs a Partial IV"));
        }
        if o.kid_context.as_ref().is_some_and(|c| *c != self.params.group_id) {
            return Err(Error::UnknownContext);
        }
        let deterministic = self.deterministic.as_ref().is_some_and(|(d, _)| *d == kid);
        if deterministic {
            let (plain, binding) = self.unprotect_deterministic(outer, value, kid, o)?;
            return Ok((plain, binding, Ok(())));
        }
        let member = self.member(&kid)?;
        let cred = member.cred.clone();
        let window = member.replay.check(piv_value(&o.piv));
        let aad = self.external_aad(&kid, &o.piv, &[], value, &cred);
        let (pt, mode) = if o.group {
            let ct = self.check_signature(&kid, &outer.payload, &aad, &o.piv, true)?.to_vec();
            let alg = self.params.group_enc;
            let (key, nonce) = (self.member(&kid)?.group_key.clone(), self.nonce(alg, &kid, &o.piv));
            (self.open(alg, &key, &nonce, &aad, &ct)?, Mode::Group)
        } else {
            let alg = self.params.aead;
            let (key, nonce) = (self.member(&kid)?.pairwise_recipient.clone(), self.nonce(alg, &kid, &o.piv));
            (self.open(alg, &key, &nonce, &aad, &outer.payload)?, Mode::Pairwise)
        };
        let (code, mut options, payload) = parse_plaintext(&pt)?;
        merge_outer(&mut options, &outer.options);
        let observe = options.contains(OptionNumber::OBSERVE);
        let binding = GroupBinding { mode, kid, piv: o.piv, server: None, request_hash: None, observe };
        Ok((Plain { code, options, payload }, binding, window))
    }

    /// Records a request from [`GroupContext::open_request`] whose window check passed.
    pub fn replay_accept(&mut self, binding: &GroupBinding) {
        if let Some(m) = self.members.get_mut(&binding.kid) {
            m.replay.accept(piv_value(&binding.piv));
        }
    }

    /// After a restart, a member that proved freshness (Echo) restarts its window at this request.
    pub fn resynchronise(&mut self, binding: &GroupBinding) {
        if let Some(m) = self.members.get_mut(&binding.kid) {
            m.replay.resynchronise(piv_value(&binding.piv));
        }
    }

    fn unprotect_deterministic(
        &mut self,
        outer: &Plain,
        option: &[u8],
        kid: Vec<u8>,
        o: OscoreOption,
    ) -> Result<(Plain, GroupBinding), Error> {
        let h = outer.options.get(OptionNumber::REQUEST_HASH).ok_or(Error::BadOption("no Request-Hash"))?.to_vec();
        if o.group {
            return Err(Error::BadOption("a deterministic request is not in group mode"));
        }
        let aad = self.external_aad(&kid, &o.piv, &[], option, &[]);
        let key = self.deterministic_key(&h)?;
        let alg = self.params.aead;
        let nonce = self.nonce(alg, &kid, &o.piv);
        let pt = self.open(alg, &key, &nonce, &aad, &outer.payload)?;
        if self.request_hash(&aad, &pt)? != h {
            return Err(Error::DecryptionFailed);
        }
        let (code, mut options, payload) = parse_plaintext(&pt)?;
        if !matches!(code, Code::GET | Code::FETCH) {
            return Err(Error::UnsafeDeterministic);
        }
        merge_outer(&mut options, &outer.options);
        let observe = options.contains(OptionNumber::OBSERVE);
        let binding =
            GroupBinding { mode: Mode::Deterministic, kid, piv: o.piv, server: None, request_hash: Some(h), observe };
        Ok((Plain { code, options, payload }, binding))
    }

    /// Protects the response to a request [`GroupContext::unprotect_request`] verified: a deterministic
    /// request's in group mode with a Partial IV of the server's (and an outer Max-Age equal to the inner
    /// one, so a proxy caches it as long as the server meant), any other in pairwise mode (with the
    /// request's nonce unless `own_piv`).
    pub fn protect_response(&mut self, binding: &GroupBinding, plain: &Plain, own_piv: bool) -> Result<Plain, Error> {
        let (inner, mut outer) = split(&plain.options, false)?;
        let group = binding.mode == Mode::Deterministic;
        let own_piv = own_piv || group;
        let piv = if own_piv { self.seq.next_piv()? } else { Vec::new() };
        let kid = self.params.sender_id.clone();
        let option = OscoreOption { piv: piv.clone(), kid_context: None, kid: Some(kid.clone()), group }.encode();
        let aad = self.external_aad(
            &binding.kid,
            &binding.piv,
            &class_i(binding.request_hash.as_deref())?,
            &option,
            &self.own_cred.clone(),
        );
        let pt = plaintext(plain.code, &inner, &plain.payload)?;
        let (nonce_id, nonce_piv) =
            if own_piv { (kid, piv.clone()) } else { (binding.kid.clone(), binding.piv.clone()) };
        let ct = if group {
            let alg = self.params.group_enc;
            let nonce = self.nonce(alg, &nonce_id, &nonce_piv);
            let key = self.sender_key.clone();
            let mut ct = self.seal(alg, &key, &nonce, &aad, &pt)?;
            self.append_signature(&mut ct, &aad, &piv, false)?;
            ct
        } else {
            let alg = self.params.aead;
            let nonce = self.nonce(alg, &nonce_id, &nonce_piv);
            let key = self.member(&binding.kid)?.pairwise_sender.clone();
            self.seal(alg, &key, &nonce, &aad, &pt)?
        };
        outer.push(OptionNumber::OSCORE, &option);
        if group {
            if let Some(age) = plain.options.get(OptionNumber::MAX_AGE) {
                outer.push(OptionNumber::MAX_AGE, age);
            }
        }
        let fetch = binding.observe || group;
        Ok(Plain { code: outer_code(false, fetch), options: outer, payload: ct })
    }
}
