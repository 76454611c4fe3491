//! The handler registry: names → dense ids, and the handlers themselves.
//!
//! Handlers are registered by name before `start`; ids are dense in
//! registration order and must be equal on every rank — `start` sends each
//! rank's name table to rank 0, which names the first difference if any
//! (see `crate::endpoint`). The table is frozen at start.
//!
//! Two kinds of handler:
//! - an `async` closure (FM 2.x): it starts when the first fragment of its
//!   message arrives and suspends in `Message::receive(..).await` when it
//!   asks for bytes that have not arrived. Each keeps a pool of pinned
//!   future slots ([`pool`]), so running one allocates nothing once warm;
//! - a plain function, run to completion once per arriving piece (fragment)
//!   with the bytes borrowed straight from the frame: the cheapest path, for
//!   small messages and for consumers that fold data as it streams in;
//! - a whole-message function ([`whole`]), a plain function underneath that
//!   gets each message as one contiguous slice.
//!
//! The registry is generic over the two handles a handler gets — the
//! context `C` and the message `M` (the endpoint's `Ctx` and `Message`,
//! which hold the engine that holds this table, so they are named where
//! the engine is, in `crate::endpoint::engine::core`) — and names neither:
//! nothing here depends on what a handle can do. A plain-function
//! handler's [`Piece`](piece::Piece) is pure data, defined here.
//!
//! An id may be *declared* before its function is given (`declare`, then
//! `define`), so that handlers can name each other (a request handler
//! sends to the reply handler and the other way round). `start` refuses a
//! declared id that was never defined.

pub(crate) mod piece;
pub(crate) mod pool;
pub(crate) mod whole;

use self::piece::Piece;
use crate::error::{BoxError, StartError};
use crate::id::HandlerId;
use std::future::Future;

/// What a handler returns: `Ok(())`, or any error (reported by `extract`).
pub type HandlerResult = Result<(), BoxError>;

/// A plain-function handler, type-erased, given the context `C`.
pub(crate) type FnHandler<C> = Box<dyn FnMut(&C, &Piece<'_>) -> HandlerResult>;

/// A registered handler.
pub(crate) enum Entry<C, M> {
    /// An async handler and its pool of future slots.
    Async(Box<dyn pool::ErasedHandler<C, M>>),
    /// A plain function called per piece.
    Fn(FnHandler<C>),
    /// Declared, not defined yet (`start` refuses it).
    Declared,
}

/// The registry: names and type-erased handlers, indexed by id; the
/// handlers get context `C` and message `M`.
pub(crate) struct Registry<C, M> {
    names: Vec<String>,
    entries: Vec<Entry<C, M>>,
    /// The first bad `define` (reported by `start`).
    bad_define: Option<(HandlerId, &'static str)>,
}

impl<C, M> Default for Registry<C, M> {
    fn default() -> Self {
        Registry {
            names: Vec::new(),
            entries: Vec::new(),
            bad_define: None,
        }
    }
}

impl<C, M> std::fmt::Debug for Registry<C, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names)
            .finish()
    }
}

impl<C: 'static, M: 'static> Registry<C, M> {
    /// Add a handler; its id is the next dense index.
    pub(crate) fn register<F, Fut>(&mut self, name: &str, f: F) -> HandlerId
    where
        F: FnMut(C, M) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        let id = HandlerId(self.names.len() as u32);
        self.names.push(name.to_owned());
        self.entries
            .push(Entry::Async(Box::new(pool::Pooled::new(f))));
        id
    }

    /// Add a plain-function handler; its id is the next dense index.
    pub(crate) fn register_fn<F>(&mut self, name: &str, f: F) -> HandlerId
    where
        F: FnMut(&C, &Piece<'_>) -> HandlerResult + 'static,
    {
        let id = HandlerId(self.names.len() as u32);
        self.names.push(name.to_owned());
        self.entries.push(Entry::Fn(Box::new(f)));
        id
    }

    /// Reserve the next id for a handler defined later.
    pub(crate) fn declare(&mut self, name: &str) -> HandlerId {
        let id = HandlerId(self.names.len() as u32);
        self.names.push(name.to_owned());
        self.entries.push(Entry::Declared);
        id
    }

    /// Give declared id `id` its handler; a bad id is kept for `start` to
    /// report.
    pub(crate) fn define(&mut self, id: HandlerId, entry: Entry<C, M>) {
        let why = match self.entries.get_mut(id.0 as usize) {
            None => "no handler was declared under this id",
            Some(Entry::Declared) => {
                self.entries[id.0 as usize] = entry;
                return;
            }
            Some(_) => "it is already defined",
        };
        self.bad_define.get_or_insert((id, why));
    }

    /// An async handler's entry.
    pub(crate) fn async_entry<F, Fut>(f: F) -> Entry<C, M>
    where
        F: FnMut(C, M) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        Entry::Async(Box::new(pool::Pooled::new(f)))
    }

    /// Add a plain-function handler given as an entry.
    pub(crate) fn register_entry(&mut self, name: &str, entry: Entry<C, M>) -> HandlerId {
        let id = self.declare(name);
        self.entries[id.0 as usize] = entry;
        id
    }

    /// Reject a declared id that was never defined, or a bad `define`.
    pub(crate) fn check_defined(&self) -> Result<(), StartError> {
        if let Some((id, why)) = self.bad_define {
            return Err(StartError::BadDefinition { id: id.raw(), why });
        }
        match self
            .entries
            .iter()
            .position(|e| matches!(e, Entry::Declared))
        {
            Some(i) => Err(StartError::UndefinedHandler {
                id: i as u32,
                name: self.names[i].clone(),
            }),
            None => Ok(()),
        }
    }

    /// Per id, whether the handler is a plain function.
    pub(crate) fn fn_kinds(&self) -> Vec<bool> {
        self.entries
            .iter()
            .map(|e| matches!(e, Entry::Fn(_)))
            .collect()
    }

    /// Call plain-function handler `id` on a piece.
    #[inline]
    pub(crate) fn call_fn(&mut self, id: HandlerId, ctx: &C, piece: &Piece<'_>) -> HandlerResult {
        match &mut self.entries[id.0 as usize] {
            Entry::Fn(f) => f(ctx, piece),
            Entry::Async(_) | Entry::Declared => {
                unreachable!("handler {id} is async; the stream checked its kind")
            }
        }
    }

    /// Number of handlers.
    pub(crate) fn len(&self) -> u32 {
        self.names.len() as u32
    }

    /// Name of handler `id` (empty if out of range: an id of another
    /// endpoint's registry).
    pub(crate) fn name(&self, id: HandlerId) -> &str {
        self.names.get(id.0 as usize).map_or("", String::as_str)
    }

    /// The names in id order.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The async handler `id`.
    pub(crate) fn entry(&mut self, id: HandlerId) -> &mut dyn pool::ErasedHandler<C, M> {
        match &mut self.entries[id.0 as usize] {
            Entry::Async(h) => &mut **h,
            Entry::Fn(_) | Entry::Declared => {
                unreachable!("handler {id} is a plain function; the stream checked its kind")
            }
        }
    }

    /// Reject a table whose encoding passes [`MAX_TABLE_BYTES`] (no peer
    /// would accept it).
    pub(crate) fn check_table_size(&self) -> Result<(), StartError> {
        let bytes = 4 + self.names.iter().map(|n| 4 + n.len()).sum::<usize>();
        if bytes > MAX_TABLE_BYTES {
            return Err(StartError::HandlerTableTooLarge {
                handlers: self.len(),
                bytes: bytes as u64,
                max: MAX_TABLE_BYTES as u64,
            });
        }
        Ok(())
    }

    /// Reject a name registered twice.
    pub(crate) fn check_unique(&self) -> Result<(), StartError> {
        let mut seen = std::collections::HashMap::new();
        for (i, n) in self.names.iter().enumerate() {
            if let Some(first) = seen.insert(n.as_str(), i as u32) {
                return Err(StartError::DuplicateHandler {
                    name: n.clone(),
                    first,
                    second: i as u32,
                });
            }
        }
        Ok(())
    }
}

/// The longest encoded handler table ([`encode_table`]) a rank may send:
/// 1 MiB, e.g. ten thousand handlers with names of a hundred bytes. `start`
/// refuses a longer one ([`StartError::HandlerTableTooLarge`]); rank 0
/// refuses to buffer a longer one from a peer (`ControlOp::max_len`).
pub(crate) const MAX_TABLE_BYTES: usize = 1 << 20;

/// Encode a name table for the start-up comparison: the count, then each
/// name as its length and its UTF-8 bytes (u32 little-endian lengths).
/// Length-prefixed so that every table has its own encoding: names may be
/// empty or hold any character, `\0` included.
pub(crate) fn encode_table(names: &[String]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + names.iter().map(|n| 4 + n.len()).sum::<usize>());
    b.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for n in names {
        b.extend_from_slice(&(n.len() as u32).to_le_bytes());
        b.extend_from_slice(n.as_bytes());
    }
    b
}

/// Decode a table encoded by [`encode_table`].
///
/// # Errors
/// What is malformed: the table or a name runs past the end, a name is
/// not UTF-8, or bytes follow the last name.
pub(crate) fn decode_table(bytes: &[u8]) -> Result<Vec<String>, &'static str> {
    let mut rest = bytes;
    let word = |rest: &mut &[u8]| -> Result<usize, &'static str> {
        let (w, tail) = rest
            .split_first_chunk::<4>()
            .ok_or("handler table cut short")?;
        *rest = tail;
        Ok(u32::from_le_bytes(*w) as usize)
    };
    let count = word(&mut rest)?;
    // Every name takes at least its 4-byte length: a count the bytes
    // cannot hold is refused before anything is allocated for it.
    if count > rest.len() / 4 {
        return Err("handler table counts more names than it holds");
    }
    let mut names = Vec::with_capacity(count);
    for _ in 0..count {
        let len = word(&mut rest)?;
        if len > rest.len() {
            return Err("handler name runs past the end of the table");
        }
        let (name, tail) = rest.split_at(len);
        rest = tail;
        let name = std::str::from_utf8(name).map_err(|_| "handler name is not UTF-8")?;
        names.push(name.to_owned());
    }
    if !rest.is_empty() {
        return Err("bytes after the last handler name");
    }
    Ok(names)
}

/// The first index where two tables differ, with the names there.
pub(crate) fn first_difference(
    a: &[String],
    b: &[String],
) -> Option<(u32, Option<String>, Option<String>)> {
    let n = a.len().max(b.len());
    (0..n).find_map(|i| {
        let (x, y) = (a.get(i), b.get(i));
        (x != y).then(|| (i as u32, x.cloned(), y.cloned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tables_round_trip_and_compare() {
        let a = t(&["ping", "pong"]);
        assert_eq!(decode_table(&encode_table(&a)), Ok(a.clone()));
        assert_eq!(decode_table(&encode_table(&[])), Ok(Vec::new()));
        assert_eq!(first_difference(&a, &a), None);
        assert_eq!(
            first_difference(&a, &t(&["ping", "pang"])),
            Some((1, Some("pong".into()), Some("pang".into())))
        );
        assert_eq!(
            first_difference(&a, &t(&["ping"])),
            Some((1, Some("pong".into()), None))
        );
    }

    /// Found by the `handler_table` fuzz target: names joined by `\0`
    /// gave `[""]` and `[]` one encoding (a false mismatch), and `["a\0b"]`
    /// the encoding of `["a", "b"]` (a mismatch unseen, ids differing).
    #[test]
    fn every_table_has_its_own_encoding() {
        for v in [
            t(&[""]),
            t(&["", ""]),
            t(&["a\0b"]),
            t(&["a", "b"]),
            t(&["é", ""]),
        ] {
            assert_eq!(decode_table(&encode_table(&v)), Ok(v.clone()), "{v:?}");
        }
        assert_ne!(encode_table(&t(&[""])), encode_table(&[]));
        assert_ne!(encode_table(&t(&["a\0b"])), encode_table(&t(&["a", "b"])));
    }

    #[test]
    fn malformed_tables_are_refused() {
        let good = encode_table(&t(&["ping"]));
        assert!(decode_table(&good[..good.len() - 1]).is_err(), "cut short");
        assert!(
            decode_table(&[good.as_slice(), &[0]].concat()).is_err(),
            "trailing"
        );
        assert!(
            decode_table(&[1, 0, 0, 0, 1, 0, 0, 0, 0xff]).is_err(),
            "not UTF-8"
        );
        assert!(
            decode_table(&[0xff, 0xff, 0xff, 0xff]).is_err(),
            "huge count"
        );
        assert!(decode_table(&[]).is_err(), "empty");
    }

    proptest::proptest! {
        /// Every table has its own encoding; accepted bytes are canonical.
        #[test]
        fn table_encoding_is_a_bijection(
            names in proptest::collection::vec(".{0,12}", 0..8),
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            proptest::prop_assert_eq!(decode_table(&encode_table(&names)), Ok(names));
            if let Ok(t) = decode_table(&bytes) {
                proptest::prop_assert_eq!(encode_table(&t), bytes);
            }
        }
    }
}
