//! Control traffic of the endpoint itself, carried as SYSTEM messages over
//! the same transports as user messages (so it works for any transport mix):
//!
//! - **start**: every rank sends its handler-name table to rank 0
//!   ([`OP_TABLE`]); rank 0 compares each with its own and sends every rank
//!   the verdict ([`OP_VERDICT`]): "ok", or the first differing handler.
//! - **close**: every rank reports [`OP_CLOSE`] to rank 0; when all have,
//!   rank 0 sends [`OP_RELEASE`] to all, so no rank leaves while another may
//!   still be sending to it.

use crate::error::{ProtocolError, StartError};
use crate::handler::{decode_table, first_difference};
use crate::id::Rank;

/// A rank's handler table, to rank 0.
pub(crate) const OP_TABLE: u32 = 1;
/// Rank 0's verdict on the tables.
pub(crate) const OP_VERDICT: u32 = 2;
/// A rank has called `close`.
pub(crate) const OP_CLOSE: u32 = 3;
/// Everyone has called `close`.
pub(crate) const OP_RELEASE: u32 = 4;

/// The verdict of the table comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Mismatch {
        index: u32,
        rank: Rank,
        ours: Option<String>,
        theirs: Option<String>,
    },
}

impl Verdict {
    fn encode(&self) -> Vec<u8> {
        match self {
            Verdict::Ok => vec![0],
            Verdict::Mismatch {
                index,
                rank,
                ours,
                theirs,
            } => {
                let mut v = vec![1];
                v.extend_from_slice(&index.to_le_bytes());
                v.extend_from_slice(&rank.0.to_le_bytes());
                for s in [ours, theirs] {
                    match s {
                        None => v.extend_from_slice(&u32::MAX.to_le_bytes()),
                        Some(s) => {
                            v.extend_from_slice(&(s.len() as u32).to_le_bytes());
                            v.extend_from_slice(s.as_bytes());
                        }
                    }
                }
                v
            }
        }
    }

    fn decode(src: Rank, b: &[u8]) -> Result<Verdict, ProtocolError> {
        let bad = |what| ProtocolError::BadControl { src: src.0, what };
        let word = |b: &[u8], at: usize| -> Result<u32, ProtocolError> {
            b.get(at..at + 4)
                .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
                .ok_or(bad("verdict too short"))
        };
        match b.first() {
            Some(0) if b.len() == 1 => Ok(Verdict::Ok),
            Some(1) => {
                let index = word(b, 1)?;
                let rank = Rank(word(b, 5)?);
                let mut at = 9;
                let mut names = [None, None];
                for name in &mut names {
                    let len = word(b, at)?;
                    at += 4;
                    if len != u32::MAX {
                        let s = b
                            .get(at..at + len as usize)
                            .ok_or(bad("verdict name runs past the end"))?;
                        *name = Some(String::from_utf8_lossy(s).into_owned());
                        at += len as usize;
                    }
                }
                let [ours, theirs] = names;
                Ok(Verdict::Mismatch {
                    index,
                    rank,
                    ours,
                    theirs,
                })
            }
            _ => Err(bad("unknown verdict")),
        }
    }

    /// As a start error, if a mismatch.
    pub(crate) fn into_result(self) -> Result<(), StartError> {
        match self {
            Verdict::Ok => Ok(()),
            Verdict::Mismatch {
                index,
                rank,
                ours,
                theirs,
            } => Err(StartError::HandlerMismatch {
                index,
                our_rank: Rank(0),
                ours,
                their_rank: rank,
                theirs,
            }),
        }
    }
}

/// Control state of one rank.
#[derive(Debug)]
pub(crate) struct Control {
    size: u32,
    own_table: Vec<String>,
    tables: Vec<Option<Vec<String>>>,
    tables_in: u32,
    pub(crate) verdict: Option<Verdict>,
    closes: u32,
    pub(crate) released: bool,
}

/// Messages to send in reaction: (destination, op, payload).
pub(crate) type Sends = Vec<(Rank, u32, Vec<u8>)>;

impl Control {
    pub(crate) fn new(size: u32) -> Self {
        Control {
            size,
            own_table: Vec::new(),
            tables: vec![None; size as usize],
            tables_in: 0,
            verdict: None,
            closes: 0,
            released: false,
        }
    }

    /// Rank 0's own table, to compare the others with.
    pub(crate) fn set_own_table(&mut self, names: Vec<String>) {
        self.own_table = names;
    }

    /// Handle a complete control message from `src`.
    pub(crate) fn on_message(
        &mut self,
        src: Rank,
        op: u32,
        payload: &[u8],
    ) -> Result<Sends, ProtocolError> {
        let bad = |what| ProtocolError::BadControl { src: src.0, what };
        match op {
            OP_TABLE => {
                let slot = self
                    .tables
                    .get_mut(src.index())
                    .ok_or(bad("table from unknown rank"))?;
                if slot.is_some() {
                    return Err(bad("table sent twice"));
                }
                *slot = Some(decode_table(payload));
                self.tables_in += 1;
                if self.tables_in < self.size {
                    return Ok(Vec::new());
                }
                let verdict = self
                    .tables
                    .iter()
                    .enumerate()
                    .find_map(|(r, t)| {
                        let t = t.as_deref().unwrap_or(&[]);
                        first_difference(&self.own_table, t).map(|(index, ours, theirs)| {
                            Verdict::Mismatch {
                                index,
                                rank: Rank(r as u32),
                                ours,
                                theirs,
                            }
                        })
                    })
                    .unwrap_or(Verdict::Ok);
                let bytes = verdict.encode();
                Ok((0..self.size)
                    .map(|r| (Rank(r), OP_VERDICT, bytes.clone()))
                    .collect())
            }
            OP_VERDICT => {
                if self.verdict.is_some() {
                    return Err(bad("verdict sent twice"));
                }
                self.verdict = Some(Verdict::decode(src, payload)?);
                Ok(Vec::new())
            }
            OP_CLOSE => {
                self.closes += 1;
                if self.closes > self.size {
                    return Err(bad("more closes than ranks"));
                }
                if self.closes < self.size {
                    return Ok(Vec::new());
                }
                self.closes = 0;
                Ok((0..self.size)
                    .map(|r| (Rank(r), OP_RELEASE, Vec::new()))
                    .collect())
            }
            OP_RELEASE => {
                self.released = true;
                Ok(Vec::new())
            }
            _ => Err(bad("unknown control operation")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_round_trips() {
        for v in [
            Verdict::Ok,
            Verdict::Mismatch {
                index: 2,
                rank: Rank(5),
                ours: Some("pong".into()),
                theirs: None,
            },
        ] {
            assert_eq!(Verdict::decode(Rank(0), &v.encode()), Ok(v));
        }
        assert!(Verdict::decode(Rank(0), &[1, 2]).is_err());
        assert!(Verdict::decode(Rank(0), &[]).is_err());
    }

    #[test]
    fn rank0_names_the_first_difference() {
        let mut c = Control::new(2);
        c.set_own_table(vec!["a".into(), "b".into()]);
        assert!(c.on_message(Rank(0), OP_TABLE, b"a\0b").unwrap().is_empty());
        let sends = c.on_message(Rank(1), OP_TABLE, b"a\0c").unwrap();
        assert_eq!(sends.len(), 2);
        let v = Verdict::decode(Rank(0), &sends[1].2).unwrap();
        assert_eq!(
            v,
            Verdict::Mismatch {
                index: 1,
                rank: Rank(1),
                ours: Some("b".into()),
                theirs: Some("c".into())
            }
        );
    }
}
