//! Facts about the machine and the process: CPU, date, disk usage of a directory, peak
//! resident memory.
//!
//! Peak memory is the kernel's high-water mark (`VmHWM`); before each engine runs the mark is
//! reset through `/proc/self/clear_refs` (Linux 4.0+) after returning freed heap memory to
//! the kernel, so each engine's figure is its own rather than the largest so far. `VmHWM` also
//! counts the file pages an engine's memory maps touched (page cache the kernel can take back),
//! so beside it an [`AnonPeakSampler`] samples the anonymous part (`RssAnon`: heap, stacks,
//! anonymous maps), which is what an engine's configured budget governs.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::engines::MARKER_FILE;
use crate::error::{Error, Result};

/// CPU model and count, as db_bench prints them (`2 * Intel(R) ...`).
pub fn cpu_description() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mut count = 0;
    let mut model = None;
    for line in text.lines() {
        if let Some((field, value)) = line.split_once(':') {
            match field.trim() {
                "processor" => count += 1,
                "model name" if model.is_none() => model = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    Some(format!(
        "{count} * {}",
        model.unwrap_or_else(|| "unknown".to_string())
    ))
}

/// The CPU cache size line of `/proc/cpuinfo`.
pub fn cpu_cache() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(field, _)| field.trim() == "cache size")
        .map(|(_, value)| value.trim().to_string())
}

/// Now as `Tue Jan 17 12:48:28 2012 UTC` (ctime's layout, in UTC so no time-zone database
/// is needed).
pub fn date_utc() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_ctime_utc(secs)
}

/// Formats seconds since the epoch in ctime's layout, UTC.
pub fn format_ctime_utc(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = DAYS
        .get((days.rem_euclid(7)) as usize)
        .copied()
        .unwrap_or("???");
    let month_name = MONTHS.get((month - 1) as usize).copied().unwrap_or("???");
    format!("{weekday} {month_name} {day:2} {h:02}:{m:02}:{s:02} {year} UTC")
}

/// Space a database directory takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// Bytes allocated on disk (as `du` counts them: blocks, so sparse files count only what
    /// they use, and preallocated space, like RocksDB's WAL, counts in full).
    pub allocated: u64,
    /// Sum of file lengths (as `du --apparent-size` counts them).
    pub apparent: u64,
}

/// The space taken under `dir`, leaving out the benchmark's own marker file.
pub fn disk_usage(dir: &Path) -> Result<DiskUsage> {
    use std::os::unix::fs::MetadataExt;
    let mut total = DiskUsage::default();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read_dir", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read_dir", dir, e))?;
        let path = entry.path();
        if entry.file_name() == MARKER_FILE {
            continue;
        }
        // A file removed between listing and stat (an LSM deleting an obsolete table) simply
        // no longer counts.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let sub = disk_usage(&path)?;
            total.allocated += sub.allocated;
            total.apparent += sub.apparent;
        } else {
            total.allocated += meta.blocks() * 512;
            total.apparent += meta.len();
        }
    }
    Ok(total)
}

/// The machine and moment a header names: read once per run (or per `--lockstep` child).
#[derive(Debug, Clone)]
pub struct Machine {
    /// When the run started ([`date_utc`]).
    pub date: String,
    /// CPU count and model ([`cpu_description`]).
    pub cpu: Option<String>,
    /// CPU cache size ([`cpu_cache`]).
    pub cpu_cache: Option<String>,
}

impl Machine {
    /// Reads the clock and the CPU now.
    pub fn read() -> Machine {
        Machine {
            date: date_utc(),
            cpu: cpu_description(),
            cpu_cache: cpu_cache(),
        }
    }
}

/// The process's peak resident set size in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The process's anonymous resident memory in bytes (`RssAnon`, Linux 4.5+): heap, stacks
/// and anonymous maps, without the file pages a memory map touched.
pub fn anon_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Samples [`anon_rss_bytes`] on a thread of its own until [`AnonPeakSampler::finish`], keeping
/// the largest figure. The kernel keeps no high-water mark of `RssAnon`, so a short spike
/// between two samples can be missed; at the default 5 ms interval a sample costs about
/// 0.5% of one core.
pub struct AnonPeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AnonPeakSampler {
    /// Starts sampling every `interval`; `None` where `RssAnon` cannot be read.
    pub fn start(interval: Duration) -> Option<AnonPeakSampler> {
        let first = anon_rss_bytes()?;
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(first));
        let thread = {
            let stop = stop.clone();
            let peak = peak.clone();
            std::thread::Builder::new()
                .name("rss-sampler".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(now) = anon_rss_bytes() {
                            peak.fetch_max(now, Ordering::Relaxed);
                        }
                        std::thread::park_timeout(interval);
                    }
                })
                .ok()?
        };
        Some(AnonPeakSampler {
            stop,
            peak,
            thread: Some(thread),
        })
    }

    /// Stops sampling and returns the largest anonymous resident size seen.
    pub fn finish(mut self) -> u64 {
        self.stop_thread();
        let last = anon_rss_bytes().unwrap_or(0);
        self.peak.load(Ordering::Relaxed).max(last)
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Drop for AnonPeakSampler {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Returns freed heap memory to the kernel and resets the peak-RSS mark to the current RSS.
/// Returns false when the kernel does not support the reset.
pub fn reset_peak_rss() -> bool {
    // SAFETY: malloc_trim only releases free memory at the top of glibc's heaps; it does not
    // touch live allocations.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctime_format_in_utc() {
        assert_eq!(format_ctime_utc(0), "Thu Jan  1 00:00:00 1970 UTC");
        // 2012-01-17 12:48:28 UTC, a Tuesday (the date in the seed's db_bench output).
        assert_eq!(
            format_ctime_utc(1_326_804_508),
            "Tue Jan 17 12:48:28 2012 UTC"
        );
        assert_eq!(
            format_ctime_utc(951_782_400),
            "Tue Feb 29 00:00:00 2000 UTC"
        );
    }

    #[test]
    fn disk_usage_counts_files_and_skips_the_marker() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(MARKER_FILE), b"x").expect("marker");
        assert_eq!(disk_usage(dir.path()).expect("du"), DiskUsage::default());
        std::fs::create_dir(dir.path().join("sub")).expect("sub");
        std::fs::write(dir.path().join("sub/a"), vec![7u8; 10_000]).expect("a");
        let used = disk_usage(dir.path()).expect("du");
        assert_eq!(used.apparent, 10_000);
        assert!(used.allocated >= 10_000, "{used:?}");
        // A sparse file: long, but with almost nothing allocated.
        let sparse = std::fs::File::create(dir.path().join("sparse")).expect("create");
        sparse.set_len(1 << 30).expect("set_len");
        let with_sparse = disk_usage(dir.path()).expect("du");
        assert_eq!(with_sparse.apparent, 10_000 + (1 << 30));
        assert!(with_sparse.allocated < 1 << 20, "{with_sparse:?}");
    }

    #[test]
    fn peak_rss_is_readable() {
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn the_anonymous_peak_sees_an_allocation_made_while_sampling() {
        let sampler = AnonPeakSampler::start(Duration::from_millis(1)).expect("RssAnon");
        let before = anon_rss_bytes().expect("RssAnon");
        // 64 MiB, touched so that it is resident, held across several samples, then freed.
        let block = vec![1u8; 64 << 20];
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(block.iter().map(|&b| u64::from(b)).sum::<u64>(), 64 << 20);
        drop(block);
        let peak = sampler.finish();
        assert!(
            peak >= before + (60 << 20),
            "peak {peak} bytes, {before} before the allocation"
        );
    }
}
