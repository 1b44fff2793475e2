//! How much memory the embedded server's buffer cache gets.
//!
//! PostgreSQL's default `shared_buffers` (128 MB) is sized for a server that shares its machine
//! with anything; at a million revisions the retrieval indexes alone are larger, and every search
//! then reads its index pages through the kernel's page cache instead of the server's own cache
//! (hybrid recall p95 35–36 ms at 128 MB against 27–28 ms at 4 GB on the benchmark machine,
//! docs/benchmarks-history.md). The embedded cluster therefore takes a quarter of the memory it may
//! use (the starting point PostgreSQL's documentation gives for a dedicated server), never less
//! than the default and never more than 4 GB, since it shares a desktop with the console. The
//! server maps this memory at start but the kernel only backs the pages it touches, so a small
//! store costs little. `MESH_PG_SHARED_BUFFERS` overrides the choice.

use super::PgError;

/// PostgreSQL's own default, the floor.
const FLOOR_MB: u64 = 128;
/// The most the embedded cluster takes by itself.
const CEILING_MB: u64 = 4 * 1024;

/// The `shared_buffers` value to start the server with: `MESH_PG_SHARED_BUFFERS` when set (checked
/// here, so a typo is a clear error rather than a server that does not start), else
/// [`shared_buffers_for`] the memory this process may use.
pub fn shared_buffers_setting() -> Result<String, PgError> {
    match std::env::var("MESH_PG_SHARED_BUFFERS") {
        Ok(value) => checked_memory_setting(&value),
        Err(_) => Ok(format!("{}MB", shared_buffers_for(usable_memory_bytes()))),
    }
}

/// A quarter of `usable` bytes in MB, between 128 MB and 4 GB (128 MB when unknown).
pub fn shared_buffers_for(usable: Option<u64>) -> u64 {
    let quarter_mb = usable.map_or(FLOOR_MB, |bytes| bytes / 4 / (1024 * 1024));
    quarter_mb.clamp(FLOOR_MB, CEILING_MB)
}

/// `value` if it is a PostgreSQL memory size (digits, optionally followed by kB, MB, GB or TB).
fn checked_memory_setting(value: &str) -> Result<String, PgError> {
    let value = value.trim();
    let digits = value.chars().take_while(char::is_ascii_digit).count();
    let unit = &value[digits..];
    if digits == 0 || !matches!(unit, "" | "kB" | "MB" | "GB" | "TB") {
        return Err(PgError::InvalidSetting {
            name: "MESH_PG_SHARED_BUFFERS",
            expected: "a memory size such as 512MB or 2GB",
        });
    }
    Ok(value.to_owned())
}

/// Physical memory, or the control group's limit when that is lower (containers).
fn usable_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf has no preconditions; a negative result means "unknown".
    let (pages, page_size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let physical = u64::try_from(pages).ok().zip(u64::try_from(page_size).ok()).map(|(p, s)| p.saturating_mul(s));
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok().and_then(|s| s.trim().parse::<u64>().ok());
    match (physical, limit) {
        (Some(p), Some(l)) => Some(p.min(l)),
        (p, l) => p.or(l),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    #[test]
    fn a_quarter_of_memory_between_the_default_and_four_gigabytes() {
        assert_eq!(shared_buffers_for(None), 128);
        assert_eq!(shared_buffers_for(Some(GIB / 4)), 128);
        assert_eq!(shared_buffers_for(Some(8 * GIB)), 2048);
        assert_eq!(shared_buffers_for(Some(24 * GIB)), 4096);
        assert_eq!(shared_buffers_for(Some(256 * GIB)), 4096);
    }

    #[test]
    fn an_override_must_be_a_memory_size() {
        assert_eq!(checked_memory_setting("512MB").unwrap(), "512MB");
        assert_eq!(checked_memory_setting(" 2GB ").unwrap(), "2GB");
        assert_eq!(checked_memory_setting("16384").unwrap(), "16384");
        for bad in ["", "MB", "2 GB", "2gb", "1GB -c fsync=off", "-1"] {
            let err = checked_memory_setting(bad).unwrap_err();
            assert!(err.to_string().contains("MESH_PG_SHARED_BUFFERS"), "{bad}: {err}");
        }
    }
}
