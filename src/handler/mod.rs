//! The handler registry: names → dense ids, and the handlers themselves.
//!
//! Handlers are registered by name before `start`; ids are dense in
//! registration order and must be equal on every rank — `start` sends each
//! rank's name table to rank 0, which names the first difference if any
//! (see `crate::endpoint`). The table is frozen at start.
//!
//! A handler is an `async` closure: it starts when the first fragment of its
//! message arrives and suspends in `Message::receive(..).await` when it asks
//! for bytes that have not arrived (FM 2.x semantics). Each handler keeps a
//! pool of pinned future slots ([`pool`]), so running a handler allocates
//! nothing once the pool is warm.

pub(crate) mod pool;

use crate::endpoint::{Ctx, Message};
use crate::error::{BoxError, StartError};
use crate::id::HandlerId;
use std::future::Future;

/// What a handler returns: `Ok(())`, or any error (reported by `extract`).
pub type HandlerResult = Result<(), BoxError>;

/// The registry: names and type-erased handlers, indexed by id.
#[derive(Default)]
pub(crate) struct Registry {
    names: Vec<String>,
    entries: Vec<Box<dyn pool::ErasedHandler>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names)
            .finish()
    }
}

impl Registry {
    /// Add a handler; its id is the next dense index.
    pub(crate) fn register<F, Fut>(&mut self, name: &str, f: F) -> HandlerId
    where
        F: FnMut(Ctx, Message) -> Fut + 'static,
        Fut: Future<Output = HandlerResult> + 'static,
    {
        let id = HandlerId(self.names.len() as u32);
        self.names.push(name.to_owned());
        self.entries.push(Box::new(pool::Pooled::new(f)));
        id
    }

    /// Number of handlers.
    pub(crate) fn len(&self) -> u32 {
        self.names.len() as u32
    }

    /// Name of handler `id` (empty if out of range).
    pub(crate) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    /// The names in id order.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The handler `id`.
    pub(crate) fn entry(&mut self, id: u32) -> &mut dyn pool::ErasedHandler {
        &mut *self.entries[id as usize]
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

/// Encode a name table for the start-up comparison: names joined by `\0`.
pub(crate) fn encode_table(names: &[String]) -> Vec<u8> {
    names.join("\0").into_bytes()
}

/// Decode a table encoded by [`encode_table`].
pub(crate) fn decode_table(bytes: &[u8]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    String::from_utf8_lossy(bytes)
        .split('\0')
        .map(str::to_owned)
        .collect()
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
        assert_eq!(decode_table(&encode_table(&a)), a);
        assert_eq!(decode_table(&encode_table(&[])), Vec::<String>::new());
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
}
