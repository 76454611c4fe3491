//! The line rank 0 of a Bale kernel (`histo`, `ig`, `permute`,
//! `transpose`) prints for each repetition — text, or one JSON object with
//! `--json` — and the exit status of a run: every kernel reports through
//! [`Reporter`], so the lines that `fmbench` and the tests read have one
//! shape. The text line is
//! `<kernel>-fastmsg [form=F] ranks=N <size> buffer=B rep=R time_s=T
//! <unit>_per_s=RATE <figures> OK|FAILED`; the JSON object has `kernel`,
//! `form` (where the kernel has forms), `ranks`, `ok`, `<unit>_per_s`,
//! `time_s`, its own figures, `rep`, `buffer` and `max_rss_mib` (the
//! largest peak resident memory of any rank, MiB).

use fastmsg::{Endpoint, Rank};
use fastmsg_handlers::{Collectives, Op};
use std::fmt::Write;

/// A figure of a line besides the rate: a count, or a hash.
#[derive(Debug, Clone, Copy)]
pub enum Figure {
    /// A whole number.
    Count(u64),
    /// A hash: 16 hex digits (a string in JSON).
    Hash(u64),
}

/// One repetition of a kernel, measured and checked.
#[derive(Debug, Clone)]
pub struct Repetition<'a> {
    /// The kernel's name.
    pub kernel: &'a str,
    /// How the natural code is written, for a kernel with several forms.
    pub form: Option<&'a str>,
    /// The problem's size as the text line gives it
    /// (`table=2^20 updates/rank=2^22`).
    pub size: String,
    /// What the rate counts: `updates` for `updates_per_s`.
    pub unit: &'a str,
    /// How many of `unit` all ranks did together.
    pub work: u64,
    /// The slowest rank's time, seconds.
    pub time_s: f64,
    /// Aggregation buffer bytes per destination.
    pub buffer: usize,
    /// The repetition, from 0.
    pub index: usize,
    /// Whether the result checked out.
    pub ok: bool,
    /// The text line's figures, after the rate.
    pub text: &'a [(&'a str, Figure)],
    /// The JSON object's figures, after `time_s`.
    pub json: &'a [(&'a str, Figure)],
}

/// Reports a kernel's repetitions and ends its run.
#[derive(Debug)]
pub struct Reporter {
    json: bool,
    failed: bool,
}

impl Reporter {
    /// A reporter writing JSON (`json`) or text lines.
    pub fn new(json: bool) -> Reporter {
        Reporter {
            json,
            failed: false,
        }
    }

    /// Report one repetition: the largest peak resident memory of all
    /// ranks is gathered (an allreduce: every rank calls this, in step),
    /// then rank 0 prints the line. A repetition that did not check out
    /// makes the run fail at [`Reporter::finish`].
    ///
    /// # Errors
    /// The allreduce's.
    pub fn report(
        &mut self,
        coll: &Collectives,
        ep: &mut Endpoint,
        rep: &Repetition,
    ) -> Result<(), fastmsg::Error> {
        let mut rss = [crate::peak_rss_mib()];
        coll.allreduce(ep, &mut rss, Op::Max)?;
        self.failed |= !rep.ok;
        if ep.rank() == Rank(0) {
            let n = ep.size();
            let line = if self.json {
                json_line(rep, n, rss[0])
            } else {
                text_line(rep, n)
            };
            println!("{line}");
        }
        Ok(())
    }

    /// Close the endpoint; then exit with status 1 if a repetition did not
    /// check out.
    ///
    /// # Errors
    /// The close's.
    pub fn finish(self, ep: Endpoint) -> Result<(), fastmsg::Error> {
        ep.close()?;
        if self.failed {
            std::process::exit(1);
        }
        Ok(())
    }
}

/// The repetition's rate: its work over the slowest rank's time.
fn rate(rep: &Repetition) -> f64 {
    rep.work as f64 / rep.time_s
}

/// The `--json` line of `rep` on `n` ranks.
fn json_line(rep: &Repetition, n: u32, rss: f64) -> String {
    let mut l = format!("{{\"kernel\":\"{}\"", rep.kernel);
    if let Some(f) = rep.form {
        let _ = write!(l, ",\"form\":\"{f}\"");
    }
    let _ = write!(
        l,
        ",\"ranks\":{n},\"ok\":{},\"{}_per_s\":{:.4e},\"time_s\":{:.4}",
        rep.ok,
        rep.unit,
        rate(rep),
        rep.time_s
    );
    for (name, fig) in rep.json {
        let _ = match fig {
            Figure::Count(v) => write!(l, ",\"{name}\":{v}"),
            Figure::Hash(v) => write!(l, ",\"{name}\":\"{v:016x}\""),
        };
    }
    let _ = write!(
        l,
        ",\"rep\":{},\"buffer\":{},\"max_rss_mib\":{rss:.1}}}",
        rep.index, rep.buffer
    );
    l
}

/// The text line of `rep` on `n` ranks.
fn text_line(rep: &Repetition, n: u32) -> String {
    let mut l = format!("{}-fastmsg ", rep.kernel);
    if let Some(f) = rep.form {
        let _ = write!(l, "form={f} ");
    }
    let _ = write!(
        l,
        "ranks={n} {} buffer={} rep={} time_s={:.4} {}_per_s={:.4e}",
        rep.size,
        rep.buffer,
        rep.index,
        rep.time_s,
        rep.unit,
        rate(rep)
    );
    for (name, fig) in rep.text {
        let _ = match fig {
            Figure::Count(v) => write!(l, " {name}={v}"),
            Figure::Hash(v) => write!(l, " {name}={v:016x}"),
        };
    }
    l.push_str(if rep.ok { " OK" } else { " FAILED" });
    l
}

#[cfg(test)]
mod tests {
    use super::{json_line, text_line, Figure, Repetition};

    /// The lines have the shape `fmbench` and the tests read, byte for byte.
    #[test]
    fn lines_have_the_kernels_shape() {
        let histo = Repetition {
            kernel: "histo",
            form: Some("atomic"),
            size: "table=2^12 updates/rank=2^14".to_owned(),
            unit: "updates",
            work: 32768,
            time_s: 0.5,
            buffer: 8192,
            index: 1,
            ok: true,
            text: &[
                ("sum", Figure::Count(32768)),
                ("hash", Figure::Hash(0xe1f4_a891)),
            ],
            json: &[("hash", Figure::Hash(0xe1f4_a891))],
        };
        assert_eq!(
            text_line(&histo, 2),
            "histo-fastmsg form=atomic ranks=2 table=2^12 updates/rank=2^14 buffer=8192 rep=1 time_s=0.5000 updates_per_s=6.5536e4 sum=32768 hash=00000000e1f4a891 OK"
        );
        assert_eq!(
            json_line(&histo, 2, 5.44),
            "{\"kernel\":\"histo\",\"form\":\"atomic\",\"ranks\":2,\"ok\":true,\"updates_per_s\":6.5536e4,\"time_s\":0.5000,\"hash\":\"00000000e1f4a891\",\"rep\":1,\"buffer\":8192,\"max_rss_mib\":5.4}"
        );
        let permute = Repetition {
            kernel: "permute",
            form: None,
            size: "darts/rank=2^10".to_owned(),
            unit: "darts",
            work: 2048,
            time_s: 0.25,
            buffer: 4096,
            index: 0,
            ok: false,
            text: &[("throws", Figure::Count(2848))],
            json: &[("throws", Figure::Count(2848))],
        };
        assert_eq!(
            text_line(&permute, 3),
            "permute-fastmsg ranks=3 darts/rank=2^10 buffer=4096 rep=0 time_s=0.2500 darts_per_s=8.1920e3 throws=2848 FAILED"
        );
        assert_eq!(
            json_line(&permute, 3, 6.0),
            "{\"kernel\":\"permute\",\"ranks\":3,\"ok\":false,\"darts_per_s\":8.1920e3,\"time_s\":0.2500,\"throws\":2848,\"rep\":0,\"buffer\":4096,\"max_rss_mib\":6.0}"
        );
    }
}
