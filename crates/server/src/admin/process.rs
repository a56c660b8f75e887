//! The process as Linux sees it (`/proc/self`): what Prometheus' `process_*` families and
//! ZooKeeper's file descriptor gauges report. Elsewhere every figure is `None`.

/// One look at the process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Process {
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    /// User and system CPU time.
    pub cpu_seconds: Option<f64>,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

pub fn look() -> Process {
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let fields = stat.as_deref().map(stat_fields).unwrap_or_default();
    // Fields after the command name, numbered as in proc(5) from 3 (state).
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    Process {
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64),
        max_fds: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_open_files(&l)),
        resident_bytes: field(24).map(|pages| pages * rustix::param::page_size() as u64),
        virtual_bytes: field(23),
        cpu_seconds: field(14)
            .zip(field(15))
            .map(|(user, system)| (user + system) as f64 / ticks),
        start_time_seconds: field(22)
            .zip(boot_time_seconds())
            .map(|(since_boot, boot)| boot as f64 + since_boot as f64 / ticks),
    }
}

/// The fields of `/proc/self/stat` after `(comm)`, which may itself hold blanks and ')'.
fn stat_fields(stat: &str) -> Vec<String> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse().ok())
}

fn boot_time_seconds() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|t| t.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_process() {
        let p = look();
        assert!(p.open_fds.unwrap() >= 3);
        assert!(p.max_fds.unwrap() >= p.open_fds.unwrap());
        assert!(p.resident_bytes.unwrap() > 1 << 20);
        assert!(p.virtual_bytes.unwrap() >= p.resident_bytes.unwrap());
        assert!(p.cpu_seconds.unwrap() >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = p.start_time_seconds.unwrap();
        assert!(started <= now + 1.0 && started > now - 86_400.0);
    }

    #[test]
    fn a_command_name_with_blanks_and_parentheses_is_skipped() {
        let fields = stat_fields("42 (a b) c) S 1 2");
        assert_eq!(fields, ["S", "1", "2"]);
        let limits = "Limit Soft Limit Hard Limit Units\nMax open files 1024 4096 files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }
}
