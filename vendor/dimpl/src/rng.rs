//! Seedable random number generator for deterministic testing.
//!
//! When a seed is provided via [`Config::rng_seed`], all non-cryptographic
//! randomness will be deterministic. This is useful for testing and debugging.
//!
//! corral patch: or a 256-bit key ([`Config::rng_key`]): then *all* of an instance's randomness —
//! randoms, nonces, the cookie secret, timer jitter and (through
//! [`crate::crypto::SupportedKxGroup::start_exchange_with_rng`]) its ECDHE keys — comes from ChaCha20
//! keyed with it. A key from a CSPRNG keeps every value unpredictable; a key derived from a
//! simulation's seed makes the instance's bytes repeat exactly. The generator is a CSPRNG
//! ([`rand::TryCryptoRng`]) so that key generation may draw from it.

use std::convert::Infallible;

use rand::distr::{Distribution, StandardUniform};
use rand::rngs::{ChaCha20Rng, StdRng};
use rand::{Rng as _, RngExt, SeedableRng, TryCryptoRng, TryRng};

use crate::Config;

/// A random number generator that can be seeded for deterministic behavior.
///
/// When created with a seed, it produces deterministic random values.
/// When created without a seed, it uses the thread-local random generator.
pub struct SeededRng {
    inner: Inner,
}

/// corral patch: where the values come from.
enum Inner {
    /// The thread-local generator (a CSPRNG seeded from the OS).
    Thread,
    /// `Config::rng_seed`: 64 bits, for tests.
    Seeded(StdRng),
    /// `Config::rng_key`: ChaCha20 keyed with 256 bits.
    Keyed(ChaCha20Rng),
}

impl SeededRng {
    /// Create a new RNG with an optional seed.
    ///
    /// If `seed` is `Some`, the RNG will produce deterministic values.
    /// If `seed` is `None`, it will use the thread-local random generator.
    pub fn new(seed: Option<u64>) -> Self {
        let inner = seed.map_or(Inner::Thread, |s| Inner::Seeded(StdRng::seed_from_u64(s)));
        Self { inner }
    }

    /// corral patch: the generator `config` asks for: keyed ([`Config::rng_key`]) before seeded
    /// ([`Config::rng_seed`]) before the thread-local one.
    pub fn for_config(config: &Config) -> Self {
        match config.rng_key() {
            Some(key) => Self { inner: Inner::Keyed(ChaCha20Rng::from_seed(key)) },
            None => Self::new(config.rng_seed()),
        }
    }

    /// Generate a random value of type T.
    pub fn random<T>(&mut self) -> T
    where
        StandardUniform: Distribution<T>,
    {
        match &mut self.inner {
            Inner::Thread => rand::random(),
            Inner::Seeded(rng) => rng.random(),
            Inner::Keyed(rng) => rng.random(),
        }
    }
}

/// corral patch: a source of bytes for key generation (see the module docs).
impl TryRng for SeededRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.random())
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.random())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        match &mut self.inner {
            Inner::Thread => rand::rng().fill_bytes(dst),
            Inner::Seeded(rng) => rng.fill_bytes(dst),
            Inner::Keyed(rng) => rng.fill_bytes(dst),
        }
        Ok(())
    }
}

/// corral patch: each source is a CSPRNG (ChaCha); a 64-bit seed is as guessable as its seed, which is
/// why it is `dangerously_set_rng_seed`.
impl TryCryptoRng for SeededRng {}

impl std::fmt::Debug for SeededRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let is_seeded = !matches!(self.inner, Inner::Thread);
        f.debug_struct("SeededRng").field("seeded", &is_seeded).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_rng_is_deterministic() {
        let mut rng1 = SeededRng::new(Some(12345));
        let mut rng2 = SeededRng::new(Some(12345));

        let values1: [u8; 10] = [
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
            rng1.random(),
        ];

        let values2: [u8; 10] = [
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
            rng2.random(),
        ];

        assert_eq!(values1, values2, "Same seed should produce same values");
    }

    #[test]
    fn different_seeds_produce_different_values() {
        let mut rng1 = SeededRng::new(Some(12345));
        let mut rng2 = SeededRng::new(Some(54321));

        let value1: u64 = rng1.random();
        let value2: u64 = rng2.random();

        assert_ne!(value1, value2, "Different seeds should produce different values");
    }
}
