//! Options: numbers and their registry, the delta/length encoding, and an owned sorted option list.
//!
//! This module owns what an option *is* (RFC 7252 §3.1, §5.4, §12.2 and the later RFCs that registered
//! options). It decodes and encodes option sequences; it never decides what an endpoint does about an
//! unrecognised option, it only tells ([`check_critical`]).

use crate::Error;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

/// An option number.
///
/// <https://www.rfc-editor.org/rfc/rfc7252#section-5.4.6>
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OptionNumber(pub u16);

/// How an option's value is encoded (RFC 7252 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionFormat {
    Empty,
    Opaque,
    Uint,
    String,
}

/// A registered option: its name, format, length bounds and whether it may repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionDef {
    pub number: OptionNumber,
    pub name: &'static str,
    pub format: OptionFormat,
    pub min_len: u16,
    pub max_len: u16,
    pub repeatable: bool,
}

macro_rules! registry {
    ($($(#[$doc:meta])* $name:ident = $num:literal, $text:literal, $fmt:ident, $min:literal..=$max:literal, $rep:literal;)*) => {
        impl OptionNumber {
            $( $(#[$doc])* pub const $name: OptionNumber = OptionNumber($num); )*
        }

        /// Every option corral recognises, in ascending number order.
        pub static REGISTRY: &[OptionDef] = &[
            $( OptionDef {
                number: OptionNumber($num),
                name: $text,
                format: OptionFormat::$fmt,
                min_len: $min,
                max_len: $max,
                repeatable: $rep,
            }, )*
        ];
    };
}

registry! {
    /// RFC 7252 §5.10.8.1.
    IF_MATCH = 1, "If-Match", Opaque, 0..=8, true;
    /// draft-ietf-core-groupcomm-proxy §2 (suggested number; see [`crate::reply_from`]): the seconds a
    /// client collects the responses to a group request it sends through a proxy. Elective, unsafe.
    MULTICAST_TIMEOUT = 2, "Multicast-Timeout", Uint, 0..=4, false;
    /// RFC 7252 §5.10.1.
    URI_HOST = 3, "Uri-Host", String, 1..=255, false;
    /// RFC 7252 §5.10.6. Repeatable in requests only.
    ETAG = 4, "ETag", Opaque, 1..=8, true;
    /// RFC 7252 §5.10.8.2.
    IF_NONE_MATCH = 5, "If-None-Match", Empty, 0..=0, false;
    /// RFC 7641 §2.
    OBSERVE = 6, "Observe", Uint, 0..=3, false;
    URI_PORT = 7, "Uri-Port", Uint, 0..=2, false;
    LOCATION_PATH = 8, "Location-Path", String, 0..=255, true;
    /// RFC 8613 §2.
    OSCORE = 9, "OSCORE", Opaque, 0..=255, false;
    URI_PATH = 11, "Uri-Path", String, 0..=255, true;
    CONTENT_FORMAT = 12, "Content-Format", Uint, 0..=2, false;
    MAX_AGE = 14, "Max-Age", Uint, 0..=4, false;
    URI_QUERY = 15, "Uri-Query", String, 0..=255, true;
    /// RFC 8768.
    HOP_LIMIT = 16, "Hop-Limit", Uint, 1..=1, false;
    ACCEPT = 17, "Accept", Uint, 0..=2, false;
    LOCATION_QUERY = 20, "Location-Query", String, 0..=255, true;
    /// RFC 7959 §2.1.
    BLOCK2 = 23, "Block2", Uint, 0..=3, false;
    /// RFC 7959 §2.1.
    BLOCK1 = 27, "Block1", Uint, 0..=3, false;
    /// RFC 7959 §4.
    SIZE2 = 28, "Size2", Uint, 0..=4, false;
    PROXY_URI = 35, "Proxy-Uri", String, 1..=1034, false;
    PROXY_SCHEME = 39, "Proxy-Scheme", String, 1..=255, false;
    /// RFC 7252 §5.10.9, RFC 7959 §4.
    SIZE1 = 60, "Size1", Uint, 0..=4, false;
    /// draft-ietf-core-groupcomm-proxy §3 (suggested number): the group member a relayed response came
    /// from, a CBOR CRI ([`crate::reply_from`]). Elective, safe to forward.
    REPLY_FROM = 248, "Reply-From", Opaque, 5..=1034, false;
    /// RFC 9175 §2.2.
    ECHO = 252, "Echo", Opaque, 1..=40, false;
    /// RFC 7967 §2.
    NO_RESPONSE = 258, "No-Response", Uint, 0..=1, false;
    /// RFC 9175 §3.2.
    REQUEST_TAG = 292, "Request-Tag", Opaque, 0..=8, true;
    /// draft-ietf-core-cacheable-oscore §3.3: the hash a deterministic request's key is derived from.
    /// Elective, safe to forward, part of the cache key, not repeatable (2022+ drafts).
    REQUEST_HASH = 548, "Request-Hash", Opaque, 0..=255, false;
}

impl OptionNumber {
    /// Critical options are odd (RFC 7252 §5.4.6).
    pub const fn is_critical(self) -> bool {
        self.0 & 0x01 != 0
    }

    /// Unsafe-to-forward options have bit 1 set.
    pub const fn is_unsafe(self) -> bool {
        self.0 & 0x02 != 0
    }

    /// Safe-to-forward options with `(n & 0x1e) == 0x1c` are not part of the cache key.
    pub const fn is_no_cache_key(self) -> bool {
        (self.0 & 0x1e) == 0x1c
    }

    /// The registry entry, if corral knows this option.
    pub fn def(self) -> Option<&'static OptionDef> {
        REGISTRY.binary_search_by_key(&self, |d| d.number).ok().map(|i| &REGISTRY[i])
    }

    pub fn name(self) -> Option<&'static str> {
        self.def().map(|d| d.name)
    }

    /// Looks up a registered option by name, case-insensitively.
    pub fn from_name(name: &str) -> Option<OptionNumber> {
        REGISTRY.iter().find(|d| d.name.eq_ignore_ascii_case(name)).map(|d| d.number)
    }
}

impl fmt::Debug for OptionNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "Option({})", self.0),
        }
    }
}

impl fmt::Display for OptionNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

/// The longest option value the delta/length encoding can express: 65535 + 269 bytes (RFC 7252 §3.1).
pub const MAX_OPTION_LEN: usize = 65535 + 269;

/// Decodes a uint option value (RFC 7252 §3.2): big-endian, leading zeros allowed, at most 8 bytes.
pub fn decode_uint(value: &[u8]) -> Option<u64> {
    if value.len() > 8 {
        return None;
    }
    Some(value.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

/// Encodes `v` in the fewest bytes (zero is the empty string); returns the buffer and the used length.
pub fn encode_uint(v: u64) -> ([u8; 8], usize) {
    let len = (8 - v.leading_zeros() as usize / 8).min(8);
    let len = if v == 0 { 0 } else { len };
    let be = v.to_be_bytes();
    let mut out = [0u8; 8];
    out[..len].copy_from_slice(&be[8 - len..]);
    (out, len)
}

/// The first problem an endpoint must act on among a message's options (RFC 7252 §5.4.1, §5.4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadOption {
    /// A critical option corral does not recognise.
    Unrecognized(OptionNumber),
    /// A critical option with a length outside its registered bounds: treated like an unrecognised one.
    BadLength(OptionNumber),
    /// A critical, non-repeatable option that occurs more than once.
    Repeated(OptionNumber),
}

impl BadOption {
    pub fn number(self) -> OptionNumber {
        match self {
            BadOption::Unrecognized(n) | BadOption::BadLength(n) | BadOption::Repeated(n) => n,
        }
    }
}

impl fmt::Display for BadOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadOption::Unrecognized(n) => write!(f, "unrecognized critical option {}", n.0),
            BadOption::BadLength(n) => write!(f, "option {n} has an invalid length"),
            BadOption::Repeated(n) => write!(f, "option {n} must not repeat"),
        }
    }
}

/// Returns the first critical option that is unrecognised, has a bad length, or repeats illegally.
///
/// `extra_known` lists options that a service recognises beyond the registry. Elective problems are not
/// reported: RFC 7252 §5.4.1 says they MUST be silently ignored.
pub fn check_critical<'a>(
    options: impl IntoIterator<Item = (OptionNumber, &'a [u8])>,
    extra_known: &[OptionNumber],
) -> Result<(), BadOption> {
    let mut previous: Option<OptionNumber> = None;
    for (number, value) in options {
        let repeated = previous == Some(number);
        previous = Some(number);
        if !number.is_critical() {
            continue;
        }
        match number.def() {
            Some(def) => {
                let len = value.len();
                if len < usize::from(def.min_len) || len > usize::from(def.max_len) {
                    return Err(BadOption::BadLength(number));
                }
                if repeated && !def.repeatable {
                    return Err(BadOption::Repeated(number));
                }
            }
            None if extra_known.contains(&number) => {}
            None => return Err(BadOption::Unrecognized(number)),
        }
    }
    Ok(())
}

/// Iterator over the options of an encoded message. Only constructed on validated bytes, so it
/// yields every option exactly as validation saw it and never fails.
#[derive(Clone)]
pub struct OptionIter<'a> {
    bytes: &'a [u8],
    number: u16,
}

impl<'a> OptionIter<'a> {
    /// `bytes` must hold exactly the options, already validated by [`scan_options`].
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        OptionIter { bytes, number: 0 }
    }
}

impl<'a> OptionIter<'a> {
    /// The first value of `number` (options are in ascending order, so the search stops early).
    pub fn first(self, number: OptionNumber) -> Option<&'a [u8]> {
        self.skip_while(|(n, _)| *n < number).take_while(|(n, _)| *n == number).map(|(_, v)| v).next()
    }
}

/// The payload of validated message bytes whose options end at `options_end`: what follows the marker.
pub(crate) fn payload_after(bytes: &[u8], options_end: usize) -> &[u8] {
    bytes.get(options_end + 1..).unwrap_or(&[])
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = (OptionNumber, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        // Validated bytes: decoding cannot fail, but stay total rather than index blindly.
        let (delta, len, header) = decode_option_header(self.bytes).ok()??;
        let end = header + len;
        let value = self.bytes.get(header..end)?;
        self.bytes = &self.bytes[end..];
        self.number = self.number.checked_add(delta)?;
        Some((OptionNumber(self.number), value))
    }
}

/// Decodes one option header: `Ok(None)` at the payload marker or end of input, else
/// `(delta, value length, header length)`.
fn decode_option_header(b: &[u8]) -> Result<Option<(u16, usize, usize)>, Error> {
    let Some(&first) = b.first() else {
        return Ok(None);
    };
    if first == 0xff {
        return Ok(None);
    }
    let mut pos = 1;
    let mut ext = |nibble: u8, reserved: Error| -> Result<u32, Error> {
        match nibble {
            0..=12 => Ok(u32::from(nibble)),
            13 => {
                let v = *b.get(pos).ok_or(Error::Truncated)?;
                pos += 1;
                Ok(u32::from(v) + 13)
            }
            14 => {
                let hi = *b.get(pos).ok_or(Error::Truncated)?;
                let lo = *b.get(pos + 1).ok_or(Error::Truncated)?;
                pos += 2;
                Ok(u32::from(u16::from_be_bytes([hi, lo])) + 269)
            }
            _ => Err(reserved),
        }
    };
    let delta = ext(first >> 4, Error::ReservedOptionDelta)?;
    let len = ext(first & 0x0f, Error::ReservedOptionLength)?;
    let delta = u16::try_from(delta).map_err(|_| Error::OptionNumberOverflow)?;
    Ok(Some((delta, len as usize, pos)))
}

/// Validates the option sequence at the start of `b`; returns the offset just past the last option
/// (the payload marker's position, or `b.len()`).
pub(crate) fn scan_options(b: &[u8]) -> Result<usize, Error> {
    let mut pos = 0usize;
    let mut number: u16 = 0;
    while let Some((delta, len, header)) = decode_option_header(&b[pos..])? {
        number = number.checked_add(delta).ok_or(Error::OptionNumberOverflow)?;
        let end = pos + header + len;
        if end > b.len() {
            return Err(Error::Truncated);
        }
        pos = end;
    }
    Ok(pos)
}

/// The bytes `write_option` needs for one option.
pub fn option_encoded_len(delta: u16, len: usize) -> usize {
    let ext = |v: usize| match v {
        0..=12 => 0,
        13..=268 => 1,
        _ => 2,
    };
    1 + ext(usize::from(delta)) + ext(len) + len
}

/// Writes one option with the given delta into `out` at `pos`; returns the new position.
///
/// On the emit path of every message: the common case (delta and length below 13, one header byte) is
/// tested first, and the extended fields are written byte by byte rather than by slice copies of a
/// variable length, which compile to calls to `memcpy` for one or two bytes.
#[inline]
pub(crate) fn write_option(out: &mut [u8], pos: usize, delta: u16, value: &[u8]) -> Result<usize, Error> {
    let len = value.len();
    let delta = usize::from(delta);
    if delta < 13 && len < 13 {
        let end = pos + 1 + len;
        let Some(dst) = out.get_mut(pos..end) else { return Err(Error::BufferTooSmall) };
        dst[0] = ((delta as u8) << 4) | len as u8;
        dst[1..].copy_from_slice(value);
        return Ok(end);
    }
    if len > MAX_OPTION_LEN {
        return Err(Error::OptionTooLong);
    }
    let need = option_encoded_len(delta as u16, len);
    let Some(dst) = out.get_mut(pos..pos + need) else { return Err(Error::BufferTooSmall) };
    let (dn, dext) = extended(delta);
    let (ln, lext) = extended(len);
    dst[0] = (dn << 4) | ln;
    let mut i = 1;
    for (nibble, ext) in [(dn, dext), (ln, lext)] {
        match nibble {
            13 => {
                dst[i] = ext as u8;
                i += 1;
            }
            14 => {
                dst[i..i + 2].copy_from_slice(&ext.to_be_bytes());
                i += 2;
            }
            _ => {}
        }
    }
    dst[i..].copy_from_slice(value);
    Ok(pos + need)
}

/// The nibble and the extended value of an option delta or length (RFC 7252 §3.1).
#[inline]
fn extended(v: usize) -> (u8, u16) {
    match v {
        0..=12 => (v as u8, 0),
        13..=268 => (13, (v - 13) as u16),
        _ => (14, (v - 269) as u16),
    }
}

/// Appends `options` in the CoAP option encoding (RFC 7252 §3.1), without a payload marker: the form
/// OSCORE's plaintext carries the inner options in (RFC 8613 §5.3).
pub fn encode_options(options: &Options, out: &mut alloc::vec::Vec<u8>) -> Result<(), Error> {
    let start = out.len();
    out.resize(start + options.encoded_len(), 0);
    let mut pos = start;
    let mut last = 0u16;
    for (n, v) in options.iter() {
        pos = write_option(out, pos, n.0 - last, v)?;
        last = n.0;
    }
    out.truncate(pos);
    Ok(())
}

/// Decodes an option sequence followed by an optional payload (`0xFF` and at least one byte), as a
/// message's tail or OSCORE's plaintext after its code byte. Malformed input is an error, never a panic.
pub fn decode_options(bytes: &[u8]) -> Result<(Options, &[u8]), Error> {
    let end = scan_options(bytes)?;
    let options = Options::from_iter_unsorted(OptionIter::new(&bytes[..end]));
    let payload = match bytes.get(end) {
        None => &[][..],
        Some(0xff) if bytes.len() > end + 1 => &bytes[end + 1..],
        Some(0xff) => return Err(Error::EmptyPayloadAfterMarker),
        Some(_) => return Err(Error::Truncated),
    };
    Ok((options, payload))
}

/// An option value: short values (the common case) live inline, longer ones on the heap.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OptionValue(Repr);

const INLINE: usize = 22;

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
}

impl OptionValue {
    pub fn new(value: &[u8]) -> Self {
        if value.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..value.len()].copy_from_slice(value);
            OptionValue(Repr::Inline(value.len() as u8, buf))
        } else {
            OptionValue(Repr::Heap(value.into()))
        }
    }

    pub fn uint(v: u64) -> Self {
        let (b, l) = encode_uint(v);
        OptionValue::new(&b[..l])
    }

    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(len, buf) => &buf[..usize::from(*len)],
            Repr::Heap(b) => b,
        }
    }
}

impl core::ops::Deref for OptionValue {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.as_bytes();
        match core::str::from_utf8(b) {
            Ok(s) if !b.is_empty() && s.chars().all(|c| !c.is_control()) => write!(f, "{s:?}"),
            _ => {
                f.write_str("0x")?;
                b.iter().try_for_each(|x| write!(f, "{x:02x}"))
            }
        }
    }
}

/// An owned, always sorted list of options. Repeated options keep the order in which they were added.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Options {
    entries: Vec<(OptionNumber, OptionValue)>,
}

impl Options {
    pub const fn new() -> Self {
        Options { entries: Vec::new() }
    }

    /// Collects options from an iterator (any order).
    pub fn from_iter_unsorted<'a>(it: impl IntoIterator<Item = (OptionNumber, &'a [u8])>) -> Self {
        let mut o = Options::new();
        for (n, v) in it {
            o.push(n, v);
        }
        o
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds an option after any existing options with the same number.
    ///
    /// A value longer than [`MAX_OPTION_LEN`] (65804 bytes, the most the option encoding can express) is
    /// cut to that length, so that every `Options` can be encoded; no registered option comes near it.
    pub fn push(&mut self, number: OptionNumber, value: &[u8]) -> &mut Self {
        let value = &value[..value.len().min(MAX_OPTION_LEN)];
        let at = self.entries.partition_point(|(n, _)| *n <= number);
        self.entries.insert(at, (number, OptionValue::new(value)));
        self
    }

    pub fn push_uint(&mut self, number: OptionNumber, v: u64) -> &mut Self {
        let (b, l) = encode_uint(v);
        self.push(number, &b[..l])
    }

    pub fn push_str(&mut self, number: OptionNumber, s: &str) -> &mut Self {
        self.push(number, s.as_bytes())
    }

    /// Replaces every occurrence of `number` with one value.
    pub fn set(&mut self, number: OptionNumber, value: &[u8]) -> &mut Self {
        self.remove(number);
        self.push(number, value)
    }

    pub fn set_uint(&mut self, number: OptionNumber, v: u64) -> &mut Self {
        let (b, l) = encode_uint(v);
        self.set(number, &b[..l])
    }

    /// Removes every occurrence of `number`; returns whether any was present.
    pub fn remove(&mut self, number: OptionNumber) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(n, _)| *n != number);
        before != self.entries.len()
    }

    pub fn contains(&self, number: OptionNumber) -> bool {
        self.get(number).is_some()
    }

    /// The first value of `number`.
    pub fn get(&self, number: OptionNumber) -> Option<&[u8]> {
        self.get_all(number).next()
    }

    /// Every value of `number`, in order.
    pub fn get_all(&self, number: OptionNumber) -> impl Iterator<Item = &[u8]> + '_ {
        let start = self.entries.partition_point(|(n, _)| *n < number);
        self.entries[start..].iter().take_while(move |(n, _)| *n == number).map(|(_, v)| v.as_bytes())
    }

    /// The first value of `number` decoded as a uint; `None` if absent or longer than 8 bytes.
    pub fn get_uint(&self, number: OptionNumber) -> Option<u64> {
        self.get(number).and_then(decode_uint)
    }

    pub fn iter(&self) -> impl Iterator<Item = (OptionNumber, &[u8])> + Clone + '_ {
        self.entries.iter().map(|(n, v)| (*n, v.as_bytes()))
    }

    /// Bytes these options take on the wire.
    pub fn encoded_len(&self) -> usize {
        let mut prev = 0u16;
        self.entries
            .iter()
            .map(|(n, v)| {
                let l = option_encoded_len(n.0 - prev, v.len());
                prev = n.0;
                l
            })
            .sum()
    }

    /// Writes the options at `pos` of `out`; returns the position after them.
    pub(crate) fn write(&self, out: &mut [u8], mut pos: usize) -> Result<usize, Error> {
        let mut prev = 0u16;
        for (n, v) in &self.entries {
            pos = write_option(out, pos, n.0 - prev, v)?;
            prev = n.0;
        }
        Ok(pos)
    }

    // Convenience accessors for the options every layer reads.

    /// Uri-Path segments joined with `/`, with a leading `/` (`"/"` when there are none). Segments that
    /// are not UTF-8 are replaced lossily; the caller that needs exact bytes uses `get_all`.
    pub fn path(&self) -> alloc::string::String {
        join_segments(self.get_all(OptionNumber::URI_PATH), '/', "/")
    }

    /// Uri-Query items joined with `&` (empty when there are none).
    pub fn query(&self) -> alloc::string::String {
        join_segments(self.get_all(OptionNumber::URI_QUERY), '&', "")
    }

    /// Iterates `(key, value)` over Uri-Query items (`key=value`, or `key` with an empty value).
    pub fn query_pairs(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.get_all(OptionNumber::URI_QUERY).filter_map(|q| {
            let s = core::str::from_utf8(q).ok()?;
            Some(s.split_once('=').unwrap_or((s, "")))
        })
    }

    pub fn content_format(&self) -> Option<crate::ContentFormat> {
        self.get_uint(OptionNumber::CONTENT_FORMAT).and_then(|v| u16::try_from(v).ok()).map(crate::ContentFormat)
    }

    pub fn accept(&self) -> Option<crate::ContentFormat> {
        self.get_uint(OptionNumber::ACCEPT).and_then(|v| u16::try_from(v).ok()).map(crate::ContentFormat)
    }

    pub fn observe(&self) -> Option<u32> {
        self.get_uint(OptionNumber::OBSERVE).and_then(|v| u32::try_from(v).ok())
    }

    pub fn max_age(&self) -> Option<u32> {
        self.get_uint(OptionNumber::MAX_AGE).and_then(|v| u32::try_from(v).ok())
    }

    pub fn block1(&self) -> Option<crate::BlockValue> {
        self.get(OptionNumber::BLOCK1).and_then(crate::BlockValue::decode)
    }

    pub fn block2(&self) -> Option<crate::BlockValue> {
        self.get(OptionNumber::BLOCK2).and_then(crate::BlockValue::decode)
    }

    /// Sets Uri-Path from a `/`-separated path (leading and trailing `/` ignored, no percent-decoding).
    pub fn set_path(&mut self, path: &str) -> &mut Self {
        self.remove(OptionNumber::URI_PATH);
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            self.push(OptionNumber::URI_PATH, seg.as_bytes());
        }
        self
    }
}

fn join_segments<'a>(segs: impl Iterator<Item = &'a [u8]>, sep: char, empty: &str) -> alloc::string::String {
    let mut s = alloc::string::String::new();
    for (i, seg) in segs.enumerate() {
        if sep == '/' || i > 0 {
            s.push(sep);
        }
        s.push_str(&alloc::string::String::from_utf8_lossy(seg));
    }
    if s.is_empty() {
        s.push_str(empty);
    }
    s
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.iter().map(|(n, v)| (n, v))).finish()
    }
}

impl<'a> FromIterator<(OptionNumber, &'a [u8])> for Options {
    fn from_iter<I: IntoIterator<Item = (OptionNumber, &'a [u8])>>(iter: I) -> Self {
        Options::from_iter_unsorted(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits() {
        assert!(OptionNumber::URI_PATH.is_critical());
        assert!(OptionNumber::URI_PATH.is_unsafe());
        assert!(!OptionNumber::ETAG.is_critical());
        assert!(OptionNumber::SIZE1.is_no_cache_key());
        assert!(OptionNumber::SIZE2.is_no_cache_key());
        assert!(OptionNumber::ECHO.is_no_cache_key());
        assert!(!OptionNumber::REQUEST_TAG.is_no_cache_key());
    }

    #[test]
    fn registry_sorted() {
        assert!(REGISTRY.windows(2).all(|w| w[0].number < w[1].number));
        assert_eq!(OptionNumber::from_name("uri-path"), Some(OptionNumber::URI_PATH));
    }

    #[test]
    fn uint_roundtrip() {
        for v in [0u64, 1, 255, 256, 65535, 65536, 1 << 24, u64::MAX] {
            let (b, l) = encode_uint(v);
            assert_eq!(decode_uint(&b[..l]), Some(v));
        }
        assert_eq!(encode_uint(0).1, 0);
        assert_eq!(encode_uint(256).1, 2);
    }

    #[test]
    fn check_critical_rules() {
        let ok: [(OptionNumber, &[u8]); 2] = [(OptionNumber::URI_PATH, b"a"), (OptionNumber::URI_PATH, b"b")];
        assert_eq!(check_critical(ok, &[]), Ok(()));
        let unknown: [(OptionNumber, &[u8]); 1] = [(OptionNumber(2049), b"")];
        assert_eq!(check_critical(unknown, &[]), Err(BadOption::Unrecognized(OptionNumber(2049))));
        assert_eq!(check_critical(unknown, &[OptionNumber(2049)]), Ok(()));
        let elective_unknown: [(OptionNumber, &[u8]); 1] = [(OptionNumber(2048), b"")];
        assert_eq!(check_critical(elective_unknown, &[]), Ok(()));
        let long_host = [0u8; 256];
        let bad: [(OptionNumber, &[u8]); 1] = [(OptionNumber::URI_HOST, &long_host)];
        assert_eq!(check_critical(bad, &[]), Err(BadOption::BadLength(OptionNumber::URI_HOST)));
        let rep: [(OptionNumber, &[u8]); 2] = [(OptionNumber::URI_HOST, b"a"), (OptionNumber::URI_HOST, b"b")];
        assert_eq!(check_critical(rep, &[]), Err(BadOption::Repeated(OptionNumber::URI_HOST)));
    }

    #[test]
    fn options_sorted_and_repeats_ordered() {
        let mut o = Options::new();
        o.push(OptionNumber::URI_QUERY, b"q");
        o.push(OptionNumber::URI_PATH, b"a");
        o.push(OptionNumber::URI_PATH, b"b");
        o.push_uint(OptionNumber::CONTENT_FORMAT, 50);
        let nums: Vec<u16> = o.iter().map(|(n, _)| n.0).collect();
        assert_eq!(nums, [11, 11, 12, 15]);
        assert_eq!(o.path(), "/a/b");
        assert_eq!(o.query(), "q");
        assert_eq!(o.content_format(), Some(crate::ContentFormat::JSON));
        o.set_path("x/y/");
        assert_eq!(o.path(), "/x/y");
        assert!(o.remove(OptionNumber::URI_QUERY));
        assert_eq!(o.query(), "");
    }

    #[test]
    fn overlong_values_are_cut_so_encoding_never_fails() {
        let mut m =
            crate::Message::new(crate::MessageType::Con, crate::Code::GET, crate::MessageId(1), crate::Token::EMPTY);
        m.options.push(OptionNumber::PROXY_URI, &alloc::vec![b'a'; MAX_OPTION_LEN + 10]);
        assert_eq!(m.options.get(OptionNumber::PROXY_URI).map(<[u8]>::len), Some(MAX_OPTION_LEN));
        assert_eq!(m.encode().len(), m.encoded_len());
    }

    #[test]
    fn long_values_heap() {
        let v = [7u8; 300];
        let ov = OptionValue::new(&v);
        assert_eq!(ov.as_bytes(), &v[..]);
    }
}
