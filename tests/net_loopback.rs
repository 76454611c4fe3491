//! The network transports on one host: `FASTMSG_NET=tcp` (here set through
//! the configuration) forces every pair of ranks onto the TCP ring
//! transport, so the storm, one-sided puts and a sleeping wait policy run
//! over the software NIC and the loopback — no namespaces needed. With the
//! `ofi` feature the same scenarios run over libfabric (`FASTMSG_NET=ofi`,
//! the default provider `tcp;ofi_rxm`).

mod common;

use common::storm::storm_rank;
use fastmsg::threads;
use fastmsg::{Config, NetMode, Rank, WaitPolicy};
use std::time::Duration;

type Net = fn(&mut Config);

fn tcp(c: &mut Config) {
    c.net.mode = NetMode::named("tcp").expect("a provider of every build");
    c.net.secret = Some("loopback-test-secret".into());
    c.timeout = Duration::from_secs(60);
}

#[cfg(feature = "ofi")]
fn ofi(c: &mut Config) {
    tcp(c);
    c.net.mode = NetMode::named("ofi").expect("a provider of every build");
}

/// Each scenario over TCP, and over libfabric where it is built.
macro_rules! over_each {
    ($scenario:ident: $tcp:ident, $ofi:ident) => {
        #[test]
        fn $tcp() {
            $scenario(tcp);
        }
        #[cfg(feature = "ofi")]
        #[test]
        fn $ofi() {
            $scenario(ofi);
        }
    };
}

over_each!(storm_4_ranks: storm_4_ranks_over_tcp, storm_4_ranks_over_ofi);
over_each!(storm_3_ranks_small_rings: storm_3_ranks_over_small_tcp_rings_sleeping, storm_3_ranks_over_small_ofi_rings_sleeping);
over_each!(puts_land_in_the_window: puts_land_in_the_window_over_tcp, puts_land_in_the_window_over_ofi);
over_each!(close_delivers_everything: close_delivers_everything_sent_before_it, close_delivers_everything_sent_before_it_over_ofi);

fn storm_4_ranks(net: Net) {
    let got = threads::run(4, net, |b| storm_rank(b, 600, 256 << 10, 0x7c9))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.iter().sum::<usize>(), 4 * 600);
}

fn storm_3_ranks_small_rings(net: Net) {
    // Small rings (4 slots of 256 bytes): every message of more than 216
    // bytes spans fragments and credit runs out constantly; the sleeping
    // policy must be woken (TCP: by the NIC thread; libfabric: by the
    // sleep's time-out, a rank asleep does not drive progress).
    let got = threads::run(
        3,
        |c| {
            net(c);
            c.net.rings.slots = 4;
            c.net.rings.slot_bytes = 256;
            c.wait = WaitPolicy::Sleep;
        },
        |b| storm_rank(b, 300, 8 << 10, 0x51ee),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.iter().sum::<usize>(), 3 * 300);
}

fn puts_land_in_the_window(net: Net) {
    threads::run(2, net, |mut b| {
        let win = b.window("w", 4096);
        let mut ep = b.start()?;
        let me = ep.rank().0;
        let peer = Rank(1 - me);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + me) as u8).collect();
        ep.put(win, peer, 64, &data)?;
        // The flag after the data: whoever sees it sees the data.
        ep.put_u64(win, peer, 8, 0xfeed_0000 + u64::from(me))?;
        let want = 0xfeed_0000 + u64::from(1 - me);
        // The NIC places puts without the target's help: just look.
        let t0 = std::time::Instant::now();
        while ep.read_u64(win, 8)? != want {
            assert!(t0.elapsed() < Duration::from_secs(20), "put never landed");
            ep.extract(usize::MAX)?;
            std::thread::yield_now();
        }
        let mut got = vec![0u8; 1000];
        ep.read_window(win, 64, &mut got)?;
        let expect: Vec<u8> = (0..1000u32).map(|i| (i * 7 + (1 - me)) as u8).collect();
        assert_eq!(got, expect);
        ep.close()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Send, then close at once: whatever a rank sent before it closed must be
/// handled by the time the receiver's `close` returns — also when the
/// close barrier's messages travel on other connections than the data
/// (rank 1's data to rank 2 versus rank 0's release to rank 2).
fn close_delivers_everything(net: Net) {
    let got = threads::run(3, net, |mut b| {
        let (h, n) = common::counting_handler(&mut b);
        let mut ep = b.start()?;
        let me = ep.rank().0;
        let data = vec![me as u8; 100_000];
        for i in 0..60 {
            for d in 0..3 {
                if d != me {
                    ep.send(Rank(d), h, &[&data[..1000 * (i % 50) + 1]])?;
                }
            }
        }
        ep.close()?;
        Ok(n.get())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got,
        vec![120, 120, 120],
        "messages handled before close returned"
    );
}
