//! [`OnBehalf`]: a collective the engine runs inside another one — the
//! allreduce by which an `Auto` algorithm agrees, at its first call, how
//! crowded the hosts are; the allgather by which the hierarchical barrier
//! learns the hosts' masters — under the name of the collective the user
//! called. Its messages carry that collective's kind (with the set-up's
//! algorithm bits, [`crate::sig::SETUP`]), so a member that called
//! something else meets a mismatch naming what each member called, and
//! its stall warnings and errors name the user's call, not the helper.

use super::{Io, Machine, Output};
use crate::error::CollError;
use crate::wire::Kind;

/// `inner`, run as part of a collective of kind `kind`.
pub(crate) struct OnBehalf {
    kind: Kind,
    inner: Box<dyn Machine>,
}

impl OnBehalf {
    pub(crate) fn new(kind: Kind, inner: Box<dyn Machine>) -> OnBehalf {
        OnBehalf { kind, inner }
    }
}

impl Machine for OnBehalf {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn start(&mut self, io: &Io<'_>) -> Result<(), CollError> {
        self.inner.start(io)
    }

    fn on_message(
        &mut self,
        io: &Io<'_>,
        from: u32,
        step: u16,
        data: &[u8],
    ) -> Result<(), CollError> {
        self.inner.on_message(io, from, step, data)
    }

    fn is_done(&self) -> bool {
        self.inner.is_done()
    }

    fn take_output(&mut self) -> Output {
        self.inner.take_output()
    }

    fn root(&self) -> Option<u32> {
        self.inner.root()
    }
}
