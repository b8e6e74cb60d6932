//! OSCORE on hostile bytes: any OSCORE option value and ciphertext, as a request to a server context and
//! as a response to a client's request, must be refused with an error, never a panic.
#![no_main]
use corral_oscore::{OscoreOption, Params, Plain, RequestBinding, SecurityContext};
use corral_wire::{Code, OptionNumber, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| usize::from(b) % (data.len().max(1)));
    let (option, payload) = data.get(1..).unwrap_or_default().split_at(split.min(data.len().saturating_sub(1)));
    let _ = OscoreOption::decode(option);
    let mut o = Options::new();
    o.push(OptionNumber::OSCORE, option);
    let p = Plain { code: Code::POST, options: o, payload: payload.to_vec() };
    let secret = b"fuzzing master secret";
    let mut server = SecurityContext::derive(Params::new(secret, &[2], &[1])).unwrap();
    let _ = server.unprotect_request(&p);
    let mut client = SecurityContext::derive(Params::new(secret, &[1], &[2])).unwrap();
    let binding = RequestBinding { kid: vec![1], piv: vec![0], observe: data.len() % 2 == 0 };
    let _ = client.unprotect_response(&binding, &p);
});
