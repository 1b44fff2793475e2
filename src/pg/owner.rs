//! Who started the running server: the record a [`super::ClusterGuard`] leaves in the cluster
//! root, so that a server whose starter died without stopping it (a crash, `kill -9`) is known
//! as abandoned at the next start and stopped by the guard that finds it.
//!
//! The record is a process id and that process's start time (clock ticks since boot, field 22 of
//! `/proc/<pid>/stat`): a pid alone could name an unrelated process that reused it.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

/// A process, named so that a reused pid does not pass for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OwnerRecord {
    pid: u32,
    start_ticks: u64,
}

impl OwnerRecord {
    /// This process.
    pub(super) fn current() -> Self {
        let pid = std::process::id();
        Self { pid, start_ticks: start_ticks(pid).unwrap_or(0) }
    }

    /// Whether the recorded process still runs (the same process, not a later one with its pid).
    pub(super) fn is_alive(&self) -> bool {
        match start_ticks(self.pid) {
            Some(ticks) => ticks == self.start_ticks,
            // No /proc (not Linux): whether any process has the pid.
            None => pid_exists(self.pid),
        }
    }

    /// The record stored at `path`; `None` when there is none or it is unreadable (as if the
    /// server had no owner: it is then left running, the safe side).
    pub(super) fn read(path: &Path) -> Option<Self> {
        let text = fs::read_to_string(path).ok()?;
        let mut fields = text.split_whitespace();
        let pid = fields.next()?.parse().ok()?;
        let start_ticks = fields.next()?.parse().ok()?;
        Some(Self { pid, start_ticks })
    }

    /// Stores this record at `path`, replacing what was there.
    pub(super) fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut file = File::create(path)?;
        writeln!(file, "{} {}", self.pid, self.start_ticks)
    }
}

/// The start time of process `pid` in clock ticks since boot, from `/proc/<pid>/stat`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; the start time is field 22.
    after_name.split_whitespace().nth(22 - 3)?.parse().ok()
}

fn pid_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill with signal 0 only checks whether the process exists; it sends nothing.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = OwnerRecord::current();
        assert!(me.is_alive());
        assert!(!OwnerRecord { start_ticks: me.start_ticks + 1, ..me }.is_alive());
    }

    #[test]
    fn a_record_reads_back_and_garbage_reads_as_none() {
        let dir = std::env::temp_dir().join(format!("mesh-owner-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.owner");
        let me = OwnerRecord::current();
        me.write(&path).unwrap();
        assert_eq!(OwnerRecord::read(&path), Some(me));
        fs::write(&path, "not a record").unwrap();
        assert_eq!(OwnerRecord::read(&path), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
