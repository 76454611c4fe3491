//! The RDMA verbs backend (cargo feature `verbs`).
//!
//! Without the feature only [`probe`] exists, and says so.

use crate::error::VerbsError;

/// Check that an RDMA device can be opened; the first thing a rank asked
/// for `FASTMSG_NET=verbs` does, so a host without RDMA fails at once with
/// a clear error.
///
/// # Errors
/// [`VerbsError::NotBuilt`] in a build without the `verbs` feature.
#[cfg(not(feature = "verbs"))]
pub fn probe() -> Result<(), VerbsError> {
    Err(VerbsError::NotBuilt)
}
