//! Rooted collectives in a group of more than 128 members, where each
//! message carries the root after its payload (the signature holds it mod
//! 128 only): a broadcast and a reduce to root 129 on 130 ranks (threads,
//! mostly idle) give the right result on every member.

use fastmsg::{threads, Rank};
use fastmsg_handlers::{CollConfig, Collectives, Op};

#[test]
fn a_broadcast_and_a_reduce_on_130_ranks_to_root_129_are_right() {
    const N: u32 = 130;
    const ROOT: Rank = Rank(129);
    threads::run(
        N,
        |_| {},
        |mut b| {
            let coll = Collectives::register(&mut b, CollConfig::default());
            let mut ep = b.start()?;
            let me = ep.rank().0;
            let mut x = [f64::from(me); 3];
            coll.bcast(&mut ep, &mut x, ROOT)
                .unwrap_or_else(|e| panic!("rank {me}: broadcast: {e}"));
            assert_eq!(x, [f64::from(ROOT.0); 3], "rank {me}: broadcast");
            let mut y = [u64::from(me), 1];
            coll.reduce(&mut ep, &mut y, Op::Sum, ROOT)
                .unwrap_or_else(|e| panic!("rank {me}: reduce: {e}"));
            if me == ROOT.0 {
                let want = u64::from(N) * u64::from(N - 1) / 2;
                assert_eq!(y, [want, u64::from(N)], "reduce at the root");
            } else {
                assert_eq!(y, [u64::from(me), 1], "rank {me}: a non-root's buffer");
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
