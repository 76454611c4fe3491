//! The fragment header: what every transport carries in front of (shm slot)
//! or behind (network ring trailer) each frame's payload.
//!
//! A message of `total` bytes travels as one or more fragments; the first
//! has [`FragFlags::FIRST`] and carries `total`, the last has
//! [`FragFlags::LAST`]. A one-fragment message has both. Fragments of one
//! (sender, receiver) pair arrive in order and fragments of different
//! messages of one pair never interleave (the endpoint guarantees it).
//!
//! The header comes from another process or from the network, so it is
//! untrusted: [`FragHeader::check`] validates it once against the receiver's
//! limits and names what was wrong; after that no accessor can panic.

use crate::error::ProtocolError;

/// Fragment flags (bit set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FragFlags(pub u32);

impl FragFlags {
    /// First fragment of a message: starts a handler, carries `total`.
    pub const FIRST: FragFlags = FragFlags(1);
    /// Last fragment of a message.
    pub const LAST: FragFlags = FragFlags(2);
    /// Internal control traffic of the endpoint (not a user handler).
    pub const SYSTEM: FragFlags = FragFlags(4);
    /// With `LAST`: the sender aborted the message, which ends here with
    /// fewer bytes than declared (or with more attempted); its handler is
    /// told, the message is never padded.
    pub const ABORT: FragFlags = FragFlags(8);
    const KNOWN: u32 = 15;

    /// Whether every bit of `other` is set.
    #[inline]
    pub fn contains(self, other: FragFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for FragFlags {
    type Output = FragFlags;
    fn bitor(self, rhs: FragFlags) -> FragFlags {
        FragFlags(self.0 | rhs.0)
    }
}

/// Header of one fragment, 24 bytes, `repr(C)` because it is stored in shared
/// memory and in network trailers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FragHeader {
    /// Sending rank.
    pub src: u32,
    /// Handler id (dense index into the registry, equal on every rank).
    pub handler: u32,
    /// Payload bytes carried by this fragment.
    pub len: u32,
    /// [`FragFlags`] bits.
    pub flags: u32,
    /// Length of the whole message (meaningful on the first fragment).
    pub total: u64,
}

static_assertions::assert_eq_size!(FragHeader, [u8; 24]);

impl FragHeader {
    /// The flags as a typed set.
    #[inline]
    pub fn flags(&self) -> FragFlags {
        FragFlags(self.flags)
    }

    /// Validate an untrusted header: sender in range, known flags, payload
    /// no longer than the frame (`max_len`), and a first fragment not longer
    /// than its message.
    ///
    /// # Errors
    /// A [`ProtocolError`] naming the field that was wrong.
    pub fn check(&self, world: u32, max_len: usize) -> Result<(), ProtocolError> {
        if self.src >= world {
            return Err(ProtocolError::BadSource {
                src: self.src,
                world,
            });
        }
        if self.flags & !FragFlags::KNOWN != 0 {
            return Err(ProtocolError::BadFlags {
                src: self.src,
                flags: self.flags,
            });
        }
        if self.len as usize > max_len {
            return Err(ProtocolError::FrameTooLong {
                src: self.src,
                len: self.len as usize,
                max: max_len,
            });
        }
        if self.flags().contains(FragFlags::FIRST) && u64::from(self.len) > self.total {
            return Err(ProtocolError::LengthMismatch {
                src: self.src,
                total: self.total,
                got: u64::from(self.len),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> FragHeader {
        FragHeader {
            src: 1,
            handler: 0,
            len: 10,
            flags: (FragFlags::FIRST | FragFlags::LAST).0,
            total: 10,
        }
    }

    #[test]
    fn accepts_a_well_formed_header() {
        assert_eq!(good().check(2, 64), Ok(()));
    }

    #[test]
    fn names_each_bad_field() {
        let mut h = good();
        h.src = 7;
        assert!(matches!(
            h.check(2, 64),
            Err(ProtocolError::BadSource { src: 7, .. })
        ));
        let mut h = good();
        h.len = 65;
        h.total = 65;
        assert!(matches!(
            h.check(2, 64),
            Err(ProtocolError::FrameTooLong {
                len: 65,
                max: 64,
                ..
            })
        ));
        let mut h = good();
        h.flags |= 0x100;
        assert!(matches!(
            h.check(2, 64),
            Err(ProtocolError::BadFlags { .. })
        ));
        let mut h = good();
        h.total = 3;
        assert!(matches!(
            h.check(2, 64),
            Err(ProtocolError::LengthMismatch { .. })
        ));
    }
}
