//! Latency histograms: per-operation times in nanoseconds, reported in microseconds.
//!
//! Built on `hdrhistogram` (three significant digits, so every percentile is within 0.1% of
//! the true value); one histogram per client thread, added together when the benchmark ends.

use serde::{Deserialize, Serialize};

/// The longest latency recorded exactly; longer ones are clamped (an hour).
const LATENCY_NANOS_MAX: u64 = 3_600_000_000_000;

/// Per-operation latencies.
#[derive(Debug, Clone)]
pub struct Histogram {
    inner: hdrhistogram::Histogram<u64>,
}

/// A histogram's summary, in microseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistogramSummary {
    /// Operations recorded.
    pub count: u64,
    /// Mean latency.
    pub avg_micros: f64,
    /// Standard deviation.
    pub stddev_micros: f64,
    /// Fastest operation.
    pub min_micros: f64,
    /// Slowest operation.
    pub max_micros: f64,
    /// Median.
    pub p50_micros: f64,
    /// 75th percentile.
    pub p75_micros: f64,
    /// 99th percentile.
    pub p99_micros: f64,
    /// 99.9th percentile.
    pub p999_micros: f64,
    /// 99.99th percentile.
    pub p9999_micros: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // The bounds are constants hdrhistogram accepts (low >= 1, high >= 2 * low,
        // sigfig <= 5): construction cannot fail on any input.
        let inner = hdrhistogram::Histogram::new_with_bounds(1, LATENCY_NANOS_MAX, 3)
            .expect("constant histogram bounds are valid");
        Histogram { inner }
    }

    /// Records one operation that took `nanos`.
    pub fn record(&mut self, nanos: u64) {
        self.inner
            .saturating_record(nanos.clamp(1, LATENCY_NANOS_MAX));
    }

    /// Adds another thread's histogram into this one.
    pub fn merge(&mut self, other: &Histogram) {
        // Both histograms share the same bounds, so adding cannot fail; a failure would only
        // lose the other thread's samples, which is better than aborting a long run.
        let _ = self.inner.add(&other.inner);
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.inner.len()
    }

    /// Count, mean, spread and percentiles in microseconds.
    pub fn summary(&self) -> HistogramSummary {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        let q = |quantile: f64| us(self.inner.value_at_quantile(quantile));
        HistogramSummary {
            count: self.inner.len(),
            avg_micros: self.inner.mean() / 1000.0,
            stddev_micros: self.inner.stdev() / 1000.0,
            min_micros: us(self.inner.min()),
            max_micros: us(self.inner.max()),
            p50_micros: q(0.50),
            p75_micros: q(0.75),
            p99_micros: q(0.99),
            p999_micros: q(0.999),
            p9999_micros: q(0.9999),
        }
    }
}

impl HistogramSummary {
    /// The block printed under a benchmark's line with `--histogram`, in db_bench's shape.
    pub fn render(&self) -> String {
        format!(
            "Microseconds per op:\n\
             Count: {}  Average: {:.4}  StdDev: {:.2}\n\
             Min: {:.4}  Median: {:.4}  Max: {:.4}\n\
             Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n\
             ------------------------------------------------------\n",
            self.count,
            self.avg_micros,
            self.stddev_micros,
            self.min_micros,
            self.p50_micros,
            self.max_micros,
            self.p50_micros,
            self.p75_micros,
            self.p99_micros,
            self.p999_micros,
            self.p9999_micros,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= expected * 0.002 + 1e-9
    }

    #[test]
    fn percentiles_of_a_uniform_range() {
        let mut h = Histogram::new();
        // 1..=10_000 microseconds, one sample each.
        for us in 1..=10_000u64 {
            h.record(us * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert!(close(s.min_micros, 1.0), "{s:?}");
        assert!(close(s.max_micros, 10_000.0), "{s:?}");
        assert!(close(s.avg_micros, 5000.5), "{s:?}");
        assert!(close(s.p50_micros, 5000.0), "{s:?}");
        assert!(close(s.p75_micros, 7500.0), "{s:?}");
        assert!(close(s.p99_micros, 9900.0), "{s:?}");
        assert!(close(s.p999_micros, 9990.0), "{s:?}");
        assert!(close(s.p9999_micros, 9999.0), "{s:?}");
    }

    #[test]
    fn merge_adds_samples_and_tail_is_seen() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for _ in 0..9_990 {
            a.record(2_000);
        }
        for _ in 0..10 {
            b.record(1_000_000);
        }
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 10_000);
        assert!(close(s.p50_micros, 2.0), "{s:?}");
        assert!(close(s.p99_micros, 2.0), "{s:?}");
        assert!(close(s.p9999_micros, 1000.0), "{s:?}");
        assert!(close(s.max_micros, 1000.0), "{s:?}");
        let text = s.render();
        assert!(text.contains("Count: 10000"), "{text}");
        assert!(text.contains("P99.99: 1000"), "{text}");
    }
}
