//! Helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! A target turns the fuzzer's bytes into input for one decoder of bytes
//! from another process or the network, runs the real code (through
//! `fastmsg::internal` where it is crate-private), and checks what it can:
//! a round trip, an independent model of the decoder, bounds — not only
//! that nothing crashed. AddressSanitizer (cargo-fuzz's default) checks
//! every memory access on the way.
//!
//! Adding a target for a decoder that reads a socket (a handshake, say):
//! give it a stream with [`fed_stream`] or [`fed_tcp`] (the fuzzer's bytes
//! then end of stream), run the decoder on it, check the typed result,
//! add a `[[bin]]` to `Cargo.toml` and seed inputs under
//! `corpus/<target>/`. `.ci/fuzz` runs every target `cargo fuzz list`
//! names.

use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use std::thread::JoinHandle;

/// A connected stream from which a reader gets exactly `bytes`, then end
/// of stream. A thread writes them (so any length works whatever the
/// socket buffer); drop the stream, then join it.
///
/// # Panics
/// If the socket pair cannot be made.
pub fn fed_stream(bytes: Vec<u8>) -> (UnixStream, JoinHandle<()>) {
    let (mut tx, rx) = UnixStream::pair().expect("socketpair");
    let writer = std::thread::spawn(move || {
        // The reader may stop early (a decoder that refuses the first
        // bytes): a broken pipe is expected then.
        let _ = tx.write_all(&bytes);
        let _ = tx.shutdown(Shutdown::Write);
    });
    (rx, writer)
}

/// As [`fed_stream`], over a loopback TCP connection (for decoders that
/// take a `TcpStream`). The reader's end closes with `SO_LINGER` 0 (a
/// reset) and the writer keeps its end until then, so millions of runs
/// leave no `TIME_WAIT` sockets behind and no byte is lost to the reset.
/// Drop the stream before joining the writer.
///
/// # Panics
/// If loopback TCP is unusable.
pub fn fed_tcp(bytes: Vec<u8>) -> (TcpStream, JoinHandle<()>) {
    static LISTENER: OnceLock<TcpListener> = OnceLock::new();
    let l = LISTENER.get_or_init(|| TcpListener::bind("127.0.0.1:0").expect("bind loopback"));
    let mut tx = TcpStream::connect(l.local_addr().expect("address")).expect("connect");
    let (rx, _) = l.accept().expect("accept");
    linger_zero(&rx);
    let writer = std::thread::spawn(move || {
        let _ = tx.write_all(&bytes);
        let _ = tx.shutdown(Shutdown::Write);
        // Wait for the reader's close (end of stream or reset).
        let _ = std::io::copy(&mut tx, &mut std::io::sink());
    });
    (rx, writer)
}

fn linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own, with a valid `linger`.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER");
}

/// Little-endian reads at fixed offsets, for models of wire formats.
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// As [`u32_at`], 8 bytes.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn fed_streams_deliver_the_bytes_then_end() {
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let (mut s, w) = fed_stream(data.clone());
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        drop(s);
        w.join().unwrap();
        assert_eq!(got, data);
        for _ in 0..3 {
            let (mut s, w) = fed_tcp(data.clone());
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            drop(s);
            w.join().unwrap();
            assert_eq!(got, data);
        }
        // A reader that stops early does not block the writer.
        let (s, w) = fed_tcp(data.clone());
        drop(s);
        w.join().unwrap();
    }
}
