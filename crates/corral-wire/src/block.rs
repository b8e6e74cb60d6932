//! Block1/Block2 option values (RFC 7959 §2.2) and Observe sequence values (RFC 7641 §3.4).

use crate::option::{decode_uint, encode_uint};

/// A Block1 or Block2 value: block number, more flag, size exponent.
///
/// <https://www.rfc-editor.org/rfc/rfc7959#section-2.2>
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockValue {
    /// Block number, below 2^20.
    pub num: u32,
    pub more: bool,
    /// Size exponent: the block size is 2^(szx+4). 7 is BERT (RFC 8323) and only valid over reliable transports.
    pub szx: u8,
}

impl BlockValue {
    pub const MAX_NUM: u32 = (1 << 20) - 1;

    /// `None` if `num` exceeds 2^20-1 or `szx` exceeds 7.
    pub fn new(num: u32, more: bool, szx: u8) -> Option<BlockValue> {
        (num <= Self::MAX_NUM && szx <= 7).then_some(BlockValue { num, more, szx })
    }

    /// The largest SZX whose block size is at most `size` (16 or less gives 0; 1024 or more gives 6).
    pub fn szx_for_size(size: usize) -> u8 {
        let mut szx = 0u8;
        while szx < 6 && (16usize << (szx + 1)) <= size {
            szx += 1;
        }
        szx
    }

    /// Block size in bytes (1024 for BERT's SZX 7).
    pub fn size(self) -> usize {
        16usize << self.szx.min(6)
    }

    /// The byte offset of this block in the body.
    pub fn offset(self) -> usize {
        self.num as usize * self.size()
    }

    /// Decodes a 0-3 byte option value.
    pub fn decode(value: &[u8]) -> Option<BlockValue> {
        if value.len() > 3 {
            return None;
        }
        let v = decode_uint(value)? as u32;
        Some(BlockValue { num: v >> 4, more: v & 0x08 != 0, szx: (v & 0x07) as u8 })
    }

    pub fn to_uint(self) -> u32 {
        (self.num << 4) | (u32::from(self.more) << 3) | u32::from(self.szx & 7)
    }

    /// The option value in minimal form (NUM=0, M=0, SZX=0 is the empty value).
    pub fn encode(self) -> ([u8; 8], usize) {
        encode_uint(u64::from(self.to_uint()))
    }
}

/// Observe option values are 24-bit sequence numbers (RFC 7641 §4.4).
pub const OBSERVE_MODULUS: u32 = 1 << 24;
/// Observe=0 in a GET registers, Observe=1 deregisters (RFC 7641 §2).
pub const OBSERVE_REGISTER: u32 = 0;
pub const OBSERVE_DEREGISTER: u32 = 1;

/// Whether notification value `v2`, received at `t2_secs`, is fresher than `v1` received at `t1_secs`
/// (RFC 7641 §3.4: within 2^23, or more than 128 s later).
pub fn observe_is_fresher(v1: u32, t1_secs: u64, v2: u32, t2_secs: u64) -> bool {
    const HALF: u32 = 1 << 23;
    (v1 < v2 && v2 - v1 < HALF) || (v1 > v2 && v1 - v2 > HALF) || t2_secs > t1_secs + 128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_roundtrip() {
        let b = BlockValue::new(5, true, 2).unwrap();
        let (bytes, len) = b.encode();
        assert_eq!(BlockValue::decode(&bytes[..len]), Some(b));
        assert_eq!(b.size(), 64);
        assert_eq!(b.offset(), 320);
        assert_eq!(BlockValue::decode(&[]), Some(BlockValue { num: 0, more: false, szx: 0 }));
        assert_eq!(BlockValue::decode(&[0, 0, 0, 0]), None);
        assert_eq!(BlockValue::new(1 << 20, false, 0), None);
    }

    #[test]
    fn szx_for_size() {
        assert_eq!(BlockValue::szx_for_size(16), 0);
        assert_eq!(BlockValue::szx_for_size(64), 2);
        assert_eq!(BlockValue::szx_for_size(100), 2);
        assert_eq!(BlockValue::szx_for_size(1024), 6);
        assert_eq!(BlockValue::szx_for_size(5000), 6);
    }

    #[test]
    fn freshness() {
        assert!(observe_is_fresher(1, 0, 2, 0));
        assert!(!observe_is_fresher(2, 0, 1, 0));
        assert!(observe_is_fresher((1 << 24) - 1, 0, 3, 0)); // wrapped
        assert!(observe_is_fresher(5, 0, 4, 129)); // stale by time
    }
}
