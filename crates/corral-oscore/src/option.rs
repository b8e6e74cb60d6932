//! The OSCORE option value (RFC 8613 §6.1): flags `0 0 g h k n n n`, the Partial IV (n bytes), the kid
//! context (length-prefixed, if h) and the kid (the rest, if k). `g` is Group OSCORE's Group Flag
//! (draft-ietf-core-oscore-groupcomm §5): the message is protected in group mode and signed.

use crate::Error;

/// A decoded OSCORE option value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OscoreOption {
    pub piv: Vec<u8>,
    pub kid_context: Option<Vec<u8>>,
    pub kid: Option<Vec<u8>>,
    /// The Group Flag: group mode (a signature follows the ciphertext).
    pub group: bool,
}

impl OscoreOption {
    pub fn encode(&self) -> Vec<u8> {
        if self.piv.is_empty() && self.kid.is_none() && self.kid_context.is_none() && !self.group {
            return Vec::new();
        }
        let mut flags = self.piv.len() as u8 & 0x07;
        if self.kid.is_some() {
            flags |= 0x08;
        }
        if self.kid_context.is_some() {
            flags |= 0x10;
        }
        if self.group {
            flags |= 0x20;
        }
        let mut out = vec![flags];
        out.extend_from_slice(&self.piv);
        if let Some(c) = &self.kid_context {
            out.push(c.len() as u8);
            out.extend_from_slice(c);
        }
        if let Some(k) = &self.kid {
            out.extend_from_slice(k);
        }
        out
    }

    /// Decodes an option value; anything RFC 8613 §6.1 does not allow is [`Error::BadOption`].
    pub fn decode(value: &[u8]) -> Result<OscoreOption, Error> {
        let Some((&flags, rest)) = value.split_first() else { return Ok(OscoreOption::default()) };
        if flags & 0xc0 != 0 {
            return Err(Error::BadOption("reserved flag bits set"));
        }
        let n = usize::from(flags & 0x07);
        if n > 5 {
            return Err(Error::BadOption("Partial IV longer than 5 bytes"));
        }
        let piv = rest.get(..n).ok_or(Error::BadOption("truncated Partial IV"))?.to_vec();
        let mut rest = &rest[n..];
        let kid_context = if flags & 0x10 != 0 {
            let (&len, tail) = rest.split_first().ok_or(Error::BadOption("missing kid context length"))?;
            let c = tail.get(..usize::from(len)).ok_or(Error::BadOption("truncated kid context"))?.to_vec();
            rest = &tail[usize::from(len)..];
            Some(c)
        } else {
            None
        };
        let kid = if flags & 0x08 != 0 {
            Some(rest.to_vec())
        } else if !rest.is_empty() {
            return Err(Error::BadOption("bytes after the option's fields"));
        } else {
            None
        };
        Ok(OscoreOption { piv, kid_context, kid, group: flags & 0x20 != 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_examples_round_trip() {
        // RFC 8613 C.4, C.5, C.6, C.7, C.8.
        for (hex, o) in [
            ("0914", OscoreOption { piv: vec![0x14], kid: Some(vec![]), kid_context: None, group: false }),
            ("091400", OscoreOption { piv: vec![0x14], kid: Some(vec![0]), kid_context: None, group: false }),
            (
                "19140837cbf3210017a2d3",
                OscoreOption {
                    piv: vec![0x14],
                    kid: Some(vec![]),
                    kid_context: Some(vec![0x37, 0xcb, 0xf3, 0x21, 0x00, 0x17, 0xa2, 0xd3]),
                    group: false,
                },
            ),
            ("", OscoreOption::default()),
            ("0100", OscoreOption { piv: vec![0], kid: None, kid_context: None, group: false }),
        ] {
            let bytes: Vec<u8> =
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            assert_eq!(OscoreOption::decode(&bytes).unwrap(), o);
            assert_eq!(o.encode(), bytes);
        }
        for bad in [&[0x40][..], &[0x06, 1, 2, 3, 4, 5, 6], &[0x02, 1], &[0x10], &[0x10, 5, 1], &[0x01, 1, 2]] {
            assert!(OscoreOption::decode(bad).is_err(), "{bad:?}");
        }
    }
}
