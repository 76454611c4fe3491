//! The collectives' message header (`fastmsg_handlers::internal::wire`):
//! any 12 bytes or more parse and the header re-emits to the same 12
//! bytes, emit then parse is the identity, and
//! shorter messages are refused with the typed `ShortMessage` error.

#![no_main]

use fastmsg::Rank;
use fastmsg_handlers::internal::wire::{emit, kind_name, parse, HEADER};
use fastmsg_handlers::CollError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u32, u16, u8, u16, Vec<u8>)| {
    let (group, step, kind, sig, bytes) = input;
    let src = Rank(2);
    match parse(src, &bytes) {
        Ok(f) => {
            assert!(bytes.len() >= HEADER);
            assert_eq!(emit(f)[..], bytes[..HEADER], "re-emitted header");
            assert!(!kind_name(f.3).is_empty());
        }
        Err(CollError::ShortMessage { src: s, len, need }) => {
            assert_eq!((s, len, need), (src, bytes.len(), HEADER));
            assert!(bytes.len() < HEADER);
        }
        Err(e) => panic!("untyped refusal {e}"),
    }
    let step = step % 256; // one byte on the wire
    let f = (group, u32::from(step) * 7, step, kind, sig);
    assert_eq!(parse(src, &emit(f)).ok(), Some(f), "emit then parse");
});
