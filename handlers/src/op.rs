//! Reduction operators: the built-in [`Op`]s and user-defined ones
//! ([`custom`]), behind one trait, [`Reduce`].
//!
//! Every algorithm combines in a fixed order that depends only on the
//! group's size and the root, never on arrival order: a partial result
//! always covers a block of ranks, and `combine(left, right)` is always
//! called with the lower block on the left. Float results are therefore
//! bit-identical run to run, and an associative operator need not be
//! commutative (algorithms that would rotate the rank order do so only for
//! operators that say they commute).

use crate::element::{read_at, Element};
use crate::error::CollError;

/// A built-in reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Sum (wrapping on integers).
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    And,
    /// Bitwise or (integers only).
    Or,
    /// Bitwise exclusive or (integers only).
    Xor,
}

impl Op {
    /// Name, for errors and output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "SUM",
            Op::Min => "MIN",
            Op::Max => "MAX",
            Op::And => "AND",
            Op::Or => "OR",
            Op::Xor => "XOR",
        }
    }
}

/// An associative operator on `T`. `combine(a, b)` is `a ⊕ b` with `a`
/// from lower ranks than `b`.
pub trait Reduce<T: Element>: 'static {
    /// `a ⊕ b`.
    fn combine(&self, a: T, b: T) -> T;

    /// Whether `a ⊕ b == b ⊕ a` bit for bit; lets rooted algorithms build
    /// their tree around the root instead of around the first rank.
    fn commutative(&self) -> bool {
        false
    }

    /// Whether the operator applies to `T`.
    ///
    /// # Errors
    /// [`CollError::OpUndefined`].
    fn check(&self) -> Result<(), CollError> {
        Ok(())
    }

    /// A small number naming the operator to the check that every member
    /// passed the same one (ranks passing operators with different ids get
    /// [`CollError::ArgsMismatch`]): the built-in operators are 1 to 6,
    /// every custom operator 7 unless it says otherwise (only 0 to 7 are
    /// told apart).
    ///
    /// Only these 3 bits travel (in every message's header, and in the
    /// one-sided algorithms' flag words, where no byte is free), so the
    /// check cannot tell two custom operators apart: both are 7 (an id above
    /// 7 counts as 7). Members that pass *different* custom operators with
    /// the same element type and length are not told: each combine uses the
    /// operator of the member doing it, and the result mixes both — a wrong
    /// answer, not an error. Pass the same operator on every member. A
    /// program with two custom operators that one member might pass where
    /// another passes the other can give one of them id 0 (no built-in
    /// uses it), which the check then tells apart from 7. (An id from the
    /// closure's type would need more bits than the header has; a
    /// closure's type name is its enclosing function's, the same for every
    /// closure there.)
    fn id(&self) -> u8 {
        7
    }

    /// `acc[i] = acc[i] ⊕ other[i]` (`acc_left`) or `other[i] ⊕ acc[i]`,
    /// with `other` the native bytes of `acc.len()` elements, unaligned.
    fn fold(&self, acc: &mut [T], other: &[u8], acc_left: bool) {
        for (i, a) in acc.iter_mut().enumerate() {
            let b = read_at::<T>(other, i);
            *a = if acc_left {
                self.combine(*a, b)
            } else {
                self.combine(b, *a)
            };
        }
    }
}

#[inline(always)]
fn fold_with<T: Element>(acc: &mut [T], other: &[u8], acc_left: bool, f: impl Fn(T, T) -> T) {
    if acc_left {
        for (i, a) in acc.iter_mut().enumerate() {
            *a = f(*a, read_at::<T>(other, i));
        }
    } else {
        for (i, a) in acc.iter_mut().enumerate() {
            *a = f(read_at::<T>(other, i), *a);
        }
    }
}

impl<T: Element> Reduce<T> for Op {
    #[inline]
    fn combine(&self, a: T, b: T) -> T {
        match self {
            Op::Sum => a.add(b),
            Op::Min => a.min_of(b),
            Op::Max => a.max_of(b),
            Op::And => a.and(b),
            Op::Or => a.or(b),
            Op::Xor => a.xor(b),
        }
    }

    fn commutative(&self) -> bool {
        true
    }

    fn id(&self) -> u8 {
        match self {
            Op::Sum => 1,
            Op::Min => 2,
            Op::Max => 3,
            Op::And => 4,
            Op::Or => 5,
            Op::Xor => 6,
        }
    }

    fn check(&self) -> Result<(), CollError> {
        if matches!(self, Op::And | Op::Or | Op::Xor) && !T::INTEGER {
            return Err(CollError::OpUndefined {
                op: self.name(),
                ty: T::NAME,
            });
        }
        Ok(())
    }

    fn fold(&self, acc: &mut [T], other: &[u8], acc_left: bool) {
        // One match per slice, not per element.
        match self {
            Op::Sum => fold_with(acc, other, acc_left, T::add),
            Op::Min => fold_with(acc, other, acc_left, T::min_of),
            Op::Max => fold_with(acc, other, acc_left, T::max_of),
            Op::And => fold_with(acc, other, acc_left, T::and),
            Op::Or => fold_with(acc, other, acc_left, T::or),
            Op::Xor => fold_with(acc, other, acc_left, T::xor),
        }
    }
}

/// A user-defined operator made from a function; see [`custom`].
#[derive(Clone, Copy, Debug)]
pub struct Custom<F> {
    f: F,
    commutative: bool,
}

/// A user-defined associative operator, `f(a, b) = a ⊕ b` with `a` from
/// lower ranks. Declared non-commutative: results follow rank order.
///
/// Every member must pass the same operator: the check that members
/// passed the same arguments does not tell two custom operators apart
/// (see [`Reduce::id`]: a mix of two is a wrong answer, not an error).
///
/// ```
/// use fastmsg_handlers::{custom, Reduce};
/// let op = custom(|a: f64, b: f64| a * b);
/// assert_eq!(op.combine(2.0, 3.0), 6.0);
/// ```
pub fn custom<T: Element, F: Fn(T, T) -> T + 'static>(f: F) -> Custom<F> {
    Custom {
        f,
        commutative: false,
    }
}

impl<F> Custom<F> {
    /// Declare the operator commutative (lets rooted algorithms rotate the
    /// tree around the root; results may then differ in rounding from the
    /// rank-order result, but are still the same run to run).
    pub fn commutative(mut self) -> Self {
        self.commutative = true;
        self
    }
}

impl<T: Element, F: Fn(T, T) -> T + 'static> Reduce<T> for Custom<F> {
    #[inline]
    fn combine(&self, a: T, b: T) -> T {
        (self.f)(a, b)
    }

    fn commutative(&self) -> bool {
        self.commutative
    }

    fn fold(&self, acc: &mut [T], other: &[u8], acc_left: bool) {
        fold_with(acc, other, acc_left, &self.f);
    }
}

/// The sequential reference: `x[0] ⊕ x[1] ⊕ … ⊕ x[n-1]`, element-wise,
/// in rank order, left to right. (What rank-order algorithms compute up to
/// the association of ⊕; for integers and exact operators, exactly.)
pub fn reference<T: Element, R: Reduce<T>>(inputs: &[Vec<T>], op: &R) -> Vec<T> {
    let mut acc = inputs.first().cloned().unwrap_or_default();
    for x in &inputs[1.min(inputs.len())..] {
        for (a, b) in acc.iter_mut().zip(x) {
            *a = op.combine(*a, *b);
        }
    }
    acc
}
