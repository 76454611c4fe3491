//! Builds the comparison programs written in C (`benches/c/`) into
//! `<target>/fmbench-c/`, each only when its binary is missing or older
//! than its source or a header of that folder.
//!
//! The rule is the file name: `*_mpi.c` is built with `mpicc -O3` (and
//! run under `mpirun`), every other `*.c` with `cc -O3`; the binary is
//! named after the file without `.c`. Without `mpicc` the MPI programs
//! are not built, and [`CPrograms::program`] says what to install; a
//! program that does not compile is an error naming the file and the
//! compiler's message. The compilers can be replaced with `FMBENCH_CC`
//! and `FMBENCH_MPICC`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// What to install for the Open MPI comparisons.
pub const OPEN_MPI_PACKAGES: &str = "apt install openmpi-bin libopenmpi-dev";

/// A comparison program could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CBuildError {
    /// Reading the sources or writing the binaries failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The compiler could not be started.
    #[error("{compiler} could not be started for {file}: {source}")]
    Spawn {
        /// The compiler.
        compiler: String,
        /// The source file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The compiler refused the program.
    #[error("{compiler} failed on {file}:\n{message}")]
    Compile {
        /// The compiler.
        compiler: String,
        /// The source file.
        file: PathBuf,
        /// Its standard error.
        message: String,
    },
}

/// The built comparison programs, and why the others were not built.
#[derive(Debug, Clone)]
pub struct CPrograms {
    /// Where the binaries are.
    pub dir: PathBuf,
    /// Names of the programs built (or up to date).
    pub built: Vec<String>,
    /// Programs not built, with the reason (no `mpicc`).
    pub skipped: Vec<(String, String)>,
}

/// The folder of the C sources (`benches/c` of this checkout).
pub fn source_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("c")
}

/// Whether `prog` is an executable file in a folder of `PATH`.
pub fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// The two compilers: `cc` and `mpicc`, or `FMBENCH_CC` and
/// `FMBENCH_MPICC` when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compilers {
    /// For `*.c`.
    pub cc: String,
    /// For `*_mpi.c`.
    pub mpicc: String,
}

impl Compilers {
    /// `cc` and `mpicc`, each replaced by its `FMBENCH_*` variable.
    pub fn from_env() -> Compilers {
        let pick = |var: &str, default: &str| {
            std::env::var(var)
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Compilers {
            cc: pick("FMBENCH_CC", "cc"),
            mpicc: pick("FMBENCH_MPICC", "mpicc"),
        }
    }
}

fn modified(path: &Path) -> Result<SystemTime, CBuildError> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(|source| CBuildError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Whether `cmd` (a name on `PATH` or a path) can be run.
fn available(cmd: &str) -> bool {
    if cmd.contains('/') {
        Path::new(cmd).is_file()
    } else {
        on_path(cmd)
    }
}

impl CPrograms {
    /// Build the programs of [`source_dir`] that are stale into
    /// `<target>/fmbench-c/`.
    ///
    /// # Errors
    /// [`CBuildError`]: a source that cannot be read, a compiler that
    /// cannot start or refuses a program.
    pub fn build(target: &Path) -> Result<CPrograms, CBuildError> {
        Self::build_from(
            &source_dir(),
            &target.join("fmbench-c"),
            &Compilers::from_env(),
        )
    }

    /// As [`CPrograms::build`], from `src` into `dir` with `with`.
    ///
    /// # Errors
    /// As [`CPrograms::build`].
    pub fn build_from(src: &Path, dir: &Path, with: &Compilers) -> Result<CPrograms, CBuildError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| CBuildError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut sources = Vec::new();
        let mut newest_header = SystemTime::UNIX_EPOCH;
        for entry in std::fs::read_dir(src).map_err(io(src))? {
            let path = entry.map_err(io(src))?.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("c") => sources.push(path),
                Some("h") => newest_header = newest_header.max(modified(&path)?),
                _ => {}
            }
        }
        sources.sort();
        let (cc, mpicc) = (&with.cc, &with.mpicc);
        let have_mpicc = available(mpicc);
        let mut out = CPrograms {
            dir: dir.to_owned(),
            built: Vec::new(),
            skipped: Vec::new(),
        };
        for file in sources {
            let Some(name) = file.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let name = name.to_owned();
            let is_mpi = name.ends_with("_mpi");
            if is_mpi && !have_mpicc {
                out.skipped.push((
                    name.clone(),
                    format!(
                        "{mpicc} is not installed, so {name} was not built ({OPEN_MPI_PACKAGES})"
                    ),
                ));
                continue;
            }
            let bin = dir.join(&name);
            let stale = match modified(&bin) {
                Ok(b) => b < modified(&file)?.max(newest_header),
                Err(_) => true,
            };
            if stale {
                let comp = if is_mpi { mpicc } else { cc };
                compile(comp, &file, &bin)?;
            }
            out.built.push(name);
        }
        Ok(out)
    }

    /// The path of the built program `name`, or why there is none.
    ///
    /// # Errors
    /// The reason, as a sentence for a report's notes.
    pub fn program(&self, name: &str) -> Result<PathBuf, String> {
        if self.built.iter().any(|b| b == name) {
            return Ok(self.dir.join(name));
        }
        if let Some((_, why)) = self.skipped.iter().find(|(n, _)| n == name) {
            return Err(why.clone());
        }
        Err(format!(
            "{name} is not among the comparison programs of {}",
            source_dir().display()
        ))
    }

    /// The MPI program `name` and a reason when it cannot run (not built,
    /// or no `mpirun`).
    ///
    /// # Errors
    /// The reason, naming what to install.
    pub fn mpi_program(&self, name: &str) -> Result<PathBuf, String> {
        let path = self.program(name)?;
        if !on_path("mpirun") {
            return Err(format!(
                "mpirun is not installed, so {name} cannot run ({OPEN_MPI_PACKAGES})"
            ));
        }
        Ok(path)
    }
}

/// Compile `file` into `bin` (through a temporary name, so a failed or
/// concurrent build never leaves half a binary under the final name).
fn compile(comp: &str, file: &Path, bin: &Path) -> Result<(), CBuildError> {
    let tmp = bin.with_extension(format!("tmp{}", std::process::id()));
    let out = Command::new(comp)
        .args(["-O3", "-Wall", "-o"])
        .arg(&tmp)
        .arg(file)
        .output()
        .map_err(|source| CBuildError::Spawn {
            compiler: comp.to_owned(),
            file: file.to_owned(),
            source,
        })?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(CBuildError::Compile {
            compiler: comp.to_owned(),
            file: file.to_owned(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    std::fs::rename(&tmp, bin).map_err(|source| CBuildError::Io {
        path: bin.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fmbench-cbuild-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("src")).expect("scratch folder");
        d
    }

    /// A plain C program is built once, kept while fresh, rebuilt when its
    /// source changes; a broken one is an error naming the file.
    #[test]
    fn builds_when_stale_and_names_a_broken_file() {
        if !on_path("cc") {
            eprintln!("skipped: no cc on PATH");
            return;
        }
        let d = scratch("stale");
        let src = d.join("src");
        std::fs::write(src.join("two.c"), "int main(void){return 2;}\n").unwrap();
        let progs = CPrograms::build_from(&src, &d.join("bin"), &Compilers::from_env()).unwrap();
        let bin = progs.program("two").unwrap();
        assert_eq!(
            std::process::Command::new(&bin).status().unwrap().code(),
            Some(2)
        );
        let first = modified(&bin).unwrap();
        CPrograms::build_from(&src, &d.join("bin"), &Compilers::from_env()).unwrap();
        assert_eq!(modified(&bin).unwrap(), first, "a fresh binary is kept");
        // A newer source: rebuilt (mtime set explicitly, not by waiting).
        std::fs::write(src.join("two.c"), "int main(void){return 3;}\n").unwrap();
        let later = first + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(src.join("two.c"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        CPrograms::build_from(&src, &d.join("bin"), &Compilers::from_env()).unwrap();
        assert_eq!(
            std::process::Command::new(&bin).status().unwrap().code(),
            Some(3)
        );
        std::fs::write(src.join("bad.c"), "int main(void){ return }\n").unwrap();
        let e = CPrograms::build_from(&src, &d.join("bin"), &Compilers::from_env()).unwrap_err();
        assert!(
            matches!(&e, CBuildError::Compile { file, .. } if file.ends_with("bad.c")),
            "{e}"
        );
        assert!(progs.program("absent").is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Without mpicc an `_mpi.c` program is skipped with what to install.
    #[test]
    fn mpi_programs_are_skipped_without_mpicc() {
        let d = scratch("nompi");
        let src = d.join("src");
        std::fs::write(src.join("x_mpi.c"), "int main(void){return 0;}\n").unwrap();
        // A compiler path that does not exist stands for "not installed".
        let with = Compilers {
            cc: "cc".to_owned(),
            mpicc: "/nonexistent/mpicc".to_owned(),
        };
        let progs = CPrograms::build_from(&src, &d.join("bin"), &with).unwrap();
        let why = progs.program("x_mpi").unwrap_err();
        assert!(why.contains("openmpi-bin"), "{why}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
