//! A process's memory by what holds it, read from `/proc/self/smaps`: the
//! shared segment (file mappings under the segment directory), the large
//! anonymous regions a step created (the network ring regions), and the
//! rest. Used by `examples/startup` to report memory per rank; figures are
//! KiB, as the kernel gives them.
//!
//! The split is by mapping, not by owner: "regions" are the anonymous
//! mappings of at least [`REGION_MIN_KIB`] that were not there before the
//! step (the ring regions are one mapping each: the allocator maps blocks
//! this large on their own). Thread stacks (2 MiB) and malloc arenas'
//! first pieces stay below the threshold and count as the rest; a
//! provider's own large buffer pools (libfabric) count as regions. A job
//! of 3 ranks or fewer has rings smaller than the threshold: they count
//! as the rest.

use std::collections::BTreeSet;
use std::path::Path;

/// Anonymous mappings at least this large (KiB) count as regions.
pub const REGION_MIN_KIB: u64 = 2560;

/// One mapping of `/proc/self/smaps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mapping {
    /// Start address.
    pub start: u64,
    /// The address range as smaps writes it (`start-end`, hex).
    pub range: String,
    /// Path, or empty for an anonymous mapping (`[heap]`, `[stack]` kept).
    pub path: String,
    /// Virtual size, KiB.
    pub size: u64,
    /// Resident, KiB.
    pub rss: u64,
    /// Proportional share, KiB.
    pub pss: u64,
    /// Writable.
    pub writable: bool,
}

/// Parse the text of an smaps file.
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if let Some((lo, _hi)) = first.split_once('-') {
            if let Ok(start) = u64::from_str_radix(lo, 16) {
                let perms = words.next().unwrap_or("");
                // offset, device, inode, then the path (may hold spaces).
                let path: Vec<&str> = words.skip(3).collect();
                out.push(Mapping {
                    start,
                    range: first.to_owned(),
                    path: path.join(" "),
                    writable: perms.as_bytes().get(1) == Some(&b'w'),
                    ..Mapping::default()
                });
                continue;
            }
        }
        let Some(m) = out.last_mut() else { continue };
        let kib = || words.clone().next().and_then(|v| v.parse::<u64>().ok());
        match first {
            "Size:" => m.size = kib().unwrap_or(0),
            "Rss:" => m.rss = kib().unwrap_or(0),
            "Pss:" => m.pss = kib().unwrap_or(0),
            _ => {}
        }
    }
    out
}

/// This process's mappings now (empty where smaps cannot be read).
pub fn mappings() -> Vec<Mapping> {
    std::fs::read_to_string("/proc/self/smaps")
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// Start addresses of `maps`: what existed before a step.
pub fn starts(maps: &[Mapping]) -> BTreeSet<u64> {
    maps.iter().map(|m| m.start).collect()
}

/// Resident and proportional KiB of one category, and its virtual size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Share {
    /// Resident, KiB.
    pub rss: u64,
    /// Proportional share, KiB.
    pub pss: u64,
    /// Virtual size, KiB.
    pub size: u64,
}

impl Share {
    fn add(&mut self, m: &Mapping) {
        self.rss += m.rss;
        self.pss += m.pss;
        self.size += m.size;
    }
}

/// A process's memory split by what holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// Everything.
    pub total: Share,
    /// File mappings under the segment directory (the shared segment).
    pub segment: Share,
    /// Large anonymous mappings created since `before` (ring regions).
    pub regions: Share,
    /// The segment's address range, if one is mapped.
    pub segment_range: Option<String>,
}

impl Split {
    /// The rest: total less segment and regions, KiB resident.
    pub fn rest_rss(&self) -> u64 {
        self.total.rss - self.segment.rss - self.regions.rss
    }
}

/// Split `maps`: mappings of files under `shm_dir` are the segment;
/// writable anonymous mappings of at least [`REGION_MIN_KIB`] whose start
/// is not in `before` are regions.
pub fn split(maps: &[Mapping], shm_dir: &Path, before: &BTreeSet<u64>) -> Split {
    let mut s = Split::default();
    for m in maps {
        s.total.add(m);
        if !m.path.is_empty() && Path::new(&m.path).starts_with(shm_dir) {
            s.segment.add(m);
            s.segment_range.get_or_insert_with(|| m.range.clone());
        } else if m.path.is_empty()
            && m.writable
            && m.size >= REGION_MIN_KIB
            && !before.contains(&m.start)
        {
            s.regions.add(m);
        }
    }
    s
}

/// Bytes the file mapped at `range` (of this process) has allocated (its
/// blocks), and its length; found through `/proc/self/map_files`, so a
/// file already unlinked is found too.
pub fn file_allocation(range: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/self/map_files/{range}")).ok()?;
    Some((m.blocks() * 512, m.len()))
}

/// The host's TCP sockets in use and the pages their buffers hold now
/// (`/proc/net/sockstat`, this network namespace, every process).
pub fn tcp_sockstat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let line = text.lines().find(|l| l.starts_with("TCP:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |name: &str| {
        let i = words.iter().position(|w| *w == name)?;
        words.get(i + 1)?.parse::<u64>().ok()
    };
    Some((field("inuse")?, field("mem")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                  20 kB
Pss:                  20 kB
7f0000000000-7f0008001000 rw-p 00000000 00:00 0 
Size:             131076 kB
Rss:              131076 kB
Pss:              131076 kB
7f1000000000-7f1000201000 rw-p 00000000 00:00 0 
Size:               2052 kB
Rss:                  16 kB
Pss:                  16 kB
7f2000000000-7f2040000000 rw-s 00000000 00:1a 123                        /dev/shm/fastmsg-job x
Size:            1048576 kB
Rss:                 400 kB
Pss:                  25 kB
7f3000000000-7f3000800000 rw-p 00000000 00:00 0 
Size:               8192 kB
Rss:                 100 kB
Pss:                 100 kB
";

    #[test]
    fn splits_segment_new_regions_and_rest() {
        let maps = parse(SAMPLE);
        assert_eq!(maps.len(), 5);
        assert_eq!(maps[3].path, "/dev/shm/fastmsg-job x");
        // The 8 MiB mapping existed before the step: not a region.
        let before: BTreeSet<u64> = [0x7f30_0000_0000].into_iter().collect();
        let s = split(&maps, Path::new("/dev/shm"), &before);
        assert_eq!(s.total.rss, 20 + 131_076 + 16 + 400 + 100);
        assert_eq!(
            s.segment,
            Share {
                rss: 400,
                pss: 25,
                size: 1_048_576
            }
        );
        assert_eq!(s.regions.rss, 131_076);
        assert_eq!(s.rest_rss(), 20 + 16 + 100);
        assert_eq!(
            s.segment_range.as_deref(),
            Some("7f2000000000-7f2040000000")
        );
        // With nothing before, the 8 MiB mapping is a region too; the
        // 2 MiB one (a thread stack) never is.
        let s = split(&maps, Path::new("/dev/shm"), &BTreeSet::new());
        assert_eq!(s.regions.rss, 131_076 + 100);
    }

    #[test]
    fn reads_this_process() {
        let maps = mappings();
        assert!(maps.iter().any(|m| m.rss > 0), "no resident mapping read");
    }
}
