//! Per-thread measurements and the db_bench result line.
//!
//! Each client thread keeps its own [`ThreadStats`] (no sharing on the hot path); when the
//! benchmark ends they are merged into one [`BenchStats`]. As in db_bench, `micros/op` is the
//! sum of the threads' busy time divided by the operations (the latency one client sees),
//! while MB/s and ops/sec divide by the wall-clock span from the first start to the last
//! finish (the aggregate throughput).

use std::time::Instant;

use crate::histogram::Histogram;
use crate::progress::Progress;

/// Operations between progress-bar updates: keeps the shared bar off the hot path.
const PROGRESS_EVERY_OPS: u64 = 1024;

/// One client thread's measurements.
#[derive(Debug)]
pub struct ThreadStats {
    start: Instant,
    finish: Instant,
    last_op: Instant,
    ops: u64,
    bytes: u64,
    /// Keys found by reads, for "(found of reads found)" messages.
    pub found: u64,
    /// Writes done by a background writer (readwhilewriting), reported in the message only.
    pub background_writes: u64,
    timed: bool,
    histogram: Option<Histogram>,
    progress: Progress,
    progress_pending: u64,
}

impl ThreadStats {
    /// Fresh stats; `histogram` turns on per-operation timing.
    pub fn new(histogram: bool, progress: Progress) -> Self {
        let now = Instant::now();
        ThreadStats {
            start: now,
            finish: now,
            last_op: now,
            ops: 0,
            bytes: 0,
            found: 0,
            background_writes: 0,
            timed: true,
            histogram: histogram.then(Histogram::new),
            progress,
            progress_pending: 0,
        }
    }

    /// Marks the start of measured work.
    pub fn start(&mut self) {
        self.start = Instant::now();
        self.last_op = self.start;
    }

    /// Marks the end of measured work.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.progress.inc(self.progress_pending);
        self.progress_pending = 0;
    }

    /// Excludes this thread's time from the merged figures (the writer of
    /// readwhilewriting, whose operations are not the ones being measured).
    pub fn exclude_from_timing(&mut self) {
        self.timed = false;
    }

    /// Counts `n` operations completed by one call (a batch counts its entries); with
    /// `--histogram` the call's latency is recorded once.
    ///
    /// Inlined, as db_bench's `FinishedSingleOp` is: a scan step of the fastest engines takes
    /// well under 100 ns, and the call around this counting was about 2% of a shale scan step.
    #[inline]
    pub fn finished_ops(&mut self, n: u64) {
        if let Some(h) = self.histogram.as_mut() {
            let now = Instant::now();
            h.record(now.duration_since(self.last_op).as_nanos() as u64);
            self.last_op = now;
        }
        self.ops += n;
        self.progress_pending += n;
        if self.progress_pending >= PROGRESS_EVERY_OPS {
            self.progress.inc(self.progress_pending);
            self.progress_pending = 0;
        }
    }

    /// Counts bytes moved (keys plus values).
    #[inline]
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }
}

/// The merged measurements of one benchmark.
#[derive(Debug, Clone, Default)]
pub struct BenchStats {
    /// Operations completed by all measured threads.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Sum of the measured threads' busy seconds.
    pub thread_seconds: f64,
    /// Seconds from the first start to the last finish.
    pub wall_seconds: f64,
    /// Keys found by reads.
    pub found: u64,
    /// Background writes (readwhilewriting).
    pub background_writes: u64,
    /// Merged latencies, with `--histogram`.
    pub histogram: Option<Histogram>,
}

impl BenchStats {
    /// Merges the threads' stats.
    pub fn merge(threads: Vec<ThreadStats>) -> BenchStats {
        let mut out = BenchStats::default();
        let mut first: Option<Instant> = None;
        let mut last: Option<Instant> = None;
        for t in threads {
            out.found += t.found;
            out.background_writes += t.background_writes;
            if !t.timed {
                continue;
            }
            out.ops += t.ops;
            out.bytes += t.bytes;
            out.thread_seconds += t.finish.duration_since(t.start).as_secs_f64();
            first = Some(first.map_or(t.start, |f| f.min(t.start)));
            last = Some(last.map_or(t.finish, |l| l.max(t.finish)));
            if let Some(h) = t.histogram {
                match out.histogram.as_mut() {
                    Some(total) => total.merge(&h),
                    None => out.histogram = Some(h),
                }
            }
        }
        if let (Some(f), Some(l)) = (first, last) {
            out.wall_seconds = l.duration_since(f).as_secs_f64();
        }
        out
    }

    /// Microseconds per operation as one client sees it.
    pub fn micros_per_op(&self) -> f64 {
        self.thread_seconds * 1e6 / self.ops.max(1) as f64
    }

    /// Aggregate operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            self.ops as f64 / self.wall_seconds
        } else {
            0.0
        }
    }

    /// Aggregate MiB per second, when the benchmark moves bytes.
    pub fn mb_per_sec(&self) -> Option<f64> {
        (self.bytes > 0 && self.wall_seconds > 0.0)
            .then(|| self.bytes as f64 / 1_048_576.0 / self.wall_seconds)
    }
}

/// The db_bench result line: `name : micros micros/op; [MB/s] [message]`, name padded to 12
/// and micros right-aligned in 11 columns with 3 decimals, MB/s in `%6.1f` (the format
/// db_bench-parsing scripts expect).
pub fn result_line(
    name: &str,
    micros_per_op: f64,
    mb_per_sec: Option<f64>,
    message: &str,
) -> String {
    let mut extra = String::new();
    if let Some(rate) = mb_per_sec {
        extra.push_str(&format!("{rate:6.1} MB/s"));
    }
    if !message.is_empty() {
        if !extra.is_empty() {
            extra.push(' ');
        }
        extra.push_str(message);
    }
    format!(
        "{name:<12} : {micros_per_op:11.3} micros/op;{}{extra}",
        if extra.is_empty() { "" } else { " " }
    )
}

/// A line for a benchmark that did not run (skipped or unsupported).
pub fn note_line(name: &str, note: &str) -> String {
    format!("{name:<12} : {note}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pattern scripts that parse db_bench output use.
    const LINE_PATTERN: &str =
        r"^(\S+)\s+:\s+([0-9]+\.[0-9]{3}) micros/op;(?:\s+([0-9]+\.[0-9]) MB/s)?(?:\s+(.*))?$";

    #[test]
    fn result_line_has_db_bench_shape() {
        let line = result_line("fillseq", 1.765, Some(62.7), "");
        assert_eq!(line, "fillseq      :       1.765 micros/op;   62.7 MB/s");
        let re = regex::Regex::new(LINE_PATTERN).expect("regex");
        let caps = re.captures(&line).expect("matches");
        assert_eq!(&caps[1], "fillseq");
        assert_eq!(&caps[2], "1.765");
        assert_eq!(caps.get(3).map(|m| m.as_str()), Some("62.7"));

        let line = result_line("fillsync", 41449.316, Some(0.0), "(1000 ops)");
        assert_eq!(
            line,
            "fillsync     :   41449.316 micros/op;    0.0 MB/s (1000 ops)"
        );
        let caps = re.captures(&line).expect("matches");
        assert_eq!(caps.get(4).map(|m| m.as_str()), Some("(1000 ops)"));

        let line = result_line("readrandom", 12.359, None, "(632 of 1000 found)");
        assert_eq!(
            line,
            "readrandom   :      12.359 micros/op; (632 of 1000 found)"
        );
        assert!(re.is_match(&line));

        let line = result_line("compact", 18211470.0, None, "");
        assert_eq!(line, "compact      : 18211470.000 micros/op;");
        assert!(re.is_match(&line));
    }

    #[test]
    fn merged_stats_sum_ops_and_take_the_wall_span() {
        let mut a = ThreadStats::new(true, Progress::hidden());
        let mut b = ThreadStats::new(false, Progress::hidden());
        a.start();
        b.start();
        for _ in 0..10 {
            a.finished_ops(1);
            a.add_bytes(116);
        }
        b.finished_ops(1000);
        b.found = 3;
        a.stop();
        b.stop();
        let mut writer = ThreadStats::new(false, Progress::hidden());
        writer.exclude_from_timing();
        writer.finished_ops(5);
        writer.background_writes = 5;
        let s = BenchStats::merge(vec![a, b, writer]);
        assert_eq!(s.ops, 1010);
        assert_eq!(s.bytes, 1160);
        assert_eq!(s.found, 3);
        assert_eq!(s.background_writes, 5);
        assert_eq!(s.histogram.as_ref().map(Histogram::count), Some(10));
        assert!(s.wall_seconds <= s.thread_seconds + 1e-9);
    }
}
