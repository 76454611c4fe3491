//! Chaos on the words of a running job's shared segment: a three-rank
//! storm (`common::storm`) runs in a private `FASTMSG_SHM_DIR` while this
//! process — same user, as any process of the user could — writes into the
//! segment file one kind of word per run. The scribbler knows every kind:
//! receive-queue slot stamps (garbage, or set back one lap: a value the
//! protocol itself writes there), frames' in-use flags (garbage, or "in
//! use": a protocol value), free-list heads, queue tails, credit lines;
//! the runs cover every kind of [`ROTATION`], with dedicated queues or
//! shared ones (`FASTMSG_QUEUES=1`).
//!
//! Every rank must end within [`END_WITHIN`] of the scribble, either with
//! success (the word was not in use then, or any value of it is sound: the
//! output says so) or with a typed error; when any rank fails, at least
//! one names the queue failure itself (`QueueCorrupt` and its kin, or
//! `QueueHole`, on the receiving side, `PeerQueueCorrupt`, `PeerFramesCorrupt`,
//! `PeerCreditCorrupt`, `PeerQueueStuck` on the sending side), the others
//! may report the peer as gone. The output prints each rank's error. No rank may hang, panic (the storm checks every byte: a wrong
//! byte panics) or leave a file in the directory.
//!
//! Also: a job whose directory (a small tmpfs the test mounts; root only,
//! skipped with a message otherwise; unmounted in every case) fills up
//! before start, during start-up or while it runs: every rank ends with
//! success or a typed error (before start: every rank fails, one with
//! `NoSpace`), never a signal (SIGBUS), and nothing is left behind.
//!
//! Ranks are processes started by hand. The seed of each run is printed;
//! `CHAOS_SEED` replays one; `CHAOSQ_KINDS` (say `StampLapOld:Shared`) runs only
//! the kinds named.

mod common;

use common::procs::{self, Spawner};
use common::storm::storm_rank_then;
use fastmsg::EndpointBuilder;
use rand::{Rng, SeedableRng};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const RANKS: u32 = 3;
/// Every rank must have ended this long after the scribble.
const END_WITHIN: Duration = Duration::from_secs(5);
/// Exit status of a rank that reported a typed error naming a queue
/// failure.
const CORRUPT: i32 = 3;
/// Exit status of a rank that reported another rank's failure (gone,
/// died, aborted).
const PEER: i32 = 4;
/// Exit status of a rank that reported an error of any other kind.
const OTHER: i32 = 5;

/// The segment's magic (its first word once ready).
const MAGIC: u64 = u64::from_le_bytes(*b"FASTMSG\x01");
const HEADER_BYTES: u64 = 4096;
const LINE: u64 = 64;

/// Whether `e` names a corrupted or stuck queue (`QueueCorrupt`: one this
/// rank reads; the `Peer…` errors: one it writes on a peer).
fn names_queue(e: &impl std::fmt::Debug) -> bool {
    let d = format!("{e:?}");
    [
        "QueueCorrupt",
        "QueueTailCorrupt",
        "QueueFramesCorrupt",
        "CreditLineCorrupt",
        "PeerFramesCorrupt",
        "PeerCreditCorrupt",
        "PeerQueueStuck",
        "QueueHole",
    ]
    .iter()
    .any(|k| d.contains(k))
}

/// The rank program: a storm; marks its start-up with a file; exits 0 on
/// success, else one of the statuses above (the error printed).
#[test]
fn scribble_rank() {
    let Ok(dir) = std::env::var("CHAOSQ_DIR") else {
        return;
    };
    let b = EndpointBuilder::from_env().expect("env");
    let msgs = std::env::var("CHAOSQ_MSGS").map_or(3000, |v| v.parse().unwrap());
    let r = storm_rank_then(
        b,
        msgs,
        16 << 10,
        0x5c1b,
        |rank| {
            std::fs::write(Path::new(&dir).join(format!("started-{rank}")), b"").unwrap();
        },
        |ep, e| {
            // A send names only the failed peer; the endpoint's next wait
            // (here `close`) names how it failed.
            let closed = ep.close();
            let code = match &closed {
                Err(c) if names_queue(c) && !names_queue(e) => CORRUPT,
                _ => 0,
            };
            if code != 0 {
                let rank = std::env::var("FASTMSG_RANK").unwrap();
                eprintln!("RANK-ERROR {rank}: {e} ({e:?}); close: {closed:?}");
                std::process::exit(code);
            }
        },
    );
    let rank = std::env::var("FASTMSG_RANK").unwrap();
    match r {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("RANK-ERROR {rank}: {e} ({e:?})");
            let code = if names_queue(&e) {
                CORRUPT
            } else if e.is_peer_failure() || e.is_abort() {
                PEER
            } else {
                OTHER
            };
            std::process::exit(code);
        }
    }
}

/// The kinds of word a run scribbles on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Every slot stamp of every queue: garbage.
    StampGarbage,
    /// Every slot stamp of every queue set back one lap (`stamp - slots`),
    /// a value the protocol writes there.
    StampLapOld,
    /// Every frame's in-use flag: garbage (7).
    FlagGarbage,
    /// Every frame's in-use flag: 1 ("in use", a protocol value).
    FlagInUse,
    /// Every queue's free-list head: garbage.
    FreeHead,
    /// Every queue's tail counter: garbage.
    Tail,
    /// Every credit line: garbage (past anything sent).
    CreditGarbage,
    /// Every credit line: 0 (backwards, a value the line once held).
    CreditZero,
}

/// Which queues a run uses.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Queues {
    /// One queue per sender (the default).
    Dedicated,
    /// One queue per receiver, all senders share it (`FASTMSG_QUEUES=1`).
    Shared,
    /// Either, by the seed.
    Either,
}

/// The rotation: every (kind, queues) a run may scribble; each run of
/// the test takes every entry once, in an order the seed rotates.
/// `CHAOSQ_KINDS` (comma-separated `Kind:queues` names, e.g.
/// `StampLapOld:Shared`) runs only those.
const ROTATION: [(Kind, Queues); 12] = [
    (Kind::CreditGarbage, Queues::Either),
    (Kind::CreditZero, Queues::Either),
    (Kind::FlagGarbage, Queues::Either),
    (Kind::FlagInUse, Queues::Dedicated),
    (Kind::FlagInUse, Queues::Shared),
    (Kind::FreeHead, Queues::Either),
    (Kind::Tail, Queues::Dedicated),
    (Kind::Tail, Queues::Shared),
    (Kind::StampGarbage, Queues::Dedicated),
    (Kind::StampGarbage, Queues::Shared),
    (Kind::StampLapOld, Queues::Dedicated),
    (Kind::StampLapOld, Queues::Shared),
];

/// The words of the segment, found from its header the way the layout
/// code computes them (`src/transport/shm/layout.rs`); the computed total
/// is checked against the header's, so a layout change fails here loudly
/// instead of scribbling elsewhere.
struct Segment {
    file: File,
    local: u64,
    queues: u64,
    slots: u64,
    queue_off: u64,
    queue_stride: u64,
    credit_off: u64,
    frames_rel: u64,
    frame_stride: u64,
}

fn u32_at(b: &[u8], off: usize) -> u64 {
    u64::from(u32::from_le_bytes(b[off..off + 4].try_into().unwrap()))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

impl Segment {
    /// The job's segment in `dir`, once ready.
    fn find(dir: &Path) -> Result<Segment, String> {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            for e in std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
                let Ok(file) = File::options().read(true).write(true).open(e.path()) else {
                    continue;
                };
                let mut h = [0u8; 64];
                if file.read_exact_at(&mut h, 0).is_ok() && u64_at(&h, 0) == MAGIC {
                    return Segment::parse(file, &h);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err("no ready segment in the directory".into())
    }

    fn parse(file: File, h: &[u8]) -> Result<Segment, String> {
        // Header: magic u64, version, local, queues, credits, frame_size,
        // doorbells, creator_pid, attached (u32 each), total, job_hash,
        // window_bytes (u64 each).
        let (version, local, queues, credits, frame_size) = (
            u32_at(h, 8),
            u32_at(h, 12),
            u32_at(h, 16),
            u32_at(h, 20),
            u32_at(h, 24),
        );
        let (total, window_bytes) = (u64_at(h, 40), u64_at(h, 56));
        let senders = local.div_ceil(queues);
        let slots = (credits * senders).max(2).next_power_of_two();
        let credit_off = HEADER_BYTES + 3 * LINE * local;
        let queue_off = credit_off + LINE * local * local + window_bytes * local;
        let frames_rel = 2 * LINE + LINE * slots;
        let frame_stride = LINE + frame_size;
        let queue_stride = frames_rel + frame_stride * slots;
        let computed = queue_off + queue_stride * local * queues;
        if computed != total || version != 3 {
            return Err(format!(
                "segment layout version {version}, total {total} B, computed {computed} B: \
                 this test's layout arithmetic is out of date"
            ));
        }
        Ok(Segment {
            file,
            local,
            queues,
            slots,
            queue_off,
            queue_stride,
            credit_off,
            frames_rel,
            frame_stride,
        })
    }

    fn read(&self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, off).unwrap();
        u64::from_le_bytes(b)
    }

    fn write(&self, off: u64, v: u64) {
        self.file.write_all_at(&v.to_le_bytes(), off).unwrap();
    }

    fn write32(&self, off: u64, v: u32) {
        self.file.write_all_at(&v.to_le_bytes(), off).unwrap();
    }

    fn queue_offs(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.local * self.queues).map(|i| self.queue_off + self.queue_stride * i)
    }

    /// Scribble `kind`; returns how many words were written.
    fn scribble(&self, kind: Kind) -> usize {
        let mut n = 0;
        match kind {
            Kind::StampGarbage | Kind::StampLapOld => {
                for q in self.queue_offs().collect::<Vec<_>>() {
                    for s in 0..self.slots {
                        let at = q + 2 * LINE + LINE * s;
                        let v = match kind {
                            Kind::StampGarbage => 0xdead_beef_0000 + s,
                            _ => {
                                let old = self.read(at);
                                if old < self.slots {
                                    continue; // first lap: no older value
                                }
                                old - self.slots
                            }
                        };
                        self.write(at, v);
                        n += 1;
                    }
                }
            }
            Kind::FlagGarbage | Kind::FlagInUse => {
                let v = if matches!(kind, Kind::FlagGarbage) {
                    7
                } else {
                    1
                };
                for q in self.queue_offs().collect::<Vec<_>>() {
                    for f in 0..self.slots {
                        self.write32(q + self.frames_rel + self.frame_stride * f, v);
                        n += 1;
                    }
                }
            }
            Kind::FreeHead | Kind::Tail => {
                let line = if matches!(kind, Kind::Tail) { 0 } else { LINE };
                for q in self.queue_offs().collect::<Vec<_>>() {
                    self.write(q + line, 0x7fff_ffff_0000_0003);
                    n += 1;
                }
            }
            Kind::CreditGarbage | Kind::CreditZero => {
                let v = if matches!(kind, Kind::CreditZero) {
                    0
                } else {
                    u64::MAX - 5
                };
                for i in 0..self.local * self.local {
                    self.write(self.credit_off + LINE * i, v);
                    n += 1;
                }
            }
        }
        n
    }
}

fn all_started(dir: &Path, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if (0..RANKS).all(|r| dir.join(format!("started-{r}")).exists()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

fn listing(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The job's ranks with `env`, stderr to files in `markers`; start them
/// with [`Job::spawn`].
struct Job(Spawner<'static>);

impl Job {
    fn spawn(&self, r: u32, markers: &Path) -> Child {
        let log = File::create(markers.join(format!("stderr-{r}"))).unwrap();
        let mut c = self.0.command(r, &[], &[]);
        c.stdout(Stdio::null()).stderr(log);
        c.spawn().expect("spawn rank")
    }
}

fn job(tag: &str, shm_dir: &Path, markers: &Path, env: &[(&str, String)]) -> Job {
    let mut all = vec![
        (
            "CHAOSQ_DIR".to_owned(),
            markers.to_string_lossy().into_owned(),
        ),
        (
            "FASTMSG_SHM_DIR".to_owned(),
            shm_dir.to_string_lossy().into_owned(),
        ),
        ("FASTMSG_TIMEOUT".to_owned(), "10".to_owned()),
    ];
    all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    let _ = markers;
    Job(Spawner {
        rank_test: "scribble_rank",
        size: RANKS,
        job: format!("{tag}-{}", std::process::id()),
        env: all,
    })
}

/// The ranks' exit codes once all ended by `deadline` (hung ranks are
/// killed and reported), with the error lines they printed.
fn collect(
    ranks: &mut [Child],
    markers: &Path,
    deadline: Instant,
) -> Result<(Vec<i32>, Vec<String>), String> {
    let mut codes = Vec::new();
    let mut hung = Vec::new();
    for (r, c) in ranks.iter_mut().enumerate() {
        match procs::wait_until(c, deadline) {
            Some(s) => codes.push(s.code().unwrap_or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                -s.signal().unwrap_or(0)
            })),
            None => {
                hung.push(r);
                codes.push(i32::MIN);
            }
        }
    }
    let mut lines = Vec::new();
    for r in 0..ranks.len() {
        let s = std::fs::read_to_string(markers.join(format!("stderr-{r}"))).unwrap_or_default();
        lines.extend(
            s.lines()
                .filter(|l| {
                    ["RANK-ERROR", "panicked", "WARN", "warn"]
                        .iter()
                        .any(|k| l.contains(k))
                })
                .map(str::to_owned),
        );
    }
    if !hung.is_empty() {
        return Err(format!("rank(s) {hung:?} hung (killed); {lines:?}"));
    }
    Ok((codes, lines))
}

/// One scribble run; `Ok` with a line for the output.
fn scribble_run(run: usize, seed: u64, (kind, queues): (Kind, Queues)) -> Result<String, String> {
    let mut g = rand::rngs::StdRng::seed_from_u64(seed);
    let shared = match queues {
        Queues::Dedicated => false,
        Queues::Shared => true,
        Queues::Either => g.random_bool(0.5),
    };
    let delay = Duration::from_micros(g.random_range(0..30_000));
    let dir = procs::private_shm_dir(&format!("chaosq{run}"));
    let markers = std::env::temp_dir().join(format!("fastmsg-chaosq-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&markers);
    std::fs::create_dir(&markers).unwrap();
    let mut env = vec![("FASTMSG_CREDITS", "8".to_owned())];
    if shared {
        env.push(("FASTMSG_QUEUES", "1".to_owned()));
    }
    let job = job(&format!("chaosq{run}"), &dir, &markers, &env);
    // The segment file is unlinked once every rank has attached: the last
    // rank starts once the scribbler holds it open.
    let mut ranks: Vec<Child> = (0..RANKS - 1).map(|r| job.spawn(r, &markers)).collect();
    let result = (|| {
        let seg = Segment::find(&dir);
        ranks.push(job.spawn(RANKS - 1, &markers));
        let seg = seg?;
        if !all_started(&markers, Duration::from_secs(10)) {
            return Err("the ranks did not all start".to_owned());
        }
        std::thread::sleep(delay);
        let words = seg.scribble(kind);
        let at = Instant::now();
        drop(seg);
        let mode = if shared { "shared" } else { "dedicated" };
        let (codes, lines) = collect(&mut ranks, &markers, at + END_WITHIN)
            .map_err(|e| format!("{kind:?} ({mode}): {e}"))?;
        let took = at.elapsed();
        if codes.iter().any(|&c| c != 0 && c != CORRUPT && c != PEER) {
            return Err(format!(
                "{kind:?} ({mode}): exit codes {codes:?} (0 ok, {CORRUPT} queue error, \
                 {PEER} peer failure): {lines:?}"
            ));
        }
        let verdict = if codes.iter().all(|&c| c == 0) {
            "every rank succeeded: the words scribbled were not in use then, or any value is sound"
        } else if codes.contains(&CORRUPT) {
            "the queue failure was reported"
        } else {
            return Err(format!(
                "{kind:?} ({mode}): ranks failed but none named the queue: {codes:?} {lines:?}"
            ));
        };
        let errors: Vec<String> = lines
            .iter()
            .map(|l| l.chars().take(400).collect())
            .collect();
        Ok(format!(
            "{kind:?} ({mode} queues, {words} words, {delay:?} after start): codes {codes:?}, \
             all ended within {took:?}: {verdict}\n    {}",
            errors.join("\n    ")
        ))
    })();
    for c in &mut ranks {
        let _ = c.kill();
        let _ = c.wait();
    }
    let left = listing(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&markers);
    let line = result?;
    if !left.is_empty() {
        return Err(format!("left in the segment directory: {left:?}"));
    }
    Ok(line)
}

fn base_seed() -> u64 {
    std::env::var("CHAOS_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
        |s| {
            let s = s.trim_start_matches("0x");
            u64::from_str_radix(s, 16).expect("CHAOS_SEED in hex")
        },
    )
}

#[test]
fn scribbles_on_a_running_jobs_queues_end_every_rank_with_a_typed_error() {
    let seed = base_seed();
    println!("chaos_queues seed {seed:#x} (CHAOS_SEED={seed:x} replays it)");
    let t = Instant::now();
    let only = std::env::var("CHAOSQ_KINDS").unwrap_or_default();
    let mut runs = 0;
    for run in 0..ROTATION.len() {
        let s = seed ^ (run as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let kind = ROTATION[(seed as usize % ROTATION.len() + run) % ROTATION.len()];
        let named = only
            .split(',')
            .any(|k| k == format!("{:?}:{:?}", kind.0, kind.1));
        if !only.is_empty() && !named {
            continue;
        }
        runs += 1;
        match scribble_run(run, s, kind) {
            Ok(line) => println!("scribble run {run}: {line}"),
            Err(e) => panic!("scribble run {run} (seed {seed:#x}): {e}"),
        }
    }
    println!("{runs} scribble runs in {:?}", t.elapsed());
}

/// When the directory fills up.
#[derive(Clone, Copy, Debug)]
enum Fill {
    /// Before any rank starts.
    BeforeStart,
    /// While the ranks start.
    DuringStart,
    /// Once every rank has started, while they run.
    WhileRunning,
}

/// Write a file in `dir` until the file system is full; its size.
fn fill_up(dir: &Path) -> u64 {
    use std::io::Write;
    let mut f = File::create(dir.join("filler")).unwrap();
    let chunk = vec![0x5au8; 16 << 10];
    let mut n = 0u64;
    while f.write_all(&chunk).is_ok() {
        n += chunk.len() as u64;
    }
    // The last partial chunk, page by page.
    while f.write_all(&chunk[..4096]).is_ok() {
        n += 4096;
    }
    n
}

/// A small tmpfs mounted on a fresh directory, unmounted (and the
/// directory removed) on drop.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    /// `None` (printed) where the test cannot mount (not root).
    fn mount(tag: &str, bytes: u64) -> Option<SmallFs> {
        let d = std::env::temp_dir().join(format!("fastmsg-fullfs-{tag}-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700")])
            .arg("tmpfs")
            .arg(&d)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&d);
            println!("skipped: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(SmallFs(d))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// One full-directory run; `Ok` with a line for the output.
fn full_dir_run(run: usize, seed: u64, fill: Fill) -> Result<String, String> {
    let mut g = rand::rngs::StdRng::seed_from_u64(seed);
    // About twice the segment of three ranks with 8 credits of 8 KiB frames
    // (about 600 KiB): room to start, then none.
    let Some(fs) = SmallFs::mount(&format!("{run}"), 1280 << 10) else {
        return Ok("skipped".into());
    };
    let dir = fs.0.clone();
    let markers =
        std::env::temp_dir().join(format!("fastmsg-chaosq-full-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&markers);
    std::fs::create_dir(&markers).unwrap();
    let env = [
        ("FASTMSG_CREDITS", "8".to_owned()),
        ("FASTMSG_TIMEOUT", "3".to_owned()),
    ];
    let job = job(&format!("chaosq-full{run}"), &dir, &markers, &env);
    let delay = Duration::from_micros(g.random_range(0..20_000));
    let mut filled = 0;
    if let Fill::BeforeStart = fill {
        filled = fill_up(&dir);
    }
    let t = Instant::now();
    let mut ranks: Vec<Child> = (0..RANKS).map(|r| job.spawn(r, &markers)).collect();
    match fill {
        Fill::BeforeStart => {}
        Fill::DuringStart => {
            std::thread::sleep(delay);
            filled = fill_up(&dir);
        }
        Fill::WhileRunning => {
            if all_started(&markers, Duration::from_secs(10)) {
                std::thread::sleep(delay);
            }
            filled = fill_up(&dir);
        }
    }
    // Start-up waits at most FASTMSG_TIMEOUT (3 s) for a missing rank.
    let result = collect(&mut ranks, &markers, t + Duration::from_secs(10));
    for c in &mut ranks {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_file(dir.join("filler"));
    let left = listing(&dir);
    drop(fs);
    let _ = std::fs::remove_dir_all(&markers);
    let (codes, lines) = result.map_err(|e| format!("{fill:?}: {e}"))?;
    if codes
        .iter()
        .any(|&c| c != 0 && c != CORRUPT && c != PEER && c != OTHER)
    {
        return Err(format!(
            "{fill:?}: exit codes {codes:?} (negative: killed by that signal): {lines:?}"
        ));
    }
    if let Fill::BeforeStart = fill {
        if codes.contains(&0) {
            return Err(format!(
                "{fill:?}: a rank started in a full directory: {codes:?}"
            ));
        }
        if !lines.iter().any(|l| l.contains("NoSpace")) {
            return Err(format!("{fill:?}: no rank reported NoSpace: {lines:?}"));
        }
    }
    if !left.is_empty() {
        return Err(format!("{fill:?}: left in the directory: {left:?}"));
    }
    Ok(format!(
        "{fill:?} ({filled} B filled, {delay:?}): codes {codes:?} (0 ok, {OTHER} typed error \
         such as NoSpace, {PEER} peer failure), all ended within {:?}",
        t.elapsed()
    ))
}

#[test]
fn a_full_segment_directory_ends_every_rank_with_a_typed_error() {
    let seed = base_seed();
    println!("chaos_queues full-directory seed {seed:#x} (CHAOS_SEED={seed:x} replays it)");
    for (run, fill) in [Fill::BeforeStart, Fill::DuringStart, Fill::WhileRunning]
        .into_iter()
        .enumerate()
    {
        let s = seed ^ (run as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        match full_dir_run(run, s, fill) {
            Ok(line) if line == "skipped" => return,
            Ok(line) => println!("full-directory run {run}: {line}"),
            Err(e) => panic!("full-directory run {run} (seed {seed:#x}): {e}"),
        }
    }
}
