//! The `--report` page: one self-contained HTML file (inline CSS bars, no scripts, no
//! external assets) that shows, per benchmark, a horizontal bar per engine with its
//! operations per second, then disk usage after each write benchmark and each engine's peak
//! memory, and the configuration every figure came from.

use std::fmt::Write as _;

use crate::output::thousands;
use crate::record::{RunRecord, Status};

/// Bar colours, one per engine in run order (shale first when it ran).
const COLOURS: [&str; 6] = [
    "#2b6cb0", "#c05621", "#2f855a", "#805ad5", "#b7791f", "#c53030",
];

/// Escapes text for HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1_048_576.0)
}

/// One bar chart: rows of (engine index, label, value, text); bars scale to the largest.
fn chart(html: &mut String, title: &str, rows: &[(usize, &str, f64, String)]) {
    let max = rows.iter().map(|r| r.2).fold(0.0f64, f64::max);
    let _ = writeln!(
        html,
        "<section class=\"chart\"><h3>{}</h3><table>",
        escape(title)
    );
    for (engine, label, value, text) in rows {
        let pct = if max > 0.0 { value / max * 100.0 } else { 0.0 };
        let colour = COLOURS
            .get(engine % COLOURS.len())
            .copied()
            .unwrap_or("#444");
        let _ = writeln!(
            html,
            "<tr><td class=\"name\">{}</td><td class=\"bar\"><div style=\"width:{pct:.1}%;\
             background:{colour}\"></div></td><td class=\"value\">{}</td></tr>",
            escape(label),
            escape(text)
        );
    }
    let _ = writeln!(html, "</table></section>");
}

const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#1a202c;\
max-width:980px}h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:32px;\
border-bottom:1px solid #cbd5e0;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}\
.meta{color:#4a5568;font-size:13px;line-height:1.5}table{border-collapse:collapse;width:100%}\
td{padding:2px 4px;font-size:13px}td.name{width:130px;font-weight:bold}td.bar{width:560px}\
td.bar div{height:16px;border-radius:2px;min-width:1px}td.value{white-space:nowrap;\
color:#2d3748}.note{color:#718096;font-style:italic}.warn{color:#9c4221}\
table.config td{vertical-align:top;border-bottom:1px solid #edf2f7}code{font-size:12px;word-break:break-all}";

/// Renders the report for a run.
pub fn render(run: &RunRecord) -> String {
    let mut html = String::new();
    let w = &run.workload;
    let _ = writeln!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>shale-bench report</title><style>{STYLE}</style></head><body>"
    );
    let _ = writeln!(html, "<h1>shale-bench: {}</h1>", escape(&engine_list(run)));
    let _ = writeln!(
        html,
        "<p class=\"meta\">{} &middot; CPU: {} ({}) &middot; {} entries, {}-byte keys, \
         {}-byte values (compressible to {:.0}%), {} thread(s), seed {}<br>\
         <code>{}</code></p>",
        escape(&run.date),
        escape(run.cpu.as_deref().unwrap_or("unknown")),
        escape(run.cpu_cache.as_deref().unwrap_or("cache unknown")),
        thousands(w.num),
        w.key_size,
        w.value_size,
        w.compression_ratio * 100.0,
        w.threads,
        w.seed,
        escape(&w.command_line.join(" "))
    );
    if w.repeat > 1 {
        let _ = writeln!(
            html,
            "<p class=\"meta\">Every engine's suite ran {} times, the engine order reversed \
             each round; each figure is the median round's, memory the worst round's.</p>",
            w.repeat
        );
    }
    if !run.optimized {
        let _ = writeln!(
            html,
            "<p class=\"warn\">This was a debug build of shale-bench: figures are not \
             meaningful.</p>"
        );
    }
    let reference = run.reference_engine();
    let _ = writeln!(
        html,
        "<h2>Throughput (operations per second, longer is better)</h2>"
    );
    for (i, label) in run.row_labels().iter().enumerate() {
        let base = reference
            .and_then(|r| r.results.get(i))
            .filter(|r| r.status == Status::Ok)
            .map(|r| r.ops_per_sec);
        let mut rows = Vec::new();
        let mut notes = Vec::new();
        for (e, engine) in run.engines.iter().enumerate() {
            match engine.results.get(i) {
                Some(r) if r.status == Status::Ok => {
                    let mut text = format!("{} ops/sec", thousands(r.ops_per_sec.round() as u64));
                    if let Some(b) = base.filter(|b| *b > 0.0) {
                        if reference.is_some_and(|re| re.info.name != engine.info.name) {
                            let _ = write!(
                                text,
                                " ({:.2}x {})",
                                r.ops_per_sec / b,
                                reference.map_or("", |re| re.info.name)
                            );
                        }
                    }
                    let lo = r.round_ops_per_sec.iter().copied().reduce(f64::min);
                    let hi = r.round_ops_per_sec.iter().copied().reduce(f64::max);
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        let _ = write!(
                            text,
                            " [rounds {}-{}]",
                            thousands(lo.round() as u64),
                            thousands(hi.round() as u64)
                        );
                    }
                    rows.push((e, engine.info.name, r.ops_per_sec, text));
                }
                Some(r) if r.status == Status::Unsupported || r.status == Status::Skipped => {
                    notes.push(format!("{}: {}", engine.info.name, r.message));
                }
                _ => {}
            }
        }
        if rows.is_empty() {
            continue;
        }
        chart(&mut html, label, &rows);
        if let Some(summary) = run.sync_floor_summary(i) {
            notes.push(format!(
                "Share of the raw fdatasync rate measured just before and after each \
                 engine's run: {summary}"
            ));
        }
        for note in notes {
            let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(&note));
        }
    }

    let _ = writeln!(
        html,
        "<h2>Disk usage after write benchmarks (shorter is better)</h2>"
    );
    let mut any_disk = false;
    for (i, label) in run.row_labels().iter().enumerate() {
        let rows: Vec<(usize, &str, f64, String)> = run
            .engines
            .iter()
            .enumerate()
            .filter_map(|(e, engine)| {
                let r = engine.results.get(i)?;
                let disk = r.disk_bytes.filter(|_| r.status == Status::Ok)?;
                let mut text = mib(disk);
                // Preallocated files (RocksDB's WAL) make allocation and length differ a lot;
                // show both so the bar is not misread.
                if let Some(apparent) = r.disk_apparent_bytes {
                    if apparent.abs_diff(disk) > disk / 10 {
                        text.push_str(&format!(" ({} apparent)", mib(apparent)));
                    }
                }
                Some((e, engine.info.name, disk as f64, text))
            })
            .collect();
        if !rows.is_empty() {
            any_disk = true;
            chart(&mut html, label, &rows);
        }
    }
    if !any_disk {
        let _ = writeln!(html, "<p class=\"note\">No write benchmark ran.</p>");
    }

    let _ = writeln!(
        html,
        "<h2>Peak memory (resident set, shorter is better)</h2>"
    );
    let rows: Vec<(usize, &str, f64, String)> = run
        .engines
        .iter()
        .enumerate()
        .filter_map(|(e, engine)| {
            let rss = engine.peak_rss_bytes?;
            let scope = if engine.peak_rss_per_engine {
                ""
            } else {
                " (process-wide)"
            };
            Some((
                e,
                engine.info.name,
                rss as f64,
                format!("{}{scope}", mib(rss)),
            ))
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(html, "<p class=\"note\">Not measured.</p>");
    } else {
        chart(&mut html, "peak RSS", &rows);
    }

    let _ = writeln!(
        html,
        "<h2>Peak anonymous memory (heap; shorter is better)</h2>\n<p class=\"note\">The \
         largest <code>RssAnon</code> sampled every 5 ms while the engine ran, minus what was \
         resident before it opened. Unlike the peak RSS above it leaves out the file pages a \
         memory map touched. The benchmark's value pool (1 MiB) is built before that baseline; \
         what it still allocates while the engine runs is each client's key and batch buffers \
         (about 150 KB for a batch of 1,000 entries; the key order is computed key by \
         key).</p>"
    );
    let rows: Vec<(usize, &str, f64, String)> = run
        .engines
        .iter()
        .enumerate()
        .filter_map(|(e, engine)| {
            let peak = engine.peak_anon_rss_bytes?;
            let grown = peak.saturating_sub(engine.anon_rss_before_bytes?);
            Some((e, engine.info.name, grown as f64, mib(grown)))
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(html, "<p class=\"note\">Not measured.</p>");
    } else {
        chart(&mut html, "peak anonymous memory", &rows);
    }

    let _ = writeln!(
        html,
        "<h2>Engines and configuration</h2><table class=\"config\">"
    );
    for engine in &run.engines {
        let i = &engine.info;
        let _ = writeln!(
            html,
            "<tr><td class=\"name\">{} {}</td><td>{}<br><code>{}</code>{}{}</td></tr>",
            escape(i.name),
            escape(&i.version),
            escape(i.library.as_deref().unwrap_or("built in")),
            escape(&i.settings.join(", ")),
            i.warning
                .as_deref()
                .map(|w| format!("<br><span class=\"warn\">{}</span>", escape(w)))
                .unwrap_or_default(),
            engine
                .error
                .as_deref()
                .map(|e| format!("<br><span class=\"warn\">stopped: {}</span>", escape(e)))
                .unwrap_or_default(),
        );
    }
    let _ = writeln!(html, "</table></body></html>");
    html
}

fn engine_list(run: &RunRecord) -> String {
    let names: Vec<String> = run
        .engines
        .iter()
        .map(|e| format!("{} {}", e.info.name, e.info.version))
        .collect();
    names.join(" vs ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests_support::sample_run;

    #[test]
    fn report_has_a_chart_per_benchmark_with_scaled_bars() {
        let html = render(&sample_run());
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.ends_with("</html>\n"));
        // Self-contained: nothing fetched from elsewhere.
        assert!(
            !html.contains("http://") && !html.contains("https://") && !html.contains("<script")
        );
        assert!(html.contains("<h3>fillseq</h3>"));
        assert!(html.contains("<h3>readrandom #2</h3>"));
        // lmdb is the fastest fillseq: full bar; shale half; leveldb a quarter.
        assert!(html.contains("width:100.0%;background:#2f855a"), "lmdb bar");
        assert!(html.contains("width:50.0%;background:#2b6cb0"), "shale bar");
        assert!(
            html.contains("width:25.0%;background:#c05621"),
            "leveldb bar"
        );
        assert!(html.contains("1,000,000 ops/sec (2.00x shale)"));
        assert!(html.contains("lmdb: not supported"));
        assert!(html.contains("Disk usage after write benchmarks"));
        assert!(html.contains("120.0 MiB"), "leveldb's fillseq disk");
        assert!(
            html.contains("30.0 MiB (7.5 MiB apparent)"),
            "lmdb's preallocation shown"
        );
        assert!(!html.contains("120.0 MiB ("), "equal sizes show one figure");
        assert!(html.contains("<h3>peak RSS</h3>"));
        assert!(html.contains("90.0 MiB"));
        // Text from the run is escaped.
        assert!(html.contains("Test CPU &lt;3GHz&gt;"));
    }

    /// Renders the sample report with headless Chromium when it is installed, and checks that
    /// a real screenshot came out. The PNG is kept in the system's temporary directory for a
    /// person to look at.
    #[test]
    fn report_renders_in_headless_chromium() {
        let chromium = std::path::Path::new("/usr/bin/chromium");
        if !chromium.exists() {
            println!(
                "SKIP report_renders_in_headless_chromium: /usr/bin/chromium is not installed \
                 (scripts/install-chromium.sh installs it)"
            );
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let page = dir.path().join("report.html");
        std::fs::write(&page, render(&sample_run())).expect("write page");
        let shot = std::env::temp_dir().join("shale-bench-report-screenshot.png");
        let _ = std::fs::remove_file(&shot);
        let status = std::process::Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--hide-scrollbars",
                &format!("--screenshot={}", shot.display()),
                "--window-size=1024,1600",
                &format!("file://{}", page.display()),
            ])
            .env("HOME", dir.path())
            .output()
            .expect("run chromium");
        assert!(
            status.status.success(),
            "chromium failed: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        let png = std::fs::read(&shot).expect("screenshot written");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        assert!(
            png.len() > 10_000,
            "screenshot is suspiciously small: {} bytes",
            png.len()
        );
        println!("report screenshot: {}", shot.display());
    }
}
