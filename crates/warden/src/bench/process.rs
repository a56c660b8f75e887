//! CPU time and resident memory of the servers under test, read from Linux's /proc, and the
//! bench's own CPU time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, ensure};
use serde::Serialize;

/// How often the resident set is sampled for its peak while the run is measured.
pub const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
pub const PIDS_MAX: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// User plus system time of all the process's threads.
    pub cpu: Duration,
    pub rss_bytes: u64,
}

/// A process, by its pid under /proc.
#[derive(Clone, Debug)]
pub struct Process {
    name: String,
    ticks_per_second: u64,
}

impl Process {
    pub fn pid(pid: u32) -> anyhow::Result<Process> {
        Process::named(pid.to_string())
    }

    fn named(name: String) -> anyhow::Result<Process> {
        let ticks_per_second = rustix::param::clock_ticks_per_second();
        ensure!(
            ticks_per_second > 0,
            "the kernel reports 0 clock ticks per second"
        );
        let process = Process {
            name,
            ticks_per_second,
        };
        process
            .sample()
            .with_context(|| format!("no process {} to sample in /proc", process.name))?;
        Ok(process)
    }

    pub fn sample(&self) -> anyhow::Result<Sample> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.name))?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.name))?;
        let ticks = cpu_ticks(&stat).context("unreadable /proc/<pid>/stat")?;
        let rss_kib = rss_kib(&status).context("no VmRSS in /proc/<pid>/status")?;
        let cpu = Duration::from_secs_f64(ticks as f64 / self.ticks_per_second as f64);
        Ok(Sample {
            cpu,
            rss_bytes: rss_kib * 1024,
        })
    }

    /// The process's own name (`java`, `warden`), for the report.
    pub fn command(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/comm", self.name))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    }
}

/// A server's figures over the measured part of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Usage {
    pub pid: u32,
    pub command: String,
    pub cpu_seconds: f64,
    pub rss_bytes_start: u64,
    pub rss_bytes_end: u64,
    pub rss_bytes_peak: u64,
}

/// Follows one server process through the measured window.
struct Meter {
    pid: u32,
    process: Process,
    start: Sample,
    rss_peak: Arc<AtomicU64>,
}

impl Meter {
    fn start(pid: u32) -> anyhow::Result<Meter> {
        let process = Process::pid(pid).with_context(|| format!("--pid {pid}"))?;
        let start = process.sample()?;
        Ok(Meter {
            pid,
            process,
            start,
            rss_peak: Arc::new(AtomicU64::new(start.rss_bytes)),
        })
    }

    /// Samples the resident set until the returned handle is dropped or aborted, keeping its peak.
    fn follow_peak(&self) -> tokio::task::JoinHandle<()> {
        let process = self.process.clone();
        let peak = self.rss_peak.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RSS_SAMPLE_INTERVAL);
            loop {
                tick.tick().await;
                let Ok(sample) = process.sample() else { return };
                peak.fetch_max(sample.rss_bytes, Ordering::Relaxed);
            }
        })
    }

    fn finish(self) -> anyhow::Result<Usage> {
        let end = self
            .process
            .sample()
            .with_context(|| format!("server pid {} exited during the run", self.pid))?;
        let peak = self.rss_peak.load(Ordering::Relaxed).max(end.rss_bytes);
        Ok(Usage {
            pid: self.pid,
            command: self.process.command(),
            cpu_seconds: end.cpu.saturating_sub(self.start.cpu).as_secs_f64(),
            rss_bytes_start: self.start.rss_bytes,
            rss_bytes_end: end.rss_bytes,
            rss_bytes_peak: peak,
        })
    }
}

/// The servers' meters and the bench's own CPU time, over the measured window.
pub struct Meters {
    servers: Vec<Meter>,
    peak_followers: Vec<tokio::task::JoinHandle<()>>,
    client_cpu_start: Duration,
}

/// The bench's own CPU time, from the kernel's process clock: nanoseconds, where /proc counts
/// clock ticks (10 ms), which a short run's client may not fill once.
fn own_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

impl Meters {
    pub fn start(pids: &[u32]) -> anyhow::Result<Meters> {
        let servers = pids
            .iter()
            .map(|pid| Meter::start(*pid))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let peak_followers = servers.iter().map(Meter::follow_peak).collect();
        Ok(Meters {
            servers,
            peak_followers,
            client_cpu_start: own_cpu(),
        })
    }

    /// Each server's usage, and the bench's CPU seconds.
    pub fn finish(self) -> anyhow::Result<(Vec<Usage>, f64)> {
        for follower in self.peak_followers {
            follower.abort();
        }
        let usage = self
            .servers
            .into_iter()
            .map(Meter::finish)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let client_cpu = own_cpu().saturating_sub(self.client_cpu_start);
        Ok((usage, client_cpu.as_secs_f64()))
    }
}

/// utime + stime, in clock ticks, from the text of /proc/<pid>/stat.
fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its
    // last ')'. What follows starts at field 3 (state); utime and stime are fields 14 and 15.
    let after_command = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_command.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// VmRSS in KiB from the text of /proc/<pid>/status.
fn rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line["VmRSS:".len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_count_after_an_awkward_command_name() {
        let stat = "4242 (my (odd) proc) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 30 0 100 \
                    3000000000 50000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(cpu_ticks("12 (short) S 1 2"), None);
        assert_eq!(cpu_ticks("no parenthesis at all"), None);
    }

    #[test]
    fn rss_is_read_from_status() {
        let status = "Name:\tjava\nVmPeak:\t 9000 kB\nVmRSS:\t  123456 kB\nThreads:\t42\n";
        assert_eq!(rss_kib(status), Some(123_456));
        assert_eq!(rss_kib("Name:\tkthreadd\n"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let me = Process::pid(std::process::id()).unwrap();
        let sample = me.sample().unwrap();
        assert!(sample.rss_bytes > 0);
        assert!(!me.command().is_empty());
        assert!(Process::pid(u32::MAX).is_err());
    }

    #[test]
    fn the_benchs_own_cpu_is_counted_finer_than_a_clock_tick() {
        let start = own_cpu();
        let mut x = 0u64;
        while own_cpu() - start < Duration::from_micros(200) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = own_cpu() - start;
        assert!(spent < Duration::from_millis(10), "{spent:?}");
    }
}
