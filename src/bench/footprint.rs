//! What a store costs besides time: its disk footprint per relation, and the resident memory of
//! the bench process and of the PostgreSQL server at the end of each size. Both are read from the
//! catalogue and from `/proc`, so they describe the store and the server as they are, not an
//! estimate.

use serde::Serialize;

/// The on-disk size of a store right after it was loaded (and its vectors written).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiskFootprint {
    /// `pg_database_size` of the bench database: every relation, the catalogue and free space.
    pub database_bytes: i64,
    /// Tables (heap with its TOAST, free space and visibility maps) and each of their indexes,
    /// largest first; relations under 1 MB are left out.
    pub relations: Vec<RelationSize>,
}

/// One table or index and its size.
#[derive(Clone, Debug, Serialize)]
pub struct RelationSize {
    /// The relation's name (an index: `table.index`).
    pub name: String,
    /// `table` or `index`.
    pub kind: String,
    /// Bytes on disk.
    pub bytes: i64,
}

impl DiskFootprint {
    /// Reads the footprint of the database behind `pool`.
    pub async fn read(pool: &sqlx::PgPool) -> Result<Self, sqlx::Error> {
        let database_bytes: i64 =
            sqlx::query_scalar("SELECT pg_database_size(current_database())").fetch_one(pool).await?;
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT t.relname::text, 'table', pg_table_size(t.oid)
               FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
              WHERE n.nspname = 'public' AND t.relkind IN ('r', 'p')
             UNION ALL
             SELECT t.relname || '.' || i.relname, 'index', pg_relation_size(i.oid)
               FROM pg_index x
               JOIN pg_class i ON i.oid = x.indexrelid
               JOIN pg_class t ON t.oid = x.indrelid
               JOIN pg_namespace n ON n.oid = t.relnamespace
              WHERE n.nspname = 'public'
             ORDER BY 3 DESC",
        )
        .fetch_all(pool)
        .await?;
        let relations = rows
            .into_iter()
            .filter(|(_, _, bytes)| *bytes >= 1 << 20)
            .map(|(name, kind, bytes)| RelationSize { name, kind, bytes })
            .collect();
        Ok(DiskFootprint { database_bytes, relations })
    }
}

/// Resident memory at the end of a size.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResidentMemory {
    /// The bench process's resident set (`VmRSS`), where `/proc` exists.
    pub bench_process_bytes: Option<u64>,
    /// The PostgreSQL server's proportional set size (`Pss`, summed over the postmaster and its
    /// children: shared buffers are counted once, not once per backend), where the server runs
    /// on this machine and its processes can be read; `None` otherwise.
    pub postgres_bytes: Option<u64>,
    /// How many server processes were summed.
    pub postgres_processes: usize,
}

impl ResidentMemory {
    /// Reads both. The server's postmaster is found through its data directory's `postmaster.pid`
    /// (reading `data_directory` needs a superuser or `pg_read_all_settings`, which the bench's
    /// admin connection has); a server on another machine gives `None`.
    pub async fn read(pool: &sqlx::PgPool) -> Self {
        let bench_process_bytes = status_kilobytes("/proc/self/status", "VmRSS:").map(|kb| kb * 1024);
        let data_directory: Option<String> =
            sqlx::query_scalar("SELECT current_setting('data_directory', true)").fetch_one(pool).await.ok().flatten();
        let postmaster = data_directory
            .and_then(|dir| std::fs::read_to_string(std::path::Path::new(&dir).join("postmaster.pid")).ok())
            .and_then(|pid_file| pid_file.lines().next().and_then(|line| line.trim().parse::<u32>().ok()));
        let (postgres_bytes, postgres_processes) = match postmaster {
            Some(pid) => {
                let processes = server_processes(pid);
                let total: u64 =
                    processes.iter().filter_map(|p| status_kilobytes(&format!("/proc/{p}/smaps_rollup"), "Pss:")).sum();
                ((total > 0).then_some(total * 1024), processes.len())
            }
            None => (None, 0),
        };
        ResidentMemory { bench_process_bytes, postgres_bytes, postgres_processes }
    }

    /// One line for the report.
    pub fn summary(&self) -> String {
        let mb = |b: Option<u64>| b.map_or("unknown".to_string(), |b| format!("{:.0} MB", b as f64 / 1e6));
        format!(
            "resident memory: bench process {} (RSS), PostgreSQL {} (PSS of {} processes)",
            mb(self.bench_process_bytes),
            mb(self.postgres_bytes),
            self.postgres_processes
        )
    }
}

/// The postmaster and every process whose parent it is (backends, background workers).
fn server_processes(postmaster: u32) -> Vec<u32> {
    let mut found = vec![postmaster];
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The command name is in parentheses and may contain spaces: the parent pid is the second
        // field after its closing parenthesis.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if parent == Some(postmaster) {
            found.push(pid);
        }
    }
    found
}

/// A `Key:   123 kB` line of a `/proc` status-like file, in kB.
fn status_kilobytes(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
}

/// Bytes for people: `12.3 GB`, `456 MB`.
pub fn human_bytes(bytes: i64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else {
        format!("{:.0} MB", b / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_set() {
        let rss = status_kilobytes("/proc/self/status", "VmRSS:");
        assert!(rss.is_some_and(|kb| kb > 0), "VmRSS of this process: {rss:?}");
    }

    #[test]
    fn bytes_read_in_the_unit_that_fits() {
        assert_eq!(human_bytes(12_345_678_901), "12.35 GB");
        assert_eq!(human_bytes(456_000_000), "456 MB");
    }
}
