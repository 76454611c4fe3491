//! Helpers shared by the integration tests: deterministic message contents
//! that a receiver can verify byte by byte without storing what was sent.

#![allow(dead_code)]

pub mod fmrun;
pub mod launch;
pub mod netns;
pub mod procs;
pub mod storm;

/// SplitMix64: a tiny deterministic generator.
#[derive(Clone, Copy, Debug)]
pub struct Mix(pub u64);

impl Mix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Byte `i` of message `seq` from `src` to `dst`.
#[inline]
pub fn byte_at(src: u32, dst: u32, seq: u64, i: u64) -> u8 {
    let x = (u64::from(src) << 48) ^ (u64::from(dst) << 40) ^ (seq << 20) ^ i;
    let x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

/// Message `seq` from `src` to `dst` of `len` bytes: an 8-byte header
/// carrying `seq`, then verifiable bytes.
pub fn message(src: u32, dst: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let h = seq.to_le_bytes();
    let n = len.min(8);
    v[..n].copy_from_slice(&h[..n]);
    for (i, b) in v.iter_mut().enumerate().skip(8) {
        *b = byte_at(src, dst, seq, i as u64);
    }
    v
}

/// Checks an arriving message piece by piece against `message(src, dst,
/// seq, len)`, where `seq` is the sequence number the receiver expects next
/// from `src` — so a message out of order fails the check.
#[derive(Debug)]
pub struct Checker {
    pub src: u32,
    pub dst: u32,
    pub seq: u64,
    pub len: usize,
    pub seen: usize,
}

impl Checker {
    pub fn new(src: u32, dst: u32, seq: u64, len: usize) -> Self {
        Checker {
            src,
            dst,
            seq,
            len,
            seen: 0,
        }
    }

    /// Feed the bytes at `offset` (pieces must come in order).
    pub fn feed(&mut self, offset: usize, data: &[u8]) -> Result<(), String> {
        if offset != self.seen {
            return Err(format!("piece at {offset}, expected {}", self.seen));
        }
        if offset + data.len() > self.len {
            return Err(format!(
                "piece runs to {}, message is {}",
                offset + data.len(),
                self.len
            ));
        }
        let h = self.seq.to_le_bytes();
        for (k, &b) in data.iter().enumerate() {
            let i = offset + k;
            let want = if i < 8 {
                h[i]
            } else {
                byte_at(self.src, self.dst, self.seq, i as u64)
            };
            if b != want {
                return Err(format!(
                    "byte {i} of message {} ({} B) from rank {} to {}: got {b}, want {want}",
                    self.seq, self.len, self.src, self.dst
                ));
            }
        }
        self.seen += data.len();
        Ok(())
    }

    pub fn done(&self) -> bool {
        self.seen == self.len
    }
}

/// Register a handler named "count" that counts whole messages (their last
/// piece); returns its id and the count the test waits on.
pub fn counting_handler(
    b: &mut fastmsg::EndpointBuilder,
) -> (fastmsg::HandlerId, std::rc::Rc<std::cell::Cell<u32>>) {
    let n = std::rc::Rc::new(std::cell::Cell::new(0u32));
    let c = n.clone();
    let h = b.register_fn("count", move |_ctx, p| {
        if p.is_last() {
            c.set(c.get() + 1);
        }
        Ok(())
    });
    (h, n)
}
