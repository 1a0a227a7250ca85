//! Everything a run measured, as one serializable record: the source of the comparison
//! table, the `--json` file and the `--report` page.

use serde::{Deserialize, Serialize};

use crate::engines::EngineInfo;
use crate::histogram::HistogramSummary;

/// How a benchmark ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It ran; the figures are real.
    Ok,
    /// It did not run (e.g. a fresh-database benchmark with --use_existing_db).
    Skipped,
    /// The engine lacks the operation (e.g. merge on LMDB).
    Unsupported,
    /// It printed information rather than a measurement (`stats`).
    Info,
    /// The engine failed; the rest of its suite did not run.
    Error,
}

/// One benchmark's figures on one engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRecord {
    /// Benchmark name as printed.
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// The text after the figures (found counts, op counts), or why it did not run.
    pub message: String,
    /// Operations done.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Microseconds per operation (per client thread).
    pub micros_per_op: f64,
    /// Aggregate operations per second.
    pub ops_per_sec: f64,
    /// Aggregate MiB per second, when bytes moved.
    pub mb_per_sec: Option<f64>,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Bytes allocated on disk in the database directory afterwards (write benchmarks).
    pub disk_bytes: Option<u64>,
    /// Sum of the file lengths in the database directory afterwards (write benchmarks).
    pub disk_apparent_bytes: Option<u64>,
    /// Peak resident memory of the process so far for this engine.
    pub peak_rss_bytes: Option<u64>,
    /// Latency summary, with --histogram.
    pub histogram: Option<HistogramSummary>,
    /// The line printed for it.
    pub line: String,
    /// With `--repeat`, every round's ops/s in round order; the record itself is the round
    /// with the median figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_ops_per_sec: Vec<f64>,
    /// fillsync only: the raw `fdatasync` rate (same threads, same count) measured just
    /// before and just after it, the disk's limit beside the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_floor_ops_per_sec: Option<f64>,
    /// With `--repeat`, every round's `sync_floor_ops_per_sec`, in round order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_sync_floor_ops_per_sec: Vec<f64>,
}

impl BenchRecord {
    /// A record for a benchmark that produced no figures.
    pub fn note(name: &str, status: Status, message: impl Into<String>, line: String) -> Self {
        BenchRecord {
            name: name.to_string(),
            status,
            message: message.into(),
            ops: 0,
            bytes: 0,
            micros_per_op: 0.0,
            ops_per_sec: 0.0,
            mb_per_sec: None,
            wall_seconds: 0.0,
            disk_bytes: None,
            disk_apparent_bytes: None,
            peak_rss_bytes: None,
            histogram: None,
            line,
            round_ops_per_sec: Vec::new(),
            sync_floor_ops_per_sec: None,
            round_sync_floor_ops_per_sec: Vec::new(),
        }
    }

    /// fillsync's share of the disk's sync rate measured around it, in every round (one
    /// share without `--repeat`); empty for other benchmarks.
    pub fn sync_floor_shares(&self) -> Vec<f64> {
        // A floor is the rate of a run that synced: never zero.
        if self.round_sync_floor_ops_per_sec.len() == self.round_ops_per_sec.len()
            && !self.round_ops_per_sec.is_empty()
        {
            return self
                .round_ops_per_sec
                .iter()
                .zip(&self.round_sync_floor_ops_per_sec)
                .map(|(ops, floor)| ops / floor)
                .collect();
        }
        self.sync_floor_ops_per_sec
            .map(|floor| self.ops_per_sec / floor)
            .into_iter()
            .collect()
    }
}

/// One engine's suite.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineRecord {
    /// Name, version, library, settings.
    pub info: EngineInfo,
    /// Results in the order run.
    pub results: Vec<BenchRecord>,
    /// Peak resident memory while this engine ran.
    pub peak_rss_bytes: Option<u64>,
    /// Whether the peak was reset before this engine (false: it is the process-wide peak).
    pub peak_rss_per_engine: bool,
    /// Anonymous resident memory (`RssAnon`) just before this engine opened: the benchmark's
    /// own, and what earlier engines left in the allocator.
    pub anon_rss_before_bytes: Option<u64>,
    /// The largest anonymous resident memory sampled while this engine ran (every 5 ms).
    /// Minus `anon_rss_before_bytes`, the engine's heap at its peak: the benchmark's value
    /// pool is built before the baseline, its per-client cursors and buffers are a few bytes,
    /// and the key order is computed key by key, in constant memory.
    pub peak_anon_rss_bytes: Option<u64>,
    /// The error that stopped the suite, if one did.
    pub error: Option<String>,
}

/// The workload's shape, as printed in the header.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Entries.
    pub num: u64,
    /// Reads per read benchmark.
    pub reads: u64,
    /// Client threads.
    pub threads: u32,
    /// Bytes per key.
    pub key_size: u32,
    /// Bytes per value.
    pub value_size: u32,
    /// Target compression ratio of values.
    pub compression_ratio: f64,
    /// Seed.
    pub seed: u64,
    /// Rounds of the whole suite (`--repeat`); figures are medians over them.
    pub repeat: u32,
    /// Benchmarks as given.
    pub benchmarks: Vec<String>,
    /// The command line.
    pub command_line: Vec<String>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// "shale-bench".
    pub tool: String,
    /// This tool's version.
    pub tool_version: String,
    /// Whether this binary was optimized (a debug build's figures are meaningless).
    pub optimized: bool,
    /// When the run started.
    pub date: String,
    /// CPU count and model.
    pub cpu: Option<String>,
    /// CPU cache size.
    pub cpu_cache: Option<String>,
    /// The workload.
    pub workload: Workload,
    /// Each engine's suite, in the order run.
    pub engines: Vec<EngineRecord>,
}

impl RunRecord {
    /// For the row at `position` when its records carry a sync floor (fillsync): each
    /// engine's share of the raw `fdatasync` rate measured around it, the median of its
    /// rounds with every round in brackets, e.g. `shale 97% (95% / 99% / 91%)`.
    pub fn sync_floor_summary(&self, position: usize) -> Option<String> {
        let percent = |share: f64| format!("{:.0}%", share * 100.0);
        let parts: Vec<String> = self
            .engines
            .iter()
            .filter_map(|engine| {
                let record = engine.results.get(position)?;
                if record.status != Status::Ok {
                    return None;
                }
                let mut shares = record.sync_floor_shares();
                if shares.is_empty() {
                    return None;
                }
                let rounds: Vec<String> = shares.iter().map(|s| percent(*s)).collect();
                shares.sort_by(f64::total_cmp);
                let median = shares[(shares.len() - 1) / 2];
                Some(if rounds.len() > 1 {
                    format!(
                        "{} {} ({})",
                        engine.info.name,
                        percent(median),
                        rounds.join(" / ")
                    )
                } else {
                    format!("{} {}", engine.info.name, percent(median))
                })
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The engine that ratios are taken against: shale when it ran, else the first.
    pub fn reference_engine(&self) -> Option<&EngineRecord> {
        self.engines
            .iter()
            .find(|e| e.info.name == "shale")
            .or_else(|| self.engines.first())
    }

    /// Row labels for the results by position: the benchmark name, numbered when a name
    /// repeats (`readrandom`, `readrandom #2`), the same across engines.
    pub fn row_labels(&self) -> Vec<String> {
        let longest = self
            .engines
            .iter()
            .max_by_key(|e| e.results.len())
            .map(|e| e.results.as_slice())
            .unwrap_or(&[]);
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        longest
            .iter()
            .map(|r| {
                let n = seen.entry(r.name.as_str()).or_insert(0);
                *n += 1;
                if *n == 1 {
                    r.name.clone()
                } else {
                    format!("{} #{}", r.name, n)
                }
            })
            .collect()
    }
}

impl EngineRecord {
    /// Folds several rounds of one engine's suite into one record: each benchmark's figures
    /// are those of the round with the median ops/s (the lower of the two middle rounds when
    /// the count is even), with every round's ops/s kept in `round_ops_per_sec`; memory is the
    /// worst round's, since a budget must hold in every round. A benchmark that failed (or
    /// was not supported) in some round keeps that round's record, so the table shows the
    /// failure rather than a figure from the rounds that worked; one missing from some round
    /// keeps its first round's record. `None` for no rounds.
    pub fn median_of_rounds(rounds: &[EngineRecord]) -> Option<EngineRecord> {
        let first = rounds.first()?;
        let positions = rounds.iter().map(|r| r.results.len()).max().unwrap_or(0);
        let mut results = Vec::with_capacity(positions);
        for i in 0..positions {
            let here: Vec<&BenchRecord> = rounds.iter().filter_map(|r| r.results.get(i)).collect();
            let all_ran = here.len() == rounds.len() && here.iter().all(|r| r.status == Status::Ok);
            let Some(&fallback) = here
                .iter()
                .find(|r| r.status != Status::Ok)
                .or_else(|| here.first())
            else {
                continue;
            };
            if !all_ran {
                results.push(fallback.clone());
                continue;
            }
            let mut order: Vec<&BenchRecord> = here.clone();
            order.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
            let mut median = order[(order.len() - 1) / 2].clone();
            median.round_ops_per_sec = here.iter().map(|r| r.ops_per_sec).collect();
            if here.iter().all(|r| r.sync_floor_ops_per_sec.is_some()) {
                median.round_sync_floor_ops_per_sec = here
                    .iter()
                    .filter_map(|r| r.sync_floor_ops_per_sec)
                    .collect();
            }
            results.push(median);
        }
        // The round whose heap grew most, with its own baseline, so growth is not mixed up.
        let anon = rounds
            .iter()
            .filter_map(|r| Some((r.peak_anon_rss_bytes?, r.anon_rss_before_bytes?)))
            .max_by_key(|(peak, before)| peak.saturating_sub(*before));
        Some(EngineRecord {
            info: first.info.clone(),
            results,
            peak_rss_bytes: rounds.iter().filter_map(|r| r.peak_rss_bytes).max(),
            peak_rss_per_engine: rounds.iter().all(|r| r.peak_rss_per_engine),
            anon_rss_before_bytes: anon.map(|(_, before)| before),
            peak_anon_rss_bytes: anon.map(|(peak, _)| peak),
            error: rounds.iter().find_map(|r| r.error.clone()),
        })
    }
}

/// Records for tests of the table and the report: three engines, a repeated benchmark, an
/// unsupported one.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub(crate) fn ok(name: &str, ops_per_sec: f64, disk: Option<u64>, scale: f64) -> BenchRecord {
        BenchRecord {
            name: name.to_string(),
            status: Status::Ok,
            message: String::new(),
            ops: 1000,
            bytes: 116_000,
            micros_per_op: 1e6 / ops_per_sec,
            ops_per_sec,
            mb_per_sec: Some(ops_per_sec * 116.0 / 1_048_576.0),
            wall_seconds: 1000.0 / ops_per_sec,
            disk_bytes: disk,
            disk_apparent_bytes: disk.map(|d| {
                if name == "fillseq" && scale > 1.5 {
                    d / 4
                } else {
                    d
                }
            }),
            peak_rss_bytes: Some(30 << 20),
            histogram: None,
            line: String::new(),
            round_ops_per_sec: Vec::new(),
            sync_floor_ops_per_sec: (name == "fillsync").then_some(ops_per_sec * 1.25),
            round_sync_floor_ops_per_sec: Vec::new(),
        }
    }

    fn engine(name: &'static str, scale: f64, merge: bool, rss: u64) -> EngineRecord {
        let merge = if merge {
            ok("mergerandom", 300_000.0 * scale, Some(4 << 20), scale)
        } else {
            BenchRecord::note(
                "mergerandom",
                Status::Unsupported,
                "not supported",
                String::new(),
            )
        };
        EngineRecord {
            info: EngineInfo {
                name,
                version: "1.0".to_string(),
                library: Some(format!("/usr/lib/lib{name}.so.1.0")),
                warning: None,
                settings: vec!["cache_size=8388608".to_string()],
            },
            results: vec![
                ok(
                    "fillseq",
                    500_000.0 * scale,
                    Some((60.0 / scale) as u64 * (1 << 20)),
                    scale,
                ),
                ok("readrandom", 200_000.0 * scale, None, scale),
                ok("readrandom", 210_000.0 * scale, None, scale),
                merge,
            ],
            peak_rss_bytes: Some(rss),
            peak_rss_per_engine: true,
            anon_rss_before_bytes: Some(10 << 20),
            peak_anon_rss_bytes: Some(rss / 2),
            error: None,
        }
    }

    /// shale at full speed, leveldb at half, lmdb at double without merge.
    pub(crate) fn sample_run() -> RunRecord {
        RunRecord {
            tool: "shale-bench".to_string(),
            tool_version: "0.1.0".to_string(),
            optimized: true,
            date: "Tue Jan 17 12:48:28 2012 UTC".to_string(),
            cpu: Some("2 * Test CPU <3GHz>".to_string()),
            cpu_cache: Some("512 KB".to_string()),
            workload: Workload {
                num: 1000,
                reads: 1000,
                threads: 1,
                key_size: 16,
                value_size: 100,
                compression_ratio: 0.5,
                seed: 301,
                repeat: 1,
                benchmarks: vec![
                    "fillseq".into(),
                    "readrandom".into(),
                    "readrandom".into(),
                    "mergerandom".into(),
                ],
                command_line: vec!["shale-bench".into(), "--num=1000".into()],
            },
            engines: vec![
                engine("shale", 1.0, true, 40 << 20),
                engine("leveldb", 0.5, false, 20 << 20),
                engine("lmdb", 2.0, false, 90 << 20),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::sample_run;
    use super::*;

    #[test]
    fn rounds_fold_to_the_median_figure_and_the_worst_memory() {
        let base = sample_run().engines.swap_remove(0);
        let mut rounds = Vec::new();
        for (scale, anon) in [(3.0, 12u64), (1.0, 30), (2.0, 14)] {
            let mut r = base.clone();
            for b in &mut r.results {
                b.ops_per_sec *= scale;
            }
            r.peak_anon_rss_bytes = Some(anon << 20);
            r.peak_rss_bytes = Some((anon + 100) << 20);
            rounds.push(r);
        }
        let merged = EngineRecord::median_of_rounds(&rounds).expect("three rounds");
        let fill = &merged.results[0];
        assert_eq!(fill.ops_per_sec, 2.0 * base.results[0].ops_per_sec);
        assert_eq!(
            fill.round_ops_per_sec,
            vec![1.5e6, 0.5e6, 1.0e6],
            "every round's figure, in round order"
        );
        assert_eq!(merged.results.len(), base.results.len());
        assert_eq!(merged.peak_anon_rss_bytes, Some(30 << 20));
        assert_eq!(merged.anon_rss_before_bytes, Some(10 << 20));
        assert_eq!(merged.peak_rss_bytes, Some(130 << 20));

        // An even count takes the lower middle round.
        let merged = EngineRecord::median_of_rounds(&rounds[..2]).expect("two rounds");
        assert_eq!(merged.results[0].ops_per_sec, base.results[0].ops_per_sec);

        // A benchmark that failed in one round is not given a median.
        let mut broken = rounds.clone();
        broken[1].results[1].status = Status::Error;
        let merged = EngineRecord::median_of_rounds(&broken).expect("rounds");
        assert!(merged.results[1].round_ops_per_sec.is_empty());
        assert_eq!(
            merged.results[1].status,
            Status::Error,
            "the failed round's record, not a figure from the rounds that worked"
        );
        assert!(EngineRecord::median_of_rounds(&[]).is_none());
    }

    /// fillsync's share of the floor measured around it is taken round by round (each round
    /// against its own floor), and the summary gives the median share with every round's.
    #[test]
    fn fillsync_shares_are_per_round_against_the_floor_beside_each() {
        let mut base = sample_run();
        for engine in &mut base.engines {
            engine.results = vec![tests_support::ok("fillsync", 6_000.0, None, 1.0)];
        }
        assert_eq!(base.engines[0].results[0].sync_floor_shares(), vec![0.8]);
        assert_eq!(
            base.sync_floor_summary(0).as_deref(),
            Some("shale 80%, leveldb 80%, lmdb 80%")
        );
        assert!(base.sync_floor_summary(1).is_none(), "no such row");

        // The round with the median ops/s is not the round with the median share.
        let one = base.engines.swap_remove(0);
        let rounds: Vec<EngineRecord> =
            [(6_000.0, 6_000.0), (7_000.0, 10_000.0), (5_000.0, 6_250.0)]
                .iter()
                .map(|&(ops, floor)| {
                    let mut r = one.clone();
                    r.results[0].ops_per_sec = ops;
                    r.results[0].sync_floor_ops_per_sec = Some(floor);
                    r
                })
                .collect();
        let merged = EngineRecord::median_of_rounds(&rounds).expect("three rounds");
        assert_eq!(
            merged.results[0].round_sync_floor_ops_per_sec,
            vec![6e3, 1e4, 6.25e3]
        );
        assert_eq!(merged.results[0].sync_floor_shares(), vec![1.0, 0.7, 0.8]);
        base.engines = vec![merged];
        assert_eq!(
            base.sync_floor_summary(0).as_deref(),
            Some("shale 80% (100% / 70% / 80%)")
        );

        // A round without a floor (an older record) leaves the per-round shares out.
        let mut old = rounds.clone();
        old[1].results[0].sync_floor_ops_per_sec = None;
        let merged = EngineRecord::median_of_rounds(&old).expect("rounds");
        assert!(merged.results[0].round_sync_floor_ops_per_sec.is_empty());
        let json = serde_json::to_string(&merged.results[0]).expect("encode");
        assert!(json.contains("\"sync_floor_ops_per_sec\""), "{json}");
        let read: BenchRecord = serde_json::from_str(&json).expect("decode");
        assert_eq!(
            read.sync_floor_ops_per_sec,
            merged.results[0].sync_floor_ops_per_sec
        );
    }

    /// A `--lockstep` child sends its record as JSON; the parent must read back every figure.
    #[test]
    fn a_record_reads_back_from_its_json() {
        let mut sent = sample_run().engines.swap_remove(1);
        sent.results[0].round_ops_per_sec = vec![1.0, 2.0];
        sent.error = Some("leveldb: put: disk full".to_string());
        let json = serde_json::to_string(&sent).expect("encode");
        let read: EngineRecord = serde_json::from_str(&json).expect("decode");
        assert_eq!(read.info.name, "leveldb");
        assert_eq!(serde_json::to_string(&read).expect("encode again"), json);
        let unknown = json.replace("\"leveldb\"", "\"berkeleydb\"");
        let e = serde_json::from_str::<EngineRecord>(&unknown).expect_err("unknown engine");
        assert!(e.to_string().contains("berkeleydb"), "{e}");
    }
}
