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
//!                                   reduce-broadcast 1; a one-sided
//!                                   algorithm 3; else 0)
//!  bit 13..10  element type        (0 none, i64 1, u64 2, f64 3, i32 4,
//!                                   u32 5, f32 6, others 7..15 by name)
//!  bit  9..7   operator            (0 none, Reduce::id: built-ins 1..6,
//!                                   custom 7)
//!  bit  6..0   root mod 128        (rooted collectives; else 0)
//! ```
//!
//! Two custom operators are told apart only if they override
//! [`Reduce::id`]; roots that differ by a multiple of 128 are not told
//! apart by the bits (the tree shapes then differ, which the algorithms'
//! own checks of who sends which step usually catch).

use crate::element::Element;
use crate::op::Reduce;
use crate::wire::Kind;

/// The algorithm bits of a one-sided collective's placeholder instance.
pub(crate) const ONE_SIDED: u8 = 3;

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

impl Sig {
    /// The signature of a call.
    pub(crate) fn new(algo: u8, ty: u8, op: u8, root: Option<u32>) -> Sig {
        let root = root.map_or(0, |r| r & 0x7f) as u16;
        Sig(u16::from(algo & 3) << 14 | u16::from(ty & 15) << 10 | u16::from(op & 7) << 7 | root)
    }

    /// In words, for errors.
    pub(crate) fn describe(self, kind: u8) -> String {
        let algo = (self.0 >> 14) as u8;
        let ty = ((self.0 >> 10) & 15) as u8;
        let op = ((self.0 >> 7) & 7) as u8;
        let root = self.0 & 0x7f;
        let algo = match (kind, algo) {
            (k, 0) if k == Kind::Barrier as u8 => "dissemination",
            (k, 1) if k == Kind::Barrier as u8 => "pairwise exchange",
            (k, 0) if k == Kind::Allreduce as u8 => "recursive doubling",
            (k, 1) if k == Kind::Allreduce as u8 => "reduce-broadcast",
            (_, 3) => "a one-sided algorithm",
            _ => "the default algorithm",
        };
        let mut s = format!("{} by {algo}", Kind::name_of(kind));
        if ty != 0 {
            s += &format!(", {} on {}", op_name(op), type_name(ty));
        }
        if kind == Kind::Bcast as u8 || kind == Kind::Reduce as u8 {
            s += &format!(", root {root} (mod 128)");
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
}
