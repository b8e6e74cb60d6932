//! The response cache (RFC 7252 §5.6): bounded by entries (default 40, seed 001's setting) and by bytes,
//! least recently used first out; freshness from Max-Age (60 s when absent); a stale entry with an ETag is
//! kept for revalidation.

use crate::key::Key;
use corral_proto::wire::{Code, OptionNumber};
use corral_proto::{Duration, Instant, Response};
use std::collections::{BTreeMap, HashMap};

/// RFC 7252 §5.10.5: a response without Max-Age is fresh for 60 s.
pub const DEFAULT_MAX_AGE: u32 = 60;

struct Entry {
    /// The response as stored, without Max-Age.
    response: Response,
    expires: Instant,
    /// The normalised target URI, for invalidation by unsafe methods.
    target: String,
    bytes: usize,
    /// Position in the LRU order.
    tick: u64,
}

/// What the cache holds for a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Fresh: the stored response with Max-Age set to the time it has left.
    Fresh(Response),
    /// Stale but with a validator: ask upstream with this ETag; a 2.03 refreshes the entry.
    Stale {
        etag: Vec<u8>,
    },
    Miss,
}

/// One entry as the operator sees it (`GET /proxy/cache`, the console).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    /// The resource the response came from.
    pub target: String,
    pub bytes: usize,
    pub content_format: Option<u16>,
    /// Seconds it stays fresh; 0 once stale (kept for revalidation by its ETag).
    pub fresh_s: u64,
    pub etag: bool,
}

/// An LRU response cache. See the module docs.
pub struct Cache {
    entries: HashMap<Key, Entry, foldhash::fast::FixedState>,
    lru: BTreeMap<u64, Key>,
    tick: u64,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

fn max_age_of(response: &Response) -> u32 {
    response.options.max_age().unwrap_or(DEFAULT_MAX_AGE)
}

impl Cache {
    pub fn new(max_entries: usize, max_bytes: usize) -> Cache {
        Cache {
            entries: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0)),
            lru: BTreeMap::new(),
            tick: 0,
            bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The entries, most recently used first, at most `limit` of them.
    pub fn listing(&self, now: Instant, limit: usize) -> Vec<Listed> {
        let listed = |e: &Entry| Listed {
            target: e.target.clone(),
            bytes: e.bytes,
            content_format: e.response.options.content_format().map(|c| c.0),
            fresh_s: e.expires.saturating_since(now).as_secs(),
            etag: e.response.options.contains(OptionNumber::ETAG),
        };
        self.lru.values().rev().filter_map(|k| self.entries.get(k)).take(limit).map(listed).collect()
    }

    /// Forgets every entry (the operator's purge); returns how many there were.
    pub fn clear(&mut self) -> usize {
        let n = self.entries.len();
        self.entries.clear();
        self.lru.clear();
        self.bytes = 0;
        n
    }

    fn touch(&mut self, key: &Key) {
        if let Some(e) = self.entries.get_mut(key) {
            self.lru.remove(&e.tick);
            self.tick += 1;
            e.tick = self.tick;
            self.lru.insert(self.tick, key.clone());
        }
    }

    pub fn lookup(&mut self, key: &Key, now: Instant) -> Lookup {
        let Some(e) = self.entries.get(key) else { return Lookup::Miss };
        if now < e.expires {
            let left = e.expires.saturating_since(now).as_secs();
            let mut r = e.response.clone();
            r.options.set_uint(OptionNumber::MAX_AGE, left);
            self.touch(key);
            return Lookup::Fresh(r);
        }
        match e.response.options.get(OptionNumber::ETAG) {
            Some(etag) => Lookup::Stale { etag: etag.to_vec() },
            None => {
                self.remove(key);
                Lookup::Miss
            }
        }
    }

    /// Stores a 2.05 response to a GET or FETCH (anything else is ignored, as is Max-Age 0). Returns whether
    /// it was stored; a response larger than the whole cache is not.
    pub fn insert(&mut self, key: Key, target: &str, response: &Response, now: Instant) -> bool {
        let max_age = max_age_of(response);
        if response.code != Code::CONTENT || max_age == 0 || self.max_entries == 0 {
            self.remove(&key);
            return false;
        }
        let mut stored = response.clone();
        stored.options.remove(OptionNumber::MAX_AGE);
        let bytes = key.0.len() + stored.payload.len() + stored.options.encoded_len() + target.len();
        if bytes > self.max_bytes {
            self.remove(&key);
            return false;
        }
        self.remove(&key);
        while self.entries.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
            let Some((_, oldest)) = self.lru.pop_first() else { break };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.bytes;
            }
        }
        self.tick += 1;
        let expires = now + Duration::from_secs(u64::from(max_age));
        self.lru.insert(self.tick, key.clone());
        self.bytes += bytes;
        self.entries
            .insert(key, Entry { response: stored, expires, target: target.to_string(), bytes, tick: self.tick });
        true
    }

    /// A 2.03 Valid for a stale entry (RFC 7252 §5.9.1.3): its Max-Age and other options replace the
    /// stored ones; returns the refreshed response (with its new Max-Age), or `None` if the entry is gone.
    pub fn refresh(&mut self, key: &Key, valid: &Response, now: Instant) -> Option<Response> {
        let e = self.entries.get_mut(key)?;
        for (n, _) in valid.options.iter() {
            e.response.options.remove(n);
        }
        for (n, v) in valid.options.iter() {
            if n != OptionNumber::MAX_AGE {
                e.response.options.push(n, v);
            }
        }
        let max_age = max_age_of(valid);
        e.expires = now + Duration::from_secs(u64::from(max_age));
        let mut r = e.response.clone();
        r.options.set_uint(OptionNumber::MAX_AGE, u64::from(max_age));
        self.touch(key);
        Some(r)
    }

    /// The keys that begin with `prefix`: a group request's entries, one per member
    /// (`proxy/group_cache.rs`). A scan of the whole table, which its bound keeps short.
    pub fn keys_with_prefix(&self, prefix: &[u8]) -> Vec<Key> {
        self.entries.keys().filter(|k| k.0.starts_with(prefix)).cloned().collect()
    }

    /// The ETag of the response stored under `key`, fresh or stale.
    pub fn etag(&self, key: &Key) -> Option<&[u8]> {
        self.entries.get(key)?.response.options.get(OptionNumber::ETAG)
    }

    /// Forgets every entry for a resource an unsafe method changed (RFC 7252 §5.6.2, §5.9.1).
    pub fn invalidate(&mut self, target: &str) -> usize {
        let keys: Vec<Key> = self.entries.iter().filter(|(_, e)| e.target == target).map(|(k, _)| k.clone()).collect();
        for k in &keys {
            self.remove(k);
        }
        keys.len()
    }

    fn remove(&mut self, key: &Key) {
        if let Some(e) = self.entries.remove(key) {
            self.lru.remove(&e.tick);
            self.bytes -= e.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::wire::ContentFormat;

    fn k(i: u8) -> Key {
        Key(vec![i])
    }

    fn content(body: &str, max_age: Option<u32>) -> Response {
        let r = Response::content(ContentFormat::TEXT_PLAIN, body.as_bytes().to_vec());
        match max_age {
            Some(a) => r.with_max_age(a),
            None => r,
        }
    }

    #[test]
    fn fresh_then_stale_then_gone() {
        let mut c = Cache::new(4, 10_000);
        let t0 = Instant::from_secs(100);
        assert!(c.insert(k(1), "coap://h/a", &content("x", Some(10)), t0));
        match c.lookup(&k(1), t0 + Duration::from_secs(4)) {
            Lookup::Fresh(r) => assert_eq!(r.options.max_age(), Some(6), "Max-Age less the time in the cache"),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.lookup(&k(1), t0 + Duration::from_secs(10)), Lookup::Miss, "stale without ETag");
        assert!(c.is_empty());
        // Default Max-Age 60; with an ETag the stale entry stays for revalidation.
        let tagged = content("y", None).with_option(OptionNumber::ETAG, b"v1");
        assert!(c.insert(k(2), "coap://h/b", &tagged, t0));
        assert!(matches!(c.lookup(&k(2), t0 + Duration::from_secs(59)), Lookup::Fresh(_)));
        assert_eq!(c.lookup(&k(2), t0 + Duration::from_secs(60)), Lookup::Stale { etag: b"v1".to_vec() });
        let valid = Response::new(Code::VALID).with_option(OptionNumber::ETAG, b"v1").with_max_age(30);
        let r = c.refresh(&k(2), &valid, t0 + Duration::from_secs(61)).unwrap();
        assert_eq!((r.payload_text().as_ref(), r.options.max_age()), ("y", Some(30)));
        assert!(matches!(c.lookup(&k(2), t0 + Duration::from_secs(90)), Lookup::Fresh(_)));
    }

    #[test]
    fn bounded_by_entries_and_bytes_lru_first() {
        let mut c = Cache::new(2, 10_000);
        let t = Instant::from_secs(1);
        c.insert(k(1), "a", &content("1", None), t);
        c.insert(k(2), "b", &content("2", None), t);
        assert!(matches!(c.lookup(&k(1), t), Lookup::Fresh(_)), "touch 1: 2 is now the oldest");
        c.insert(k(3), "c", &content("3", None), t);
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(&k(2), t), Lookup::Miss);
        let mut small = Cache::new(100, 40);
        assert!(!small.insert(k(1), "a", &content(&"x".repeat(64), None), t), "larger than the cache");
        for i in 0..10 {
            small.insert(k(i), "a", &content("0123456789", None), t);
            assert!(small.bytes() <= 40);
        }
        let held = small.len();
        assert!(held >= 2);
        assert_eq!(small.invalidate("a"), held);
        assert_eq!((small.len(), small.bytes()), (0, 0));
    }

    #[test]
    fn listing_is_most_recent_first_and_bounded_and_clear_empties() {
        let mut c = Cache::new(8, 10_000);
        let t = Instant::from_secs(1);
        c.insert(k(1), "coap://h/a", &content("1", Some(30)), t);
        c.insert(k(2), "coap://h/b", &content("2", None).with_option(OptionNumber::ETAG, b"e"), t);
        assert!(matches!(c.lookup(&k(1), t), Lookup::Fresh(_)), "touch a: it is now the most recent");
        let l = c.listing(t + Duration::from_secs(10), 8);
        assert_eq!(l.iter().map(|e| e.target.as_str()).collect::<Vec<_>>(), ["coap://h/a", "coap://h/b"]);
        assert_eq!((l[0].fresh_s, l[0].etag, l[0].content_format), (20, false, Some(0)));
        assert_eq!((l[1].fresh_s, l[1].etag), (50, true));
        assert_eq!(c.listing(t, 1).len(), 1);
        assert_eq!(c.listing(t + Duration::from_secs(100), 8)[1].fresh_s, 0, "stale, kept for its ETag");
        assert_eq!(c.clear(), 2);
        assert_eq!((c.len(), c.bytes(), c.listing(t, 8).len()), (0, 0, 0));
    }

    #[test]
    fn only_content_is_stored() {
        let mut c = Cache::new(4, 10_000);
        let t = Instant::from_secs(1);
        assert!(!c.insert(k(1), "a", &Response::new(Code::CHANGED), t));
        assert!(!c.insert(k(1), "a", &Response::error(Code::NOT_FOUND, "x"), t));
        assert!(!c.insert(k(1), "a", &content("x", Some(0)), t), "Max-Age 0 is not cacheable");
        assert!(c.is_empty());
    }
}
