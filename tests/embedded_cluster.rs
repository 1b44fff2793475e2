//! The embedded cluster's lifecycle across processes (issue 53, "a desktop citizen"): a server
//! whose starter was killed (a crash, `kill -9`) is adopted by the next guard and stopped when
//! that guard drops; a server kept running on purpose (`db start`) or owned by a live process is
//! used and left running. Real servers on private data directories, a real child process.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mesh_memory::pg::EmbeddedCluster;

/// Set in the child process: the cluster root it starts a guarded server on.
const HOLDER_ROOT: &str = "MESH_TEST_GUARD_HOLDER_ROOT";
/// What the child prints once its guard holds the server.
const READY: &str = "guard-holder-ready";

/// Not a test of its own: the body of the child process the tests start and kill. Without
/// `MESH_TEST_GUARD_HOLDER_ROOT` it does nothing.
#[test]
fn guard_holder_process() {
    let Some(root) = std::env::var_os(HOLDER_ROOT) else { return };
    let cluster = EmbeddedCluster::new(PathBuf::from(root)).expect("PostgreSQL binaries");
    let guard = cluster.start_guarded().expect("start the server under a guard");
    assert!(guard.stops_on_drop(), "the holder started the server");
    println!("{READY}");
    std::thread::sleep(std::time::Duration::from_secs(300));
    drop(guard);
}

/// A private cluster root, removed (its server stopped first) when dropped, also on panic.
struct PrivateCluster {
    cluster: EmbeddedCluster,
    root: PathBuf,
}

impl PrivateCluster {
    fn new(name: &str) -> Self {
        // Short: the socket path must stay under 108 bytes.
        let root = std::env::temp_dir().join(format!("mm-{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
        let cluster = EmbeddedCluster::new(&root).expect("PostgreSQL binaries (run scripts/setup.sh)");
        Self { cluster, root }
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        if let Err(err) = self.cluster.stop() {
            eprintln!("warning: could not stop the private cluster: {err}");
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Starts this test binary as a child holding a guard on the cluster at `root`; returns once the
/// guard holds the running server.
fn spawn_holder(root: &Path) -> Child {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "guard_holder_process", "--nocapture", "--test-threads=1"])
        .env(HOLDER_ROOT, root)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the holder process");
    let stdout = child.stdout.take().expect("piped stdout");
    for line in BufReader::new(stdout).lines() {
        if line.expect("holder output").contains(READY) {
            return child;
        }
    }
    let status = child.wait().expect("holder exit");
    panic!("the holder process ended before its guard held the server: {status}");
}

fn owner_record(root: &Path) -> Option<String> {
    std::fs::read_to_string(root.join("server.owner")).ok()
}

#[test]
fn a_server_left_by_a_killed_owner_is_adopted_and_stopped_by_the_next_guard() {
    let private = PrivateCluster::new("adopt");
    let cluster = &private.cluster;
    let mut holder = spawn_holder(&private.root);
    let holder_pid = holder.id();
    assert!(owner_record(&private.root).is_some_and(|r| r.starts_with(&format!("{holder_pid} "))));

    // While the owner lives, another guard uses the server and leaves it to its owner.
    let visitor = cluster.start_guarded().expect("reuse the running server");
    assert!(!visitor.stops_on_drop(), "a live owner's server is not taken over");
    drop(visitor);
    assert!(cluster.is_running(), "a guard that did not start the server leaves it running");

    // kill -9: the owner's guard never runs, the server it started keeps running.
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    assert!(cluster.is_running(), "the server outlives its killed starter");

    let next = cluster.start_guarded().expect("start after the crash");
    assert!(next.stops_on_drop(), "the server of a dead owner is adopted");
    let record = owner_record(&private.root).expect("the adopter is recorded");
    assert!(record.starts_with(&format!("{} ", std::process::id())), "{record}");
    drop(next);
    assert!(!cluster.is_running(), "the adopter stops the server it adopted");
    assert_eq!(owner_record(&private.root), None, "a stopped server has no owner");
}

#[test]
fn a_server_kept_running_by_db_start_is_reused_and_left_running() {
    let private = PrivateCluster::new("kept");
    let cluster = &private.cluster;
    assert!(cluster.start(true).expect("db start"), "started by db start");
    assert_eq!(owner_record(&private.root), None, "db start leaves no owner");

    let guard = cluster.start_guarded().expect("reuse");
    assert!(!guard.stops_on_drop());
    drop(guard);
    assert!(cluster.is_running(), "a db start server is left running");
}

#[test]
fn db_start_after_a_crash_keeps_the_abandoned_server_running() {
    let private = PrivateCluster::new("claim");
    let cluster = &private.cluster;
    let mut holder = spawn_holder(&private.root);
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");

    assert!(!cluster.start(true).expect("db start"), "already running");
    assert_eq!(owner_record(&private.root), None, "db start takes the server out of any guard's hands");
    let guard = cluster.start_guarded().expect("reuse");
    assert!(!guard.stops_on_drop());
    drop(guard);
    assert!(cluster.is_running());
}

#[test]
fn db_start_keeps_a_guarded_server_running_after_its_guard_drops() {
    let private = PrivateCluster::new("later");
    let cluster = &private.cluster;
    let guard = cluster.start_guarded().expect("start under a guard");
    assert!(guard.stops_on_drop());
    assert!(!cluster.start(true).expect("db start while the guard holds it"));
    assert!(!guard.stops_on_drop(), "db start disowns the server");
    drop(guard);
    assert!(cluster.is_running(), "kept running on purpose");
}
