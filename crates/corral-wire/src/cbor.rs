//! The few CBOR items (RFC 8949 §3, deterministic encoding) that CoAP's options and OSCORE's key
//! derivation `info` and AAD are made of: arrays, byte and text strings, integers, booleans and null —
//! written, and read back by [`Reader`] (which never panics on any input: a value that does not fit is
//! `None`). Moved here from corral-oscore when the Reply-From option (a CRI, [`crate::reply_from`]) needed
//! it too.

use alloc::vec::Vec;

pub fn head(out: &mut Vec<u8>, major: u8, n: u64) {
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

pub fn array(out: &mut Vec<u8>, len: usize) {
    head(out, 4, len as u64);
}

pub fn bstr(out: &mut Vec<u8>, b: &[u8]) {
    head(out, 2, b.len() as u64);
    out.extend_from_slice(b);
}

pub fn tstr(out: &mut Vec<u8>, s: &str) {
    head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub fn uint(out: &mut Vec<u8>, n: u64) {
    head(out, 0, n);
}

pub fn null(out: &mut Vec<u8>) {
    out.push(0xf6);
}

/// An integer, negative ones as major type 1 (COSE algorithm values such as -8 for EdDSA).
pub fn int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        head(out, 0, n as u64);
    } else {
        head(out, 1, (-1 - n) as u64);
    }
}

pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.push(if b { 0xf5 } else { 0xf4 });
}

/// Reads CBOR items from the front of a byte string, one at a time; a malformed or unexpected item is
/// `None` and the reader is then of no further use.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next item's major type and argument (its length, count or value). Indefinite lengths and
    /// the reserved additional information values are refused.
    pub fn head(&mut self) -> Option<(u8, u64)> {
        let (&first, rest) = self.rest.split_first()?;
        let (major, info) = (first >> 5, first & 0x1f);
        let width = match info {
            0..=23 => {
                self.rest = rest;
                return Some((major, u64::from(info)));
            }
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            _ => return None,
        };
        if rest.len() < width {
            return None;
        }
        let (arg, rest) = rest.split_at(width);
        self.rest = rest;
        Some((major, arg.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b))))
    }

    /// An array's head: its number of items.
    pub fn array(&mut self) -> Option<u64> {
        self.head().filter(|(m, _)| *m == 4).map(|(_, n)| n)
    }

    /// An unsigned or negative integer.
    pub fn int(&mut self) -> Option<i64> {
        match self.head()? {
            (0, n) => i64::try_from(n).ok(),
            (1, n) => i64::try_from(n).ok().map(|n| -1 - n),
            _ => None,
        }
    }

    /// An unsigned integer.
    pub fn uint(&mut self) -> Option<u64> {
        self.head().filter(|(m, _)| *m == 0).map(|(_, n)| n)
    }

    /// A byte string.
    pub fn bstr(&mut self) -> Option<&'a [u8]> {
        let (major, len) = self.head()?;
        let len = usize::try_from(len).ok().filter(|l| major == 2 && *l <= self.rest.len())?;
        let (b, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let mut out = Vec::new();
        array(&mut out, 3);
        int(&mut out, -1);
        bstr(&mut out, &[127, 0, 0, 1]);
        uint(&mut out, 65535);
        let mut r = Reader::new(&out);
        assert_eq!(r.array(), Some(3));
        assert_eq!(r.int(), Some(-1));
        assert_eq!(r.bstr(), Some(&[127u8, 0, 0, 1][..]));
        assert_eq!(r.uint(), Some(65535));
        assert!(r.is_empty());
    }

    #[test]
    fn truncated_and_indefinite_items_are_none() {
        for bad in [
            &[0x19, 0x01][..],
            &[0x44, 1, 2],
            &[0x9f],
            &[0x1c],
            &[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ] {
            let mut r = Reader::new(bad);
            assert!(r.head().is_none() || r.clone().bstr().is_none(), "{bad:?}");
        }
        assert_eq!(Reader::new(&[0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).int(), None, "below i64");
    }
}
