//! Transitions of the receive state machine, driven as the engine drives
//! it: feed a fragment, perform the returned action by hand, report back.

use super::*;
use crate::endpoint::engine::handler::MAX_TABLE_BYTES;
use crate::frame::FragHeader;

const SRC: u32 = 3;
const F: FragFlags = FragFlags::FIRST;
const L: FragFlags = FragFlags::LAST;
const MID: FragFlags = FragFlags(0);
const SYS: FragFlags = FragFlags::SYSTEM;
const ABORT: FragFlags = FragFlags::ABORT;
/// Handler 0 is async, handler 1 a plain function.
const KINDS: [bool; 2] = [false, true];
const ASYNC: u32 = 0;
const FN: u32 = 1;

fn frag(handler: u32, data: &[u8], flags: FragFlags, total: u64) -> RxFragment {
    let h = FragHeader {
        src: SRC,
        handler,
        len: data.len() as u32,
        flags: flags.0,
        total,
    };
    RxFragment::leaked(h, data)
}

fn streams() -> Streams {
    Streams::new(SRC + 1, KINDS.to_vec())
}

fn stream(s: &mut Streams) -> &mut SourceStream {
    s.get_mut(Rank(SRC)).unwrap()
}

/// Accept, expecting success.
fn ok(s: &mut Streams, f: RxFragment) -> Action {
    match s.accept(f) {
        Ok(a) => a,
        Err(r) => panic!("rejected: {:?}", r.error),
    }
}

/// Accept, expecting a rejection; returns the error (the fragment is
/// handed back, as the engine releases it).
fn rejected(s: &mut Streams, f: RxFragment) -> ProtocolError {
    match s.accept(f) {
        Ok(a) => panic!("accepted: {a:?}"),
        Err(r) => r.error,
    }
}

fn bytes(used: Used<'_>) -> Vec<Vec<u8>> {
    used.map(|f| f.bytes().to_vec()).collect()
}

#[test]
fn the_fast_path_is_decided_in_one_place() {
    let mut s = streams();
    let whole = |h, d: &[u8]| frag(h, d, F | L, d.len() as u64).header;
    assert_eq!(s.fast(&whole(FN, b"ab")), Fast::Piece);
    assert_eq!(s.fast(&whole(ASYNC, b"ab")), Fast::Async);
    assert_eq!(s.fast(&whole(7, b"ab")), Fast::No, "unknown handler");
    assert_eq!(s.fast(&frag(FN, b"ab", F, 4).header), Fast::No, "not whole");
    assert_eq!(s.fast(&frag(FN, b"ab", F | L, 4).header), Fast::No, "short");
    assert_eq!(
        s.fast(&frag(FN, b"ab", F | L | SYS, 2).header),
        Fast::No,
        "control"
    );
    assert_eq!(
        s.fast(&frag(FN, b"ab", F | L | ABORT, 2).header),
        Fast::No,
        "aborted"
    );
    // Not idle: a message is open.
    assert!(matches!(
        ok(&mut s, frag(FN, b"a", F, 3)),
        Action::Piece(..)
    ));
    assert_eq!(s.fast(&whole(FN, b"ab")), Fast::No);
}

#[test]
fn an_async_message_streams_and_releases_in_order() {
    let mut s = streams();
    let Action::Start(start) = ok(&mut s, frag(ASYNC, b"abc", F, 7)) else {
        panic!("an async message starts its handler")
    };
    assert_eq!((start.handler, start.total), (HandlerId(ASYNC), 7));
    let st = stream(&mut s);
    st.suspend(Slot(5));
    let mut buf = [0u8; 5];
    let (r, used) = st.read(start.seq, &mut buf).unwrap();
    assert_eq!(bytes(used), vec![b"abc".to_vec()]);
    assert_eq!((r.n, r.finished, r.aborted), (3, false, false));
    assert_eq!(st.available(start.seq), Some(0));
    for (data, flags) in [(&b"de"[..], MID), (b"fg", L)] {
        match ok(&mut s, frag(ASYNC, data, flags, 7)) {
            Action::Resume { handler, slot } => assert_eq!((handler.0, slot), (ASYNC, Slot(5))),
            other => panic!("a suspended handler is resumed: {other:?}"),
        }
    }
    let st = stream(&mut s);
    assert_eq!(st.available(start.seq), Some(4));
    let (r, used) = st.read(start.seq, &mut buf[3..]).unwrap();
    assert_eq!((r.n, r.finished), (2, false));
    assert_eq!(bytes(used), vec![b"de".to_vec()]);
    assert_eq!(&buf, b"abcde");
    let mut rest = [0u8; 8];
    let (r, used) = st.read(start.seq, &mut rest).unwrap();
    assert_eq!((r.n, r.finished, r.aborted), (2, true, false));
    assert_eq!(bytes(used), vec![b"fg".to_vec()]);
    assert_eq!(st.finish_current().count(), 0);
    assert!(matches!(st.next(), Action::Wait));
    assert!(
        st.read(start.seq, &mut rest).is_none(),
        "stale after return"
    );
    assert_eq!(
        s.fast(&frag(FN, b"x", F | L, 1).header),
        Fast::Piece,
        "idle"
    );
}

#[test]
fn an_early_return_discards_the_rest_of_the_message() {
    let mut s = streams();
    assert!(matches!(
        ok(&mut s, frag(ASYNC, b"ab", F, 6)),
        Action::Start(_)
    ));
    let unread = bytes(stream(&mut s).finish_current());
    assert_eq!(
        unread,
        vec![b"ab".to_vec()],
        "its unread fragment is released"
    );
    assert!(matches!(stream(&mut s).next(), Action::Wait));
    assert_eq!(
        s.fast(&frag(FN, b"x", F | L, 1).header),
        Fast::No,
        "discarding"
    );
    for (data, flags) in [(&b"cd"[..], MID), (b"ef", L)] {
        match ok(&mut s, frag(ASYNC, data, flags, 6)) {
            Action::Release(f) => assert_eq!(f.bytes(), data),
            other => panic!("discarded fragments are released: {other:?}"),
        }
    }
    assert!(matches!(
        ok(&mut s, frag(ASYNC, b"x", F | L, 1)),
        Action::Start(_)
    ));
}

#[test]
fn a_first_fragment_while_discarding_is_a_typed_error() {
    let mut s = streams();
    assert!(matches!(
        ok(&mut s, frag(ASYNC, b"ab", F, 6)),
        Action::Start(_)
    ));
    let _ = stream(&mut s).finish_current().count();
    assert_eq!(
        rejected(&mut s, frag(ASYNC, b"x", F | L, 1)),
        ProtocolError::UnexpectedFirst { src: SRC }
    );
    // The discard is over: the stream is between messages again.
    assert!(matches!(
        ok(&mut s, frag(FN, b"y", F | L, 1)),
        Action::Piece(..)
    ));
}

#[test]
fn bad_sequences_are_typed_errors() {
    let mut s = streams();
    assert_eq!(
        rejected(&mut s, frag(ASYNC, b"a", L, 1)),
        ProtocolError::MissingFirst { src: SRC }
    );
    assert_eq!(
        rejected(&mut s, frag(9, b"a", F | L, 1)),
        ProtocolError::UnknownHandler {
            src: SRC,
            id: 9,
            registered: 2
        }
    );
    assert_eq!(
        rejected(&mut s, frag(ASYNC, b"abc", F | L, 2)),
        ProtocolError::LengthMismatch {
            src: SRC,
            total: 2,
            got: 3
        }
    );
    assert_eq!(
        rejected(&mut s, frag(ASYNC, b"ab", F | L, 3)),
        ProtocolError::LengthMismatch {
            src: SRC,
            total: 3,
            got: 2
        },
        "a whole message shorter than declared and not flagged aborted"
    );
    let Action::Start(start) = ok(&mut s, frag(ASYNC, b"a", F, 4)) else {
        panic!()
    };
    stream(&mut s).suspend(Slot(2));
    assert_eq!(
        rejected(&mut s, frag(ASYNC, b"b", F, 4)),
        ProtocolError::UnexpectedFirst { src: SRC }
    );
    // The broken-off message ended, aborted: its handler is resumed and
    // its read reports the abort instead of waiting for ever.
    let st = stream(&mut s);
    assert!(matches!(st.next(), Action::Resume { slot: Slot(2), .. }));
    let mut buf = [0u8; 4];
    let (r, _) = st.read(start.seq, &mut buf).unwrap();
    assert_eq!(
        r,
        Read {
            n: 1,
            finished: true,
            aborted: true
        }
    );
}

#[test]
fn an_unknown_handler_discards_the_rest_of_its_message() {
    let mut s = streams();
    assert!(matches!(
        rejected(&mut s, frag(9, b"a", F, 3)),
        ProtocolError::UnknownHandler { id: 9, .. }
    ));
    assert!(matches!(
        ok(&mut s, frag(9, b"bc", L, 3)),
        Action::Release(_)
    ));
    assert!(matches!(
        ok(&mut s, frag(FN, b"d", F | L, 1)),
        Action::Piece(..)
    ));
}

#[test]
fn a_continuation_past_the_declared_length_aborts_the_message() {
    let mut s = streams();
    let Action::Piece(_, first) = ok(&mut s, frag(FN, b"ab", F, 3)) else {
        panic!()
    };
    assert!(!stream(&mut s).piece_done(2, first.last, false));
    assert_eq!(
        rejected(&mut s, frag(FN, b"cd", MID, 3)),
        ProtocolError::LengthMismatch {
            src: SRC,
            total: 3,
            got: 4
        }
    );
    // Its plain-function handler gets an empty, aborted last piece...
    let st = stream(&mut s);
    let Action::AbortedEnd(end) = st.next() else {
        panic!("the handler is told")
    };
    assert_eq!(
        (end.offset, end.total, end.last, end.aborted),
        (2, 3, true, true)
    );
    assert!(st.piece_done(0, true, false));
    assert_eq!(st.finish_current().count(), 0);
    // ...and the rest of the message is discarded.
    assert!(matches!(
        ok(&mut s, frag(FN, b"e", L, 3)),
        Action::Release(_)
    ));
    assert!(matches!(
        ok(&mut s, frag(FN, b"f", F | L, 1)),
        Action::Piece(..)
    ));
}

#[test]
fn plain_function_messages_come_out_as_pieces() {
    let mut s = streams();
    let Action::Piece(f, i) = ok(&mut s, frag(FN, b"abc", F, 5)) else {
        panic!()
    };
    assert_eq!(f.bytes(), b"abc");
    assert_eq!(
        (i.handler, i.offset, i.last, i.aborted),
        (HandlerId(FN), 0, false, false)
    );
    assert!(!stream(&mut s).piece_done(3, false, false));
    let Action::Piece(f, i) = ok(&mut s, frag(FN, b"de", L, 5)) else {
        panic!()
    };
    assert_eq!((f.bytes(), i.offset, i.last), (&b"de"[..], 3, true));
    let st = stream(&mut s);
    assert!(st.piece_done(2, true, false));
    assert_eq!(st.finish_current().count(), 0);
    assert!(matches!(st.next(), Action::Wait));
}

#[test]
fn a_failed_piece_ends_its_message_and_discards_the_rest() {
    let mut s = streams();
    assert!(matches!(
        ok(&mut s, frag(FN, b"ab", F, 4)),
        Action::Piece(..)
    ));
    let st = stream(&mut s);
    assert!(st.piece_done(2, false, true), "a failure ends the message");
    assert_eq!(st.finish_current().count(), 0);
    assert!(matches!(
        ok(&mut s, frag(FN, b"cd", L, 4)),
        Action::Release(_)
    ));
}

#[test]
fn messages_queue_behind_a_suspended_handler_and_run_in_order() {
    let mut s = streams();
    assert!(matches!(
        ok(&mut s, frag(ASYNC, b"a", F | L, 1)),
        Action::Start(_)
    ));
    stream(&mut s).suspend(Slot(0));
    // Queued: an async message, then a two-fragment plain-function one.
    assert!(matches!(
        ok(&mut s, frag(ASYNC, b"b", F | L, 1)),
        Action::Wait
    ));
    assert!(matches!(ok(&mut s, frag(FN, b"cd", F, 3)), Action::Wait));
    assert!(matches!(ok(&mut s, frag(FN, b"e", L, 3)), Action::Wait));
    let st = stream(&mut s);
    // The first handler returns without reading: its fragment goes.
    assert_eq!(bytes(st.finish_current()), vec![b"a".to_vec()]);
    let Action::Start(b) = st.next() else {
        panic!("the queued async message starts")
    };
    let mut buf = [0u8; 1];
    let (r, _) = st.read(b.seq, &mut buf).unwrap();
    assert_eq!((r.n, &buf), (1, b"b"));
    assert_eq!(st.finish_current().count(), 0);
    // Then the plain-function message, piece by piece from the stream.
    let Action::Piece(f, i) = st.next() else {
        panic!("its stored pieces are handed out")
    };
    assert_eq!((f.bytes(), i.offset, i.last), (&b"cd"[..], 0, false));
    assert!(!st.piece_done(2, i.last, false));
    let Action::Piece(f, i) = st.next() else {
        panic!()
    };
    assert_eq!((f.bytes(), i.offset, i.last), (&b"e"[..], 2, true));
    assert!(st.piece_done(1, true, false));
    assert_eq!(st.finish_current().count(), 0);
    assert!(matches!(st.next(), Action::Wait));
}

#[test]
fn a_control_message_is_reassembled_and_decoded() {
    let mut s = streams();
    let op = ControlOp::Report.wire();
    for data in [&b"ab"[..], b"cd"] {
        let flags = if data == b"ab" { F | SYS } else { SYS };
        assert!(matches!(
            ok(&mut s, frag(op, data, flags, 5)),
            Action::Release(_)
        ));
    }
    match ok(&mut s, frag(op, b"e", L | SYS, 5)) {
        Action::Control { op, payload, frag } => {
            assert_eq!((op, payload.as_slice()), (ControlOp::Report, &b"abcde"[..]));
            assert_eq!(
                frag.bytes(),
                b"e",
                "the last fragment is released by the engine"
            );
        }
        other => panic!("{other:?}"),
    }
    // A whole one-fragment control message.
    assert!(matches!(
        ok(&mut s, frag(ControlOp::Probe.wire(), b"xy", F | L | SYS, 2)),
        Action::Control {
            op: ControlOp::Probe,
            ..
        }
    ));
}

#[test]
fn bad_control_messages_are_typed_errors() {
    let mut s = streams();
    assert_eq!(
        rejected(&mut s, frag(99, b"ab", F | SYS, 4)),
        ProtocolError::BadControl {
            src: SRC,
            what: "unknown control operation"
        }
    );
    assert!(
        matches!(ok(&mut s, frag(99, b"cd", L | SYS, 4)), Action::Release(_)),
        "the rest of it is discarded"
    );
    let op = ControlOp::Table.wire();
    assert!(matches!(
        ok(&mut s, frag(op, b"ab", F | SYS, 3)),
        Action::Release(_)
    ));
    assert_eq!(
        rejected(&mut s, frag(op, b"cd", L | SYS, 3)),
        ProtocolError::LengthMismatch {
            src: SRC,
            total: 3,
            got: 4
        }
    );
    assert!(matches!(
        ok(&mut s, frag(op, b"ab", F | SYS, 4)),
        Action::Release(_)
    ));
    assert_eq!(
        rejected(&mut s, frag(op, b"c", L | SYS, 4)),
        ProtocolError::LengthMismatch {
            src: SRC,
            total: 4,
            got: 3
        },
        "a control message ending short"
    );
    assert!(matches!(
        ok(&mut s, frag(FN, b"z", F | L, 1)),
        Action::Piece(..)
    ));
}

#[test]
fn a_control_message_announcing_more_than_its_kind_holds_is_refused_at_once() {
    let mut s = streams();
    // A forged first fragment announcing 4 GiB for a round report (26
    // bytes): refused before anything is buffered, naming sender, op and
    // size; its rest is dropped.
    let op = ControlOp::Report.wire();
    assert_eq!(
        rejected(&mut s, frag(op, b"ab", F | SYS, 1 << 32)),
        ProtocolError::ControlTooLong {
            src: SRC,
            op: "round report",
            len: 1 << 32,
            max: 26
        }
    );
    assert!(
        matches!(stream(&mut s).inbound, Inbound::Discarding),
        "nothing is reassembled for it"
    );
    assert!(matches!(
        ok(&mut s, frag(op, b"cd", SYS, 1 << 32)),
        Action::Release(_)
    ));
    assert!(matches!(
        ok(&mut s, frag(op, b"ef", L | SYS, 1 << 32)),
        Action::Release(_)
    ));
    // A handler table past its bound, as one whole forged fragment.
    let table = ControlOp::Table.wire();
    let too_long = MAX_TABLE_BYTES as u64 + 1;
    assert!(matches!(
        rejected(&mut s, frag(table, b"x", F | L | SYS, too_long)),
        ProtocolError::ControlTooLong { op: "handler table", len, .. } if len == too_long
    ));
    // A straggler list longer than the job (4 ranks: 16 bytes).
    let list = ControlOp::Stragglers.wire();
    assert_eq!(
        rejected(&mut s, frag(list, b"", F | SYS, 20)),
        ProtocolError::ControlTooLong {
            src: SRC,
            op: "straggler list",
            len: 20,
            max: 16
        }
    );
    assert!(matches!(
        ok(&mut s, frag(list, b"", L | SYS, 20)),
        Action::Release(_)
    ));
    // The stream goes on: at their bounds both are accepted.
    assert!(matches!(
        ok(&mut s, frag(list, &[0; 16], F | L | SYS, 16)),
        Action::Control { .. }
    ));
    assert!(matches!(
        ok(&mut s, frag(FN, b"z", F | L, 1)),
        Action::Piece(..)
    ));
}

#[test]
fn every_control_encoding_fits_its_bound() {
    use crate::endpoint::engine::termination::CloseCounts;
    use crate::endpoint::engine::termination::{encode_probe, Report, RoundKind};
    let report = Report {
        round: u32::MAX,
        wave: u32::MAX,
        kind: RoundKind::Close,
        busy: true,
        counts: CloseCounts {
            sent: u64::MAX,
            received: u64::MAX,
        },
    };
    assert_eq!(report.encode().len() as u64, ControlOp::Report.max_len(1));
    assert_eq!(
        encode_probe(u32::MAX, u32::MAX).len() as u64,
        ControlOp::Probe.max_len(1)
    );
    // The largest table `start` lets through.
    let names = vec!["n".repeat(MAX_TABLE_BYTES - 8)];
    let table = crate::endpoint::engine::handler::encode_table(&names);
    assert_eq!(table.len() as u64, ControlOp::Table.max_len(1));
}

#[test]
fn a_control_message_can_arrive_behind_a_suspended_handler() {
    let mut s = streams();
    assert!(matches!(
        ok(&mut s, frag(ASYNC, b"a", F | L, 1)),
        Action::Start(_)
    ));
    stream(&mut s).suspend(Slot(1));
    let op = ControlOp::Verdict.wire();
    assert!(matches!(
        ok(&mut s, frag(op, b"\0", F | L | SYS, 1)),
        Action::Control { .. }
    ));
    assert!(
        matches!(stream(&mut s).next(), Action::Wait),
        "the suspended handler is not disturbed"
    );
}

#[test]
fn a_cut_off_message_ends_aborted() {
    // The sender dies mid-message: an async handler is resumed and its
    // read ends aborted; later fragments of a new message start cleanly.
    let mut s = streams();
    let Action::Start(start) = ok(&mut s, frag(ASYNC, b"ab", F, 9)) else {
        panic!()
    };
    let st = stream(&mut s);
    st.suspend(Slot(4));
    st.cut_open();
    assert!(matches!(st.next(), Action::Resume { slot: Slot(4), .. }));
    let mut buf = [0u8; 9];
    let (r, used) = st.read(start.seq, &mut buf).unwrap();
    assert_eq!(
        r,
        Read {
            n: 2,
            finished: true,
            aborted: true
        }
    );
    assert_eq!(used.count(), 1);
    assert_eq!(st.finish_current().count(), 0);
    assert!(matches!(st.next(), Action::Wait));
    assert_eq!(
        s.fast(&frag(FN, b"x", F | L, 1).header),
        Fast::Piece,
        "idle again"
    );
}

#[test]
fn a_sender_abort_flag_ends_the_message_short() {
    let mut s = streams();
    assert!(matches!(
        ok(&mut s, frag(FN, b"ab", F, 9)),
        Action::Piece(..)
    ));
    assert!(!stream(&mut s).piece_done(2, false, false));
    let Action::Piece(_, i) = ok(&mut s, frag(FN, b"", L | ABORT, 9)) else {
        panic!()
    };
    assert_eq!((i.offset, i.last, i.aborted), (2, true, true));
}
