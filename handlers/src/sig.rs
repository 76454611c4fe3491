//! Call signatures: what every member must pass alike to one collective —
//! the algorithm, the element type, the operator and the root — packed
//! into 16 bits that travel in every collective message's header
//! ([`crate::wire`]); the one-sided collectives put 24 bits (algorithm,
//! type, operator and byte length) beside the epoch in every flag word
//! ([`crate::window`]). A receiver compares the signature with its own;
//! a difference is [`CollError::ArgsMismatch`](crate::CollError::ArgsMismatch)
//! (the length, which message algorithms check from each message's size,
//! is [`CollError::LengthMismatch`](crate::CollError::LengthMismatch)), and
//! the rank that finds it makes every member fail too (see
//! [`crate::engine`]: an abort message per member). Nothing is added to a
//! message or to a flag: the bits were free.
//!
//! ```text
//!  bit 15..14  algorithm variant   (barrier: dissemination 0, pairwise 1;
//!                                   allreduce: recursive doubling 0,
//!                                   reduce-broadcast 1; the set-up an
//!                                   algorithm runs at its first call 2;
//!                                   a one-sided algorithm 3; else 0)
//!  bit 13..10  element type        (0 none, i64 1, u64 2, f64 3, i32 4,
//!                                   u32 5, f32 6, others 7..15 by name)
//!  bit  9..7   operator            (0 none, Reduce::id: built-ins 1..6,
//!                                   custom 7)
//!  bit  6..0   root mod 128        (rooted collectives; else 0)
//! ```
//!
//! In a group of more than 128 members, roots that differ by a multiple
//! of 128 share the bits: there every message of a rooted collective
//! carries the root's full member index in 4 more bytes after its payload
//! ([`root_tail`]), which the receiver strips and compares. Smaller groups
//! pay nothing (a root index is below the group size, so 7 bits hold it).
//!
//! Two custom operators are told apart only if they override
//! [`Reduce::id`] (see its docs: the 3 bits leave one code for every
//! custom operator; a closure has no name that is the same in every
//! process).

use crate::element::Element;
use crate::error::CollError;
use crate::op::Reduce;
use crate::wire::{Header, Kind, HEADER};
use fastmsg::Rank;

/// The algorithm bits of a one-sided collective's placeholder instance.
pub(crate) const ONE_SIDED: u8 = 3;

/// The algorithm bits of the set-up a collective runs at its first call
/// ([`crate::machine::setup`]): a collective the engine runs on the
/// user's call's behalf, under its kind.
pub(crate) const SETUP: u8 = 2;

/// A collective call's signature (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Sig(pub(crate) u16);

/// The 4-bit code of an element type.
pub(crate) fn type_code<T: Element>() -> u8 {
    match T::NAME {
        "i64" => 1,
        "u64" => 2,
        "f64" => 3,
        "i32" => 4,
        "u32" => 5,
        "f32" => 6,
        other => 7 + (fnv(other) % 9) as u8,
    }
}

fn type_name(code: u8) -> &'static str {
    match code {
        0 => "no data",
        1 => "i64",
        2 => "u64",
        3 => "f64",
        4 => "i32",
        5 => "u32",
        6 => "f32",
        _ => "a user element type",
    }
}

/// The 3-bit code of an operator.
pub(crate) fn op_code<T: Element, R: Reduce<T>>(op: &R) -> u8 {
    op.id().min(7)
}

fn op_name(code: u8) -> &'static str {
    match code {
        0 => "no operator",
        1 => "SUM",
        2 => "MIN",
        3 => "MAX",
        4 => "AND",
        5 => "OR",
        6 => "XOR",
        _ => "a custom operator",
    }
}

fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The bytes of the root a rooted collective's message carries after its
/// payload in a group of more than 128 members.
pub(crate) const ROOT_TAIL: usize = 4;

/// Whether a collective of `kind` (raw) in a group of `n` members sends
/// its root after every payload (see the module docs).
#[inline]
pub(crate) fn has_root_tail(kind: u8, n: u32) -> bool {
    n > 128 && Kind::is_rooted(kind)
}

/// The bytes a rooted collective with root `root` (member index) sends
/// after every payload in a group of `n` members, if any.
#[inline]
pub(crate) fn root_tail(n: u32, root: Option<u32>) -> Option<[u8; 4]> {
    root.filter(|_| n > 128).map(u32::to_le_bytes)
}

/// Split a message of a collective of `kind` (raw) in a group of `n`
/// members into its payload and the root it carries, if it carries one;
/// `None` if it is too short to carry one.
#[inline]
pub(crate) fn split_root(kind: u8, n: u32, data: &[u8]) -> Option<(&[u8], Option<u32>)> {
    if !has_root_tail(kind, n) {
        return Some((data, None));
    }
    let cut = data.len().checked_sub(ROOT_TAIL)?;
    let (payload, t) = data.split_at(cut);
    Some((payload, Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))))
}

/// This rank's side of an instance, which every message of it must match.
#[derive(Clone, Copy)]
pub(crate) struct Call {
    pub(crate) kind: Kind,
    pub(crate) sig: Sig,
    /// The root's full member index, where messages carry it.
    pub(crate) root: Option<u32>,
}

/// Check a message from `src` (header `h`, payload `data`) of a group of
/// `n` members against this rank's call: the same collective, signature
/// and root. Returns the payload without the root it carries, if any.
#[inline]
pub(crate) fn check_message<'d>(
    ours: Call,
    n: u32,
    src: Rank,
    h: &Header,
    data: &'d [u8],
) -> Result<&'d [u8], CollError> {
    // The common case, in a few compares: a group of at most 128 members
    // (no root after the payload), the same collective and signature.
    if n <= 128 && ours.kind as u8 == h.kind && ours.sig.0 == h.sig {
        return Ok(data);
    }
    check_message_slow(ours, n, src, h, data)
}

#[cold]
#[inline(never)]
fn check_message_slow<'d>(
    ours: Call,
    n: u32,
    src: Rank,
    h: &Header,
    data: &'d [u8],
) -> Result<&'d [u8], CollError> {
    if ours.kind as u8 != h.kind {
        return Err(CollError::Mismatch {
            group: h.group,
            seq: h.seq,
            ours: ours.kind.name(),
            theirs: Kind::name_of(h.kind),
            src,
        });
    }
    let Some((payload, root)) = split_root(h.kind, n, data) else {
        return Err(CollError::ShortMessage {
            src,
            len: HEADER + data.len(),
            need: HEADER + ROOT_TAIL,
        });
    };
    if ours.sig.0 != h.sig || ours.root != root {
        return Err(CollError::ArgsMismatch {
            group: h.group,
            seq: h.seq,
            ours: ours.sig.describe_root(h.kind, ours.root),
            theirs: Sig(h.sig).describe_root(h.kind, root),
            src,
        });
    }
    Ok(payload)
}

impl Sig {
    /// The signature of a call.
    pub(crate) fn new(algo: u8, ty: u8, op: u8, root: Option<u32>) -> Sig {
        let root = root.map_or(0, |r| r & 0x7f) as u16;
        Sig(u16::from(algo & 3) << 14 | u16::from(ty & 15) << 10 | u16::from(op & 7) << 7 | root)
    }

    /// In words, for errors.
    pub(crate) fn describe(self, kind: u8) -> String {
        self.describe_root(kind, None)
    }

    /// In words, for errors, with the full root (member index) where
    /// known (groups of more than 128 members: the bits hold it mod 128).
    pub(crate) fn describe_root(self, kind: u8, full_root: Option<u32>) -> String {
        let algo = (self.0 >> 14) as u8;
        let ty = ((self.0 >> 10) & 15) as u8;
        let op = ((self.0 >> 7) & 7) as u8;
        let root = self.0 & 0x7f;
        let algo = match (kind, algo) {
            (k, 0) if k == Kind::Barrier as u8 => "dissemination",
            (k, 1) if k == Kind::Barrier as u8 => "pairwise exchange",
            (k, 0) if k == Kind::Allreduce as u8 => "recursive doubling",
            (k, 1) if k == Kind::Allreduce as u8 => "reduce-broadcast",
            (_, SETUP) => "the set-up of its algorithm at its first call",
            (_, ONE_SIDED) => "a one-sided algorithm",
            _ => "the default algorithm",
        };
        let mut s = format!("{} by {algo}", Kind::name_of(kind));
        match (ty, op) {
            (0, _) => {}
            (_, 0) => s += &format!(", {}", type_name(ty)),
            _ => s += &format!(", {} on {}", op_name(op), type_name(ty)),
        }
        if Kind::is_rooted(kind) {
            match full_root {
                Some(r) => s += &format!(", root member {r}"),
                None => s += &format!(", root member {root} (mod 128)"),
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Op;

    #[test]
    fn built_in_types_and_operators_have_distinct_codes() {
        let types = [
            type_code::<i64>(),
            type_code::<u64>(),
            type_code::<f64>(),
            type_code::<i32>(),
            type_code::<u32>(),
            type_code::<f32>(),
        ];
        let mut t = types.to_vec();
        t.dedup();
        assert_eq!(t.len(), 6);
        let ops: Vec<u8> = [Op::Sum, Op::Min, Op::Max, Op::And, Op::Or, Op::Xor]
            .iter()
            .map(op_code::<u64, _>)
            .collect();
        assert_eq!(ops, vec![1, 2, 3, 4, 5, 6]);
        let custom = crate::op::custom(|a: u64, b: u64| a ^ b);
        assert_eq!(op_code::<u64, _>(&custom), 7);
        let a = Sig::new(0, 3, 1, None);
        let b = Sig::new(0, 3, 3, None);
        assert_ne!(a, b);
        assert!(a.describe(Kind::Allreduce as u8).contains("SUM on f64"));
        assert!(b.describe(Kind::Allreduce as u8).contains("MAX on f64"));
        assert_ne!(Sig::new(0, 0, 0, Some(1)), Sig::new(0, 0, 0, Some(2)));
    }

    #[test]
    fn large_groups_carry_the_full_root() {
        let bcast = Kind::Bcast as u8;
        // Up to 128 members the bits hold every root: nothing is added.
        assert_eq!(root_tail(128, Some(127)), None);
        assert_eq!(split_root(bcast, 128, &[1, 2]), Some((&[1u8, 2][..], None)));
        // Past 128, roots 1 and 129 share the bits, not the tail.
        assert_eq!(Sig::new(0, 1, 0, Some(1)), Sig::new(0, 1, 0, Some(129)));
        let mut msg = vec![7u8, 8];
        msg.extend(root_tail(130, Some(129)).unwrap());
        assert_eq!(
            split_root(bcast, 130, &msg),
            Some((&[7u8, 8][..], Some(129)))
        );
        assert_eq!(split_root(bcast, 130, &[1, 2, 3]), None);
        // Other collectives carry none.
        let ar = Kind::Allreduce as u8;
        assert_eq!(split_root(ar, 130, &[1, 2]), Some((&[1u8, 2][..], None)));
        let d = Sig::new(0, 1, 0, Some(1)).describe_root(bcast, Some(129));
        assert!(d.contains("root member 129"), "{d}");
    }
}
