//! What every wire of the network transport is configured with: the
//! rings' geometry (all ranks agree; checked at connection) and where a
//! peer's one-sided writes land in this rank's shared segment.

use crate::ring::RingGeometry;
use crate::transport::shm::mapping::MapRef;
use crate::wake::Doorbell;
use crate::window::WindowView;

/// Settings of the network rings (all ranks agree; checked at connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetRingConfig {
    /// Slots per ring (`FASTMSG_NET_SLOTS`, a power of two ≥ 4).
    pub slots: u32,
    /// Bytes per slot including the 40-byte trailer
    /// (`FASTMSG_NET_SLOT_SIZE`, a multiple of 64).
    pub slot_bytes: u32,
}

impl Default for NetRingConfig {
    fn default() -> Self {
        NetRingConfig {
            slots: 16,
            slot_bytes: 64 << 10,
        }
    }
}

impl NetRingConfig {
    /// The ring geometry, if the settings are usable.
    pub fn geometry(&self) -> Option<RingGeometry> {
        RingGeometry::checked(self.slots, self.slot_bytes)
    }
}

/// Where remote one-sided writes land and whom to wake: this rank's window
/// area and doorbell in the host's shared segment, each a view that keeps
/// the segment mapped.
#[derive(Debug, Clone)]
pub(crate) struct NetTargets {
    /// The window area (`ShmTransport::own_window`).
    pub(crate) window: WindowView,
    /// The doorbell to ring when a record lands (a sleeping wait policy).
    pub(crate) bell: Option<MapRef<Doorbell>>,
}
