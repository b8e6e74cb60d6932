//! RFC 7252 datagrams: whatever `Packet::new_checked` accepts must read back without panicking, and its owned form
//! must encode to bytes that parse to the same message.
#![no_main]

use corral_wire::{Message, Packet};
use libfuzzer_sys::fuzz_target;
use std::hint::black_box;

fuzz_target!(|data: &[u8]| {
    let _ = black_box(Packet::<&[u8]>::peek_header(data));
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let mut previous = 0u16;
    let mut count = 0usize;
    for (number, value) in packet.options() {
        assert!(number.0 >= previous, "options come out in ascending order");
        previous = number.0;
        count += 1;
        black_box(value);
    }
    black_box((packet.mtype(), packet.code(), packet.message_id(), packet.token(), packet.payload()));

    let owned = packet.to_owned();
    assert_eq!(owned.options.len(), count);
    assert_eq!(owned.payload, packet.payload());
    let bytes = owned.encode();
    assert_eq!(bytes.len(), owned.encoded_len());
    // Not necessarily the input bytes (extended lengths may have been non-minimal), but the same message.
    let again = Message::parse(&bytes).expect("a re-encoded valid message parses");
    assert_eq!(again, owned);
    assert_eq!(Message::parse(data).as_ref(), Ok(&owned));
});
