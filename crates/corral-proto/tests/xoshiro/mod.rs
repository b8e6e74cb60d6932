//! The attack that broke the old generator, a xoshiro256** stream, shared by the tests that show it no
//! longer works (corral-proto's `unpredictable.rs`, corral's `attack_proxy.rs`): its output function is
//! invertible, so each 64-bit output gives the state word `s1` it was made from, and `s1` at successive
//! steps is a linear function (over GF(2)) of the 256-bit state. Four outputs make 256 equations; Gaussian
//! elimination gives the state, and the state gives every later output.
#![allow(dead_code)]

/// A linear combination of the 256 bits of the initial state.
type Bits = [u64; 4];
/// A 64-bit word of the generator's state, each bit a combination of initial bits.
type Word = [Bits; 64];

fn xor(a: &Word, b: &Word) -> Word {
    std::array::from_fn(|i| std::array::from_fn(|k| a[i][k] ^ b[i][k]))
}

fn shl(a: &Word, n: usize) -> Word {
    std::array::from_fn(|i| if i >= n { a[i - n] } else { [0; 4] })
}

fn rotl(a: &Word, n: usize) -> Word {
    std::array::from_fn(|i| a[(i + 64 - n) % 64])
}

/// One xoshiro256** step on a state (symbolic or concrete), as the old `corral_proto::Rng` made it.
fn step_symbolic(s: &mut [Word; 4]) {
    let t = shl(&s[1], 17);
    s[2] = xor(&s[2], &s[0]);
    s[3] = xor(&s[3], &s[1]);
    s[1] = xor(&s[1], &s[2]);
    s[0] = xor(&s[0], &s[3]);
    s[2] = xor(&s[2], &t);
    s[3] = rotl(&s[3], 45);
}

/// One xoshiro256** step: the output, and the state advanced.
pub fn step(s: &mut [u64; 4]) -> u64 {
    let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
    let t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3].rotate_left(45);
    out
}

/// The multiplicative inverse of an odd number modulo 2^64 (Newton's iteration).
fn inverse(a: u64) -> u64 {
    let mut x = a;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
    }
    x
}

/// The xoshiro256** state that produced `outputs` — one every `stride` outputs of the generator (the
/// endpoint may draw for other purposes between two values the attacker sees) — if the equations determine
/// one, advanced past the last of them: `step` on it gives the generator's next outputs.
pub fn recover(outputs: &[u64], stride: usize) -> Option<[u64; 4]> {
    let (inv9, inv5) = (inverse(9), inverse(5));
    let mut sym: [Word; 4] =
        std::array::from_fn(|w| std::array::from_fn(|b| std::array::from_fn(|k| if k == w { 1 << b } else { 0 })));
    let mut rows: Vec<(Bits, bool)> = Vec::new();
    for &o in outputs {
        let s1 = o.wrapping_mul(inv9).rotate_right(7).wrapping_mul(inv5);
        for (b, bits) in sym[1].iter().enumerate() {
            rows.push((*bits, s1 >> b & 1 == 1));
        }
        for _ in 0..stride {
            step_symbolic(&mut sym);
        }
    }
    // Gauss-Jordan elimination over GF(2).
    let mut pivot_of = [usize::MAX; 256];
    let mut r = 0;
    for (var, pivot_row) in pivot_of.iter_mut().enumerate() {
        let (k, bit) = (var / 64, 1u64 << (var % 64));
        let Some(p) = (r..rows.len()).find(|&i| rows[i].0[k] & bit != 0) else { continue };
        rows.swap(r, p);
        let pivot = rows[r];
        for (i, row) in rows.iter_mut().enumerate() {
            if i != r && row.0[k] & bit != 0 {
                row.0 = std::array::from_fn(|j| row.0[j] ^ pivot.0[j]);
                row.1 ^= pivot.1;
            }
        }
        *pivot_row = r;
        r += 1;
    }
    if pivot_of.contains(&usize::MAX) || rows[r..].iter().any(|row| row.1) {
        return None; // not determined, or no xoshiro state makes these outputs
    }
    let mut state = [0u64; 4];
    for (var, &p) in pivot_of.iter().enumerate() {
        state[var / 64] |= u64::from(rows[p].1) << (var % 64);
    }
    for _ in 0..(outputs.len() - 1) * stride + 1 {
        step(&mut state);
    }
    Some(state)
}

/// The output the attacker sees next, `stride` outputs after the last of `outputs` (see [`recover`]).
pub fn predict_next(outputs: &[u64], stride: usize) -> Option<u64> {
    let mut state = recover(outputs, stride)?;
    for _ in 1..stride {
        step(&mut state);
    }
    Some(step(&mut state))
}
