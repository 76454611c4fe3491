//! Alltoall and alltoallv: every member sends a block to every member.

use super::{downcast, Collectives};
use crate::blocks::Blocks;
use crate::element::Element;
use crate::error::CollError;
use crate::machine::alltoall::{Alltoall, Alltoallv};
use crate::request::Request;
use crate::sig::{type_code, Sig};
use fastmsg::Endpoint;

impl Collectives {
    /// Alltoall (MPI's `MPI_Alltoall`): `send` holds one block of the same
    /// length for each member, in member order; block `j` goes to member
    /// `j`. Returns the block each member sent here, in member order.
    ///
    /// Each block is one message, all sent at once in pairwise order
    /// (member `i` sends to `i + 1`, `i + 2`, … so no member is every
    /// sender's first destination): one latency and `n - 1` blocks per
    /// member (the `machine::alltoall` module docs weigh the alternatives).
    ///
    /// ```
    /// use fastmsg::threads;
    /// use fastmsg_handlers::{CollConfig, Collectives};
    ///
    /// let out = threads::run(3, |_| {}, |mut b| {
    ///     let coll = Collectives::register(&mut b, CollConfig::default());
    ///     let mut ep = b.start()?;
    ///     let me = ep.rank().0;
    ///     // Member `me` sends `10 * me + j` to member j.
    ///     let send: Vec<u32> = (0..3).map(|j| 10 * me + j).collect();
    ///     let got = coll.alltoall(&mut ep, &send)?;
    ///     ep.close()?;
    ///     Ok(got)
    /// }).unwrap();
    /// assert_eq!(out[1], vec![1, 11, 21]);
    /// ```
    ///
    /// # Errors
    /// [`CollError::BadArgument`] if `send.len()` is not a multiple of the
    /// group's size (the call fails on every member);
    /// [`CollError::LengthMismatch`] if members' blocks differ in length,
    /// [`CollError::ArgsMismatch`] in element type,
    /// [`CollError::Mismatch`] if a member called another collective,
    /// [`CollError::Aborted`] if another member found that first — on
    /// every member, within the call; send and progress failures.
    pub fn alltoall<T: Element>(&self, ep: &mut Endpoint, send: &[T]) -> Result<Vec<T>, CollError> {
        let m = Alltoall::new(self.group.n(), self.group.me, send);
        let sig = Sig::new(0, type_code::<T>(), 0, None);
        Ok(downcast(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking alltoall: the request yields what
    /// [`alltoall`](Self::alltoall) returns.
    ///
    /// # Errors
    /// As [`alltoall`](Self::alltoall), at start or from the request.
    pub fn ialltoall<T: Element>(
        &self,
        ep: &Endpoint,
        send: &[T],
    ) -> Result<Request<Vec<T>>, CollError> {
        let m = Alltoall::new(self.group.n(), self.group.me, send);
        let sig = Sig::new(0, type_code::<T>(), 0, None);
        self.request(ep, Box::new(m), sig)
    }

    /// Alltoallv (MPI's `MPI_Alltoallv`): `send` holds one block for each
    /// member, back to back in member order, block `j` of `counts[j]`
    /// elements going to member `j`. Returns the blocks the members sent
    /// here, in member order, with their lengths.
    ///
    /// Unlike MPI, a receiver needs no counts: a block's length travels
    /// as its message's, so members cannot pass counts that disagree. As
    /// [`alltoall`](Self::alltoall), every block leaves at once in
    /// pairwise order; empty blocks are sent too (as empty messages: each
    /// tells its receiver that the sender has nothing for it).
    ///
    /// # Errors
    /// [`CollError::BadArgument`] if `counts` does not have one count per
    /// member or they do not add up to `send.len()` (on every member);
    /// as [`alltoall`](Self::alltoall) otherwise.
    pub fn alltoallv<T: Element>(
        &self,
        ep: &mut Endpoint,
        send: &[T],
        counts: &[usize],
    ) -> Result<Blocks<T>, CollError> {
        let m = Alltoallv::new(self.group.n(), self.group.me, send, counts);
        let sig = Sig::new(0, type_code::<T>(), 0, None);
        Ok(downcast(self.run(ep, Box::new(m), sig)?))
    }

    /// Non-blocking alltoallv.
    ///
    /// # Errors
    /// As [`alltoallv`](Self::alltoallv), at start or from the request.
    pub fn ialltoallv<T: Element>(
        &self,
        ep: &Endpoint,
        send: &[T],
        counts: &[usize],
    ) -> Result<Request<Blocks<T>>, CollError> {
        let m = Alltoallv::new(self.group.n(), self.group.me, send, counts);
        let sig = Sig::new(0, type_code::<T>(), 0, None);
        self.request(ep, Box::new(m), sig)
    }
}
