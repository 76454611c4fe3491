//! Receive-side state of one source: its unreleased fragments, in arrival
//! order, and the messages they belong to.
//!
//! Invariants:
//! - `frags` holds, front to back, the unread fragments of the *current*
//!   message (whose handler is running or suspended), then the fragments of
//!   messages queued behind it (only possible while the current handler is
//!   suspended after its message completed);
//! - fragments leave `frags` only from the front, so they are released in
//!   arrival order (the transport contract relies on it);
//! - at most one message per source is *open* (expecting fragments): the
//!   last one; senders never interleave messages to one destination.
//!
//! Messages for plain-function handlers are not stored while current: each
//! fragment is handed out as a piece ([`Accepted::Piece`]) and released as
//! soon as the handler returns; only when queued behind a suspended async
//! handler do their fragments wait in `frags`. A whole one-fragment message
//! to an idle source takes the fast path: no bookkeeping at all.
//!
//! Control (system) messages are reassembled into a buffer and handed to
//! the endpoint whole; they never enter `frags`.

use crate::error::ProtocolError;
use crate::frame::FragFlags;
use crate::transport::RxFragment;
use std::collections::VecDeque;

/// A message with fragments in the stream.
#[derive(Debug)]
pub(crate) struct MsgState {
    pub(crate) handler: u32,
    pub(crate) seq: u64,
    pub(crate) total: u64,
    arrived: u64,
    read: u64,
    /// Fragments of this message still in `frags`.
    frags: usize,
    complete: bool,
    /// It ended without all its bytes: the sender aborted it (or died,
    /// or broke the protocol). Set together with `complete`.
    aborted: bool,
    /// Pool slot of its suspended handler.
    pub(crate) suspended: Option<u32>,
    /// Whether its handler is a plain function (pieces, not a future).
    piecewise: bool,
}

/// Where a piece sits in its message, for a plain-function handler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PieceInfo {
    pub(crate) handler: u32,
    pub(crate) offset: u64,
    pub(crate) total: u64,
    pub(crate) last: bool,
    /// Whether the message has a `MsgState` (false on the fast path).
    pub(crate) tracked: bool,
    /// The message was aborted and this is its last piece.
    pub(crate) aborted: bool,
}

/// What the current message of a stream needs after it was cut off (see
/// [`SourceStream::cut_open`]).
#[derive(Debug)]
pub(crate) enum Cut {
    /// Nothing beyond running what is current.
    Nothing,
    /// A plain-function message with no fragment left to hand out: its
    /// handler gets an empty last piece flagged aborted.
    Piece(PieceInfo),
    /// Resume its suspended async handler (its next read reports the
    /// abort).
    Resume,
}

/// What is current on a stream.
#[derive(Debug)]
pub(crate) enum Current {
    /// No message.
    None,
    /// A plain-function message.
    Piecewise,
    /// An async message; `started` once its handler has run.
    Async {
        handler: u32,
        seq: u64,
        total: u64,
        started: bool,
    },
}

/// What the endpoint must do after a fragment was accepted.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// Nothing (queued behind a running handler, or dropped).
    Nothing,
    /// Start the handler of the new current message.
    Start,
    /// Run the current plain-function handler on this fragment, then
    /// release it.
    Piece(RxFragment, PieceInfo),
    /// Resume the current message's suspended handler.
    Resume,
    /// A control message is complete: (op, payload).
    Control(u32, Vec<u8>),
}

#[derive(Debug)]
enum Open {
    No,
    User,
    Control { op: u32, total: u64, buf: Vec<u8> },
}

/// One source's stream.
#[derive(Debug)]
pub(crate) struct SourceStream {
    src: u32,
    frags: VecDeque<RxFragment>,
    front_read: usize,
    msgs: VecDeque<MsgState>,
    open: Open,
    discarding: bool,
    next_seq: u64,
}

/// Result of a read by a handler.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Read {
    /// Bytes copied.
    pub(crate) n: usize,
    /// Whether the message has been read to its end.
    pub(crate) finished: bool,
    /// Whether that end is an abort (fewer bytes than declared, or the
    /// sender aborted).
    pub(crate) aborted: bool,
}

impl SourceStream {
    pub(crate) fn new(src: u32) -> Self {
        SourceStream {
            src,
            frags: VecDeque::new(),
            front_read: 0,
            msgs: VecDeque::new(),
            open: Open::No,
            discarding: false,
            next_seq: 1,
        }
    }

    /// Nothing in progress: no message, none open, nothing being dropped.
    #[inline(always)]
    pub(crate) fn is_idle(&self) -> bool {
        self.msgs.is_empty() && !self.discarding && matches!(self.open, Open::No)
    }

    /// Enter a whole one-fragment message for an async handler into an idle
    /// stream (the caller checked both); returns its sequence number.
    #[inline]
    pub(crate) fn enter_whole(&mut self, frag: RxFragment) -> u64 {
        debug_assert!(self.is_idle());
        let seq = self.next_seq;
        self.next_seq += 1;
        let len = u64::from(frag.header.len);
        self.msgs.push_back(MsgState {
            handler: frag.header.handler,
            seq,
            total: len,
            arrived: len,
            read: 0,
            frags: 1,
            complete: true,
            aborted: false,
            suspended: None,
            piecewise: false,
        });
        self.frags.push_back(frag);
        seq
    }

    /// The current message (handler running or suspended), if any.
    pub(crate) fn current(&mut self) -> Option<&mut MsgState> {
        self.msgs.front_mut()
    }

    /// Accept an arrived fragment. `piecewise[id]` tells the kind of each
    /// registered handler; `release` gives a fragment back to its transport.
    #[inline]
    pub(crate) fn accept(
        &mut self,
        frag: RxFragment,
        piecewise: &[bool],
        release: &mut dyn FnMut(&RxFragment),
    ) -> Result<Accepted, ProtocolError> {
        let h = frag.header;
        const WHOLE: u32 = FragFlags::FIRST.0 | FragFlags::LAST.0;
        // Fast path: a whole one-fragment message to a plain-function
        // handler, nothing else going on with this source.
        if h.flags == WHOLE
            && self.msgs.is_empty()
            && !self.discarding
            && matches!(self.open, Open::No)
            && piecewise.get(h.handler as usize) == Some(&true)
            && u64::from(h.len) == h.total
        {
            let info = PieceInfo {
                handler: h.handler,
                offset: 0,
                total: h.total,
                last: true,
                tracked: false,
                aborted: false,
            };
            return Ok(Accepted::Piece(frag, info));
        }
        self.accept_slow(frag, piecewise, release)
    }

    fn accept_slow(
        &mut self,
        frag: RxFragment,
        piecewise: &[bool],
        release: &mut dyn FnMut(&RxFragment),
    ) -> Result<Accepted, ProtocolError> {
        let h = frag.header;
        let flags = h.flags();
        let (first, last) = (
            flags.contains(FragFlags::FIRST),
            flags.contains(FragFlags::LAST),
        );
        // An abort ends a message short: the sender gave up on it (or
        // overflowed it); only meaningful on a last fragment.
        let abort = last && flags.contains(FragFlags::ABORT);
        let len = u64::from(h.len);
        let handlers = piecewise.len() as u32;
        if self.discarding {
            release(&frag);
            if first {
                self.discarding = false;
                self.open = Open::No;
                return Err(ProtocolError::UnexpectedFirst { src: self.src });
            }
            if last {
                self.discarding = false;
                self.open = Open::No;
            }
            return Ok(Accepted::Nothing);
        }
        if first {
            if !matches!(self.open, Open::No) {
                release(&frag);
                self.truncate_open(release);
                return Err(ProtocolError::UnexpectedFirst { src: self.src });
            }
            if flags.contains(FragFlags::SYSTEM) {
                let mut buf = Vec::with_capacity(h.total.min(1 << 20) as usize);
                buf.extend_from_slice(frag.bytes());
                release(&frag);
                if last {
                    return self.control_done(h.handler, h.total, buf);
                }
                self.open = Open::Control {
                    op: h.handler,
                    total: h.total,
                    buf,
                };
                return Ok(Accepted::Nothing);
            }
            if h.handler >= handlers {
                release(&frag);
                self.discarding = !last;
                return Err(ProtocolError::UnknownHandler {
                    src: self.src,
                    id: h.handler,
                    registered: handlers,
                });
            }
            if last && (len > h.total || (len != h.total && !abort)) {
                release(&frag);
                return Err(ProtocolError::LengthMismatch {
                    src: self.src,
                    total: h.total,
                    got: len,
                });
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            let is_fn = piecewise[h.handler as usize];
            let now = self.msgs.is_empty();
            self.msgs.push_back(MsgState {
                handler: h.handler,
                seq,
                total: h.total,
                arrived: len,
                read: 0,
                frags: 0,
                complete: last,
                aborted: abort,
                suspended: None,
                piecewise: is_fn,
            });
            self.open = if last { Open::No } else { Open::User };
            if now && is_fn {
                let info = PieceInfo {
                    handler: h.handler,
                    offset: 0,
                    total: h.total,
                    last,
                    tracked: true,
                    aborted: abort,
                };
                return Ok(Accepted::Piece(frag, info));
            }
            self.msgs.back_mut().expect("just pushed").frags = 1;
            self.frags.push_back(frag);
            return Ok(if now {
                Accepted::Start
            } else {
                Accepted::Nothing
            });
        }
        // A continuation fragment.
        match &mut self.open {
            Open::No => {
                release(&frag);
                Err(ProtocolError::MissingFirst { src: self.src })
            }
            Open::Control { op, total, buf } => {
                if buf.len() as u64 + len > *total {
                    let got = buf.len() as u64 + len;
                    let total = *total;
                    release(&frag);
                    self.open = Open::No;
                    self.discarding = !last;
                    return Err(ProtocolError::LengthMismatch {
                        src: self.src,
                        total,
                        got,
                    });
                }
                buf.extend_from_slice(frag.bytes());
                release(&frag);
                if last {
                    let (op, total) = (*op, *total);
                    let Open::Control { buf, .. } = std::mem::replace(&mut self.open, Open::No)
                    else {
                        unreachable!("matched above")
                    };
                    return self.control_done(op, total, buf);
                }
                Ok(Accepted::Nothing)
            }
            Open::User => {
                let only = self.msgs.len() == 1;
                let m = self
                    .msgs
                    .back_mut()
                    .expect("an open user message is in msgs");
                if m.arrived + len > m.total || (last && !abort && m.arrived + len != m.total) {
                    let got = m.arrived + len;
                    let total = m.total;
                    release(&frag);
                    // The message cannot be trusted any more: it ends as
                    // aborted (the engine tells its handler).
                    m.complete = true;
                    m.aborted = true;
                    self.open = Open::No;
                    self.discarding = !last;
                    return Err(ProtocolError::LengthMismatch {
                        src: self.src,
                        total,
                        got,
                    });
                }
                m.arrived += len;
                if last {
                    m.complete = true;
                    m.aborted = abort;
                    self.open = Open::No;
                }
                if only && m.piecewise {
                    let info = PieceInfo {
                        handler: m.handler,
                        offset: m.read,
                        total: m.total,
                        last,
                        tracked: true,
                        aborted: abort,
                    };
                    return Ok(Accepted::Piece(frag, info));
                }
                m.frags += 1;
                self.frags.push_back(frag);
                Ok(if only && m.suspended.is_some() {
                    Accepted::Resume
                } else {
                    Accepted::Nothing
                })
            }
        }
    }

    fn control_done(
        &mut self,
        op: u32,
        total: u64,
        buf: Vec<u8>,
    ) -> Result<Accepted, ProtocolError> {
        if buf.len() as u64 != total {
            return Err(ProtocolError::LengthMismatch {
                src: self.src,
                total,
                got: buf.len() as u64,
            });
        }
        Ok(Accepted::Control(op, buf))
    }

    /// A sender broke off a message (a new first fragment while it was
    /// open): it ends as aborted; the engine then tells its handler
    /// ([`cut_need`](Self::cut_need)).
    fn truncate_open(&mut self, _release: &mut dyn FnMut(&RxFragment)) {
        self.cut_open();
    }

    /// The message open on this stream will get no more fragments (its
    /// sender died, or broke it off): it ends as aborted. A message whose
    /// handler already returned is simply forgotten, as is a half-received
    /// control message.
    pub(crate) fn cut_open(&mut self) {
        if self.discarding {
            self.discarding = false;
        } else if let Open::User = self.open {
            if let Some(m) = self.msgs.back_mut() {
                m.complete = true;
                m.aborted = true;
            }
        }
        self.open = Open::No;
    }

    /// What the current message needs once it was cut off: an empty
    /// aborted last piece for a plain-function handler that has had every
    /// fragment, a resume for a suspended async handler, or nothing.
    pub(crate) fn cut_need(&self) -> Cut {
        let Some(m) = self.msgs.front() else {
            return Cut::Nothing;
        };
        if !(m.aborted && m.complete) {
            return Cut::Nothing;
        }
        if m.piecewise {
            if m.frags == 0 {
                return Cut::Piece(PieceInfo {
                    handler: m.handler,
                    offset: m.read,
                    total: m.total,
                    last: true,
                    tracked: true,
                    aborted: true,
                });
            }
            return Cut::Nothing;
        }
        if m.suspended.is_some() {
            Cut::Resume
        } else {
            Cut::Nothing
        }
    }

    /// Copy bytes of the current message `seq` into `buf`, releasing
    /// fragments as they are used up. `None` if `seq` is not current.
    pub(crate) fn read(
        &mut self,
        seq: u64,
        buf: &mut [u8],
        release: &mut dyn FnMut(&RxFragment),
    ) -> Option<Read> {
        let m = self.msgs.front_mut().filter(|m| m.seq == seq)?;
        let mut n = 0;
        while m.frags > 0 {
            let f = self
                .frags
                .front()
                .expect("frags counted in msg are present");
            let bytes = f.bytes();
            let k = (bytes.len() - self.front_read).min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&bytes[self.front_read..self.front_read + k]);
            n += k;
            self.front_read += k;
            m.read += k as u64;
            if self.front_read == bytes.len() {
                let f = self.frags.pop_front().expect("checked above");
                release(&f);
                self.front_read = 0;
                m.frags -= 1;
            } else {
                break;
            }
        }
        let drained = m.complete && m.frags == 0;
        Some(Read {
            n,
            finished: m.read == m.total || drained,
            aborted: m.aborted && drained,
        })
    }

    /// Bytes of the current message `seq` that have arrived and are unread.
    pub(crate) fn available(&self, seq: u64) -> Option<u64> {
        let m = self.msgs.front().filter(|m| m.seq == seq)?;
        Some(m.arrived - m.read)
    }

    /// What is current.
    pub(crate) fn current_info(&self) -> Current {
        match self.msgs.front() {
            None => Current::None,
            Some(m) if m.piecewise => Current::Piecewise,
            Some(m) => Current::Async {
                handler: m.handler,
                seq: m.seq,
                total: m.total,
                started: m.suspended.is_some(),
            },
        }
    }

    /// The next stored fragment of the current plain-function message.
    pub(crate) fn next_queued_piece(&mut self) -> Option<(RxFragment, PieceInfo)> {
        let m = self
            .msgs
            .front_mut()
            .filter(|m| m.piecewise && m.frags > 0)?;
        let frag = self
            .frags
            .pop_front()
            .expect("frags counted in msg are present");
        m.frags -= 1;
        let last = m.complete && m.frags == 0;
        let info = PieceInfo {
            handler: m.handler,
            offset: m.read,
            total: m.total,
            last,
            tracked: true,
            aborted: last && m.aborted,
        };
        Some((frag, info))
    }

    /// A plain-function handler has consumed a tracked piece of `len`
    /// bytes. On `last`, or on `failed` (the rest is then dropped), the
    /// message ends; returns whether another message became current.
    pub(crate) fn piece_done(
        &mut self,
        len: u32,
        last: bool,
        failed: bool,
        release: &mut dyn FnMut(&RxFragment),
    ) -> bool {
        if let Some(m) = self.msgs.front_mut() {
            m.read += u64::from(len);
        }
        if last || failed {
            return self.finish_current(release);
        }
        false
    }

    /// The current message's handler returned: drop its unread fragments
    /// (and its future ones). Returns whether another message is now current.
    pub(crate) fn finish_current(&mut self, release: &mut dyn FnMut(&RxFragment)) -> bool {
        let Some(m) = self.msgs.pop_front() else {
            return false;
        };
        for _ in 0..m.frags {
            let f = self
                .frags
                .pop_front()
                .expect("frags counted in msg are present");
            release(&f);
        }
        self.front_read = 0;
        if !m.complete {
            // Only the last message can be incomplete: its remaining
            // fragments will be dropped as they arrive.
            self.discarding = true;
        }
        !self.msgs.is_empty()
    }

    /// Forget everything without releasing (endpoint teardown).
    pub(crate) fn clear(&mut self) {
        self.frags.clear();
        self.msgs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FragHeader;

    fn frag(handler: u32, data: &[u8], flags: FragFlags, total: u64) -> RxFragment {
        let h = FragHeader {
            src: 3,
            handler,
            len: data.len() as u32,
            flags: flags.0,
            total,
        };
        RxFragment::leaked(h, data)
    }

    const F: FragFlags = FragFlags::FIRST;
    const L: FragFlags = FragFlags::LAST;

    #[test]
    fn streams_a_three_fragment_message_and_releases_in_order() {
        let mut s = SourceStream::new(3);
        let mut released = Vec::new();
        let mut rel = |f: &RxFragment| released.push(f.bytes().to_vec());
        assert!(matches!(
            s.accept(frag(0, b"abc", F, 7), &[false], &mut rel),
            Ok(Accepted::Start)
        ));
        let seq = s.current().unwrap().seq;
        s.current().unwrap().suspended = Some(0);
        let mut buf = [0u8; 5];
        let r = s.read(seq, &mut buf, &mut rel).unwrap();
        assert_eq!(
            r,
            Read {
                n: 3,
                finished: false,
                aborted: false
            }
        );
        assert!(matches!(
            s.accept(frag(0, b"de", FragFlags(0), 7), &[false], &mut rel),
            Ok(Accepted::Resume)
        ));
        assert!(matches!(
            s.accept(frag(0, b"fg", L, 7), &[false], &mut rel),
            Ok(Accepted::Resume)
        ));
        let r = s.read(seq, &mut buf[3..], &mut rel).unwrap();
        assert_eq!(
            r,
            Read {
                n: 2,
                finished: false,
                aborted: false
            }
        );
        assert_eq!(&buf, b"abcde");
        let mut rest = [0u8; 8];
        let r = s.read(seq, &mut rest, &mut rel).unwrap();
        assert_eq!(
            r,
            Read {
                n: 2,
                finished: true,
                aborted: false
            }
        );
        assert!(!s.finish_current(&mut rel));
        assert_eq!(
            released,
            vec![b"abc".to_vec(), b"de".to_vec(), b"fg".to_vec()]
        );
    }

    #[test]
    fn an_early_return_discards_the_rest() {
        let mut s = SourceStream::new(3);
        let mut n = 0;
        let mut rel = |_: &RxFragment| n += 1;
        assert!(matches!(
            s.accept(frag(0, b"ab", F, 6), &[false], &mut rel),
            Ok(Accepted::Start)
        ));
        assert!(!s.finish_current(&mut rel));
        assert!(matches!(
            s.accept(frag(0, b"cd", FragFlags(0), 6), &[false], &mut rel),
            Ok(Accepted::Nothing)
        ));
        assert!(matches!(
            s.accept(frag(0, b"ef", L, 6), &[false], &mut rel),
            Ok(Accepted::Nothing)
        ));
        assert!(matches!(
            s.accept(frag(0, b"x", F | L, 1), &[false], &mut rel),
            Ok(Accepted::Start)
        ));
        drop(s);
        assert_eq!(n, 3);
    }

    #[test]
    fn bad_sequences_are_typed_errors() {
        let mut s = SourceStream::new(3);
        let mut rel = |_: &RxFragment| {};
        assert_eq!(
            s.accept(frag(0, b"a", L, 1), &[false], &mut rel)
                .unwrap_err(),
            ProtocolError::MissingFirst { src: 3 }
        );
        assert!(matches!(
            s.accept(frag(9, b"a", F | L, 1), &[false], &mut rel)
                .unwrap_err(),
            ProtocolError::UnknownHandler { id: 9, .. }
        ));
        assert!(matches!(
            s.accept(frag(0, b"a", F, 4), &[false], &mut rel),
            Ok(Accepted::Start)
        ));
        assert_eq!(
            s.accept(frag(0, b"b", F, 4), &[false], &mut rel)
                .unwrap_err(),
            ProtocolError::UnexpectedFirst { src: 3 }
        );
        let seq = s.current().unwrap().seq;
        let mut buf = [0u8; 4];
        assert_eq!(
            s.read(seq, &mut buf, &mut rel).unwrap(),
            Read {
                n: 1,
                finished: true,
                aborted: true
            },
            "a broken-off message ends, aborted, instead of waiting for ever"
        );
        assert!(!s.finish_current(&mut rel));
        assert!(matches!(
            s.accept(frag(0, b"abc", F | L, 2), &[false], &mut rel)
                .unwrap_err(),
            ProtocolError::LengthMismatch { .. }
        ));
    }

    #[test]
    fn plain_function_messages_come_out_as_pieces() {
        let mut s = SourceStream::new(3);
        let mut rel = |_: &RxFragment| panic!("pieces are released by the caller");
        let kinds = [true];
        match s.accept(frag(0, b"ab", F | L, 2), &kinds, &mut rel) {
            Ok(Accepted::Piece(f, i)) => {
                assert_eq!(f.bytes(), b"ab");
                assert!(i.last && !i.tracked && i.offset == 0);
            }
            other => panic!("{other:?}"),
        }
        match s.accept(frag(0, b"abc", F, 5), &kinds, &mut rel) {
            Ok(Accepted::Piece(_, i)) => assert!(!i.last && i.tracked && i.offset == 0),
            other => panic!("{other:?}"),
        }
        assert!(!s.piece_done(3, false, false, &mut rel));
        match s.accept(frag(0, b"de", L, 5), &kinds, &mut rel) {
            Ok(Accepted::Piece(f, i)) => assert!(i.last && i.offset == 3 && f.bytes() == b"de"),
            other => panic!("{other:?}"),
        }
        assert!(!s.piece_done(2, true, false, &mut rel));
        assert!(matches!(s.current_info(), Current::None));
    }

    #[test]
    fn messages_queue_behind_a_suspended_complete_handler() {
        let mut s = SourceStream::new(3);
        let mut rel = |_: &RxFragment| {};
        assert!(matches!(
            s.accept(frag(0, b"a", F | L, 1), &[false], &mut rel),
            Ok(Accepted::Start)
        ));
        s.current().unwrap().suspended = Some(0);
        assert!(matches!(
            s.accept(frag(0, b"b", F | L, 1), &[false], &mut rel),
            Ok(Accepted::Nothing)
        ));
        assert!(
            s.finish_current(&mut rel),
            "the queued message becomes current"
        );
        let seq = s.current().unwrap().seq;
        let mut buf = [0u8; 1];
        assert_eq!(s.read(seq, &mut buf, &mut rel).unwrap().n, 1);
        assert_eq!(&buf, b"b");
    }
}
