//! [`Element`]: the types collectives move and reduce (`i64`, `u64`, `f64`,
//! and their 32-bit siblings).
//!
//! Elements travel in the host's native byte order, as MPI does on a
//! homogeneous cluster: every rank of a job must run on the same
//! architecture. Received bytes need not be aligned; they are read with
//! unaligned loads, so no copy is made just to align them.

use bytemuck::Pod;

/// A type collectives can move and reduce.
pub trait Element: Pod + PartialOrd + Send + 'static {
    /// Type name, for errors.
    const NAME: &'static str;
    /// Whether the bitwise operators (AND, OR, XOR) apply.
    const INTEGER: bool;
    /// Sum (wrapping for integers, so every order of a tie gives the same
    /// bits; IEEE addition for floats).
    fn add(self, other: Self) -> Self;
    /// Bitwise and (integers only; floats never reach it).
    fn and(self, other: Self) -> Self;
    /// Bitwise or.
    fn or(self, other: Self) -> Self;
    /// Bitwise exclusive or.
    fn xor(self, other: Self) -> Self;
    /// The smaller (for floats: IEEE `minNum`, a NaN loses).
    fn min_of(self, other: Self) -> Self;
    /// The larger (for floats: IEEE `maxNum`).
    fn max_of(self, other: Self) -> Self;
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            const INTEGER: bool = true;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn and(self, o: Self) -> Self { self & o }
            #[inline(always)]
            fn or(self, o: Self) -> Self { self | o }
            #[inline(always)]
            fn xor(self, o: Self) -> Self { self ^ o }
            #[inline(always)]
            fn min_of(self, o: Self) -> Self { Ord::min(self, o) }
            #[inline(always)]
            fn max_of(self, o: Self) -> Self { Ord::max(self, o) }
        }
    )*};
}

macro_rules! float_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            const INTEGER: bool = false;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn and(self, _: Self) -> Self { unreachable!("bitwise operators are refused on floats before any data moves") }
            #[inline(always)]
            fn or(self, _: Self) -> Self { unreachable!("bitwise operators are refused on floats before any data moves") }
            #[inline(always)]
            fn xor(self, _: Self) -> Self { unreachable!("bitwise operators are refused on floats before any data moves") }
            #[inline(always)]
            fn min_of(self, o: Self) -> Self { self.min(o) }
            #[inline(always)]
            fn max_of(self, o: Self) -> Self { self.max(o) }
        }
    )*};
}

int_element!(i64, u64, i32, u32);
float_element!(f64, f32);

/// The bytes of a slice of elements (native order).
#[inline]
pub(crate) fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// The bytes of a slice of elements, writable.
#[inline]
pub(crate) fn as_bytes_mut<T: Element>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

/// Element `i` of an unaligned byte slice.
#[inline(always)]
pub(crate) fn read_at<T: Element>(bytes: &[u8], i: usize) -> T {
    let s = std::mem::size_of::<T>();
    bytemuck::pod_read_unaligned(&bytes[i * s..(i + 1) * s])
}

/// Elements from native bytes (a whole number of them), unaligned.
pub(crate) fn from_bytes<T: Element>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    as_bytes_mut(&mut v).copy_from_slice(bytes);
    v
}
