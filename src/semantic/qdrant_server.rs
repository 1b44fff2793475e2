//! Throwaway Qdrant servers on loopback (feature `qdrant`), started the way the embedded
//! PostgreSQL is: for the test suites, the benchmarks and a developer's machine, never for
//! production (a deployment runs its own Qdrant and sets `QDRANT_URL`).
//!
//! The server binary is `MESH_QDRANT_BIN`, else the one `../shared/tools/qdrant/unpack.sh`
//! verifies (sha256) and unpacks into a cache directory. Each node gets its own storage directory
//! and ports the kernel just handed out on 127.0.0.1 (so parallel runs do not collide), and is
//! ready when its `/readyz` answers. A [`QdrantCluster`] of several nodes runs Qdrant's
//! distributed mode (`QDRANT__CLUSTER__ENABLED`, `--uri`, `--bootstrap` over p2p ports). Dropping
//! the guard kills every node and removes its storage; a node is also killed when the thread that
//! started it ends (`PR_SET_PDEATHSIG`), so a crashed test run leaves no server behind.
//! [`QdrantCluster::detach`] hands the nodes to `mesh-memory qdrant start`, which records them
//! in a state file for `qdrant stop`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Why a throwaway Qdrant could not be started or found.
#[derive(Debug, thiserror::Error)]
pub enum QdrantServerError {
    /// Neither `MESH_QDRANT_BIN` nor the shared unpack script gave a binary.
    #[error(
        "no Qdrant server binary: set MESH_QDRANT_BIN, or provide {0} (its unpack.sh verifies and unpacks the binary)"
    )]
    NoBinary(String),
    /// The unpack script failed (a wrong checksum, a missing `xz`).
    #[error("unpacking the Qdrant binary failed: {0}")]
    Unpack(String),
    /// Starting, signalling or waiting for a process failed.
    #[error("Qdrant process: {0}")]
    Io(#[from] std::io::Error),
    /// A node did not become ready in time (its log is in its directory).
    #[error("Qdrant node {node} was not ready within {seconds} s (log: {log})")]
    NotReady {
        /// Which node.
        node: usize,
        /// How long it was given.
        seconds: u64,
        /// Its log file.
        log: String,
    },
    /// A state file of `mesh-memory qdrant start` is missing or unreadable.
    #[error("no running throwaway Qdrant recorded in {0} (start one with `mesh-memory qdrant start`)")]
    NoState(String),
}

/// The Qdrant release the shared binary is (`../shared/tools/qdrant/PROVENANCE.md`).
pub const QDRANT_VERSION: &str = "1.18.0";

/// How long a node may take to answer `/readyz` (a cold start here takes well under a second;
/// a cluster's followers wait for the consensus).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The Qdrant server binary: `MESH_QDRANT_BIN`, else unpacked (and verified) by the unpack script
/// of `MESH_QDRANT_DIST` or `../shared/tools/qdrant` beside the source tree, into
/// `MESH_QDRANT_CACHE` or `$XDG_CACHE_HOME/mesh-memory/qdrant-<version>`.
pub fn qdrant_binary() -> Result<PathBuf, QdrantServerError> {
    if let Some(bin) = std::env::var_os("MESH_QDRANT_BIN").filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let dist = std::env::var_os("MESH_QDRANT_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/qdrant"));
    let script = dist.join("unpack.sh");
    if !script.is_file() {
        return Err(QdrantServerError::NoBinary(script.display().to_string()));
    }
    let cache = std::env::var_os("MESH_QDRANT_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("mesh-memory").join(format!("qdrant-{QDRANT_VERSION}"))
    });
    let out = Command::new(&script).arg(&cache).stderr(Stdio::piped()).output()?;
    if !out.status.success() {
        return Err(QdrantServerError::Unpack(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Ports the kernel hands out on loopback now (released again; a lost race makes the node fail
/// to start, and [`QdrantCluster::start`] then tries new ones).
fn free_ports(n: usize) -> Result<Vec<u16>, std::io::Error> {
    let listeners: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// One node's addresses and directory, as recorded in a state file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The gRPC URL clients use (`http://127.0.0.1:<port>`).
    pub grpc_url: String,
    /// The REST URL (health, cluster state).
    pub http_url: String,
    /// The process id while it runs.
    pub pid: u32,
}

/// One Qdrant process.
#[derive(Debug)]
pub struct QdrantNode {
    dir: PathBuf,
    http_port: u16,
    grpc_port: u16,
    /// Cluster mode: this node's p2p port, and the p2p URI of the node to bootstrap from.
    p2p: Option<(u16, Option<String>)>,
    child: Option<Child>,
}

impl QdrantNode {
    /// The gRPC URL (what `QDRANT_URL` holds).
    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// The REST URL.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn log(&self) -> PathBuf {
        self.dir.join("qdrant.log")
    }

    fn spawn(&mut self, binary: &Path, tied_to_thread: bool, api_key: Option<&str>) -> Result<(), QdrantServerError> {
        std::fs::create_dir_all(&self.dir)?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log())?;
        let mut command = Command::new(binary);
        command
            .current_dir(&self.dir)
            .arg("--disable-telemetry")
            .env("QDRANT__SERVICE__HOST", "127.0.0.1")
            .env("QDRANT__SERVICE__HTTP_PORT", self.http_port.to_string())
            .env("QDRANT__SERVICE__GRPC_PORT", self.grpc_port.to_string())
            .env("QDRANT__STORAGE__STORAGE_PATH", self.dir.join("storage"))
            .env("QDRANT__STORAGE__SNAPSHOTS_PATH", self.dir.join("snapshots"))
            .env("QDRANT_INIT_FILE_PATH", self.dir.join(".initialized"))
            .env("QDRANT__LOG_LEVEL", "WARN")
            // Small: a few test collections on a 2-core machine beside PostgreSQL.
            .env("QDRANT__STORAGE__PERFORMANCE__MAX_SEARCH_THREADS", "1")
            .env("QDRANT__STORAGE__PERFORMANCE__OPTIMIZER_CPU_BUDGET", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(key) = api_key {
            command.env("QDRANT__SERVICE__API_KEY", key);
        }
        if let Some((port, bootstrap)) = &self.p2p {
            command
                .env("QDRANT__CLUSTER__ENABLED", "true")
                .env("QDRANT__CLUSTER__P2P__PORT", port.to_string())
                .arg("--uri")
                .arg(format!("http://127.0.0.1:{port}"));
            if let Some(bootstrap) = bootstrap {
                command.arg("--bootstrap").arg(bootstrap);
            }
        }
        if tied_to_thread {
            die_with_parent(&mut command);
        } else {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        self.child = Some(command.spawn()?);
        Ok(())
    }

    /// Whether the process has exited (or was never started).
    fn exited(&mut self) -> bool {
        match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Kills the process at once (SIGKILL: a crash, as far as Qdrant knows) and reaps it. Its
    /// storage stays, so [`QdrantCluster::restart`] brings the same node back.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the process: a server that accepts connections and
    /// never answers, to test deadlines.
    pub fn freeze(&self, frozen: bool) -> Result<(), QdrantServerError> {
        let pid = self.pid().ok_or_else(|| std::io::Error::other("node is not running"))?;
        signal(pid, if frozen { libc::SIGSTOP } else { libc::SIGCONT })
    }
}

fn signal(pid: u32, signal: i32) -> Result<(), QdrantServerError> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
    // SAFETY: kill(2) with a pid this module started; no memory is shared.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; the closure touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// One throwaway Qdrant server, or several in distributed mode, on loopback.
#[derive(Debug)]
pub struct QdrantCluster {
    binary: PathBuf,
    dir: PathBuf,
    nodes: Vec<QdrantNode>,
    /// Whether the nodes die with the thread that started them.
    tied: bool,
    /// The API key the nodes require, if any.
    api_key: Option<String>,
    detached: bool,
    http: reqwest::Client,
}

impl QdrantCluster {
    /// Starts `nodes` nodes (1: a plain server; more: distributed mode, all bootstrapped from the
    /// first) under a new directory in `base` (default: the system's temporary directory), and
    /// waits until every node is ready and, in a cluster, every peer is known to the first. The
    /// nodes die with this guard, or with the thread that started them.
    pub async fn start(nodes: usize, base: Option<&Path>) -> Result<Self, QdrantServerError> {
        Self::start_with(nodes, base, true, None).await
    }

    /// Like [`start`](Self::start), with every node requiring `api_key` (Qdrant's
    /// `service.api_key`): what a deployment with authentication looks like to the adapter.
    pub async fn start_with_api_key(nodes: usize, api_key: &str) -> Result<Self, QdrantServerError> {
        Self::start_with(nodes, None, true, Some(api_key.to_owned())).await
    }

    /// Like [`start`](Self::start), but the nodes outlive this process once
    /// [`detach`](Self::detach)ed (for `mesh-memory qdrant start`).
    pub async fn start_detachable(nodes: usize, base: Option<&Path>) -> Result<Self, QdrantServerError> {
        Self::start_with(nodes, base, false, None).await
    }

    async fn start_with(
        nodes: usize,
        base: Option<&Path>,
        tied: bool,
        api_key: Option<String>,
    ) -> Result<Self, QdrantServerError> {
        let binary = qdrant_binary()?;
        let base = base.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let dir = base.join(format!("mesh-qdrant-{}", uuid::Uuid::new_v4().simple()));
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().map_err(std::io::Error::other)?;
        let mut cluster = QdrantCluster { binary, dir, nodes: Vec::new(), tied, api_key, detached: false, http };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match cluster.launch(nodes.max(1)).await {
                Ok(()) => return Ok(cluster),
                // A port taken between choosing and binding: new ports, a clean directory.
                Err(_) if attempt < 3 && cluster.nodes.iter_mut().any(QdrantNode::exited) => {
                    cluster.kill_all();
                    let _ = std::fs::remove_dir_all(&cluster.dir);
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn launch(&mut self, count: usize) -> Result<(), QdrantServerError> {
        let per_node = if count > 1 { 3 } else { 2 };
        let ports = free_ports(count * per_node)?;
        self.nodes = (0..count)
            .map(|i| {
                let p = &ports[i * per_node..(i + 1) * per_node];
                let first_p2p = ports.get(2).copied().unwrap_or(0);
                QdrantNode {
                    dir: self.dir.join(format!("node{i}")),
                    http_port: p[0],
                    grpc_port: p[1],
                    p2p: (count > 1).then(|| (p[2], (i > 0).then(|| format!("http://127.0.0.1:{first_p2p}")))),
                    child: None,
                }
            })
            .collect();
        for i in 0..count {
            self.nodes[i].spawn(&self.binary, self.tied, self.api_key.as_deref())?;
            // Followers bootstrap from a running first node.
            if i == 0 {
                self.wait_ready(0).await?;
            }
        }
        for i in 1..count {
            self.wait_ready(i).await?;
        }
        if count > 1 {
            self.wait_for_peers(count).await?;
        }
        Ok(())
    }

    async fn wait_ready(&mut self, node: usize) -> Result<(), QdrantServerError> {
        let started = Instant::now();
        let url = format!("{}/readyz", self.nodes[node].http_url());
        while started.elapsed() < READY_TIMEOUT {
            if self.nodes[node].exited() {
                break;
            }
            if let Ok(response) = self.http.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(QdrantServerError::NotReady {
            node,
            seconds: READY_TIMEOUT.as_secs(),
            log: self.nodes[node].log().display().to_string(),
        })
    }

    /// Waits until the first node's consensus lists `count` peers.
    async fn wait_for_peers(&self, count: usize) -> Result<(), QdrantServerError> {
        let started = Instant::now();
        let url = format!("{}/cluster", self.nodes[0].http_url());
        while started.elapsed() < READY_TIMEOUT {
            let mut request = self.http.get(&url);
            if let Some(key) = &self.api_key {
                request = request.header("api-key", key);
            }
            if let Ok(response) = request.send().await {
                if let Ok(body) = response.json::<serde_json::Value>().await {
                    let peers = body["result"]["peers"].as_object().map_or(0, serde_json::Map::len);
                    if peers >= count {
                        return Ok(());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(QdrantServerError::NotReady {
            node: 0,
            seconds: READY_TIMEOUT.as_secs(),
            log: self.nodes[0].log().display().to_string(),
        })
    }

    /// The gRPC URL of the first node (any node serves the whole cluster).
    pub fn url(&self) -> String {
        self.nodes[0].grpc_url()
    }

    /// The nodes, first one first.
    pub fn nodes(&self) -> &[QdrantNode] {
        &self.nodes
    }

    /// Node `i`, to kill or freeze it.
    pub fn node_mut(&mut self, i: usize) -> &mut QdrantNode {
        &mut self.nodes[i]
    }

    /// Starts node `i` again on its ports and storage (after [`QdrantNode::kill`]) and waits until
    /// it is ready. A cluster node rejoins with its stored peer identity.
    pub async fn restart(&mut self, i: usize) -> Result<(), QdrantServerError> {
        self.nodes[i].kill();
        // A restarted node finds its peers in its storage; bootstrapping again is not needed.
        if let Some((_, bootstrap)) = &mut self.nodes[i].p2p {
            *bootstrap = None;
        }
        self.nodes[i].spawn(&self.binary, self.tied, self.api_key.as_deref())?;
        self.wait_ready(i).await
    }

    fn kill_all(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
    }

    /// Leaves the nodes of a [`start_detachable`](Self::start_detachable) cluster running after
    /// this guard is dropped and returns what `qdrant stop` needs to stop them.
    pub fn detach(mut self) -> ClusterState {
        self.detached = true;
        let nodes = self
            .nodes
            .iter_mut()
            .map(|n| {
                let info = NodeInfo { grpc_url: n.grpc_url(), http_url: n.http_url(), pid: n.pid().unwrap_or(0) };
                // Forget the child without killing it.
                n.child.take();
                info
            })
            .collect();
        ClusterState { dir: self.dir.clone(), nodes }
    }
}

impl Drop for QdrantCluster {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A detached throwaway Qdrant, as `mesh-memory qdrant start` records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterState {
    /// Its storage directory (removed by [`ClusterState::stop`]).
    pub dir: PathBuf,
    /// Its nodes, the first one first.
    pub nodes: Vec<NodeInfo>,
}

impl ClusterState {
    /// The state file's name in `mesh-memory qdrant`'s directory.
    pub const FILE: &'static str = "qdrant-state.json";

    /// Writes the state file into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), QdrantServerError> {
        std::fs::create_dir_all(dir)?;
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(Self::FILE), text)?;
        Ok(())
    }

    /// Reads the state file in `dir`.
    pub fn load(dir: &Path) -> Result<Self, QdrantServerError> {
        let path = dir.join(Self::FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|_| QdrantServerError::NoState(path.display().to_string()))?;
        serde_json::from_str(&text).map_err(|_| QdrantServerError::NoState(path.display().to_string()))
    }

    /// Kills every recorded node that still runs a Qdrant, removes its storage and the state
    /// file in `dir`.
    pub fn stop(&self, dir: &Path) -> Result<(), QdrantServerError> {
        for node in &self.nodes {
            // Only a pid that still runs the qdrant binary is ours to kill (pids are reused).
            let exe = std::fs::read_link(format!("/proc/{}/exe", node.pid)).unwrap_or_default();
            if exe.file_name().is_some_and(|name| name.to_string_lossy().starts_with("qdrant")) {
                let _ = signal(node.pid, libc::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(dir.join(Self::FILE));
        Ok(())
    }
}
