//! Protecting and verifying requests and responses (RFC 8613 §4, §5, §8).
//!
//! Options are split as §4.1 says: Class U (outer only) are Uri-Host, Uri-Port, Proxy-Scheme, OSCORE and
//! Hop-Limit; Observe is both (§4.1.3.5); Block1, Block2, Size1 and Size2 in the original message are
//! inner (§4.1.3.4.1: the application's own block-wise transfer), while the endpoint may still cut the
//! protected message into outer blocks on the wire and reassembles them before OSCORE sees them;
//! Proxy-Uri is split into its outer authority and inner path and query (§4.1.3.3); every other option,
//! known or not, is Class E (inner). No option is Class I.

use crate::cbor;
use crate::context::{piv_value, SecurityContext};
use crate::option::OscoreOption;
use crate::Error;
use corral_wire::uri::Uri;
use corral_wire::{decode_options, encode_options, Code, OptionNumber, Options};

/// A CoAP request or response as OSCORE sees it: the fields above the message layer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plain {
    pub code: Code,
    pub options: Options,
    pub payload: Vec<u8>,
}

/// What binds a response to its request (RFC 8613 §5.4, §7.1): the request's kid and Partial IV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestBinding {
    pub kid: Vec<u8>,
    pub piv: Vec<u8>,
    /// The request was an Observe registration: its responses carry Partial IVs of the server's.
    pub observe: bool,
}

pub(crate) const OUTER_ONLY: [OptionNumber; 5] = [
    OptionNumber::URI_HOST,
    OptionNumber::URI_PORT,
    OptionNumber::PROXY_SCHEME,
    OptionNumber::OSCORE,
    OptionNumber::HOP_LIMIT,
];

/// Splits the original message's options into inner (Class E) and outer (Class U) ones.
pub(crate) fn split(options: &Options, request: bool) -> Result<(Options, Options), Error> {
    let mut inner = Options::new();
    let mut outer = Options::new();
    for (n, v) in options.iter() {
        if n == OptionNumber::OSCORE {
            return Err(Error::Nested);
        } else if n == OptionNumber::OBSERVE {
            // §4.1.3.5: the request's value on both sides; a notification's inner Observe is empty.
            inner.push(n, if request { v } else { &[] });
            outer.push(n, v);
        } else if n == OptionNumber::PROXY_URI {
            // §4.1.3.3: the authority stays outer (as Proxy-Scheme and Uri-*), path and query go inner.
            let text = std::str::from_utf8(v).map_err(|_| Error::Config("Proxy-Uri is not UTF-8".into()))?;
            let uri = Uri::parse(text).map_err(|e| Error::Config(format!("Proxy-Uri {text:?}: {e}")))?;
            let mut parts = Options::new();
            uri.to_options(&mut parts);
            for (pn, pv) in parts.iter() {
                match pn {
                    OptionNumber::URI_PATH | OptionNumber::URI_QUERY => inner.push(pn, pv),
                    _ => outer.push(pn, pv),
                };
            }
            if !outer.contains(OptionNumber::URI_HOST) {
                // An IP literal gets no Uri-Host from the URI; the proxy needs it to know where to go.
                outer.push_str(OptionNumber::URI_HOST, &uri.host.to_string());
            }
            outer.push_str(OptionNumber::PROXY_SCHEME, uri.scheme.as_str());
        } else if OUTER_ONLY.contains(&n) {
            outer.push(n, v);
        } else {
            inner.push(n, v);
        }
    }
    Ok((inner, outer))
}

/// The AAD: the COSE Enc_structure over the external AAD of §5.4.
fn aad(ctx: &SecurityContext, request_kid: &[u8], request_piv: &[u8]) -> Vec<u8> {
    let mut array = Vec::with_capacity(16);
    cbor::array(&mut array, 5);
    cbor::uint(&mut array, 1); // oscore_version
    cbor::array(&mut array, 1);
    cbor::uint(&mut array, ctx.params.aead.cose_id());
    cbor::bstr(&mut array, request_kid);
    cbor::bstr(&mut array, request_piv);
    cbor::bstr(&mut array, &[]); // no Class I options
    let mut out = Vec::with_capacity(array.len() + 12);
    cbor::array(&mut out, 3);
    cbor::tstr(&mut out, "Encrypt0");
    cbor::bstr(&mut out, &[]);
    cbor::bstr(&mut out, &array);
    out
}

pub(crate) fn plaintext(code: Code, inner: &Options, payload: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = vec![code.0];
    encode_options(inner, &mut out).map_err(|_| Error::Internal("inner option encoding"))?;
    if !payload.is_empty() {
        out.push(0xff);
        out.extend_from_slice(payload);
    }
    Ok(out)
}

/// Whether a message with `options` and a payload of `payload_len` bytes fits in one protected message whose
/// plaintext holds at most `max` bytes (counting every option as inner, which errs on the side of cutting
/// it into blocks).
pub(crate) fn fits(options: &Options, payload_len: usize, max: usize) -> bool {
    let mut encoded = Vec::new();
    encode_options(options, &mut encoded).is_ok() && 2 + encoded.len() + payload_len <= max
}

/// Decrypted plaintext back to code, inner options and payload. A plaintext that authenticated but does
/// not parse came from a peer with the key and a bug; it is refused like a failed decryption.
pub(crate) fn parse_plaintext(p: &[u8]) -> Result<(Code, Options, Vec<u8>), Error> {
    let (&code, rest) = p.split_first().ok_or(Error::DecryptionFailed)?;
    let (options, payload) = decode_options(rest).map_err(|_| Error::DecryptionFailed)?;
    Ok((Code(code), options, payload.to_vec()))
}

impl SecurityContext {
    /// Protects a request (RFC 8613 §8.1): a new Partial IV, the kid (and the ID Context as kid context if
    /// `send_kid_context`), outer code POST (FETCH with Observe).
    pub fn protect_request(&mut self, plain: &Plain, send_kid_context: bool) -> Result<(Plain, RequestBinding), Error> {
        let (inner, mut outer) = split(&plain.options, true)?;
        // Checked before a sequence number is spent on it.
        let pt = plaintext(plain.code, &inner, &plain.payload)?;
        self.params.aead.check_len(&pt)?;
        let piv = self.next_piv()?;
        let kid = self.params.sender_id.clone();
        let nonce = self.nonce(&kid, &piv);
        let ct = self.params.aead.seal(&self.sender_key, &nonce, &aad(self, &kid, &piv), &pt)?;
        let kid_context = if send_kid_context { self.params.id_context.clone() } else { None };
        let option = OscoreOption { piv: piv.clone(), kid_context, kid: Some(kid.clone()), group: false };
        self.ops.aead += 1;
        outer.push(OptionNumber::OSCORE, &option.encode());
        let observe = plain.options.contains(OptionNumber::OBSERVE);
        let code = if observe { Code::FETCH } else { Code::POST };
        Ok((Plain { code, options: outer, payload: ct }, RequestBinding { kid, piv, observe }))
    }

    /// Verifies a request (RFC 8613 §8.2) for which the caller picked this context by the kid (see
    /// [`request_kid`]): replay check, decryption, then the original request with the outer Class U
    /// options put back.
    pub fn unprotect_request(&mut self, outer: &Plain) -> Result<(Plain, RequestBinding), Error> {
        let (plain, binding, window) = self.open_request(outer)?;
        match window {
            Ok(()) => {}
            Err(crate::replay::Refusal::Unsynchronised) => return Err(Error::Unsynchronised),
            Err(_) => return Err(Error::Replay),
        }
        self.replay.accept(piv_value(&binding.piv));
        Ok((plain, binding))
    }

    /// Decrypts a request without touching the replay window: the request, its binding, and what the
    /// window says of its Partial IV. For a server recovering its window with Echo (Appendix B.1.2): an
    /// authentic request that the window cannot vouch for is answered with a challenge, and the one that
    /// echoes it is accepted with [`SecurityContext::resynchronise`].
    pub fn open_request(
        &mut self,
        outer: &Plain,
    ) -> Result<(Plain, RequestBinding, Result<(), crate::Refusal>), Error> {
        let value = outer.options.get(OptionNumber::OSCORE).ok_or(Error::NotOscore)?;
        let o = OscoreOption::decode(value)?;
        let kid = o.kid.ok_or(Error::BadOption("a request needs a kid"))?;
        if o.piv.is_empty() {
            return Err(Error::BadOption("a request needs a Partial IV"));
        }
        if kid != self.params.recipient_id {
            return Err(Error::UnknownContext);
        }
        if o.kid_context.is_some() && o.kid_context != self.params.id_context {
            return Err(Error::UnknownContext);
        }
        if o.group {
            return Err(Error::UnknownContext);
        }
        let window = self.replay.check(piv_value(&o.piv));
        self.ops.aead += 1;
        let nonce = self.nonce(&kid, &o.piv);
        let p = self.params.aead.open(&self.recipient_key, &nonce, &aad(self, &kid, &o.piv), &outer.payload)?;
        let (code, mut options, payload) = parse_plaintext(&p)?;
        for (n, v) in outer.options.iter() {
            if OUTER_ONLY.contains(&n) && n != OptionNumber::OSCORE {
                options.push(n, v);
            }
        }
        let observe = options.contains(OptionNumber::OBSERVE);
        Ok((Plain { code, options, payload }, RequestBinding { kid, piv: o.piv, observe }, window))
    }

    /// Records a request from [`SecurityContext::open_request`] whose window check passed.
    pub fn replay_accept(&mut self, binding: &RequestBinding) {
        self.replay.accept(piv_value(&binding.piv));
    }

    /// A request that verified but whose replay window was lost in a restart is accepted once the client
    /// proved freshness (Echo, RFC 9175): the window restarts at this request's Partial IV.
    pub fn resynchronise(&mut self, binding: &RequestBinding) {
        self.replay.resynchronise(piv_value(&binding.piv));
    }

    /// Protects a response (RFC 8613 §8.3). `own_piv`: with a Partial IV of the server's own (required for
    /// every notification but the first, §4.1.3.5.2), else with the request's nonce.
    pub fn protect_response(&mut self, binding: &RequestBinding, plain: &Plain, own_piv: bool) -> Result<Plain, Error> {
        let (inner, mut outer) = split(&plain.options, false)?;
        // Checked before a sequence number is spent on it.
        let pt = plaintext(plain.code, &inner, &plain.payload)?;
        self.params.aead.check_len(&pt)?;
        let (nonce, option) = if own_piv {
            let piv = self.next_piv()?;
            (self.nonce(&self.params.sender_id, &piv), OscoreOption { piv, ..OscoreOption::default() })
        } else {
            (self.nonce(&binding.kid, &binding.piv), OscoreOption::default())
        };
        let ct = self.params.aead.seal(&self.sender_key, &nonce, &aad(self, &binding.kid, &binding.piv), &pt)?;
        outer.push(OptionNumber::OSCORE, &option.encode());
        self.ops.aead += 1;
        let code = if plain.options.contains(OptionNumber::OBSERVE) { Code::CONTENT } else { Code::CHANGED };
        Ok(Plain { code, options: outer, payload: ct })
    }

    /// Verifies a response to the request `binding` describes (RFC 8613 §8.4). Returns the original
    /// response and, for a response with a Partial IV, its value (a notification's number: the caller
    /// keeps the highest per observation and drops older ones, §7.4.1).
    pub fn unprotect_response(
        &mut self,
        binding: &RequestBinding,
        outer: &Plain,
    ) -> Result<(Plain, Option<u64>), Error> {
        let value = outer.options.get(OptionNumber::OSCORE).ok_or(Error::NotOscore)?;
        let o = OscoreOption::decode(value)?;
        let nonce = if o.piv.is_empty() {
            self.nonce(&binding.kid, &binding.piv)
        } else {
            self.nonce(&self.params.recipient_id, &o.piv)
        };
        self.ops.aead += 1;
        let p = self.params.aead.open(
            &self.recipient_key,
            &nonce,
            &aad(self, &binding.kid, &binding.piv),
            &outer.payload,
        )?;
        let (code, mut options, payload) = parse_plaintext(&p)?;
        let number = (!o.piv.is_empty()).then(|| piv_value(&o.piv));
        if options.contains(OptionNumber::OBSERVE) {
            if !binding.observe {
                return Err(Error::DecryptionFailed);
            }
            // The inner Observe is empty: the order comes from the Partial IV (§4.1.3.5.2).
            let seq = number.map_or(0, |n| n & 0xff_ffff);
            options.set_uint(OptionNumber::OBSERVE, seq);
        }
        for (n, v) in outer.options.iter() {
            if OUTER_ONLY.contains(&n) && n != OptionNumber::OSCORE {
                options.push(n, v);
            }
        }
        Ok((Plain { code, options, payload }, number))
    }
}

/// The kid and kid context of a request's OSCORE option, to pick its Security Context by.
pub fn request_kid(options: &Options) -> Result<(Vec<u8>, Option<Vec<u8>>), Error> {
    let value = options.get(OptionNumber::OSCORE).ok_or(Error::NotOscore)?;
    let o = OscoreOption::decode(value)?;
    Ok((o.kid.ok_or(Error::BadOption("a request needs a kid"))?, o.kid_context))
}
