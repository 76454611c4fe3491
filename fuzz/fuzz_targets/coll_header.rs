//! The collectives' message header (`fastmsg_handlers::internal::wire`):
//! any 12 bytes or more parse and the header re-emits to the same first
//! 11 bytes (the 12th is reserved), emit then parse is the identity, and
//! shorter messages are refused with the typed `ShortMessage` error.

#![no_main]

use fastmsg::Rank;
use fastmsg_handlers::internal::wire::{emit, kind_name, parse, HEADER};
use fastmsg_handlers::CollError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u32, u16, u8, Vec<u8>)| {
    let (group, step, kind, bytes) = input;
    let src = Rank(2);
    match parse(src, &bytes) {
        Ok(f) => {
            assert!(bytes.len() >= HEADER);
            assert_eq!(emit(f)[..11], bytes[..11], "re-emitted header");
            assert!(!kind_name(f.3).is_empty());
        }
        Err(CollError::ShortMessage { src: s, len, need }) => {
            assert_eq!((s, len, need), (src, bytes.len(), HEADER));
            assert!(bytes.len() < HEADER);
        }
        Err(e) => panic!("untyped refusal {e}"),
    }
    let f = (group, u32::from(step) * 7, step, kind);
    assert_eq!(parse(src, &emit(f)).ok(), Some(f), "emit then parse");
});
