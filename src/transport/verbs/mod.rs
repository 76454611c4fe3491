//! The RDMA verbs backend (cargo feature `verbs`): the same end-of-frame
//! length-flag rings ([`crate::ring`]) as the TCP transport, written by the
//! adapter itself — the MVAPICH "RDMA fast path" of IWARP §3.3.
//!
//! The ring protocol (rings, mirrors, credit, the safe mode's bookkeeping,
//! failures, the close flush) is [`crate::transport::net`]'s, shared with
//! the libfabric transport; this module is its wire ([`VerbsWire`]):
//!
//! - One RC queue pair per network peer, connected by rank order over the
//!   authenticated TCP connection of [`super::net::mesh`] (which carries
//!   the QP numbers, LID/GID, addresses and rkeys, and afterwards tells a
//!   dead peer by its end of file).
//! - Placement order: at queue-pair set-up the backend asks rdma-core
//!   (`ibv_query_qp_data_in_order`) whether an RDMA WRITE lands in order.
//!   If it does, the receiver polls the stamp word alone. If not, it uses
//!   the **safe mode**: RDMA WRITE with immediate, whose receive completion
//!   proves the whole write has landed.
//! - Credits: an 8-byte inline RDMA WRITE. One-sided `put` / `put_u64` are
//!   signaled RDMA WRITEs into the peer's registered window area.
//!
//! Not exercised on real hardware: the machines this was written on have no
//! RDMA device. What is tested is that it builds and that starting it
//! without a device fails with [`VerbsError::NoDevice`] (see the README).
//! A rank waiting with the `sleep` policy is not woken by RDMA writes (no
//! CPU sees them arrive); it notices within the sleep time-out (10 ms).

use super::net::provider::{Caps, OpenPlan, Provider};
use super::AnyTransport;
use crate::error::{StartError, VerbsError};

mod list;
#[cfg(feature = "verbs")]
mod qp;
#[cfg(feature = "verbs")]
mod wire;

pub use list::devices;
#[cfg(feature = "verbs")]
pub use wire::VerbsWire;

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

/// Check that an RDMA device can be opened; the first thing a rank asked
/// for `FASTMSG_NET=verbs` does, so a host without RDMA fails at once with
/// a clear error.
///
/// # Errors
/// [`VerbsError::NoDevice`] when `ibv_get_device_list` finds none (or
/// fails, as it does on kernels without InfiniBand support).
#[cfg(feature = "verbs")]
pub fn probe() -> Result<(), VerbsError> {
    qp::Device::open().map(drop)
}

/// The RDMA verbs wire as a provider (`FASTMSG_NET=verbs`, chosen only
/// by name).
pub(crate) struct VerbsProvider;

impl Provider for VerbsProvider {
    fn name(&self) -> &'static str {
        "verbs"
    }
    fn caps(&self) -> Caps {
        // Set-up is collective (the full mesh, see docs/scale.md); RDMA
        // writes ring no doorbell; the adapter's placing counts as a
        // second busy thread per rank.
        Caps {
            lazy_connect: false,
            busy_thread: true,
            rings_doorbell: false,
            auto: false,
        }
    }
    fn probe(&self) -> Result<(), StartError> {
        Ok(probe()?)
    }
    fn describe(&self) -> String {
        match devices() {
            Ok(d) if d.is_empty() => "built; no RDMA device found".into(),
            Ok(d) => format!("built; devices: {}", d.join(", ")),
            Err(VerbsError::NotBuilt) => {
                "not built (cargo feature `verbs`, needs rdma-core)".into()
            }
            Err(e) => e.to_string(),
        }
    }
    #[cfg(feature = "verbs")]
    fn open(&self, plan: OpenPlan) -> Result<AnyTransport, StartError> {
        let links = plan.connect_all()?;
        let wire = VerbsWire::open(links.len(), plan.geometry.slots)?;
        plan.open_eager(wire, links)
    }
    #[cfg(not(feature = "verbs"))]
    fn open(&self, _plan: OpenPlan) -> Result<AnyTransport, StartError> {
        Err(VerbsError::NotBuilt.into())
    }
}

#[cfg(all(test, feature = "verbs"))]
mod tests {
    use super::*;

    /// On a machine with RDMA hardware this test has nothing to check.
    #[test]
    fn without_a_device_start_fails_with_a_typed_error() {
        match probe() {
            Ok(()) => eprintln!("an RDMA device is present: the no-device path is not exercised"),
            Err(e) => {
                assert!(matches!(e, VerbsError::NoDevice { .. }), "{e}");
                assert!(e.to_string().contains("FASTMSG_NET=tcp"), "{e}");
            }
        }
    }
}
