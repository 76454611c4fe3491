//! Gather and scatter, with fixed and varying counts: the personalized
//! rooted collectives (binomial trees, `machine::gather` and
//! `machine::scatter`).

use super::{downcast, Collectives};
use crate::blocks::Blocks;
use crate::element::Element;
use crate::error::CollError;
use crate::machine::gather::{Gather, Gatherv};
use crate::machine::scatter::{Scatter, Scatterv};
use crate::request::Request;
use crate::sig::{type_code, Sig};
use fastmsg::{Endpoint, Rank};

impl Collectives {
    /// Gather (MPI's `MPI_Gather`) by a binomial tree: every member
    /// contributes `mine`, of the same length everywhere; the root gets
    /// all contributions in member order, the other members an empty
    /// vector. ⌈log2 n⌉ steps; a member forwards its subtree's blocks in
    /// one message.
    ///
    /// ```
    /// use fastmsg::{threads, Rank};
    /// use fastmsg_handlers::{CollConfig, Collectives};
    ///
    /// let out = threads::run(4, |_| {}, |mut b| {
    ///     let coll = Collectives::register(&mut b, CollConfig::default());
    ///     let mut ep = b.start()?;
    ///     let me = ep.rank().0 as u64;
    ///     let all = coll.gather(&mut ep, &[me, me * me], Rank(2))?;
    ///     ep.close()?;
    ///     Ok(all)
    /// }).unwrap();
    /// assert_eq!(out[2], vec![0, 0, 1, 1, 2, 4, 3, 9]);
    /// assert!(out[0].is_empty());
    /// ```
    ///
    /// # Members passing different arguments
    /// As for [`bcast`](Self::bcast): the member that receives a block
    /// from one that disagrees (in length, element type or root) fails and
    /// aborts the instance everywhere; a member whose part was handed over
    /// before returns `Ok` and learns it at its next call
    /// ([`CollError::Poisoned`]).
    ///
    /// # Errors
    /// [`CollError::LengthMismatch`], [`CollError::ArgsMismatch`],
    /// [`CollError::Mismatch`], [`CollError::Aborted`],
    /// [`CollError::Poisoned`] as above; [`CollError::BadArgument`] if
    /// `root` is not a member; send and progress failures.
    pub fn gather<T: Element>(
        &self,
        ep: &mut Endpoint,
        mine: &[T],
        root: Rank,
    ) -> Result<Vec<T>, CollError> {
        let root = self.index_of(root)?;
        let m = Gather::new(self.group.n(), self.group.me, root, mine);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        Ok(downcast(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking gather: returns once this member's part is under way;
    /// its children's blocks are forwarded by the handler inside later
    /// `extract`s. The request yields what [`gather`](Self::gather)
    /// returns.
    ///
    /// # Errors
    /// As [`gather`](Self::gather), at start or from the request.
    pub fn igather<T: Element>(
        &self,
        ep: &Endpoint,
        mine: &[T],
        root: Rank,
    ) -> Result<Request<Vec<T>>, CollError> {
        let root = self.index_of(root)?;
        let m = Gather::new(self.group.n(), self.group.me, root, mine);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        self.request(ep, Box::new(m), sig)
    }

    /// Gatherv (MPI's `MPI_Gatherv`): as [`gather`](Self::gather), but
    /// every member's contribution may have its own length. The root gets
    /// the blocks in member order with their lengths; the other members
    /// get no blocks. Each message carries its blocks' counts (8 bytes per
    /// block), so the root is told them rather than passing them, and no
    /// count can disagree.
    ///
    /// # Errors
    /// As [`gather`](Self::gather), except that lengths cannot mismatch.
    pub fn gatherv<T: Element>(
        &self,
        ep: &mut Endpoint,
        mine: &[T],
        root: Rank,
    ) -> Result<Blocks<T>, CollError> {
        let root = self.index_of(root)?;
        let m = Gatherv::new(self.group.n(), self.group.me, root, mine);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        Ok(downcast(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking gatherv.
    ///
    /// # Errors
    /// As [`gatherv`](Self::gatherv), at start or from the request.
    pub fn igatherv<T: Element>(
        &self,
        ep: &Endpoint,
        mine: &[T],
        root: Rank,
    ) -> Result<Request<Blocks<T>>, CollError> {
        let root = self.index_of(root)?;
        let m = Gatherv::new(self.group.n(), self.group.me, root, mine);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        self.request(ep, Box::new(m), sig)
    }

    /// Scatter (MPI's `MPI_Scatter`) by a binomial tree: the root's `send`
    /// holds one block of `recv.len()` elements per member, in member
    /// order; on return each member's `recv` holds its block. `send`
    /// matters at the root only (others may pass `&[]`). ⌈log2 n⌉ steps;
    /// a member forwards its subtree's blocks but its own.
    ///
    /// ```
    /// use fastmsg::{threads, Rank};
    /// use fastmsg_handlers::{CollConfig, Collectives};
    ///
    /// let out = threads::run(3, |_| {}, |mut b| {
    ///     let coll = Collectives::register(&mut b, CollConfig::default());
    ///     let mut ep = b.start()?;
    ///     let send: Vec<i32> = if ep.rank() == Rank(1) { vec![5, 6, 7, 8, 9, 10] } else { vec![] };
    ///     let mut mine = [0i32; 2];
    ///     coll.scatter(&mut ep, &send, &mut mine, Rank(1))?;
    ///     ep.close()?;
    ///     Ok(mine)
    /// }).unwrap();
    /// assert_eq!(out, vec![[5, 6], [7, 8], [9, 10]]);
    /// ```
    ///
    /// # Members passing different arguments
    /// As for [`bcast`](Self::bcast): a member that receives a message
    /// from one that disagrees fails and aborts the instance everywhere;
    /// the root, which only sends, returns `Ok` and learns it at its next
    /// call.
    ///
    /// # Errors
    /// [`CollError::BadArgument`] if the root's `send` is not one block of
    /// `recv.len()` elements per member (the call fails on every member)
    /// or `root` is not a member; as [`gather`](Self::gather) otherwise.
    pub fn scatter<T: Element>(
        &self,
        ep: &mut Endpoint,
        send: &[T],
        recv: &mut [T],
        root: Rank,
    ) -> Result<(), CollError> {
        let root = self.index_of(root)?;
        let m = Scatter::new(self.group.n(), self.group.me, root, send, recv.len());
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        let out: Vec<T> = downcast(self.run(ep, Box::new(m), sig)?);
        recv.copy_from_slice(&out);
        Ok(())
    }

    /// Non-blocking scatter of `count` elements per member; the request
    /// yields this member's block.
    ///
    /// # Errors
    /// As [`scatter`](Self::scatter), at start or from the request.
    pub fn iscatter<T: Element>(
        &self,
        ep: &Endpoint,
        send: &[T],
        count: usize,
        root: Rank,
    ) -> Result<Request<Vec<T>>, CollError> {
        let root = self.index_of(root)?;
        let m = Scatter::new(self.group.n(), self.group.me, root, send, count);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        self.request(ep, Box::new(m), sig)
    }

    /// Scatterv (MPI's `MPI_Scatterv`): the root's `send` holds one block
    /// per member, back to back in member order, block `m` of `counts[m]`
    /// elements; returns this member's block. `send` and `counts` matter
    /// at the root only (others may pass `&[]`): each message carries its
    /// blocks' counts, so a member learns the length of its block.
    ///
    /// # Errors
    /// [`CollError::BadArgument`] if the root's `counts` are not one per
    /// member adding up to `send.len()` (on every member); as
    /// [`scatter`](Self::scatter) otherwise, except that lengths cannot
    /// mismatch.
    pub fn scatterv<T: Element>(
        &self,
        ep: &mut Endpoint,
        send: &[T],
        counts: &[usize],
        root: Rank,
    ) -> Result<Vec<T>, CollError> {
        let root = self.index_of(root)?;
        let m = Scatterv::new(self.group.n(), self.group.me, root, send, counts);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        Ok(downcast(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking scatterv.
    ///
    /// # Errors
    /// As [`scatterv`](Self::scatterv), at start or from the request.
    pub fn iscatterv<T: Element>(
        &self,
        ep: &Endpoint,
        send: &[T],
        counts: &[usize],
        root: Rank,
    ) -> Result<Request<Vec<T>>, CollError> {
        let root = self.index_of(root)?;
        let m = Scatterv::new(self.group.n(), self.group.me, root, send, counts);
        let sig = Sig::new(0, type_code::<T>(), 0, Some(root));
        self.request(ep, Box::new(m), sig)
    }
}
