//! Issue 26 item 2: the values a peer sees and must not guess (Echo values here, tokens and first message
//! IDs alike) cannot be predicted from the ones it saw.
//!
//! The attack is the one that broke the old generator, a xoshiro256** stream: its output function is
//! invertible, so each 64-bit output gives the state word `s1` it was made from, and `s1` at successive
//! steps is a linear function (over GF(2)) of the 256-bit state. Four outputs make 256 equations; Gaussian
//! elimination gives the state, and the state gives every later output. Against the old endpoint the
//! attacker predicted the next Echo value — sent to a spoofed victim, it made the victim count as
//! verified. Against a CSPRNG the recovered "state" predicts nothing.

use corral_proto::wire::{Code, Message, MessageId, MessageType, OptionNumber, Token};
use corral_proto::{Endpoint, EndpointConfig, Event, Instant};
use std::net::SocketAddr;

/// Outputs the attacker uses: four determine the state when they are consecutive; a few more when the
/// endpoint draws for something else between two of them.
const WINDOW: usize = 6;

mod xoshiro;
use xoshiro::{predict_next, step};

/// Echo values a real endpoint gives, one per request it challenges (RFC 9175 §2.4), each from a port of
/// the attacker's own (one peer gets the same value again while it is young).
fn echo_values(seed: u64, n: usize) -> Vec<u64> {
    let mut ep = Endpoint::new(EndpointConfig::with_seed(seed));
    let mut values = Vec::new();
    for i in 0..n {
        let peer = SocketAddr::from(([192, 0, 2, 7], 40000 + i as u16));
        let now = Instant::from_millis(i as u64);
        let mut m = Message::new(MessageType::Non, Code::GET, MessageId(i as u16), Token::new(&[i as u8]).unwrap());
        m.options.set_path("/x");
        // Large enough that each challenge fits the reflection credit the request earns.
        m.payload = vec![0; 40];
        ep.handle_datagram(now, peer, None, &m.encode());
        while let Some(e) = ep.poll_event() {
            if let Event::Request(r) = e {
                ep.challenge(now, r.id).unwrap();
            }
        }
        while let Some(t) = ep.poll_transmit() {
            let reply = Message::parse(&t.payload).unwrap();
            assert_eq!(reply.code, Code::UNAUTHORIZED);
            let echo = reply.options.get(OptionNumber::ECHO).expect("an Echo value");
            values.push(u64::from_be_bytes(echo.try_into().expect("8 bytes")));
        }
    }
    assert_eq!(values.len(), n, "every request challenged");
    values
}

#[test]
fn the_attack_recovers_a_xoshiro_stream() {
    // The attack itself works: on a bare xoshiro256** stream it predicts every next output.
    let mut s = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210, 0x0f0f_0f0f_0f0f_0f0f, 0xdead_beef_cafe_f00d];
    let outputs: Vec<u64> = (0..21).map(|_| step(&mut s)).collect();
    assert_eq!(predict_next(&outputs[..4], 1), Some(outputs[4]));
    for stride in 2..=3 {
        let seen: Vec<u64> = outputs.iter().step_by(stride).copied().collect();
        assert_eq!(predict_next(&seen[..WINDOW], stride), Some(seen[WINDOW]), "stride {stride}");
    }
}

#[test]
fn observed_echo_values_do_not_predict_the_next_one() {
    for seed in [1u64, 42, 0xdead_beef] {
        let values = echo_values(seed, 16);
        for w in 0..values.len() - WINDOW {
            for stride in 1..=3 {
                let predicted = predict_next(&values[w..w + WINDOW], stride);
                assert_ne!(
                    predicted,
                    Some(values[w + WINDOW]),
                    "seed {seed}: Echo values {:x?} predicted the next one (stride {stride})",
                    &values[w..w + WINDOW]
                );
            }
        }
    }
}

/// What a service draws with `Context::secret_u64` (ids it hands out, so that nobody can guess another
/// client's): drawn from the endpoint's SecretRng, so the attack that recovers a xoshiro stream from a few
/// outputs predicts nothing; the same seed repeats the same values (the simulator's runs repeat).
#[test]
fn service_secret_draws_do_not_predict_the_next_one_and_repeat_under_a_seed() {
    use corral_proto::{Context, IncomingRequest, Node, Service};
    struct Quiet;
    impl Service for Quiet {
        fn handle_request(&mut self, _cx: &mut Context<'_>, _req: IncomingRequest) {}
    }
    let draws = |seed: u64| {
        let mut node = Node::new(Endpoint::new(EndpointConfig::with_seed(seed)));
        let h = node.mount("", Quiet);
        (0..16)
            .map(|i| node.with_service(Instant::from_millis(i), h, |_: &mut Quiet, cx| cx.secret_u64()).unwrap())
            .collect::<Vec<u64>>()
    };
    for seed in [1u64, 42, 0xdead_beef] {
        let values = draws(seed);
        assert_eq!(values, draws(seed), "seed {seed}: the same seed, the same draws");
        for w in 0..values.len() - WINDOW {
            for stride in 1..=3 {
                let predicted = predict_next(&values[w..w + WINDOW], stride);
                assert_ne!(predicted, Some(values[w + WINDOW]), "seed {seed}: predicted (stride {stride})");
            }
        }
    }
    assert_ne!(draws(1), draws(2));
}
