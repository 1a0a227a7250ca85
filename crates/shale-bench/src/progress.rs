//! A progress bar on stderr during long benchmarks, drawn only when stderr is a terminal so
//! logs and pipes stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A shareable handle to the bar (cheap to clone), or nothing when hidden.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar for `total` operations labelled `label`, hidden when stderr is not a terminal.
    pub fn new(label: &str, total: u64) -> Self {
        if !std::io::stderr().is_terminal() || total == 0 {
            return Self::hidden();
        }
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>24} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta} left)",
        ) {
            bar.set_style(style);
        }
        bar.set_message(label.to_string());
        Progress { bar: Some(bar) }
    }

    /// No bar at all.
    pub fn hidden() -> Self {
        Progress { bar: None }
    }

    /// Advances by `n` operations.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// Removes the bar before the result line is printed.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
