//! How much memory this process may use: the cgroup's limit when it is in one (a container or a
//! systemd slice with `MemoryMax`), else the machine's RAM. Defaults that scale with memory (the
//! hot tier) read it here.

/// A cgroup v2 `memory.max` or v1 `memory.limit_in_bytes`: bytes, or `None` for no limit ("max",
/// or v1's page-rounded `i64::MAX`).
fn cgroup_limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes < 1 << 60).then_some(bytes)
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// Bytes of memory this process may use, when the system says.
pub(crate) fn available_bytes() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let ram = read("/proc/meminfo").as_deref().and_then(meminfo_total);
    let limit = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .into_iter()
        .find_map(|path| read(path).as_deref().and_then(cgroup_limit));
    match (ram, limit) {
        (Some(ram), Some(limit)) => Some(ram.min(limit)),
        (ram, limit) => ram.or(limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_ram_are_read_from_their_files_text() {
        assert_eq!(cgroup_limit("max\n"), None);
        assert_eq!(cgroup_limit("9223372036854771712\n"), None, "v1 without a limit");
        assert_eq!(cgroup_limit("4294967296\n"), Some(4 << 30));
        assert_eq!(cgroup_limit("garbage"), None);
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(meminfo_total(meminfo), Some(24_576_000 * 1024));
        assert_eq!(meminfo_total("MemFree: 1 kB\n"), None);
    }
}
