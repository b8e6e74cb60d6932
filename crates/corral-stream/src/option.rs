//! The CoAP-SC option (number 100, seed 003 Fig. 15): SN and AN, 4 bytes each, big-endian.

use corral_proto::wire::OptionNumber;

/// Elective, safe to forward, part of the cache key (100 & 0x1E = 0x04).
pub const SC_OPTION: OptionNumber = OptionNumber(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScOption {
    pub sn: u32,
    pub an: u32,
}

impl ScOption {
    pub fn encode(self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&self.sn.to_be_bytes());
        out[4..].copy_from_slice(&self.an.to_be_bytes());
        out
    }

    /// Exactly 8 bytes, or nothing.
    pub fn decode(v: &[u8]) -> Option<ScOption> {
        let v: &[u8; 8] = v.try_into().ok()?;
        Some(ScOption {
            sn: u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
            an: u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
        })
    }
}
