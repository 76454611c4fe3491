//! Hidden entry points into crate-private code, for the fuzz targets in
//! `fuzz/`: thin wrappers that forward to the real code. Compiled only
//! with the `internal` cargo feature; **not** public API, no semver
//! promise.

/// The collective message header (see the crate's `wire` module).
pub mod wire {
    use crate::error::CollError;
    use fastmsg::Rank;

    /// Header length in bytes.
    pub const HEADER: usize = crate::wire::HEADER;

    /// The raw kind byte of each collective, in wire order.
    pub const KINDS: [u8; 13] = [
        crate::wire::Kind::Barrier as u8,
        crate::wire::Kind::Bcast as u8,
        crate::wire::Kind::Reduce as u8,
        crate::wire::Kind::Allreduce as u8,
        crate::wire::Kind::Allgather as u8,
        crate::wire::Kind::Alltoall as u8,
        crate::wire::Kind::Alltoallv as u8,
        crate::wire::Kind::Gather as u8,
        crate::wire::Kind::Gatherv as u8,
        crate::wire::Kind::Scatter as u8,
        crate::wire::Kind::Scatterv as u8,
        crate::wire::Kind::Scan as u8,
        crate::wire::Kind::Exscan as u8,
    ];

    /// A parsed header: (group tag, instance, step, kind byte, call signature).
    pub type Fields = (u32, u32, u16, u8, u16);

    /// Parse the header of a message from `src`.
    ///
    /// # Errors
    /// [`CollError::ShortMessage`] if `b` is shorter than the header.
    pub fn parse(src: Rank, b: &[u8]) -> Result<Fields, CollError> {
        crate::wire::Header::parse(src, b).map(|h| (h.group, h.seq, h.step, h.kind, h.sig))
    }

    /// Emit a header.
    pub fn emit((group, seq, step, kind, sig): Fields) -> [u8; HEADER] {
        crate::wire::Header {
            group,
            seq,
            step,
            kind,
            sig,
        }
        .emit()
    }

    /// The name a message of kind byte `raw` is reported under.
    pub fn kind_name(raw: u8) -> &'static str {
        crate::wire::Kind::name_of(raw)
    }
}
