//! The fragment header (`fastmsg::internal::frame`), as it arrives in a ring
//! trailer: the 40 trailer bytes parse and re-encode to the same bytes,
//! and `FragHeader::check` accepts exactly the headers its contract
//! describes and, when it refuses, names the first bad field.

#![no_main]

use fastmsg::error::ProtocolError;
use fastmsg::internal::frame::FragFlags;
use fastmsg::internal::ring::{Trailer, TRAILER_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, u32, [u8; TRAILER_BYTES])| {
    let (world, max_len, bytes) = input;
    let world = u32::from(world);
    let max_len = (max_len % (1 << 25)) as usize;

    // Any 40 bytes parse, and re-encode to themselves.
    let t = Trailer::from_bytes(&bytes);
    assert_eq!(t.to_bytes(), bytes, "trailer round trip");
    let h = t.body.header;

    // The model of `check`: the first rule broken, in the documented order.
    let first = h.flags().contains(FragFlags::FIRST);
    let expected = if h.src >= world {
        Some("source")
    } else if h.flags & !15 != 0 {
        Some("flags")
    } else if h.len as usize > max_len {
        Some("length")
    } else if first && u64::from(h.len) > h.total {
        Some("total")
    } else {
        None
    };
    match (h.check(world, max_len), expected) {
        (Ok(()), None) => {}
        (Err(ProtocolError::BadSource { src, world: w }), Some("source")) => {
            assert_eq!((src, w), (h.src, world));
        }
        (Err(ProtocolError::BadFlags { src, flags }), Some("flags")) => {
            assert_eq!((src, flags), (h.src, h.flags));
        }
        (Err(ProtocolError::FrameTooLong { src, len, max }), Some("length")) => {
            assert_eq!((src, len, max), (h.src, h.len as usize, max_len));
        }
        (Err(ProtocolError::LengthMismatch { src, total, got }), Some("total")) => {
            assert_eq!((src, total, got), (h.src, h.total, u64::from(h.len)));
        }
        (got, want) => panic!("check({h:?}, {world}, {max_len}) = {got:?}, model says {want:?}"),
    }
});
