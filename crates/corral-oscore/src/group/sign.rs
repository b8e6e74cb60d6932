//! The asymmetric parts of Group OSCORE: Ed25519 countersignatures (COSE `CounterSignature0`), the
//! keystream that encrypts them, and the X25519 shared secret of pairwise mode.

use crate::cbor;
use crate::Error;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use hkdf::Hkdf;
use sha2::Sha256;

/// Length of an Ed25519 signature.
pub(crate) const SIGNATURE_LEN: usize = 64;

/// What is signed: `["CounterSignature0", h'', h'', external_aad, ciphertext]`.
fn to_be_signed(external_aad: &[u8], ciphertext: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(external_aad.len() + ciphertext.len() + 32);
    cbor::array(&mut out, 5);
    cbor::tstr(&mut out, "CounterSignature0");
    cbor::bstr(&mut out, &[]);
    cbor::bstr(&mut out, &[]);
    cbor::bstr(&mut out, external_aad);
    cbor::bstr(&mut out, ciphertext);
    out
}

pub(crate) fn sign(key: &SigningKey, external_aad: &[u8], ciphertext: &[u8]) -> [u8; SIGNATURE_LEN] {
    key.sign(&to_be_signed(external_aad, ciphertext)).to_bytes()
}

pub(crate) fn verify(
    key: &VerifyingKey,
    signature: &[u8],
    external_aad: &[u8],
    ciphertext: &[u8],
) -> Result<(), Error> {
    let sig = Signature::from_slice(signature).map_err(|_| Error::DecryptionFailed)?;
    key.verify(&to_be_signed(external_aad, ciphertext), &sig).map_err(|_| Error::DecryptionFailed)
}

/// The keystream a signature is XORed with (draft-ietf-core-oscore-groupcomm §4.1): HKDF with the Partial
/// IV as salt, the Signature Encryption Key as input and `info = [id, id_context, is_request, L]`, where
/// `id` is the Sender ID of the endpoint that generated the Partial IV (aiocoap's reading; for the
/// messages corral signs — requests and responses with a Partial IV of their own — it is the sender).
pub(crate) fn keystream(sekey: &[u8], piv: &[u8], id: &[u8], group_id: &[u8], request: bool) -> Result<Vec<u8>, Error> {
    let mut info = Vec::with_capacity(16 + id.len() + group_id.len());
    cbor::array(&mut info, 4);
    cbor::bstr(&mut info, id);
    cbor::bstr(&mut info, group_id);
    cbor::boolean(&mut info, request);
    cbor::uint(&mut info, SIGNATURE_LEN as u64);
    let mut out = vec![0; SIGNATURE_LEN];
    Hkdf::<Sha256>::new(Some(piv), sekey).expand(&info, &mut out).map_err(|_| Error::Internal("HKDF keystream"))?;
    Ok(out)
}

pub(crate) fn xor(a: &mut [u8], b: &[u8]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
}

/// The static-static X25519 secret of two members' Ed25519 keys (RFC 7748 on the Montgomery forms: the
/// private scalar from the key's SHA-512 expansion, the public point converted), as pairwise mode needs.
pub(crate) fn shared_secret(own: &SigningKey, peer: &VerifyingKey) -> [u8; 32] {
    x25519_dalek::x25519(own.to_scalar_bytes(), peer.to_montgomery().to_bytes())
}
