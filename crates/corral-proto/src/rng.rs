//! The seeded random number generators corral's state machines draw from — two of them, for two kinds
//! of values.
//!
//! - [`SecretRng`]: ChaCha20 keyed with a 256-bit seed (RustCrypto's `chacha20`), for every value an
//!   off-path attacker sees and must not predict: tokens (RFC 7252 §5.3.1), the first message ID towards
//!   each peer, Echo values (RFC 9175 §2.4), Request-Tags (RFC 9175 §3), and the keys of the endpoint's
//!   hash tables. Its output does not reveal its key, so no number of observed values predicts the next.
//!   The runtime keys it from the operating system (`corral_tokio::os_seeded`); the simulator and the
//!   tests derive the key from their `u64` seed ([`SecretRng::from_u64`]), so runs stay reproducible.
//! - [`Rng`]: xoshiro256** seeded through SplitMix64 — small, fast, reproducible — for choices that are
//!   not secret: back-off jitter (ACK_RANDOM_FACTOR), multicast leisure, the first Observe sequence
//!   number, the services' own streams and everything the simulator randomises. It is **not**
//!   cryptographic: each output gives away a word of its state, and four outputs give all of it (a
//!   linear system over GF(2)), so nothing an attacker could use may ever come from it.

/// A deterministic RNG. The same seed always yields the same sequence.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        Rng { s: [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)] }
    }

    /// An independent stream derived from this seed and a stream number (per node, per channel, …).
    pub fn stream(seed: u64, stream: u64) -> Rng {
        let mut sm = seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03);
        let s = splitmix64(&mut sm);
        Rng::new(s ^ stream)
    }

    /// Splits off a child generator (advances this one).
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    pub fn next_u16(&mut self) -> u16 {
        (self.next_u64() >> 48) as u16
    }

    /// Uniform in `[0, 1)`.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, n)`; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the bias is below 2^-64 · n, irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[lo, hi]` (inclusive).
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// A cryptographically secure generator (ChaCha20) for the values an off-path attacker must not predict;
/// see the module docs for which values those are.
pub struct SecretRng(chacha20::ChaCha20Rng);

impl SecretRng {
    /// Keyed with a 256-bit seed (from the OS on real sockets), on one of the key's independent streams
    /// (an endpoint and its TCP endpoint share a key, each on a stream of its own).
    pub fn new(key: [u8; 32], stream: u64) -> SecretRng {
        use chacha20::rand_core::SeedableRng;
        let mut rng = chacha20::ChaCha20Rng::from_seed(key);
        rng.set_stream(stream);
        SecretRng(rng)
    }

    /// Keyed deterministically from a 64-bit seed: for the simulator and tests, whose runs must repeat.
    /// Never for real sockets: 64 bits of key can be searched.
    pub fn from_u64(seed: u64, stream: u64) -> SecretRng {
        let mut sm = seed ^ 0x5ec2_e75e_ed00_0000;
        let mut key = [0u8; 32];
        for chunk in key.chunks_mut(8) {
            chunk.copy_from_slice(&splitmix64(&mut sm).to_le_bytes());
        }
        SecretRng::new(key, stream)
    }

    /// The key if there is one, else derived from `seed` (see [`SecretRng::from_u64`]).
    pub fn keyed(key: Option<[u8; 32]>, seed: u64, stream: u64) -> SecretRng {
        match key {
            Some(k) => SecretRng::new(k, stream),
            None => SecretRng::from_u64(seed, stream),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        chacha20::rand_core::Rng::next_u64(&mut self.0)
    }

    pub fn next_u16(&mut self) -> u16 {
        (chacha20::rand_core::Rng::next_u32(&mut self.0) >> 16) as u16
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        chacha20::rand_core::Rng::fill_bytes(&mut self.0, out)
    }
}

impl std::fmt::Debug for SecretRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretRng(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_streams_are_deterministic_per_key_and_distinct() {
        let (mut a, mut b) = (SecretRng::from_u64(7, 0), SecretRng::from_u64(7, 0));
        assert_eq!(a.next_u64(), b.next_u64());
        let (mut s0, mut s1) = (SecretRng::new([1; 32], 0), SecretRng::new([1; 32], 1));
        assert_ne!(s0.next_u64(), s1.next_u64());
        assert_ne!(SecretRng::from_u64(7, 0).next_u64(), SecretRng::from_u64(8, 0).next_u64());
    }

    #[test]
    fn deterministic_and_distinct_streams() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut s1 = Rng::stream(7, 1);
        let mut s2 = Rng::stream(7, 2);
        assert_ne!(s1.next_u64(), s2.next_u64());
    }

    #[test]
    fn ranges() {
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            let v = r.range_inclusive(10, 20);
            assert!((10..=20).contains(&v));
            let f = r.f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert_eq!(r.below(0), 0);
    }
}
