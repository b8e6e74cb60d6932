//! The few CBOR items OSCORE's key derivation `info` and AAD are made of (RFC 8949 §3, deterministic
//! encoding): arrays, byte and text strings, integers, booleans and null.

pub(crate) fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, n as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

pub(crate) fn array(out: &mut Vec<u8>, len: usize) {
    head(out, 4, len as u64);
}

pub(crate) fn bstr(out: &mut Vec<u8>, b: &[u8]) {
    head(out, 2, b.len() as u64);
    out.extend_from_slice(b);
}

pub(crate) fn tstr(out: &mut Vec<u8>, s: &str) {
    head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub(crate) fn uint(out: &mut Vec<u8>, n: u64) {
    head(out, 0, n);
}

pub(crate) fn null(out: &mut Vec<u8>) {
    out.push(0xf6);
}

/// An integer, negative ones as major type 1 (COSE algorithm values such as -8 for EdDSA).
pub(crate) fn int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        head(out, 0, n as u64);
    } else {
        head(out, 1, (-1 - n) as u64);
    }
}

pub(crate) fn boolean(out: &mut Vec<u8>, b: bool) {
    out.push(if b { 0xf5 } else { 0xf4 });
}
