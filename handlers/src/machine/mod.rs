//! The message-driven collectives as state machines.
//!
//! A [`Machine`] is one instance of a collective on this rank. The engine
//! creates it when the program calls the collective (`start`: it sends its
//! first messages), feeds it every message of its instance
//! (`on_message`, called from the registered handler, i.e. inside
//! whatever `extract` the program runs, or from `start` for messages that
//! arrived early) and hands its output to the request once `is_done`.
//! Machines never block: they send through `Ctx` (which parks without
//! credit) and buffer what they cannot use yet. Each machine combines in
//! an order fixed by the group and the root alone (see [`crate::op`]).

pub(crate) mod allgather;
pub(crate) mod allreduce;
pub(crate) mod alltoall;
pub(crate) mod barrier;
pub(crate) mod bcast;
mod counted;
pub(crate) mod gather;
pub(crate) mod reduce;
pub(crate) mod scan;
pub(crate) mod scatter;
pub(crate) mod setup;

use crate::error::CollError;
use crate::group::Group;
use crate::sig::Sig;
use crate::wire::{Header, Kind};
use fastmsg::{Ctx, HandlerId};
use std::any::Any;

/// What a finished machine hands back (downcast by the typed request).
pub(crate) type Output = Box<dyn Any>;

/// One instance of a collective on this rank.
pub(crate) trait Machine {
    /// Which collective (checked against arriving messages).
    fn kind(&self) -> Kind;
    /// Send the first messages (and finish, for a group of one).
    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError>;
    /// A whole message from member `from` for `step`.
    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError>;
    /// Whether the result is ready.
    fn is_done(&self) -> bool;
    /// The result (called once, after `is_done`).
    fn take_output(&mut self) -> Output;
    /// The root's member index, for a rooted collective (the signature
    /// holds it mod 128 only; see [`crate::sig::root_tail`]).
    fn root(&self) -> Option<u32> {
        None
    }
}

/// What a machine needs to send: the context, the handler, its group and
/// instance.
pub(crate) struct Io<'a> {
    pub(crate) ctx: &'a Ctx,
    pub(crate) handler: HandlerId,
    pub(crate) group: &'a Group,
    pub(crate) seq: u32,
    pub(crate) kind: Kind,
    /// The call's signature, sent in every header.
    pub(crate) sig: Sig,
    /// Added to every step sent (a machine run as a phase of another).
    pub(crate) base: u16,
    /// Sent after every payload: the full root of a rooted collective in
    /// a group of more than 128 members ([`crate::sig::root_tail`]).
    pub(crate) tail: Option<[u8; 4]>,
}

impl<'a> Io<'a> {
    /// The same, for a phase whose steps start at `base`.
    pub(crate) fn phase(&self, base: u16) -> Io<'a> {
        Io {
            ctx: self.ctx,
            handler: self.handler,
            group: self.group,
            seq: self.seq,
            kind: self.kind,
            sig: self.sig,
            base: self.base + base,
            tail: self.tail,
        }
    }

    /// Send `payload` to member `to` as step `step` of this instance.
    #[inline]
    pub(crate) fn send(&self, to: u32, step: u16, payload: &[u8]) -> Result<(), CollError> {
        let h = Header {
            group: self.group.tag,
            seq: self.seq,
            step: step + self.base,
            kind: self.kind as u8,
            sig: self.sig.0,
        }
        .emit();
        let with_tail;
        let parts: &[&[u8]] = match &self.tail {
            None => &[&h, payload],
            Some(t) => {
                with_tail = [&h[..], payload, &t[..]];
                &with_tail
            }
        };
        self.ctx.send(self.group.rank(to), self.handler, parts)?;
        Ok(())
    }

    /// An `Unexpected` error for a message from member `from`.
    pub(crate) fn unexpected(&self, from: u32, step: u16, why: &'static str) -> CollError {
        CollError::Unexpected {
            group: self.group.tag,
            seq: self.seq,
            kind: self.kind.name(),
            src: self.group.rank(from),
            step,
            why,
        }
    }

    /// Check that a message of `step` from `from` has `expected` bytes.
    #[inline]
    pub(crate) fn check_len(
        &self,
        from: u32,
        step: u16,
        got: usize,
        expected: usize,
    ) -> Result<(), CollError> {
        if got == expected {
            Ok(())
        } else {
            Err(CollError::LengthMismatch {
                seq: self.seq,
                kind: self.kind.name(),
                src: self.group.rank(from),
                step,
                got,
                expected,
            })
        }
    }
}
