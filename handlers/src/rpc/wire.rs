//! The wire form of calls: requests are the `Req` items of an aggregated
//! channel; responses are framed items — `0` then the `Resp` bytes, or `1`
//! then a little-endian u32 length and the handler's error text — in the
//! order the owner handled the requests.

use super::{Inner, RpcError};
use crate::aggregate::{AggError, Outbox};
use bytemuck::Pod;
use fastmsg::{Ctx, EndpointBuilder, Rank};
use std::rc::Rc;

/// First byte of an answer.
const OK: u8 = 0;
/// First byte of a handler's error.
const ERR: u8 = 1;
/// Longest error text sent back (longer ones are cut).
const MAX_ERROR_TEXT: usize = 1024;

/// Requests of a buffer hinted ([`define_requests`]'s `prefetch`) ahead
/// of the one being handled.
const AHEAD: usize = 8;

/// Define the owner's side: the request handler runs `handler` per
/// request and appends its answer to the caller's response buffer.
/// `prefetch` runs on the request [`AHEAD`] places after the one being
/// handled (and on the first ones before the first): a hint such as
/// prefetching the memory that request's handler will read, so that the
/// cache misses of successive requests overlap.
pub(super) fn define_requests<Req, Resp, E, F, P>(
    b: &mut EndpointBuilder,
    name: &str,
    requests: &Outbox<Req>,
    responses: Rc<Outbox<u8>>,
    mut handler: F,
    prefetch: P,
) where
    Req: Pod,
    Resp: Pod,
    E: std::fmt::Display,
    F: FnMut(&Ctx, Rank, Req) -> Result<Resp, E> + 'static,
    P: Fn(&Ctx, Req) + 'static,
{
    let item = std::mem::size_of::<Req>().max(1);
    let max = requests.cap.max(item);
    let channel = name.to_owned();
    // One answer: the tag, then the response's bytes.
    let answer = 1 + std::mem::size_of::<Resp>();
    // The answers of one request buffer, written as the handler returns
    // them and appended to the caller's buffer together: between two
    // requests there is no out-of-line call, so the loads of successive
    // requests' handlers may overlap.
    let mut run: Vec<u8> = Vec::new();
    b.define_whole(requests.handler, max, move |ctx, src, bytes| {
        if bytes.len() % item != 0 {
            return Err(AggError::malformed(
                src,
                &channel,
                format!(
                    "{} request bytes are not a whole number of {item}-byte requests",
                    bytes.len()
                ),
            )
            .into());
        }
        run.clear();
        run.reserve(bytes.len() / item * answer);
        let read = |c: &[u8]| {
            if std::mem::size_of::<Req>() == 0 {
                Req::zeroed()
            } else {
                bytemuck::pod_read_unaligned(c)
            }
        };
        let mut ahead = bytes.chunks_exact(item);
        for c in ahead.by_ref().take(AHEAD) {
            prefetch(ctx, read(c));
        }
        for c in bytes.chunks_exact(item) {
            if let Some(a) = ahead.next() {
                prefetch(ctx, read(a));
            }
            let req = read(c);
            match handler(ctx, src, req) {
                Ok(resp) => {
                    run.push(OK);
                    run.extend_from_slice(bytemuck::bytes_of(&resp));
                }
                Err(e) => {
                    // The answers before it leave first: order holds.
                    answer_run(ctx, src, &responses, &run, answer)?;
                    run.clear();
                    let mut text = e.to_string();
                    if text.len() > MAX_ERROR_TEXT {
                        let mut cut = MAX_ERROR_TEXT;
                        while !text.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        text.truncate(cut);
                    }
                    let len = (text.len() as u32).to_le_bytes();
                    sent(responses.push(ctx, src, &[&[ERR], &len, text.as_bytes()]))?;
                }
            }
        }
        answer_run(ctx, src, &responses, &run, answer)
    });
}

/// Append `run`, whole answers of `answer` bytes, to `src`'s response
/// buffer.
fn answer_run(
    ctx: &Ctx,
    src: Rank,
    responses: &Outbox<u8>,
    run: &[u8],
    answer: usize,
) -> Result<(), fastmsg::error::BoxError> {
    if run.is_empty() {
        return Ok(());
    }
    sent(responses.push_run(ctx, src, run, answer))
}

/// An answer's send: a caller that is gone waits for nothing, so only
/// other failures are errors.
fn sent(r: Result<(), AggError>) -> Result<(), fastmsg::error::BoxError> {
    match r {
        Ok(()) | Err(AggError::Send(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Define the caller's side: each answer completes the oldest call
/// waiting for its owner.
pub(super) fn define_responses<Resp: Pod>(
    b: &mut EndpointBuilder,
    name: &str,
    responses: &Outbox<u8>,
    inner: Rc<Inner<Resp>>,
) {
    let size = std::mem::size_of::<Resp>();
    let max = responses.cap.max(1 + size).max(5 + MAX_ERROR_TEXT);
    let channel = name.to_owned();
    b.define_whole(responses.handler, max, move |ctx, src, mut bytes| {
        // The callback is taken out once for the whole buffer.
        let mut held = inner.complete.hold();
        while let Some((&tag, rest)) = bytes.split_first() {
            let (r, rest) = match tag {
                OK if rest.len() >= size => {
                    let v = if size == 0 {
                        Resp::zeroed()
                    } else {
                        bytemuck::pod_read_unaligned(&rest[..size])
                    };
                    (Ok(v), &rest[size..])
                }
                ERR if rest.len() >= 4 => {
                    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                    let Some(text) = rest.get(4..4 + len) else {
                        return Err(AggError::malformed(
                            src,
                            &channel,
                            format!("an error text of {len} bytes with {} left", rest.len() - 4),
                        )
                        .into());
                    };
                    let e = RpcError::Handler {
                        channel: channel.clone(),
                        rank: src,
                        message: String::from_utf8_lossy(text).into_owned(),
                    };
                    (Err(e), &rest[4 + len..])
                }
                t => {
                    return Err(AggError::malformed(
                        src,
                        &channel,
                        format!("answer tag {t} with {} bytes left", rest.len()),
                    )
                    .into())
                }
            };
            let Some(token) = inner.answered(src) else {
                return Err(AggError::malformed(
                    src,
                    &channel,
                    "an answer with no call waiting for it",
                )
                .into());
            };
            inner.finish_held(&mut held, ctx, src, token, r);
            bytes = rest;
        }
        Ok(())
    });
}
