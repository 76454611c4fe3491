//! Batch forms of the remote-word operations: a slice of items in one
//! call, for a program that already holds its updates or reads in an
//! array (Bale's kernels: millions of tiny operations).
//!
//! They are thin: the single forms already aggregate per owner (an owner
//! gets its items in the same aggregation buffers, one message per full
//! buffer; a fetching item for an owner on this host is one CPU atomic,
//! no message), so a batch is the single form in a loop. What the
//! batch adds is that every item is checked before any is issued: a bad
//! index or rank anywhere fails the whole batch with nothing applied.

use super::{MemError, RemoteWords};
use crate::rpc::RpcError;
use fastmsg::{Ctx, Rank, WordOp};

impl RemoteWords {
    /// Check every item's owner and index before any is issued.
    fn check_all(
        &self,
        ctx: &Ctx,
        items: impl Iterator<Item = (Rank, u64)>,
    ) -> Result<(), MemError> {
        for (owner, index) in items {
            if owner.0 >= ctx.size() {
                return Err(RpcError::BadDestination {
                    dest: owner,
                    size: ctx.size(),
                }
                .into());
            }
            self.check(index)?;
        }
        Ok(())
    }

    /// Add `value` (wrapping) to word `index` of `owner` for every
    /// `(owner, index, value)`; nothing comes back. As many
    /// [`add`](Self::add)s.
    ///
    /// # Errors
    /// [`MemError::OutOfRange`] or [`MemError::Rpc`]
    /// ([`RpcError::BadDestination`]) for any item: nothing is applied.
    /// Otherwise as [`add`](Self::add) (a peer gone, the endpoint
    /// closed): the items before the failing one are issued.
    pub fn add_many(&self, ctx: &Ctx, updates: &[(Rank, u64, u64)]) -> Result<(), MemError> {
        self.check_all(ctx, updates.iter().map(|&(o, i, _)| (o, i)))?;
        for &(owner, index, value) in updates {
            self.add(ctx, owner, index, value)?;
        }
        Ok(())
    }

    /// Read word `index` of `owner` for every `(owner, index)`: the
    /// completion ([`on_complete`](Self::on_complete)) gets item `k`'s
    /// value with token `first_token + k`. As many [`get`](Self::get)s.
    ///
    /// # Errors
    /// As [`add_many`](Self::add_many); also [`MemError::Rpc`] with
    /// [`RpcError::BadToken`] if the tokens reach 2^63 (nothing issued).
    pub fn get_many(
        &self,
        ctx: &Ctx,
        reads: &[(Rank, u64)],
        first_token: u64,
    ) -> Result<(), MemError> {
        self.check_all(ctx, reads.iter().copied())?;
        check_tokens(first_token, reads.len())?;
        for (k, &(owner, index)) in reads.iter().enumerate() {
            self.get(ctx, owner, index, first_token + k as u64)?;
        }
        Ok(())
    }

    /// Apply `op` to word `index` of `owner` for every `(owner, index,
    /// op)`: the completion gets item `k`'s previous value with token
    /// `first_token + k`. As many [`fetch`](Self::fetch)es.
    ///
    /// # Errors
    /// As [`get_many`](Self::get_many).
    pub fn fetch_many(
        &self,
        ctx: &Ctx,
        ops: &[(Rank, u64, WordOp)],
        first_token: u64,
    ) -> Result<(), MemError> {
        self.check_all(ctx, ops.iter().map(|&(o, i, _)| (o, i)))?;
        check_tokens(first_token, ops.len())?;
        for (k, &(owner, index, op)) in ops.iter().enumerate() {
            self.fetch(ctx, owner, index, op, first_token + k as u64)?;
        }
        Ok(())
    }
}

/// The tokens `first..first + n` all stay below 2^63.
fn check_tokens(first: u64, n: usize) -> Result<(), RpcError> {
    let last = first.checked_add((n as u64).saturating_sub(1));
    match last {
        Some(t) if t < 1 << 63 => Ok(()),
        _ => Err(RpcError::BadToken {
            token: last.unwrap_or(u64::MAX),
        }),
    }
}
