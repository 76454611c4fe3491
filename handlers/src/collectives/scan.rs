//! Scan and exscan: prefix reductions over member order
//! (`machine::scan`: recursive doubling, ⌈log2 n⌉ steps).

use super::{downcast, Collectives};
use crate::element::Element;
use crate::error::CollError;
use crate::machine::scan::ScanMachine;
use crate::op::Reduce;
use crate::request::Request;
use crate::sig::{op_code, type_code, Sig};
use fastmsg::Endpoint;

impl Collectives {
    /// Inclusive scan (MPI's `MPI_Scan`): on return member `i`'s `data`
    /// holds `x[0] ⊕ … ⊕ x[i]`, element-wise. ⌈log2 n⌉ steps of recursive
    /// doubling; every combine has the lower members' block on the left,
    /// at a place fixed by the group size alone, so the operator need not
    /// commute and float results are the same bits run to run.
    ///
    /// ```
    /// use fastmsg::threads;
    /// use fastmsg_handlers::{CollConfig, Collectives, Op};
    ///
    /// let out = threads::run(4, |_| {}, |mut b| {
    ///     let coll = Collectives::register(&mut b, CollConfig::default());
    ///     let mut ep = b.start()?;
    ///     let mut x = [u64::from(ep.rank().0) + 1];
    ///     coll.scan(&mut ep, &mut x, Op::Sum)?;
    ///     ep.close()?;
    ///     Ok(x[0])
    /// }).unwrap();
    /// assert_eq!(out, vec![1, 3, 6, 10]);
    /// ```
    ///
    /// # Members passing different arguments
    /// A member that receives a partial from one that disagrees (length,
    /// element type, operator) fails and aborts the instance everywhere.
    /// The first member only sends, so — as for [`bcast`](Self::bcast)'s
    /// root — it may return `Ok` (with its own data, its right result)
    /// and learn of the mismatch at its next call ([`CollError::Poisoned`]).
    ///
    /// # Errors
    /// [`CollError::OpUndefined`] (e.g. AND on floats);
    /// [`CollError::LengthMismatch`], [`CollError::ArgsMismatch`],
    /// [`CollError::Mismatch`], [`CollError::Aborted`],
    /// [`CollError::Poisoned`] as above; send and progress failures.
    pub fn scan<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        data: &mut [T],
        op: R,
    ) -> Result<(), CollError> {
        op.check()?;
        let sig = Sig::new(0, type_code::<T>(), op_code(&op), None);
        let m = ScanMachine::new(self.group.n(), self.group.me, data.to_vec(), op, false);
        let out: Vec<T> = downcast(self.run(ep, Box::new(m), sig)?);
        data.copy_from_slice(&out);
        Ok(())
    }

    /// Non-blocking inclusive scan; the request yields the prefix.
    ///
    /// # Errors
    /// As [`scan`](Self::scan), at start or from the request.
    pub fn iscan<T: Element, R: Reduce<T>>(
        &self,
        ep: &Endpoint,
        data: Vec<T>,
        op: R,
    ) -> Result<Request<Vec<T>>, CollError> {
        op.check()?;
        let sig = Sig::new(0, type_code::<T>(), op_code(&op), None);
        let m = ScanMachine::new(self.group.n(), self.group.me, data, op, false);
        self.request(ep, Box::new(m), sig)
    }

    /// Exclusive scan (MPI's `MPI_Exscan`): member `i > 0` gets
    /// `Some(x[0] ⊕ … ⊕ x[i-1])`, member 0 gets `None` (no operator needs
    /// an identity; MPI leaves member 0's buffer undefined). The same
    /// algorithm and guarantees as [`scan`](Self::scan).
    ///
    /// ```
    /// use fastmsg::threads;
    /// use fastmsg_handlers::{CollConfig, Collectives, Op};
    ///
    /// // Where each member's items start in a global array.
    /// let out = threads::run(4, |_| {}, |mut b| {
    ///     let coll = Collectives::register(&mut b, CollConfig::default());
    ///     let mut ep = b.start()?;
    ///     let items = [u64::from(ep.rank().0) + 1];
    ///     let start = coll.exscan(&mut ep, &items, Op::Sum)?.map_or(0, |s| s[0]);
    ///     ep.close()?;
    ///     Ok(start)
    /// }).unwrap();
    /// assert_eq!(out, vec![0, 1, 3, 6]);
    /// ```
    ///
    /// # Errors
    /// As [`scan`](Self::scan).
    pub fn exscan<T: Element, R: Reduce<T>>(
        &self,
        ep: &mut Endpoint,
        data: &[T],
        op: R,
    ) -> Result<Option<Vec<T>>, CollError> {
        op.check()?;
        let sig = Sig::new(0, type_code::<T>(), op_code(&op), None);
        let m = ScanMachine::new(self.group.n(), self.group.me, data.to_vec(), op, true);
        Ok(downcast(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking exclusive scan.
    ///
    /// # Errors
    /// As [`exscan`](Self::exscan), at start or from the request.
    pub fn iexscan<T: Element, R: Reduce<T>>(
        &self,
        ep: &Endpoint,
        data: Vec<T>,
        op: R,
    ) -> Result<Request<Option<Vec<T>>>, CollError> {
        op.check()?;
        let sig = Sig::new(0, type_code::<T>(), op_code(&op), None);
        let m = ScanMachine::new(self.group.n(), self.group.me, data, op, true);
        self.request(ep, Box::new(m), sig)
    }
}
