//! Block-wise transfers (RFC 7959), the parts that do not depend on the transport.
//!
//! - Server, Block1: [`Assemblies`] collects the blocks of an upload and answers each non-final block
//!   with 2.31 Continue (possibly with a smaller SZX), out-of-order blocks with 4.08 and oversized bodies
//!   with 4.13 + Size1, before the application sees the whole request once.
//! - Server, Block2: [`BodyCache`] and [`slice`] cut a large response into the block the client asked for,
//!   adding ETag (a hash of the body when the application gave none) so a client notices a representation
//!   that changed mid-transfer, and keep the rendered body briefly so later blocks do not re-run the handler.
//! - Client: [`Transfer`] drives an upload (Block1) and/or a download (Block2) as a sequence of requests and
//!   yields one response, or fails; it never yields a truncated body.
//!
//! Every table is bounded and entries expire.

use super::Map;
use crate::message::{Request, RequestError, Response};
use crate::time::{Duration, Instant};
use corral_wire::{BlockValue, Code, OptionNumber, Options};
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;

/// Options that do not distinguish one block-wise transfer from another (RFC 7959 §2.4: Block1/Block2
/// and their Size companions vary per block; Observe, No-Response and Echo do not change the resource).
fn ignored_for_key(n: OptionNumber, include_request_tag: bool) -> bool {
    matches!(
        n,
        OptionNumber::BLOCK1
            | OptionNumber::BLOCK2
            | OptionNumber::SIZE1
            | OptionNumber::SIZE2
            | OptionNumber::OBSERVE
            | OptionNumber::NO_RESPONSE
            | OptionNumber::ECHO
    ) || (n == OptionNumber::REQUEST_TAG && !include_request_tag)
}

/// A 64-bit key for "the same request, block options aside": method, the other options and, for FETCH, the
/// payload. Request-Tag (RFC 9175 §3) separates concurrent uploads.
pub fn request_key<'a>(
    hasher: &impl BuildHasher,
    method: Code,
    options: impl Iterator<Item = (OptionNumber, &'a [u8])>,
    payload: &[u8],
    include_request_tag: bool,
) -> u64 {
    let mut h = hasher.build_hasher();
    h.write_u8(method.0);
    for (n, v) in options {
        if !ignored_for_key(n, include_request_tag) {
            h.write_u16(n.0);
            h.write_usize(v.len());
            h.write(v);
        }
    }
    if method == Code::FETCH {
        h.write(payload);
    }
    h.finish()
}

fn block_option(options: &mut Options, number: OptionNumber, b: BlockValue) {
    let (bytes, len) = b.encode();
    options.set(number, &bytes[..len]);
}

/// Whether a payload is a legal block for `b`: exactly the block size unless it is the last one; BERT
/// (SZX 7, reliable transports only) allows any multiple of 1024.
fn block_len_ok(b: BlockValue, len: usize) -> bool {
    if b.szx == 7 {
        return if b.more { len > 0 && len % 1024 == 0 } else { true };
    }
    if b.more {
        len == b.size()
    } else {
        len <= b.size()
    }
}

// -------------------------------------------------------------------------------------------------
// Server: Block1 assembly
// -------------------------------------------------------------------------------------------------

struct Assembly {
    body: Vec<u8>,
    expires: Instant,
    /// Its peer had proved its address when the upload started: it outlives unverified ones.
    verified: bool,
}

/// What to do with one received Block1 block.
pub(crate) enum Block1Step {
    /// A non-final block was stored: answer 2.31 Continue with this Block1 value.
    Continue(BlockValue),
    /// The last block arrived: hand the whole body to the application; echo this Block1 in its response.
    Complete { body: Vec<u8>, echo: BlockValue },
    /// Answer with this error and forget the transfer.
    Reject(Response),
    /// A first block from an unverified source while unverified uploads hold their half of the table:
    /// answer 4.01 with an Echo value (a real client repeats the block with it and counts as verified).
    Challenge,
}

/// Uploads in progress, keyed by peer and request key (with Request-Tag).
pub(crate) struct Assemblies {
    map: Map<(SocketAddr, u64), Assembly>,
    order: VecDeque<(Instant, SocketAddr, u64)>,
    bytes: usize,
}

impl Assemblies {
    pub(crate) fn new(seed: u64) -> Assemblies {
        Assemblies { map: super::new_map(seed), order: VecDeque::new(), bytes: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(at, peer, key)) = self.order.front() {
            if at > now {
                break;
            }
            self.order.pop_front();
            if self.map.get(&(peer, key)).is_some_and(|a| a.expires <= now) {
                if let Some(a) = self.map.remove(&(peer, key)) {
                    self.bytes -= a.body.len();
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_block(
        &mut self,
        now: Instant,
        lifetime: Duration,
        limits: &BlockConfig,
        peer: SocketAddr,
        key: u64,
        block: BlockValue,
        size1: Option<u64>,
        payload: &[u8],
        verified: bool,
    ) -> Block1Step {
        self.expire(now);
        let too_large = || {
            let mut r = Response::error(
                Code::REQUEST_ENTITY_TOO_LARGE,
                format!("request body exceeds the maximum of {} bytes", limits.max_body),
            );
            r.options.set_uint(OptionNumber::SIZE1, limits.max_body as u64);
            Block1Step::Reject(r)
        };
        if !block_len_ok(block, payload.len()) {
            self.forget(peer, key);
            return Block1Step::Reject(Response::error(
                Code::BAD_REQUEST,
                format!(
                    "Block1 {} carries {} bytes; a non-final block must carry {}",
                    block.num,
                    payload.len(),
                    block.size()
                ),
            ));
        }
        if block.num == 0 {
            self.forget(peer, key);
            if size1.is_some_and(|s| s > limits.max_body as u64) {
                return too_large();
            }
            if block.more {
                // A new upload finds a slot: a peer over its share gives up its own oldest upload, a full
                // table its least recently active unverified one — verified peers' uploads outlive those
                // of sources that never proved their address, which hold at most half the table (beyond
                // it they are asked to prove it). Abandoned uploads cannot lock others out.
                let max = limits.max_assemblies.max(1);
                let unverified = self.map.values().filter(|a| !a.verified).count();
                if !verified && unverified * 2 >= max {
                    return Block1Step::Challenge;
                }
                let per_peer = limits.max_assemblies_per_peer.max(1);
                if self.map.keys().filter(|(p, _)| *p == peer).count() >= per_peer {
                    self.evict_oldest(|p, _| p == peer);
                }
                if self.map.len() >= max && !self.evict_oldest(|_, a| !a.verified) {
                    self.evict_oldest(|_, _| true);
                }
            }
        } else {
            let expected = self.map.get(&(peer, key)).map(|a| a.body.len());
            if expected != Some(block.offset()) {
                self.forget(peer, key);
                return Block1Step::Reject(Response::error(
                    Code::REQUEST_ENTITY_INCOMPLETE,
                    match expected {
                        Some(e) => format!("expected the block at offset {e}, got offset {}", block.offset()),
                        None => "no upload in progress for this block; start again with block 0".to_string(),
                    },
                ));
            }
        }
        let have = self.map.get(&(peer, key)).map_or(0, |a| a.body.len());
        if have + payload.len() > limits.max_body {
            self.forget(peer, key);
            return too_large();
        }
        // Bytes held by all uploads: the least recently active other uploads give way first.
        while self.bytes + payload.len() > limits.max_assembly_bytes {
            let evicted =
                self.evict_oldest(|p, a| p != peer && !a.verified) || (verified && self.evict_oldest(|p, _| p != peer));
            if !evicted {
                self.forget(peer, key);
                return too_large();
            }
        }
        if !block.more {
            let mut body = self.map.remove(&(peer, key)).map(|a| a.body).unwrap_or_default();
            self.bytes -= body.len();
            body.extend_from_slice(payload);
            return Block1Step::Complete { body, echo: BlockValue { num: block.num, more: false, szx: block.szx } };
        }
        let expires = now + lifetime;
        let entry = self.map.entry((peer, key)).or_insert_with(|| Assembly { body: Vec::new(), expires, verified });
        entry.body.extend_from_slice(payload);
        entry.expires = expires;
        self.bytes += payload.len();
        self.order.push_back((expires, peer, key));
        // RFC 7959 §2.3: the server may ask for smaller blocks; NUM stays, the client recomputes it.
        Block1Step::Continue(BlockValue { num: block.num, more: true, szx: block.szx.min(limits.szx) })
    }

    /// Drops the least recently active upload that `which` accepts (by peer and upload); `false` if there
    /// is none.
    fn evict_oldest(&mut self, which: impl Fn(SocketAddr, &Assembly) -> bool) -> bool {
        let oldest = self.map.iter().filter(|((p, _), a)| which(*p, a)).min_by_key(|(_, a)| a.expires).map(|(k, _)| *k);
        match oldest {
            Some((p, k)) => {
                tracing::debug!(peer = %p, "block-wise upload dropped to make room for a newer one");
                self.forget(p, k);
                true
            }
            None => false,
        }
    }

    fn forget(&mut self, peer: SocketAddr, key: u64) {
        if let Some(a) = self.map.remove(&(peer, key)) {
            self.bytes -= a.body.len();
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Server: Block2 slicing and the body cache
// -------------------------------------------------------------------------------------------------

/// Block-wise settings shared by both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockConfig {
    /// The largest block size exponent this endpoint uses and accepts (6 = 1024 bytes).
    pub szx: u8,
    /// The largest body (request or response) assembled from blocks.
    pub max_body: usize,
    /// Uploads assembled at once; when full, the least recently active one gives way to a new one.
    pub max_assemblies: usize,
    /// Uploads of one peer at once; a peer's newest upload replaces its oldest beyond it.
    pub max_assemblies_per_peer: usize,
    /// Bytes held by all uploads in progress together.
    pub max_assembly_bytes: usize,
    /// Rendered large responses kept for follow-up block requests.
    pub cache_entries: usize,
    pub cache_bytes: usize,
    pub cache_lifetime: Duration,
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            szx: 6,
            max_body: 4 << 20,
            max_assemblies: 64,
            max_assemblies_per_peer: 4,
            max_assembly_bytes: 32 << 20,
            cache_entries: 64,
            cache_bytes: 32 << 20,
            cache_lifetime: Duration::from_secs(30),
        }
    }
}

struct Cached {
    response: Response,
    expires: Instant,
}

/// Rendered bodies of large responses, for the requests of their later blocks (bounded by a [`BlockConfig`]'s
/// `cache_*`; entries expire).
pub struct BodyCache {
    map: Map<(SocketAddr, u64), Cached>,
    order: VecDeque<(SocketAddr, u64)>,
    bytes: usize,
}

impl BodyCache {
    pub fn new(seed: u64) -> BodyCache {
        BodyCache { map: super::new_map(seed), order: VecDeque::new(), bytes: 0 }
    }

    pub fn get(&self, now: Instant, peer: SocketAddr, key: u64) -> Option<&Response> {
        self.map.get(&(peer, key)).filter(|c| c.expires > now).map(|c| &c.response)
    }

    pub fn insert(&mut self, now: Instant, cfg: &BlockConfig, peer: SocketAddr, key: u64, response: Response) {
        if response.payload.len() > cfg.cache_bytes {
            return;
        }
        if let Some(old) = self.map.remove(&(peer, key)) {
            self.bytes -= old.response.payload.len();
            self.order.retain(|k| *k != (peer, key));
        }
        while (self.map.len() >= cfg.cache_entries || self.bytes + response.payload.len() > cfg.cache_bytes)
            && !self.order.is_empty()
        {
            if let Some(k) = self.order.pop_front() {
                if let Some(old) = self.map.remove(&k) {
                    self.bytes -= old.response.payload.len();
                }
            }
        }
        self.bytes += response.payload.len();
        self.order.push_back((peer, key));
        self.map.insert((peer, key), Cached { response, expires: now + cfg.cache_lifetime });
    }
}

/// Gives a large response an ETag if it has none: a hash of its body, so that clients can check that the
/// blocks they assemble belong to one representation (RFC 7959 §2.4).
pub fn ensure_etag(hasher: &impl BuildHasher, response: &mut Response) {
    if response.options.contains(OptionNumber::ETAG) {
        return;
    }
    let mut h = hasher.build_hasher();
    h.write(&response.payload);
    let tag = h.finish().to_be_bytes();
    response.options.set(OptionNumber::ETAG, &tag[..4]);
}

/// The block `want` of a full response: its payload slice, Block2 and, for the first block, Size2.
pub fn slice(full: &Response, want: BlockValue) -> Result<Response, Response> {
    let size = want.size();
    let offset = want.offset();
    let len = full.payload.len();
    if offset >= len && !(offset == 0 && len == 0) {
        return Err(Response::error(
            Code::BAD_OPTION,
            format!("Block2 {} is beyond the end of the {len}-byte representation", want.num),
        ));
    }
    let end = (offset + size).min(len);
    let mut r =
        Response { code: full.code, options: full.options.clone(), payload: full.payload[offset..end].to_vec() };
    block_option(&mut r.options, OptionNumber::BLOCK2, BlockValue { num: want.num, more: end < len, szx: want.szx });
    if want.num == 0 {
        r.options.set_uint(OptionNumber::SIZE2, len as u64);
    }
    Ok(r)
}

// -------------------------------------------------------------------------------------------------
// Client: one logical request as a sequence of block requests
// -------------------------------------------------------------------------------------------------

/// Why a transfer that had moved some blocks failed on a timeout.
pub(crate) const STALLED: &str = "stalled part-way through: the peer stopped answering, or the transfer outlasted \
                                  the request's timeout; nothing was delivered";

/// What the client does next in a transfer.
pub(crate) enum Step {
    /// Send this request (a new exchange, new token) and feed its response back.
    Send(Request),
    /// The transfer is complete: this is the whole response.
    Done(Response),
    Fail(RequestError),
}

#[derive(Debug)]
struct Upload {
    /// Bytes the server has accepted (every block up to the last 2.31).
    acked: usize,
    /// Bytes in the block in flight.
    in_flight: usize,
    szx: u8,
}

#[derive(Debug)]
struct Download {
    head: Response,
    etag: Option<Vec<u8>>,
    body: Vec<u8>,
}

/// How far a block-wise transfer has come: bytes the server accepted (upload) or sent (download), and the
/// body's size when known (the upload's own length; a download's Size2, RFC 7959 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferProgress {
    pub upload: bool,
    pub done: usize,
    pub total: Option<usize>,
}

/// A client-side block-wise transfer.
#[derive(Debug)]
pub(crate) struct Transfer {
    /// The request as the application made it (the full body for an upload).
    request: Request,
    upload: Option<Upload>,
    download: Option<Download>,
    szx: u8,
    max_body: usize,
    request_tag: Option<[u8; 4]>,
}

impl Transfer {
    pub(crate) fn is_uploading(&self) -> bool {
        self.upload.is_some()
    }

    pub(crate) fn progress(&self) -> TransferProgress {
        match (&self.upload, &self.download) {
            (Some(up), _) => TransferProgress { upload: true, done: up.acked, total: Some(self.request.payload.len()) },
            (None, Some(d)) => TransferProgress {
                upload: false,
                done: d.body.len(),
                total: d.head.options.get_uint(OptionNumber::SIZE2).and_then(|s| usize::try_from(s).ok()),
            },
            (None, None) => TransferProgress { upload: false, done: 0, total: None },
        }
    }

    /// Whether blocks have gone through: the server accepted part of the upload, or sent part of the
    /// response. A timeout after that is a transfer that stalled, not a server that never answered.
    pub(crate) fn has_progressed(&self) -> bool {
        self.upload.as_ref().is_some_and(|u| u.acked > 0) || self.download.is_some()
    }

    /// The error for a transfer that ends by `error`: a timeout after some blocks went through becomes
    /// [`RequestError::BadTransfer`], so the application can tell a stalled transfer from an absent server.
    pub(crate) fn failure(transfer: Option<&Transfer>, error: RequestError) -> RequestError {
        match error {
            RequestError::Timeout if transfer.is_some_and(Transfer::has_progressed) => {
                RequestError::BadTransfer(STALLED)
            }
            e => e,
        }
    }

    /// Whether `request` needs Block1 with blocks of `2^(szx+4)` bytes.
    pub(crate) fn needs_upload(request: &Request, szx: u8) -> bool {
        request.payload.len() > BlockValue { num: 0, more: false, szx }.size()
    }

    /// Starts a transfer; returns it with the first request to send.
    pub(crate) fn start(
        request: Request,
        szx: u8,
        max_body: usize,
        request_tag: Option<[u8; 4]>,
        early_block2: bool,
    ) -> (Transfer, Request) {
        let mut t = Transfer { request, upload: None, download: None, szx, max_body, request_tag };
        let first = if Transfer::needs_upload(&t.request, szx) {
            t.upload = Some(Upload { acked: 0, in_flight: 0, szx });
            let mut r = t.next_upload_block();
            r.options.set_uint(OptionNumber::SIZE1, t.request.payload.len() as u64);
            r
        } else {
            let mut r = t.request.clone();
            if early_block2 {
                // Early negotiation (RFC 7959 §2.4): ask for this block size from the start.
                block_option(&mut r.options, OptionNumber::BLOCK2, BlockValue { num: 0, more: false, szx });
            }
            r
        };
        (t, first)
    }

    /// Continues from a block-0 response that was not started as a transfer (a plain request whose
    /// response turned out to be block-wise). Returns the next step.
    pub(crate) fn from_first_response(
        request: Request,
        szx: u8,
        max_body: usize,
        response: Response,
    ) -> (Transfer, Step) {
        let mut t = Transfer { request, upload: None, download: None, szx, max_body, request_tag: None };
        let step = t.on_response(response);
        (t, step)
    }

    /// For an Observe notification that carries block 0: fetch the rest with GET and no Observe.
    pub(crate) fn for_notification(request: Request, szx: u8, max_body: usize, block0: Response) -> (Transfer, Step) {
        let mut request = request;
        request.options.remove(OptionNumber::OBSERVE);
        Transfer::from_first_response(request, szx, max_body, block0)
    }

    /// An upload starts over from its first block with option `number` set to `value` in every block (a
    /// server's 4.01 with an Echo value comes when it has the whole body, and the repetition must carry
    /// the value to the end: RFC 9175 §2.4). `None` if this transfer is not an upload.
    pub(crate) fn restart_upload(&mut self, number: OptionNumber, value: &[u8]) -> Option<Request> {
        let up = self.upload.as_mut()?;
        up.acked = 0;
        up.in_flight = 0;
        self.request.options.set(number, value);
        let mut r = self.next_upload_block();
        r.options.set_uint(OptionNumber::SIZE1, self.request.payload.len() as u64);
        Some(r)
    }

    fn next_upload_block(&mut self) -> Request {
        let up = self.upload.as_mut().expect("next_upload_block only runs while uploading");
        let size = BlockValue { num: 0, more: false, szx: up.szx }.size();
        let start = up.acked;
        let end = (start + size).min(self.request.payload.len());
        up.in_flight = end - start;
        let more = end < self.request.payload.len();
        let mut r = Request {
            method: self.request.method,
            options: self.request.options.clone(),
            payload: self.request.payload[start..end].to_vec(),
        };
        let num = (start / size) as u32;
        block_option(&mut r.options, OptionNumber::BLOCK1, BlockValue { num, more, szx: up.szx });
        if let Some(tag) = self.request_tag {
            r.options.set(OptionNumber::REQUEST_TAG, &tag);
        }
        r
    }

    fn next_download_request(&self, num: u32, szx: u8) -> Request {
        let mut r = Request { method: self.request.method, options: self.request.options.clone(), payload: Vec::new() };
        if self.request.method == Code::FETCH {
            r.payload = self.request.payload.clone();
        }
        r.options.remove(OptionNumber::OBSERVE);
        r.options.remove(OptionNumber::BLOCK1);
        r.options.remove(OptionNumber::SIZE1);
        r.options.remove(OptionNumber::REQUEST_TAG);
        block_option(&mut r.options, OptionNumber::BLOCK2, BlockValue { num, more: false, szx });
        r
    }

    pub(crate) fn on_response(&mut self, response: Response) -> Step {
        if let Some(up) = self.upload.as_mut() {
            if response.code == Code::CONTINUE {
                let Some(b) = response.options.block1() else {
                    return Step::Fail(RequestError::BadTransfer("2.31 Continue without a Block1 option"));
                };
                up.acked += up.in_flight;
                // The server may ask for smaller blocks (RFC 7959 §2.3); sizes are powers of two, so the
                // bytes acknowledged so far are a whole number of the new blocks.
                up.szx = up.szx.min(b.szx).min(6);
                if up.acked >= self.request.payload.len() {
                    return Step::Fail(RequestError::BadTransfer("2.31 Continue after the last block"));
                }
                return Step::Send(self.next_upload_block());
            }
            // Any other code ends the upload; it may start a download of a large response.
            self.upload = None;
        }
        let Some(b) = response.options.block2() else {
            if self.download.is_some() {
                return Step::Fail(RequestError::BadTransfer("a block of the response came without Block2"));
            }
            return Step::Done(response);
        };
        if !response.code.is_success() {
            return Step::Done(response);
        }
        let etag = response.options.get(OptionNumber::ETAG).map(<[u8]>::to_vec);
        match self.download.as_mut() {
            None => {
                if b.num != 0 {
                    return Step::Fail(RequestError::BadTransfer("the first block of the response is not block 0"));
                }
                let mut head = response;
                let body = std::mem::take(&mut head.payload);
                self.download = Some(Download { head, etag, body });
            }
            Some(d) => {
                if d.etag != etag {
                    return Step::Fail(RequestError::BadTransfer(
                        "the representation changed during the block-wise transfer",
                    ));
                }
                if b.offset() != d.body.len() {
                    return Step::Fail(RequestError::BadTransfer("the server sent a block at an unexpected offset"));
                }
                d.body.extend_from_slice(&response.payload);
            }
        }
        let d = self.download.as_mut().expect("download set above");
        if d.body.len() > self.max_body {
            return Step::Fail(RequestError::BadTransfer("the response body exceeds the maximum size"));
        }
        if b.more {
            let szx = b.szx.min(self.szx).min(6);
            let size = BlockValue { num: 0, more: false, szx }.size();
            if d.body.len() % size != 0 {
                return Step::Fail(RequestError::BadTransfer("a non-final block is not a whole block"));
            }
            let num = (d.body.len() / size) as u32;
            return Step::Send(self.next_download_request(num, szx));
        }
        let Download { mut head, body, .. } = self.download.take().expect("download set above");
        head.options.remove(OptionNumber::BLOCK2);
        head.options.remove(OptionNumber::SIZE2);
        head.payload = body;
        Step::Done(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BlockConfig {
        BlockConfig { szx: 2, max_body: 1000, ..BlockConfig::default() }
    }

    fn peer() -> SocketAddr {
        "10.0.0.1:5683".parse().unwrap()
    }

    #[test]
    fn assembly_in_order_lowering_szx() {
        let mut a = Assemblies::new(1);
        let now = Instant::ZERO;
        let life = Duration::from_secs(10);
        // Client starts with 128-byte blocks; the server (szx 2 = 64) asks for smaller ones.
        let b0 = BlockValue { num: 0, more: true, szx: 3 };
        let Block1Step::Continue(echo) = a.on_block(now, life, &cfg(), peer(), 7, b0, None, &[1; 128], true) else {
            panic!()
        };
        assert_eq!(echo, BlockValue { num: 0, more: true, szx: 2 });
        // Next block at the new size: 128 bytes acknowledged = block 2 of 64.
        let b2 = BlockValue { num: 2, more: false, szx: 2 };
        let Block1Step::Complete { body, echo } = a.on_block(now, life, &cfg(), peer(), 7, b2, None, &[2; 10], true)
        else {
            panic!()
        };
        assert_eq!(body.len(), 138);
        assert_eq!(echo, BlockValue { num: 2, more: false, szx: 2 });
        assert_eq!(a.len(), 0);
    }

    #[test]
    fn assembly_rejects_gaps_and_oversize() {
        let mut a = Assemblies::new(1);
        let now = Instant::ZERO;
        let life = Duration::from_secs(10);
        let b = |num, more| BlockValue { num, more, szx: 2 };
        assert!(matches!(
            a.on_block(now, life, &cfg(), peer(), 1, b(0, true), None, &[0; 64], true),
            Block1Step::Continue(_)
        ));
        let Block1Step::Reject(r) = a.on_block(now, life, &cfg(), peer(), 1, b(2, true), None, &[0; 64], true) else {
            panic!()
        };
        assert_eq!(r.code, Code::REQUEST_ENTITY_INCOMPLETE);
        let Block1Step::Reject(r) = a.on_block(now, life, &cfg(), peer(), 1, b(0, true), Some(5000), &[0; 64], true)
        else {
            panic!()
        };
        assert_eq!(r.code, Code::REQUEST_ENTITY_TOO_LARGE);
        assert_eq!(r.options.get_uint(OptionNumber::SIZE1), Some(1000));
        let Block1Step::Reject(r) = a.on_block(now, life, &cfg(), peer(), 1, b(0, true), None, &[0; 10], true) else {
            panic!()
        };
        assert_eq!(r.code, Code::BAD_REQUEST);
    }

    #[test]
    fn slice_and_reassemble() {
        let full = Response::new(Code::CONTENT).with_payload((0..200u8).collect::<Vec<_>>());
        let mut got = Vec::new();
        let mut num = 0;
        loop {
            let r = slice(&full, BlockValue { num, more: false, szx: 2 }).unwrap();
            let b = r.options.block2().unwrap();
            got.extend_from_slice(&r.payload);
            if !b.more {
                break;
            }
            num += 1;
        }
        assert_eq!(got, full.payload);
        assert!(slice(&full, BlockValue { num: 9, more: false, szx: 2 }).is_err());
    }

    #[test]
    fn client_download_detects_changed_etag() {
        let req = Request::get("big");
        let mut first = Response::new(Code::CONTENT).with_payload(vec![0; 64]);
        block_option(&mut first.options, OptionNumber::BLOCK2, BlockValue { num: 0, more: true, szx: 2 });
        first.options.set(OptionNumber::ETAG, b"a");
        let (mut t, step) = Transfer::from_first_response(req, 6, 1 << 20, first);
        let Step::Send(next) = step else { panic!() };
        assert_eq!(next.options.block2(), Some(BlockValue { num: 1, more: false, szx: 2 }));
        let mut second = Response::new(Code::CONTENT).with_payload(vec![1; 10]);
        block_option(&mut second.options, OptionNumber::BLOCK2, BlockValue { num: 1, more: false, szx: 2 });
        second.options.set(OptionNumber::ETAG, b"b");
        assert!(matches!(t.on_response(second), Step::Fail(RequestError::BadTransfer(_))));
    }
}
