//! Creating, starting and stopping the private cluster.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Serialize;

use super::owner::OwnerRecord;
use super::{find_binaries, PgBinaries, PgError};

const SUPERUSER: &str = "mesh";
const PORT: u16 = 5432;

/// Where the cluster lives when `MESH_DATA_DIR` is not set.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MESH_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if is_root() {
        return PathBuf::from("/var/lib/mesh-memory");
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("mesh-memory");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/mesh-memory")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The uid/gid of the user the server runs as, when this process is root.
fn server_user() -> Result<Option<(u32, u32)>, PgError> {
    if !is_root() {
        return Ok(None);
    }
    let name = std::env::var("MESH_PG_USER").unwrap_or_else(|_| "postgres".to_owned());
    let c_name = CString::new(name.clone()).map_err(|_| PgError::NoServerUser(name.clone()))?;
    // SAFETY: getpwnam reads a NUL-terminated name and returns a pointer into static storage,
    // which is copied out before any other call.
    let entry = unsafe { libc::getpwnam(c_name.as_ptr()) };
    if entry.is_null() {
        return Err(PgError::NoServerUser(name));
    }
    // SAFETY: entry is non-null and points to a valid passwd struct.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    if uid == 0 {
        return Err(PgError::NoServerUser(name));
    }
    Ok(Some((uid, gid)))
}

/// Whether the server is up, and where.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStatus {
    /// The data directory.
    pub data_dir: PathBuf,
    /// The binaries in use.
    pub bin_dir: PathBuf,
    /// `initdb` has run.
    pub initialized: bool,
    /// A server is running on the data directory.
    pub running: bool,
    /// Socket directory.
    pub socket_dir: PathBuf,
}

/// A private PostgreSQL cluster under one data directory.
#[derive(Clone, Debug)]
pub struct EmbeddedCluster {
    root: PathBuf,
    bin: PgBinaries,
    run_as: Option<(u32, u32)>,
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PgError {
    let path = path.to_path_buf();
    move |source| PgError::Io { action, path, source }
}

fn tail(text: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(text);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

impl EmbeddedCluster {
    /// A cluster under `root` using the binaries found by [`find_binaries`].
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, PgError> {
        let root = root.into();
        let root =
            if root.is_absolute() { root } else { std::env::current_dir().map_err(io("resolve", &root))?.join(root) };
        Ok(Self { root, bin: find_binaries()?, run_as: server_user()? })
    }

    /// The cluster under [`default_data_dir`].
    pub fn at_default_location() -> Result<Self, PgError> {
        Self::new(default_data_dir())
    }

    fn pgdata(&self) -> PathBuf {
        self.root.join("pgdata")
    }

    fn socket_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    fn password_file(&self) -> PathBuf {
        self.root.join("superuser.password")
    }

    fn log_file(&self) -> PathBuf {
        self.root.join("postgres.log")
    }

    /// The record of the guard that started the running server (absent: nobody stops it).
    fn owner_file(&self) -> PathBuf {
        self.root.join("server.owner")
    }

    /// Held while the server is started or stopped and its owner record read or written, so two
    /// processes starting at once agree on who owns the server.
    fn lock_ownership(&self) -> Result<File, PgError> {
        let path = self.root.join("server.owner.lock");
        let file =
            OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io("open", &path))?;
        file.lock().map_err(io("lock", &path))?;
        Ok(file)
    }

    /// Forgets the owner: the running server is kept running on purpose.
    fn disown(&self) -> Result<(), PgError> {
        let path = self.owner_file();
        match fs::remove_file(&path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io("remove", &path)(err)),
            _ => Ok(()),
        }
    }

    fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.bin.tool(tool));
        cmd.env("LC_ALL", "C").env_remove("PGDATA").env_remove("PGHOST").env_remove("PGPORT");
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid).current_dir(&self.root);
        }
        cmd
    }

    fn run(&self, mut cmd: Command, what: &str) -> Result<Output, PgError> {
        let output = cmd.output().map_err(io("run", &self.bin.tool(what)))?;
        if output.status.success() {
            return Ok(output);
        }
        let mut detail = tail(&output.stderr, 6);
        if detail.is_empty() {
            detail = tail(&output.stdout, 6);
        }
        if let Ok(log) = fs::read(self.log_file()) {
            let log_tail = tail(&log, 4);
            if !log_tail.is_empty() {
                detail = format!("{detail} | log: {log_tail}");
            }
        }
        Err(PgError::CommandFailed { command: what.to_owned(), status: output.status.to_string(), detail })
    }

    /// Gives a path to the server user (when running as root) with the given mode.
    fn hand_over(&self, path: &Path, mode: u32) -> Result<(), PgError> {
        if let Some((uid, gid)) = self.run_as {
            chown(path, Some(uid), Some(gid)).map_err(io("chown", path))?;
        }
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io("chmod", path))
    }

    /// Whether `initdb` has run here.
    pub fn is_initialized(&self) -> bool {
        self.pgdata().join("PG_VERSION").is_file()
    }

    /// Whether a server is running on this data directory.
    pub fn is_running(&self) -> bool {
        if !self.is_initialized() {
            return false;
        }
        let mut cmd = self.command("pg_ctl");
        cmd.arg("status").arg("-D").arg(self.pgdata());
        cmd.output().map(|o| o.status.success()).unwrap_or(false)
    }

    /// Status for `db status`.
    pub fn status(&self) -> ClusterStatus {
        ClusterStatus {
            data_dir: self.root.clone(),
            bin_dir: self.bin.dir.clone(),
            initialized: self.is_initialized(),
            running: self.is_running(),
            socket_dir: self.socket_dir(),
        }
    }

    /// Runs `initdb` once: SCRAM authentication on a unix socket only, a generated superuser
    /// password stored 0600 beside the cluster.
    pub fn initialize(&self) -> Result<(), PgError> {
        if self.is_initialized() {
            return Ok(());
        }
        let socket = self.socket_dir().join(format!(".s.PGSQL.{PORT}"));
        if socket.as_os_str().len() > 107 {
            return Err(PgError::SocketPathTooLong(socket));
        }
        fs::create_dir_all(&self.root).map_err(io("create", &self.root))?;
        fs::set_permissions(&self.root, fs::Permissions::from_mode(0o755)).map_err(io("chmod", &self.root))?;
        for dir in [self.pgdata(), self.socket_dir()] {
            fs::create_dir_all(&dir).map_err(io("create", &dir))?;
            self.hand_over(&dir, 0o700)?;
        }
        let password = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let initdb_pw = self.socket_dir().join("initdb.pw");
        fs::write(&initdb_pw, &password).map_err(io("write", &initdb_pw))?;
        self.hand_over(&initdb_pw, 0o600)?;
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(self.pgdata())
            .args([
                "-U",
                SUPERUSER,
                "-E",
                "UTF8",
                "--no-locale",
                "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", initdb_pw.display()));
        let result = self.run(cmd, "initdb");
        let _ = fs::remove_file(&initdb_pw);
        result?;
        let password_file = self.password_file();
        fs::write(&password_file, &password).map_err(io("write", &password_file))?;
        fs::set_permissions(&password_file, fs::Permissions::from_mode(0o600)).map_err(io("chmod", &password_file))?;
        let conf = self.pgdata().join("postgresql.conf");
        let mut text = fs::read_to_string(&conf).map_err(io("read", &conf))?;
        text.push_str(&format!(
            "\n# mesh-memory: private cluster, unix socket only\nlisten_addresses = ''\nport = {PORT}\n\
             unix_socket_directories = '{}'\nunix_socket_permissions = 0770\nmax_connections = 200\n\
             # shared_buffers is given at each start (src/pg/memory.rs)\n",
            self.socket_dir().display()
        ));
        fs::write(&conf, text).map_err(io("write", &conf))
    }

    /// Initializes if needed and starts the server, kept running on purpose (`db start`): no
    /// guard owns it afterwards, so none stops it, not even one that had started it. Returns
    /// `true` if this call started it. `ephemeral` turns off fsync for throwaway test clusters.
    /// The buffer cache is sized at every start ([`super::shared_buffers_setting`]), so an
    /// existing cluster follows the machine.
    pub fn start(&self, ephemeral: bool) -> Result<bool, PgError> {
        self.initialize()?;
        let _lock = self.lock_ownership()?;
        let started = self.start_server(ephemeral)?;
        self.disown()?;
        Ok(started)
    }

    fn start_server(&self, ephemeral: bool) -> Result<bool, PgError> {
        if self.is_running() {
            return Ok(false);
        }
        let log = self.log_file();
        if !log.exists() {
            fs::write(&log, b"").map_err(io("create", &log))?;
        }
        self.hand_over(&log, 0o600)?;
        let mut options = format!("-c shared_buffers={}", super::shared_buffers_setting()?);
        if ephemeral {
            options.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let mut cmd = self.command("pg_ctl");
        cmd.arg("start").arg("-D").arg(self.pgdata()).arg("-l").arg(&log).args(["-w", "-t", "60"]);
        cmd.arg("-o").arg(options);
        self.run(cmd, "pg_ctl start")?;
        Ok(true)
    }

    /// Stops the server (fast shutdown: open transactions roll back, nothing committed is lost).
    pub fn stop(&self) -> Result<bool, PgError> {
        if !self.is_running() {
            return Ok(false);
        }
        let mut cmd = self.command("pg_ctl");
        cmd.arg("stop").arg("-D").arg(self.pgdata()).args(["-m", "fast", "-w", "-t", "60"]);
        self.run(cmd, "pg_ctl stop")?;
        self.disown()?;
        Ok(true)
    }

    /// The superuser connection URL over the unix socket. It contains the generated password:
    /// print it only on request (`db url`), never into logs.
    pub fn url(&self) -> Result<String, PgError> {
        self.url_for_database("postgres")
    }

    /// As [`EmbeddedCluster::url`], for another database of the cluster.
    pub fn url_for_database(&self, database: &str) -> Result<String, PgError> {
        let file = self.password_file();
        let password = fs::read_to_string(&file).map_err(io("read", &file))?;
        Ok(format!(
            "postgres://{SUPERUSER}:{}@localhost:{PORT}/{database}?host={}",
            password.trim(),
            self.socket_dir().display()
        ))
    }

    /// Starts the cluster if needed and returns a guard that stops it again on drop when this
    /// process owns it: it started it, or found it running with an owner that has died (a crash
    /// or `kill -9` left it), so the next start cleans up what a crash left. A server kept
    /// running on purpose ([`EmbeddedCluster::start`], `db start`) or owned by a live process is
    /// used and left running.
    pub fn start_guarded(&self) -> Result<ClusterGuard, PgError> {
        self.initialize()?;
        let _lock = self.lock_ownership()?;
        let started_here = self.start_server(false)?;
        let abandoned_by =
            if started_here { None } else { OwnerRecord::read(&self.owner_file()).filter(|owner| !owner.is_alive()) };
        let owns = started_here || abandoned_by.is_some();
        let owner = if owns {
            let me = OwnerRecord::current();
            let path = self.owner_file();
            me.write(&path).map_err(io("write", &path))?;
            if let Some(dead) = abandoned_by {
                tracing::info!(?dead, "adopting the embedded PostgreSQL left running by a process that has exited");
            }
            Some(me)
        } else {
            None
        };
        Ok(ClusterGuard { cluster: self.clone(), owner })
    }

    /// Stops the server if `owner` is still its recorded owner (nobody kept it running since).
    fn stop_if_owned_by(&self, owner: OwnerRecord) -> Result<bool, PgError> {
        let _lock = self.lock_ownership()?;
        if OwnerRecord::read(&self.owner_file()) != Some(owner) {
            return Ok(false);
        }
        self.stop()
    }
}

/// Keeps the embedded cluster up for the life of a command; stops it on drop if this process
/// owns it (started it, or adopted it from a starter that died), so a CLI invocation or a
/// console session leaves the machine as it found it.
#[derive(Debug)]
pub struct ClusterGuard {
    cluster: EmbeddedCluster,
    /// This process, recorded in the cluster root, when the guard stops the server on drop.
    owner: Option<OwnerRecord>,
}

impl ClusterGuard {
    /// The cluster kept up.
    pub fn cluster(&self) -> &EmbeddedCluster {
        &self.cluster
    }

    /// Whether dropping this guard stops the server: it started it or adopted it, and nobody
    /// has kept it running since (`db start`).
    pub fn stops_on_drop(&self) -> bool {
        self.owner.is_some_and(|me| OwnerRecord::read(&self.cluster.owner_file()) == Some(me))
    }

    /// Leaves the server running after the guard drops, with no owner (as `db start` does).
    pub fn keep_running(mut self) -> Result<(), PgError> {
        if let Some(me) = self.owner.take() {
            let _lock = self.cluster.lock_ownership()?;
            if OwnerRecord::read(&self.cluster.owner_file()) == Some(me) {
                self.cluster.disown()?;
            }
        }
        Ok(())
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if let Some(me) = self.owner.take() {
            if let Err(err) = self.cluster.stop_if_owned_by(me) {
                eprintln!("warning: could not stop the embedded PostgreSQL: {err}");
            }
        }
    }
}
