//! Text output: db_bench's header before an engine's results and the comparison table after
//! several engines.

use std::io::{self, Write};

use crate::engines::EngineInfo;
use crate::flags::Settings;
use crate::record::{RunRecord, Status};
use crate::sysinfo::Machine;

const RULE: &str = "------------------------------------------------";

/// Prints the header db_bench prints (engine and version, date, CPU, keys, values, entries,
/// raw and estimated sizes), plus the engine's applied settings and any warning.
pub fn print_header(
    out: &mut dyn Write,
    settings: &Settings,
    info: &EngineInfo,
    machine: &Machine,
) -> io::Result<()> {
    let f = &settings.flags;
    let num = f.num as f64;
    let compressed = (f64::from(f.value_size) * f.compression_ratio + 0.5) as u64;
    let raw_mb = (f64::from(f.key_size) + f64::from(f.value_size)) * num / 1_048_576.0;
    let file_mb =
        (f64::from(f.key_size) + f64::from(f.value_size) * f.compression_ratio) * num / 1_048_576.0;
    // db_bench's first line: the engine's name and a colon in a 12-column field.
    writeln!(
        out,
        "{:<12}version {}",
        format!("{}:", info.name),
        info.version
    )?;
    if let Some(lib) = &info.library {
        writeln!(out, "Library:    {lib}")?;
    }
    writeln!(out, "Settings:   {}", info.settings.join(", "))?;
    writeln!(out, "Date:       {}", machine.date)?;
    writeln!(
        out,
        "CPU:        {}",
        machine.cpu.as_deref().unwrap_or("unknown")
    )?;
    writeln!(
        out,
        "CPUCache:   {}",
        machine.cpu_cache.as_deref().unwrap_or("unknown")
    )?;
    writeln!(out, "Keys:       {} bytes each", f.key_size)?;
    writeln!(
        out,
        "Values:     {} bytes each ({compressed} bytes after compression)",
        f.value_size
    )?;
    writeln!(out, "Entries:    {}", f.num)?;
    writeln!(out, "RawSize:    {raw_mb:.1} MB (estimated)")?;
    writeln!(out, "FileSize:   {file_mb:.1} MB (estimated)")?;
    if f.threads > 1 {
        writeln!(out, "Threads:    {}", f.threads)?;
    }
    if let Some(w) = &info.warning {
        writeln!(out, "WARNING: {w}")?;
    }
    if cfg!(debug_assertions) {
        writeln!(
            out,
            "WARNING: shale-bench is a debug build: benchmarks are unnecessarily slow \
             (build with --release)"
        )?;
    }
    writeln!(out, "{RULE}")
}

/// Formats an integer with thousands separators.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The comparison table after several engines: a row per benchmark, a column per engine,
/// each cell ops/sec and the ratio to the reference engine (shale when it ran).
pub fn comparison_table(run: &RunRecord) -> String {
    let Some(reference) = run.reference_engine() else {
        return String::new();
    };
    let labels = run.row_labels();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["benchmark".to_string()];
    header.extend(run.engines.iter().map(|e| e.info.name.to_string()));
    rows.push(header);
    for (i, label) in labels.iter().enumerate() {
        let base = reference
            .results
            .get(i)
            .filter(|r| r.status == Status::Ok)
            .map(|r| r.ops_per_sec);
        let mut row = vec![label.clone()];
        for engine in &run.engines {
            let cell = match engine.results.get(i) {
                Some(r) if r.status == Status::Ok => {
                    let ratio = match base {
                        Some(b) if b > 0.0 => format!(" ({:.2}x)", r.ops_per_sec / b),
                        _ => String::new(),
                    };
                    format!("{}{ratio}", thousands(r.ops_per_sec.round() as u64))
                }
                Some(r) if r.status == Status::Info => "-".to_string(),
                Some(r) if r.status == Status::Unsupported => "not supported".to_string(),
                Some(r) if r.status == Status::Error => "error".to_string(),
                Some(_) => "skipped".to_string(),
                None => "-".to_string(),
            };
            row.push(cell);
        }
        rows.push(row);
    }
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let what = if run.workload.repeat > 1 {
        format!("median ops/sec of {} rounds", run.workload.repeat)
    } else {
        "ops/sec".to_string()
    };
    let mut text = format!("Comparison: {what} (ratio to {})\n", reference.info.name);
    for (n, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        text.push_str(cells.join("   ").trim_end());
        text.push('\n');
        if n == 0 {
            text.push_str(
                &"-".repeat(widths.iter().sum::<usize>() + 3 * widths.len().saturating_sub(1)),
            );
            text.push('\n');
        }
    }
    let of_rounds = if run.workload.repeat > 1 {
        ", median of the rounds (each round's in brackets)"
    } else {
        ""
    };
    for (i, label) in labels.iter().enumerate() {
        if let Some(summary) = run.sync_floor_summary(i) {
            text.push_str(&format!(
                "{label}: share of the raw fdatasync rate measured around it{of_rounds}: \
                 {summary}\n"
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests_support::sample_run;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(4_030_000), "4,030,000");
    }

    #[test]
    fn comparison_rows_are_benchmarks_and_columns_engines() {
        let run = sample_run();
        let table = comparison_table(&run);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "Comparison: ops/sec (ratio to shale)");
        assert!(lines[1].starts_with("benchmark"), "{table}");
        assert!(
            lines[1].contains("shale") && lines[1].contains("leveldb") && lines[1].contains("lmdb")
        );
        let fillseq = lines
            .iter()
            .find(|l| l.starts_with("fillseq"))
            .expect("row");
        assert!(fillseq.contains("500,000 (1.00x)"), "{fillseq}");
        assert!(fillseq.contains("250,000 (0.50x)"), "{fillseq}");
        let merge = lines
            .iter()
            .find(|l| l.starts_with("mergerandom"))
            .expect("row");
        assert!(merge.contains("not supported"), "{merge}");
        assert!(
            lines.iter().any(|l| l.starts_with("readrandom #2")),
            "{table}"
        );
    }

    /// A fillsync row gets a line under the table with each engine's share of the raw
    /// `fdatasync` rate measured around it.
    #[test]
    fn fillsync_rows_add_their_floor_share_under_the_table() {
        let mut run = sample_run();
        for engine in &mut run.engines {
            engine.results.push(crate::record::tests_support::ok(
                "fillsync", 6_000.0, None, 1.0,
            ));
        }
        let table = comparison_table(&run);
        assert!(
            table.lines().any(|l| l
                == "fillsync: share of the raw fdatasync rate measured around it: \
                    shale 80%, leveldb 80%, lmdb 80%"),
            "{table}"
        );
        assert!(crate::report::render(&run)
            .contains("just before and after each engine&#39;s run: shale 80%, leveldb 80%"));
    }
}
