//! The handler-name table each rank sends rank 0 at start
//! (`fastmsg::internal::handler_table`): any table encodes and decodes to
//! itself (so two different tables can never compare equal on the wire),
//! any bytes either decode to a table that encodes back to exactly those
//! bytes or are refused with a typed error naming the sender, and
//! `first_difference` finds the first index where two tables differ.

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::ProtocolError;
use fastmsg::internal::handler_table::{decode, encode, first_difference};
use fastmsg::Rank;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    names: Vec<String>,
    other: Vec<String>,
    bytes: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let src = Rank(3);
    let enc = encode(&input.names);
    assert_eq!(
        decode(src, &enc).as_ref(),
        Ok(&input.names),
        "round trip of {enc:?}"
    );
    match decode(src, &input.bytes) {
        Ok(t) => assert_eq!(encode(&t), input.bytes, "decoded {t:?}"),
        Err(ProtocolError::BadControl { src: s, what }) => {
            assert_eq!(s, src.0);
            assert!(!what.is_empty());
        }
        Err(e) => panic!("untyped refusal {e:?}"),
    }
    let (a, b) = (&input.names, &input.other);
    match first_difference(a, b) {
        None => assert_eq!(a, b),
        Some((i, x, y)) => {
            let i = i as usize;
            assert_eq!(a[..i], b[..i], "differs only from {i}");
            assert_ne!(a.get(i), b.get(i));
            assert_eq!((x.as_ref(), y.as_ref()), (a.get(i), b.get(i)));
        }
    }
});
