//! Errors: one small enum per operation (iceoryx2 style), each variant
//! naming the rank, peer, handler or file it concerns, and the crate-level
//! [`Error`] that any of them converts into.
//!
//! Bad input from another process or the network is always one of these,
//! never a panic: see [`ProtocolError`] and [`SegmentError`].

use crate::id::Rank;
use std::path::PathBuf;
use std::time::Duration;

/// A boxed error returned by a user's handler.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A peer broke the wire protocol (or memory it shares with us was
/// corrupted). The offending fragment has been dropped and its frame
/// released.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The header names a sender outside the job.
    #[error("fragment claims to come from rank {src}, but the job has {world} ranks")]
    BadSource {
        /// Claimed sender.
        src: u32,
        /// Ranks in the job.
        world: u32,
    },
    /// Unknown flag bits.
    #[error("fragment from rank {src} has unknown flag bits {flags:#x}")]
    BadFlags {
        /// Sender.
        src: u32,
        /// The flags found.
        flags: u32,
    },
    /// The payload length runs past the frame (or slot).
    #[error("fragment from rank {src} says {len} bytes, but a frame holds at most {max}")]
    FrameTooLong {
        /// Sender.
        src: u32,
        /// Length claimed.
        len: usize,
        /// Frame capacity.
        max: usize,
    },
    /// Fragment lengths do not add up to the message length.
    #[error("message from rank {src} declared {total} bytes but its fragments carry {got}")]
    LengthMismatch {
        /// Sender.
        src: u32,
        /// Declared message length.
        total: u64,
        /// Bytes seen so far.
        got: u64,
    },
    /// The handler id is not in the registry.
    #[error("message from rank {src} names handler id {id}, but only {registered} handlers are registered")]
    UnknownHandler {
        /// Sender.
        src: u32,
        /// The id found.
        id: u32,
        /// Registry size.
        registered: u32,
    },
    /// A continuation fragment arrived with no message in progress.
    #[error("rank {src} sent a continuation fragment with no message in progress")]
    MissingFirst {
        /// Sender.
        src: u32,
    },
    /// A first fragment arrived while the previous message was unfinished.
    #[error("rank {src} started a new message before finishing the previous one")]
    UnexpectedFirst {
        /// Sender.
        src: u32,
    },
    /// The descriptor names a frame that does not exist.
    #[error("fragment from rank {src} names frame {frame}, but the queue has {count} frames")]
    BadFrame {
        /// Sender.
        src: u32,
        /// Frame index found.
        frame: u32,
        /// Frames in the queue.
        count: u32,
    },
    /// A queue slot's stamp is from neither this lap nor the last.
    #[error("receive queue {queue} (written by {}) is corrupt: slot stamp {seq} at position {head}; the queue is taken out of service", match sender { Some(r) => format!("rank {r}"), None => "several ranks".to_owned() })]
    QueueCorrupt {
        /// Queue index on this rank.
        queue: u32,
        /// The rank that writes it, if the queue has one sender.
        sender: Option<u32>,
        /// Consumer position.
        head: u64,
        /// Stamp found.
        seq: u64,
    },
    /// A shared receive queue's head position was claimed but never
    /// written for a second after a rank that writes on the queue died: most likely that rank died
    /// between claiming the position and writing it. The fragments other
    /// ranks published behind it cannot be read (the queue is read in
    /// order), and their senders wait for credit that will not come. Said
    /// once; the queue is left as it is (a sender merely stopped, under a
    /// debugger say, may still write the position).
    #[error("receive queue {queue}: position {head} was claimed but not written for a second after rank {died}, which writes on this queue, died (most likely mid-send); what other ranks sent behind it cannot be delivered")]
    QueueHole {
        /// Queue index on this rank.
        queue: u32,
        /// The position that stays empty.
        head: u64,
        /// A rank that writes on the queue and died.
        died: u32,
    },
    /// A send found the shared receive queue it writes on another rank
    /// corrupt: the slot it must fill holds a stamp the protocol never
    /// leaves there (see `RecvQueue::publish`). The fragment was not sent;
    /// the rank is taken as failed.
    #[error("the receive queue that this rank writes on rank {dest} is corrupt: slot stamp {seq} for position {pos}; rank {dest} is taken as failed")]
    PeerQueueCorrupt {
        /// The receiving rank.
        dest: u32,
        /// The position this rank was to publish at.
        pos: u64,
        /// The stamp found.
        seq: u64,
    },
    /// A send found the frames of the shared receive queue it writes on
    /// another rank corrupt: a frame's in-use flag holds a value the
    /// protocol never writes. The fragment was not sent; the rank is taken
    /// as failed.
    #[error("the receive queue that this rank writes on rank {dest} is corrupt: frame {frame} has in-use flag {flag}; rank {dest} is taken as failed")]
    PeerFramesCorrupt {
        /// The receiving rank.
        dest: u32,
        /// The frame.
        frame: u32,
        /// The flag found.
        flag: u32,
    },
    /// A send waited on the shared receive queue it writes on another rank
    /// while a value that the protocol leaves there only for a moment
    /// stayed unchanged (a slot's stamp set back to an earlier lap, no free
    /// frame in whole laps of the free list), the rank alive: something
    /// outside the protocol wrote it. The fragment was not sent; the rank
    /// is taken as failed.
    #[error("the receive queue that this rank writes on rank {dest} is corrupt: {what} stayed unchanged for {waited_ms} ms while rank {dest} lives (the protocol leaves it only for a moment); rank {dest} is taken as failed")]
    PeerQueueStuck {
        /// The receiving rank.
        dest: u32,
        /// What stayed (the slot and its stamp, or the frames).
        what: String,
        /// How long it stayed, in milliseconds.
        waited_ms: u64,
    },
    /// A sender used a queue it is not assigned to (shared queues only).
    #[error("rank {src} wrote to receive queue {queue}, which is not its queue")]
    WrongQueue {
        /// Sender.
        src: u32,
        /// Queue index.
        queue: u32,
    },
    /// A ring slot's stamp is from neither this lap nor the last (network
    /// rings): the ring is taken out of service.
    #[error("receive ring of rank {src} is corrupt: stamp {stamp} at position {head}; the ring is taken out of service")]
    RingCorrupt {
        /// The rank that writes the ring.
        src: u32,
        /// Reader position.
        head: u64,
        /// Stamp found.
        stamp: u64,
    },
    /// A control message announces more bytes than any of its kind can
    /// hold: refused at its first fragment, before anything is buffered
    /// for it; the rest of it is dropped.
    #[error(
        "control message ({op}) from rank {src} announces {len} bytes, but one holds at most {max}"
    )]
    ControlTooLong {
        /// Sender.
        src: u32,
        /// The control operation.
        op: &'static str,
        /// Bytes announced.
        len: u64,
        /// The most that operation's message holds.
        max: u64,
    },
    /// A system (control) message had an unexpected shape.
    #[error("control message from rank {src} is malformed: {what}")]
    BadControl {
        /// Sender.
        src: u32,
        /// What was wrong.
        what: &'static str,
    },
}

/// Creating, opening or validating the shared-memory segment failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// An OS call failed.
    #[error("shared segment {path}: {op} failed: {source}")]
    Io {
        /// Segment path.
        path: PathBuf,
        /// What was attempted.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file does not start with fastmsg's magic.
    #[error("shared segment {path} has magic {found:#018x}, not fastmsg's {expected:#018x}: not a fastmsg segment")]
    BadMagic {
        /// Segment path.
        path: PathBuf,
        /// Magic found.
        found: u64,
        /// Magic expected.
        expected: u64,
    },
    /// The layout version differs (ranks built from different fastmsg versions).
    #[error("shared segment {path} has layout version {found}, this build uses {expected}: rebuild every rank with the same fastmsg")]
    VersionMismatch {
        /// Segment path.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Version expected.
        expected: u32,
    },
    /// The file is shorter than its header says.
    #[error("shared segment {path} is {len} bytes, its layout needs {need}")]
    Truncated {
        /// Segment path.
        path: PathBuf,
        /// Actual length.
        len: u64,
        /// Needed length.
        need: u64,
    },
    /// The segment was created with different parameters.
    #[error("shared segment {path} was created with {what} = {theirs}, this rank expects {ours}: start every rank with the same settings")]
    ConfigMismatch {
        /// Segment path.
        path: PathBuf,
        /// Which parameter.
        what: &'static str,
        /// Our value.
        ours: u64,
        /// The segment's value.
        theirs: u64,
    },
    /// A live job of this user holds the segment name (its creator's
    /// lifeline is held).
    #[error("shared segment {path} belongs to a live job (its creator, pid {pid} as it recorded it in its PID namespace, is alive); two jobs use the same job id: choose another FASTMSG_JOB / fmrun --job")]
    InUse {
        /// Segment path.
        path: PathBuf,
        /// Creator's pid, as it recorded itself.
        pid: u32,
    },
    /// The file at the segment's name is not one this user may trust: owned
    /// by another user, readable or writable by group or others, or not a
    /// regular file. Nothing in it was read.
    #[error("shared segment {path} is owned by uid {owner} with mode {mode:04o} ({why}); it is not trusted and not used. If another user created it, choose another job id (or ask them / root to remove it)")]
    Untrusted {
        /// Segment path.
        path: PathBuf,
        /// The file's owner.
        owner: u32,
        /// The file's permission bits.
        mode: u32,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The segment at the name was left by a job whose creator died; the
    /// local rank 0 of this job would have replaced it but did not.
    #[error("shared segment {path} is stale: its creator (pid {pid} in its own namespace) is gone, and no live local rank 0 replaced it; is local rank 0 of this job started, with the same job id?")]
    Stale {
        /// Segment path.
        path: PathBuf,
        /// The dead creator's recorded pid.
        pid: u32,
    },
    /// Peers did not appear in time.
    #[error(
        "waited {waited:?} for {what} in shared segment {path}; are all ranks of the job started?"
    )]
    Timeout {
        /// Segment path.
        path: PathBuf,
        /// What we were waiting for.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// Some ranks of this host never attached to its segment in time.
    #[error(
        "waited {waited:?} in shared segment {path} for {} of the {} ranks of this host to attach: {ranks}; are all ranks of the job started?",
        ranks.missing.len(),
        ranks.local
    )]
    NotAttached {
        /// Segment path.
        path: PathBuf,
        /// Which ranks came and which did not.
        ranks: Box<Attendance>,
        /// How long.
        waited: Duration,
    },
    /// More processes attached than the job has local ranks.
    #[error("shared segment {path}: more than {local} processes attached")]
    TooManyAttached {
        /// Segment path.
        path: PathBuf,
        /// Local ranks expected.
        local: u32,
    },
    /// Start-up was abandoned because another rank failed.
    #[error("gave up waiting in shared segment {path}: another rank of the job failed")]
    Aborted {
        /// Segment path.
        path: PathBuf,
    },
    /// The requested layout does not fit in memory limits.
    #[error("shared segment layout too large: {what}")]
    TooLarge {
        /// What overflowed.
        what: String,
    },
    /// The segment's directory cannot hold it: the space is reserved up
    /// front (`posix_fallocate`), so this is reported at start-up instead
    /// of a SIGBUS on first touch.
    #[error("shared segment {path} needs {need} bytes, but {dir} cannot provide them ({source}; {} free): free space there, point FASTMSG_SHM_DIR (fmrun --shm-dir) at a larger tmpfs, or lower FASTMSG_CREDITS, FASTMSG_FRAME_SIZE or the ranks per host", match free { Some(f) => format!("{f} bytes"), None => "unknown bytes".to_owned() })]
    NoSpace {
        /// Segment path.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// Bytes the segment needs.
        need: u64,
        /// Bytes free in the directory's file system (`statvfs`), if known.
        free: Option<u64>,
        /// The OS error of the reservation.
        source: std::io::Error,
    },
}

/// The job's configuration (environment or builder) is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No launcher environment was found. (`JobInfo::from_env` no longer
    /// returns it: a program started by hand is a one-rank job.)
    #[error("no job environment found (looked for {looked}); start the program with `fmrun -n N prog`, srun or mpirun")]
    NoLauncher {
        /// The variables looked for.
        looked: &'static str,
    },
    /// A variable is present but unusable.
    #[error("environment variable {var}={value:?} is invalid: {why}")]
    BadEnv {
        /// Variable name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// A setting is out of range.
    #[error("invalid setting {what}: {why}")]
    Invalid {
        /// Which setting.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// The open-file limit (`RLIMIT_NOFILE`) is below what a rank of
    /// this job needs for its network connections, and the hard limit
    /// does not allow raising it.
    #[error("a rank of this {size}-rank job needs about {need} open files ({peers} network connections and {spare} for everything else), but RLIMIT_NOFILE allows {hard} (soft limit {soft}): raise the hard limit (`ulimit -Hn`, `nofile` in limits.conf, `LimitNOFILE` of a systemd unit) or start fewer ranks")]
    TooFewDescriptors {
        /// Ranks in the job.
        size: u32,
        /// Network connections a rank may hold (every other rank).
        peers: u64,
        /// Descriptors kept for everything else.
        spare: u64,
        /// Descriptors needed in all.
        need: u64,
        /// The soft limit found.
        soft: u64,
        /// The hard limit found.
        hard: u64,
    },
    /// The secret file is unusable (readable by others, not ours, empty…).
    #[error("secret file {path}: {why}")]
    SecretFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (owner and mode when they are the problem).
        why: String,
    },
    /// Settings ask for more memory than this host has (or than 64-bit
    /// arithmetic can count: `asked` is then `None`).
    #[error("{what} ask for {} of memory per rank, but this host has {available} bytes: lower them", match asked { Some(a) => format!("{a} bytes"), None => "more than 2^64 bytes".to_owned() })]
    TooMuchMemory {
        /// The settings concerned.
        what: &'static str,
        /// Bytes asked for (`None`: beyond 64-bit arithmetic).
        asked: Option<u64>,
        /// Physical memory of this host, bytes.
        available: u64,
    },
    /// Started inside a Slurm allocation but not as a job step (`srun`).
    #[error("started inside Slurm job {job} but not by srun (SLURM_JOB_ID is set, SLURM_STEP_ID is not): SLURM_PROCID={procid:?} and SLURM_NTASKS={ntasks:?} describe the batch shell, not this program's ranks; start it with `srun prog` (or `fmrun -n N prog` for ranks on this node)")]
    SlurmOutsideStep {
        /// `SLURM_JOB_ID`.
        job: String,
        /// The batch shell's `SLURM_PROCID`.
        procid: String,
        /// The batch shell's `SLURM_NTASKS`.
        ntasks: String,
    },
    /// The PMIx server (mpirun, srun --mpi=pmix) refused or failed a call.
    #[error(transparent)]
    Pmix(#[from] PmixError),
    /// The job's ranks span hosts and nothing carries the wire-up between
    /// them: no PMIx server, no PMI socket, no `FASTMSG_ROOT`.
    #[error("{launcher} puts {local} of the job's {size} ranks on this host, the others elsewhere, and nothing can carry the addresses between hosts (no PMIx server, no PMI socket at PMI_FD, no FASTMSG_ROOT): {fix}")]
    NoWireUp {
        /// Who started the job.
        launcher: &'static str,
        /// Ranks on this host, as the launcher says.
        local: u32,
        /// Ranks in the job.
        size: u32,
        /// What to set or install.
        fix: String,
    },
    /// The launcher puts every rank on this host, but the ranks' host
    /// identities (`FASTMSG_HOST`, else the host name) differ.
    #[error("{launcher} says all {size} ranks of the job are on this host, but their host identities differ: rank {rank} is on {host:?}, rank {other} on {other_host:?} (FASTMSG_HOST, else the host name), and nothing can tell which ranks share memory: {fix}")]
    HostsDisagree {
        /// Who started the job.
        launcher: &'static str,
        /// Ranks in the job.
        size: u32,
        /// This rank.
        rank: u32,
        /// Its host identity.
        host: String,
        /// A rank with another identity.
        other: u32,
        /// That identity.
        other_host: String,
        /// What to set or install.
        fix: String,
    },
}

/// A PMI-2 or PMI-1 exchange with the launcher (over `PMI_FD`) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {why}")]
pub struct Pmi2Error {
    /// The protocol and command (`PMI-2 fullinit`, `PMI-2 kvs-fence`,
    /// `PMI-1 barrier_in`…).
    pub call: String,
    /// What went wrong: the launcher's return code and message, or what it
    /// sent that is not PMI-2, or the I/O error.
    pub why: String,
}

/// A call into the PMIx client library failed, or the library could not
/// be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PmixError {
    /// A PMIx server started this process (`PMIX_RANK`, `PMIX_SERVER_URI*`
    /// are set) but its client library is not installed.
    #[error("a PMIx server started this process (PMIX_RANK / PMIX_SERVER_URI* are set), but the PMIx library could not be loaded (tried {tried}: {why}); install it (Debian/Ubuntu: apt-get install libpmix2; Fedora/RHEL: dnf install pmix)")]
    NoLibrary {
        /// The library names tried.
        tried: String,
        /// What the dynamic loader said.
        why: String,
    },
    /// The PMIx library lacks a function fastmsg calls (a PMIx older than
    /// 2.0).
    #[error("the PMIx library has no {name} ({why}); fastmsg needs PMIx 3 or later")]
    Symbol {
        /// The function.
        name: String,
        /// What the dynamic loader said.
        why: String,
    },
    /// The call returned an error status.
    #[error("{call} failed: PMIx status {status} ({text})")]
    Call {
        /// The PMIx function (and the key, for gets and puts).
        call: String,
        /// The status code it returned.
        status: i32,
        /// PMIx's text for that status.
        text: String,
    },
    /// The call succeeded but returned a value that is not what the key
    /// should hold.
    #[error("{call} returned {what}")]
    Value {
        /// The PMIx function and the key.
        call: String,
        /// What came back instead.
        what: String,
    },
}

/// `EndpointBuilder::start` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Invalid configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Shared-memory segment trouble.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// Network start-up trouble (rendezvous, connections, authentication).
    #[error(transparent)]
    Network(#[from] ConnectError),
    /// The PMIx wire-up failed.
    #[error(transparent)]
    Pmix(#[from] PmixError),
    /// The PMI-2 or PMI-1 wire-up failed (`srun --mpi=pmi2`, MPICH's
    /// `mpiexec`).
    #[error(transparent)]
    Pmi2(#[from] Pmi2Error),
    /// The RDMA verbs backend could not start.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The libfabric transport could not start.
    #[error(transparent)]
    Ofi(#[from] OfiError),
    /// A network provider without a variant of its own could not start
    /// (its name and its error).
    #[error("the {provider} network transport could not start: {source}")]
    Wire {
        /// The provider's name (`FASTMSG_NET`).
        provider: &'static str,
        /// What failed.
        source: BoxError,
    },
    /// Two handlers were registered under one name.
    #[error("handler name {name:?} registered twice (ids {first} and {second})")]
    DuplicateHandler {
        /// The name.
        name: String,
        /// First id.
        first: u32,
        /// Second id.
        second: u32,
    },
    /// A handler id was declared ([`EndpointBuilder::declare`]) and never
    /// given its function.
    ///
    /// [`EndpointBuilder::declare`]: crate::EndpointBuilder::declare
    #[error("handler {name:?} (id {id}) was declared but never defined")]
    UndefinedHandler {
        /// The id.
        id: u32,
        /// The name it was declared under.
        name: String,
    },
    /// `define*` was given an id that is not a declared, still undefined
    /// handler of this builder.
    #[error("handler id {id} cannot be defined: {why}")]
    BadDefinition {
        /// The id given.
        id: u32,
        /// What was wrong.
        why: &'static str,
    },
    /// The handler names take more than the start-up exchange carries:
    /// their table (each name with a 4-byte length, plus 4 bytes) passes
    /// `max` bytes (1 MiB).
    #[error("the {handlers} handler names take {bytes} bytes in the start-up exchange, more than its {max}: register fewer handlers or shorter names")]
    HandlerTableTooLarge {
        /// Handlers registered.
        handlers: u32,
        /// Bytes of their table.
        bytes: u64,
        /// The most a table may take.
        max: u64,
    },
    /// Handler tables differ between ranks.
    #[error("handler tables differ: handler {index} is {ours:?} on rank {our_rank} but {theirs:?} on rank {their_rank}; every rank must register the same handlers in the same order")]
    HandlerMismatch {
        /// First differing id.
        index: u32,
        /// The reporting rank (rank 0).
        our_rank: Rank,
        /// Name there (None: table shorter).
        ours: Option<String>,
        /// The differing rank.
        their_rank: Rank,
        /// Name there (None: table shorter).
        theirs: Option<String>,
    },
    /// Progress failed during the start-up exchange.
    #[error("start-up exchange failed: {0}")]
    Exchange(#[from] ExtractError),
    /// Peers did not answer in time.
    #[error(
        "waited {waited:?} for {what}; are all ranks of the job started with the same program?"
    )]
    Timeout {
        /// How long.
        waited: Duration,
        /// What we were waiting for.
        what: &'static str,
    },
}

/// A send could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The destination is not a rank of the job.
    #[error("destination rank {dest} is out of range (job has {size} ranks)")]
    BadDestination {
        /// Destination given.
        dest: Rank,
        /// Ranks in the job.
        size: u32,
    },
    /// The handler id is not registered.
    #[error("handler id {id} is not registered ({registered} handlers)")]
    UnknownHandler {
        /// Id given.
        id: u32,
        /// Registry size.
        registered: u32,
    },
    /// A piece would pass the length `begin_message` declared: nothing of
    /// it was sent and the message was aborted (its handler is told).
    #[error("message declared {declared} bytes, piece would make it {attempted}; the message was aborted")]
    Overflow {
        /// Declared length.
        declared: u64,
        /// Length the piece would reach.
        attempted: u64,
    },
    /// `end` was called (or the writer dropped) before `declared` bytes
    /// were sent: the message was aborted — its handler sees the bytes sent
    /// and then the abort ([`ReceiveError::Aborted`], or a piece flagged
    /// aborted), never padding.
    #[error("message declared {declared} bytes but only {written} were sent; it was aborted")]
    Short {
        /// Declared length.
        declared: u64,
        /// Bytes written.
        written: u64,
    },
    /// The destination process is gone: it exited, died, or failed on
    /// the network (the next `extract` or wait names how, once).
    #[error("rank {rank} has failed (it exited, died, left its queue corrupt or failed on the network; the next extract or wait names how): cannot send to it")]
    PeerGone {
        /// The dead rank.
        rank: Rank,
    },
    /// The destination's host fell silent while this send waited for it:
    /// nothing it sent was acknowledged and no keepalive probe answered for
    /// `FASTMSG_NET_DEAD_AFTER_MS`, so it is taken as dead (crashed,
    /// powered off or cut off). Unlike [`PeerGone`](SendError::PeerGone),
    /// the cause is silence, not a closed connection or an exited process:
    /// a lossy network may call for a longer `FASTMSG_NET_DEAD_AFTER_MS`.
    #[error("rank {rank}'s host stopped answering on the network ({why}) for FASTMSG_NET_DEAD_AFTER_MS; it is taken as dead: cannot send to it")]
    PeerSilent {
        /// The silent rank.
        rank: Rank,
        /// What went unanswered (the OS error or the silence watch's account).
        why: String,
    },
    /// The destination's network connection, made on first use
    /// (`FASTMSG_CONNECT=lazy`), could not be made: this rank is out of
    /// file descriptors, the peer did not answer within `FASTMSG_TIMEOUT`,
    /// its listener is gone, or it failed to authenticate. Every later send
    /// or put to it fails the same way.
    #[error("could not connect to rank {rank} on first use: {why}")]
    Unreachable {
        /// The destination.
        rank: Rank,
        /// What failed (the connection error, naming the peer's address).
        why: String,
    },
    /// The message was aborted by an earlier error of this writer; start
    /// a new one.
    #[error("the message to rank {dest} was already aborted by an earlier error")]
    MessageAborted {
        /// Its destination.
        dest: Rank,
    },
    /// The job's supervisor asked every rank to give up while this send
    /// waited for credit.
    #[error("aborted while waiting for credit: another rank of the job failed")]
    Aborted,
    /// This rank's `close` has returned (the send came through a `Ctx`
    /// kept past it): nothing is sent any more.
    #[error("rank {rank} has closed its endpoint; it cannot send any more")]
    Closed {
        /// This rank.
        rank: Rank,
    },
}

/// A one-sided put or window read could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// The destination is not a rank of the job.
    #[error("destination rank {dest} is out of range (job has {size} ranks)")]
    BadDestination {
        /// Destination given.
        dest: Rank,
        /// Ranks in the job.
        size: u32,
    },
    /// The window id is not registered.
    #[error("window id {id} is not registered ({registered} windows)")]
    UnknownWindow {
        /// Id given.
        id: u32,
        /// Windows registered.
        registered: u32,
    },
    /// The access runs past the window.
    #[error("{len} bytes at offset {offset} run past window {window:?} of {size} bytes")]
    OutOfBounds {
        /// Window name.
        window: String,
        /// Offset given.
        offset: usize,
        /// Length given.
        len: usize,
        /// Window size.
        size: u64,
    },
    /// A word access at an offset that is not a multiple of 8.
    #[error("8-byte word access at offset {offset}, which is not a multiple of 8")]
    Misaligned {
        /// Offset given.
        offset: usize,
    },
    /// The destination process is gone: it exited, died, or failed on
    /// the network (the next `extract` or wait names how, once).
    #[error("rank {rank} has failed (it exited, died, left its queue corrupt or failed on the network; the next extract or wait names how): cannot put to it")]
    PeerGone {
        /// The dead rank.
        rank: Rank,
    },
    /// The destination's network connection, made on first use, could not
    /// be made (as [`SendError::Unreachable`]).
    #[error("could not connect to rank {rank} on first use: {why}")]
    Unreachable {
        /// The destination.
        rank: Rank,
        /// What failed (the connection error, naming the peer's address).
        why: String,
    },
    /// A direct access (a `get`, a remote atomic) to a rank on another
    /// host: only ranks sharing this host's memory are reached directly;
    /// across hosts the owner applies the operation in a handler
    /// (`fastmsg-handlers`' remote memory does).
    #[error("rank {rank} is on another host: its window cannot be reached directly")]
    NotOnHost {
        /// The destination.
        rank: Rank,
    },
    /// The endpoint has been closed: its windows are no longer reachable.
    #[error("the endpoint is closed: windows cannot be reached any more")]
    Closed,
}

/// Receiving from a message inside a handler failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// The `Message` was used after its handler finished.
    #[error("message handle used after its handler returned")]
    Stale,
    /// The message ended short: its sender aborted it (sent fewer or more
    /// bytes than it declared, or dropped its writer), died while sending
    /// it, or broke it off. The bytes received before are what it sent;
    /// nothing was padded.
    #[error("message from rank {src} was aborted after {received} of its {declared} declared bytes (the sender aborted it or failed mid-stream)")]
    Aborted {
        /// The sender.
        src: Rank,
        /// The length it declared.
        declared: u64,
        /// Bytes that arrived before the abort.
        received: u64,
    },
    /// A message is longer than its receiver's bound: the bound a
    /// whole-message handler was registered with (nothing of it was
    /// handed to the handler), or the bound of
    /// [`Message::receive_vec`](crate::Message::receive_vec) (nothing was
    /// allocated).
    #[error("message from rank {src} declares {len} bytes; its receiver takes at most {max}")]
    TooLong {
        /// The sender.
        src: Rank,
        /// The message's length.
        len: u64,
        /// The handler's bound.
        max: u64,
    },
}

/// `extract` (progress) reported a problem. The engine stays usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// A peer broke the protocol; the bad fragment was dropped.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// A handler returned an error.
    #[error("handler {handler:?} failed on a message from rank {src}: {source}")]
    Handler {
        /// Sender of the message.
        src: Rank,
        /// Handler name.
        handler: String,
        /// The handler's error.
        source: BoxError,
    },
    /// A peer process died, or ended without leaving in order (killed,
    /// crashed, `exit` without dropping its endpoint). Sticky: every later
    /// blocking call (and every send to that rank) fails too.
    #[error("rank {rank} (pid {pid}, as it recorded it in its PID namespace) died or exited without closing its endpoint")]
    PeerDied {
        /// The dead rank.
        rank: Rank,
        /// Its pid, as it recorded it (meaningful in its PID namespace).
        pid: u32,
    },
    /// A peer dropped its endpoint without calling `close` (the process
    /// may live on). Sticky, like [`PeerDied`](Self::PeerDied).
    #[error("rank {rank} left the job without calling close (its endpoint was dropped)")]
    PeerLeft {
        /// The rank that left.
        rank: Rank,
    },
    /// A network peer failed or broke the wire protocol.
    #[error(transparent)]
    Network(#[from] NetError),
    /// The job's supervisor asked every rank to give up (another rank failed).
    #[error("aborted: another rank of the job failed")]
    Aborted,
    /// An idle hook ([`EndpointBuilder::on_idle`]) returned an error.
    ///
    /// [`EndpointBuilder::on_idle`]: crate::EndpointBuilder::on_idle
    #[error("idle hook failed: {source}")]
    IdleHook {
        /// The hook's error.
        source: BoxError,
    },
    /// Termination round `round` (the ranks' `round`-th call of
    /// `quiesce` or `close`, counted from 0) was `quiesce` on one rank and
    /// `close` on another: every rank must make the same sequence of such
    /// calls. Sticky: later rounds fail too.
    #[error("termination round {round}: rank {quiescing} called quiesce while rank {closing} called close; every rank must call quiesce and close in the same sequence")]
    CloseQuiesceMismatch {
        /// The round (0 = the first `quiesce` or `close` of the job).
        round: u32,
        /// A rank in `quiesce`.
        quiescing: Rank,
        /// A rank in `close`.
        closing: Rank,
    },
}

impl ExtractError {
    /// The peer this error says has failed (died, left without closing,
    /// lost its connection), if it is such an error.
    pub fn failed_peer(&self) -> Option<Rank> {
        match self {
            ExtractError::PeerDied { rank, .. } | ExtractError::PeerLeft { rank } => Some(*rank),
            ExtractError::Protocol(
                ProtocolError::PeerQueueCorrupt { dest, .. }
                | ProtocolError::PeerFramesCorrupt { dest, .. }
                | ProtocolError::PeerQueueStuck { dest, .. },
            ) => Some(Rank(*dest)),
            ExtractError::Network(
                NetError::Disconnected { rank, .. }
                | NetError::BadRecord { rank, .. }
                | NetError::Io { rank, .. }
                | NetError::HostSilent { rank, .. }
                | NetError::Unreachable { rank, .. },
            ) => Some(*rank),
            _ => None,
        }
    }
}

/// A network peer failed after start-up. The peer is marked gone; other
/// peers are unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The peer closed its connection without the goodbye record.
    #[error("rank {rank} closed its connection without saying goodbye{}; it is taken as dead", if *mid_record { ", in the middle of a write record (the partial record was dropped)" } else { "" })]
    Disconnected {
        /// The peer.
        rank: Rank,
        /// Whether a write record was cut short.
        mid_record: bool,
    },
    /// The peer sent a write record that breaks the wire protocol.
    #[error("rank {rank} sent a malformed write record ({what}); its connection is closed")]
    BadRecord {
        /// The peer.
        rank: Rank,
        /// What was wrong.
        what: String,
    },
    /// The peer's connection, set up on first use (`FASTMSG_CONNECT=lazy`),
    /// could not be made: its listener is gone (the process died), the
    /// connect timeout passed, or it failed to authenticate.
    #[error("could not connect to rank {rank} on first use: {why}")]
    Unreachable {
        /// The peer.
        rank: Rank,
        /// What failed (the connection error, naming the peer's address).
        why: String,
    },
    /// The peer's host stopped answering: no keepalive probe answered and
    /// no data acknowledged for `FASTMSG_NET_DEAD_AFTER_MS` (3 s by
    /// default). The host crashed, lost power, or the network between the
    /// two is cut; a peer *process* that dies on a live host is
    /// [`Disconnected`](NetError::Disconnected) instead, at once.
    #[error("rank {rank}'s host stopped answering on the network ({why}); it is taken as dead (crashed, powered off or cut off)")]
    HostSilent {
        /// The peer.
        rank: Rank,
        /// The OS error the connection ended with.
        why: String,
    },
    /// A socket operation on the peer's connection failed.
    #[error("connection to rank {rank}: {op} failed: {msg}")]
    Io {
        /// The peer.
        rank: Rank,
        /// What was attempted.
        op: &'static str,
        /// The OS error.
        msg: String,
    },
}

/// Authenticating a network connection failed; the connection is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The first bytes are not fastmsg's greeting.
    #[error("not a fastmsg peer (greeting {found:#018x})")]
    BadMagic {
        /// What was found.
        found: u64,
    },
    /// Another wire version.
    #[error("wire version {found}, this build speaks {expected}: rebuild every rank with the same fastmsg")]
    Version {
        /// Version found.
        found: u32,
        /// Version expected.
        expected: u32,
    },
    /// The proof of the job secret did not verify.
    #[error("wrong job secret (authentication code mismatch)")]
    BadSecret,
    /// The peer belongs to another job or names an impossible rank.
    #[error("peer is {what}")]
    WrongPeer {
        /// What was wrong.
        what: String,
    },
    /// The two ends disagree on a setting.
    #[error(
        "peer uses {what} = {theirs}, this rank {ours}: start every rank with the same settings"
    )]
    Mismatch {
        /// Which setting.
        what: &'static str,
        /// Our value.
        ours: u64,
        /// Theirs.
        theirs: u64,
    },
    /// The peer went silent or closed during the handshake.
    #[error("handshake cut short: {0}")]
    Io(String),
}

/// Joining a multi-host job failed: rendezvous, connection set-up or
/// authentication.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A socket operation failed.
    #[error("{op} {peer} failed: {source}")]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The address or rank concerned.
        peer: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A peer that should be part of the job failed to authenticate.
    #[error("authenticating {peer}: {source}")]
    Handshake {
        /// The address or rank concerned.
        peer: String,
        /// What failed.
        source: HandshakeError,
    },
    /// Peers did not appear in time.
    #[error("waited {waited:?} for {what}; are all ranks of the job started with the same FASTMSG_ROOT and secret?")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
    },
    /// The rendezvous produced an impossible job map.
    #[error("rendezvous: {0}")]
    Rendezvous(String),
}

/// The RDMA verbs backend could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// This build has no verbs backend.
    #[error("FASTMSG_NET=verbs, but fastmsg was built without the `verbs` feature (cargo build --features verbs)")]
    NotBuilt,
    /// No RDMA device could be found.
    #[error("no RDMA device found (ibv_get_device_list: {why}); use FASTMSG_NET=tcp on hosts without RDMA hardware")]
    NoDevice {
        /// What rdma-core said.
        why: String,
    },
    /// A verbs call failed.
    #[error("{call} failed on {device}: {why}")]
    Call {
        /// The verbs function.
        call: &'static str,
        /// The device name.
        device: String,
        /// errno or status.
        why: String,
    },
}

/// The libfabric transport (`FASTMSG_NET=ofi`) could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OfiError {
    /// This build has no libfabric transport.
    #[error("FASTMSG_NET=ofi, but fastmsg was built without the `ofi` feature (cargo build --features ofi; needs libfabric-dev)")]
    NotBuilt,
    /// No provider offers what the transport needs (RMA writes on a
    /// reliable datagram endpoint), or `FI_PROVIDER` names none there is.
    #[error("no libfabric provider {provider:?} with RMA writes on an RDM endpoint here ({why}); set FI_PROVIDER to one that `fi_info -c FI_RMA -t FI_EP_RDM` lists, or use FASTMSG_NET=tcp")]
    NoProvider {
        /// The provider asked for (`FI_PROVIDER`, or the default).
        provider: String,
        /// What libfabric said.
        why: String,
    },
    /// A libfabric call failed.
    #[error("{call} failed on provider {provider}: {why}")]
    Call {
        /// The libfabric function (or set-up step).
        call: String,
        /// The provider.
        provider: String,
        /// libfabric's message.
        why: String,
    },
}

/// Any fastmsg error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// See [`StartError`].
    #[error(transparent)]
    Start(#[from] StartError),
    /// See [`SendError`].
    #[error(transparent)]
    Send(#[from] SendError),
    /// See [`ReceiveError`].
    #[error(transparent)]
    Receive(#[from] ReceiveError),
    /// See [`PutError`].
    #[error(transparent)]
    Put(#[from] PutError),
    /// See [`ExtractError`].
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// See [`SegmentError`].
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// An error of a library or program built on fastmsg (a collectives
    /// library, a user's handler logic), carried through code that returns
    /// [`Error`]; make one with [`Error::other`].
    #[error(transparent)]
    Other(BoxError),
}

impl From<ProtocolError> for Error {
    fn from(e: ProtocolError) -> Self {
        Error::Extract(ExtractError::Protocol(e))
    }
}

impl Error {
    /// Wrap any other error, e.g. `.map_err(Error::other)?` on a library's
    /// own error type.
    pub fn other(e: impl Into<BoxError>) -> Error {
        Error::Other(e.into())
    }

    /// Whether this error says that another rank failed, left or is
    /// gone (`PeerDied`, `PeerLeft`, a lost connection, `PeerGone`): in a
    /// job whose ranks end together, the consequence of that rank's own
    /// error rather than a cause.
    pub fn is_peer_failure(&self) -> bool {
        match self {
            Error::Extract(e) | Error::Start(StartError::Exchange(e)) => e.failed_peer().is_some(),
            Error::Send(SendError::PeerGone { .. } | SendError::PeerSilent { .. })
            | Error::Put(PutError::PeerGone { .. }) => true,
            _ => false,
        }
    }

    /// Whether this error only says the job was abandoned because another
    /// rank failed (not a cause in itself).
    pub fn is_abort(&self) -> bool {
        matches!(
            self,
            Error::Extract(ExtractError::Aborted)
                | Error::Send(SendError::Aborted)
                | Error::Segment(SegmentError::Aborted { .. })
                | Error::Start(StartError::Segment(SegmentError::Aborted { .. }))
                | Error::Start(StartError::Exchange(ExtractError::Aborted))
        )
    }
}

/// Who attached to a host's segment and who did not
/// ([`SegmentError::NotAttached`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attendance {
    /// Ranks expected on this host.
    pub local: u32,
    /// The missing ranks' indices among this host's ranks.
    pub missing: Vec<u32>,
    /// The global ranks that did attach, in order.
    pub attached: Vec<u32>,
    /// The missing ranks' global ranks, where the job tells them (every
    /// rank of the job on this host).
    pub missing_ranks: Option<Vec<u32>>,
}

/// Names the missing ranks: by global rank where known, else by index on
/// this host beside the global ranks that came.
impl std::fmt::Display for Attendance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        match &self.missing_ranks {
            Some(ranks) => write!(f, "rank(s) {} never attached", list(ranks)),
            None if self.attached.is_empty() => write!(
                f,
                "the ranks with local index {} never attached, nor did any other",
                list(&self.missing)
            ),
            None => write!(
                f,
                "the ranks with local index {} never attached (global ranks {} did)",
                list(&self.missing),
                list(&self.attached)
            ),
        }
    }
}
