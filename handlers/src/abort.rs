//! Abort messages ([`Kind::Abort`](crate::wire::Kind::Abort)): what their
//! `step` byte says about the sender (failed; failed and poisoned; gave
//! the instance up because poisoned — see `crate::engine`), the words they
//! carry, and the error they stand for on the receiver.

use crate::error::CollError;
use fastmsg::Rank;

/// The longest error text an abort message carries.
const MAX_WHY: usize = 400;

/// The `step` byte of an abort message: the instance failed on the
/// sender, whose engine is not poisoned.
pub(crate) const ABORT_FAILED: u16 = 0;
/// The instance failed on the sender, whose engine is poisoned by it: the
/// receiver poisons its own (see the module docs).
pub(crate) const ABORT_POISONED: u16 = 1;
/// The sender's engine is poisoned and gives this instance up (it refused
/// the call, or abandoned it running): the receiver fails the instance
/// with [`CollError::Poisoned`] and poisons its own.
pub(crate) const ABORT_GAVE_UP: u16 = 2;

/// The error an abort message from `by` stands for: [`CollError::Aborted`],
/// or [`CollError::Poisoned`] if the sender's engine is poisoned (`step`
/// [`ABORT_GAVE_UP`]; the text is then the poison's first cause).
pub(crate) fn aborted(group: u32, seq: u32, by: Rank, step: u16, data: &[u8]) -> CollError {
    let why = String::from_utf8_lossy(&data[..data.len().min(MAX_WHY)]).into_owned();
    if step == ABORT_GAVE_UP {
        return CollError::Poisoned(format!(
            "rank {by} gave up collective #{seq} of group {group:#x}: {why}"
        ));
    }
    CollError::Aborted {
        group,
        seq,
        by,
        why,
    }
}

/// The text that stands for `e` in a poison and in abort messages (a
/// poison's cause, without the words saying that the engine is poisoned).
pub(crate) fn cause(e: &CollError) -> String {
    match e {
        CollError::Poisoned(why) => why.clone(),
        e => e.to_string(),
    }
}

/// The words an abort message carries for `e`: its [`cause`], cut to
/// [`MAX_WHY`] bytes.
pub(crate) fn abort_text(e: &CollError) -> String {
    let mut why = cause(e);
    if why.len() > MAX_WHY {
        let mut cut = MAX_WHY;
        while !why.is_char_boundary(cut) {
            cut -= 1;
        }
        why.truncate(cut);
    }
    why
}
