//! Storing and reusing the plan: one small text file per user, keyed by
//! CPU model and count, written atomically, measured by one process at a
//! time (`flock`).

#![allow(unsafe_code)]

use super::tune::tune;
use super::{CopyPlan, CopyPlanError, ProbeResult, Strategy};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Where the plan is stored.
///
/// # Errors
/// [`CopyPlanError::NoCacheDir`] when neither `XDG_CACHE_HOME` nor `HOME`
/// is set.
pub fn plan_path() -> Result<PathBuf, CopyPlanError> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".cache"),
            None => return Err(CopyPlanError::NoCacheDir),
        },
    };
    Ok(base.join("fastmsg").join("copy-plan"))
}

/// This machine, as the plan file records it: CPU model and count.
pub fn machine_key() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} / {n} cpus")
}

/// Measure now and store the plan for this machine (`FASTMSG_COPY=tune`,
/// `fmbench tune-copy`). Processes that ask at the same time measure one
/// after the other (a file lock), never side by side.
pub fn tune_and_store() -> Result<CopyPlan, CopyPlanError> {
    let path = plan_path()?;
    let io = |source| CopyPlanError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("lock"))
        .map_err(io)?;
    let _held = FileLock::take(&lock);
    let p = tune();
    store(&path, &p)?;
    Ok(p)
}

/// An `flock` held until dropped (advisory; released at close anyway).
struct FileLock<'a>(&'a std::fs::File);

impl<'a> FileLock<'a> {
    fn take(f: &'a std::fs::File) -> FileLock<'a> {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor we own and keep open for the
        // guard's life; no memory is passed. A failure (e.g. a file system
        // without locks) only means two processes may measure at once.
        let _ = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        FileLock(f)
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `take`.
        let _ = unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Write `p` to `path` (through a temporary file and a rename, so readers
/// never see half a plan).
///
/// # Errors
/// [`CopyPlanError::Io`] naming the file.
pub fn store(path: &Path, p: &CopyPlan) -> Result<(), CopyPlanError> {
    let io = |source| CopyPlanError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    writeln!(f, "{}", render(p)).map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)
}

pub(super) fn render(p: &CopyPlan) -> String {
    let mut s = String::from("# fastmsg copy plan (HPVM §6); delete to measure again\n");
    s += "version=2\n";
    s += &format!("machine={}\n", machine_key());
    s += &format!("strategy={}\n", p.strategy.name());
    let t = if p.threshold == usize::MAX {
        "never".to_owned()
    } else {
        p.threshold.to_string()
    };
    s += &format!("threshold={t}\n");
    for r in &p.samples {
        s += &format!(
            "sample={} {:.3} {:.3} {:.3}\n",
            r.chunk, r.plain_gb_s, r.vector_gb_s, r.stream_gb_s
        );
    }
    s
}

/// Read a stored plan; it must be version 2 and for this machine.
///
/// # Errors
/// [`CopyPlanError::Io`] if unreadable, [`CopyPlanError::BadFile`] naming
/// the first thing wrong.
pub fn load(path: &Path) -> Result<CopyPlan, CopyPlanError> {
    let text = std::fs::read_to_string(path).map_err(|source| CopyPlanError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, &machine_key()).map_err(|what| CopyPlanError::BadFile {
        path: path.to_owned(),
        what,
    })
}

pub(super) fn parse(text: &str, machine: &str) -> Result<CopyPlan, String> {
    let (mut version, mut mach, mut strategy, mut threshold) = (None, None, None, None);
    let mut samples = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {line:?} is not key=value"))?;
        match k {
            "version" => version = Some(v),
            "machine" => mach = Some(v),
            "strategy" => {
                strategy =
                    Some(Strategy::from_name(v).ok_or_else(|| format!("unknown strategy {v:?}"))?)
            }
            "threshold" => {
                threshold = Some(match v {
                    "never" => usize::MAX,
                    n => n.parse().map_err(|_| format!("bad threshold {n:?}"))?,
                })
            }
            "sample" => {
                let f: Vec<&str> = v.split_whitespace().collect();
                let bad = || format!("bad sample {v:?}");
                if f.len() != 4 {
                    return Err(bad());
                }
                samples.push(ProbeResult {
                    chunk: f[0].parse().map_err(|_| bad())?,
                    plain_gb_s: f[1].parse().map_err(|_| bad())?,
                    vector_gb_s: f[2].parse().map_err(|_| bad())?,
                    stream_gb_s: f[3].parse().map_err(|_| bad())?,
                });
            }
            _ => return Err(format!("unknown key {k:?}")),
        }
    }
    if version != Some("2") {
        return Err(format!("version {version:?}, this build reads 2"));
    }
    if mach != Some(machine) {
        return Err(format!("made on {mach:?}, this is {machine:?}"));
    }
    Ok(CopyPlan {
        strategy: strategy.ok_or("no strategy")?,
        threshold: threshold.ok_or("no threshold")?,
        source: "stored".to_owned(),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> CopyPlan {
        CopyPlan {
            strategy: Strategy::Stream,
            threshold: 4096,
            source: "tuned".into(),
            samples: vec![ProbeResult {
                chunk: 4096,
                plain_gb_s: 2.0,
                vector_gb_s: 3.0,
                stream_gb_s: 5.0,
            }],
        }
    }

    #[test]
    fn plan_file_round_trips() {
        let text = render(&plan());
        let back = parse(&text, &machine_key()).unwrap();
        assert_eq!((back.strategy, back.threshold), (Strategy::Stream, 4096));
        assert_eq!(back.samples, plan().samples);
        let dir = std::env::temp_dir().join(format!("fastmsg-copy-plan-{}", std::process::id()));
        let path = dir.join("copy-plan");
        store(&path, &plan()).unwrap();
        assert_eq!(load(&path).unwrap().threshold, 4096);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_plan_files_name_what_is_wrong() {
        let text = render(&plan());
        let e = parse(&text, "another cpu").unwrap_err();
        assert!(e.contains("made on"), "{e}");
        let e = parse(&text.replace("version=2", "version=9"), &machine_key()).unwrap_err();
        assert!(e.contains("version"), "{e}");
        let e = parse(&text.replace("=stream", "=warp"), &machine_key()).unwrap_err();
        assert!(e.contains("warp"), "{e}");
        let e = parse(
            &text.replace("threshold=4096", "threshold=lots"),
            &machine_key(),
        )
        .unwrap_err();
        assert!(e.contains("lots"), "{e}");
        assert!(parse("garbage", &machine_key()).is_err());
        let e = load(Path::new("/nonexistent/copy-plan")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/copy-plan"), "{e}");
    }
}
