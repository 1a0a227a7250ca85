//! The report of a `shale-stress` run: the counts of what was checked, and the counts that the
//! contract says must be zero, printed as text and written as JSON.

use std::time::Duration;

use crate::corrupt::CorruptStats;
use crate::crash::CrashStats;
use crate::faults::FaultStats;
use crate::fuzz::ReplayStats;
use crate::kill::KillStats;

/// A JSON value, just enough for the report.
#[derive(Debug, Clone)]
enum Value {
    Int(u64),
    Float(f64),
    Str(String),
    Obj(Vec<(String, Value)>),
    List(Vec<Value>),
}

impl Value {
    fn json(&self, out: &mut String, indent: usize) {
        let pad = "  ".repeat(indent + 1);
        match self {
            Value::Int(n) => out.push_str(&n.to_string()),
            Value::Float(f) => out.push_str(&format!("{f:.3}")),
            Value::Str(s) => out.push_str(&quote(s)),
            Value::List(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad);
                    v.json(out, indent + 1);
                }
                if !items.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(indent));
                }
                out.push(']');
            }
            Value::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad);
                    out.push_str(&quote(k));
                    out.push_str(": ");
                    v.json(out, indent + 1);
                }
                if !fields.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(indent));
                }
                out.push('}');
            }
        }
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn secs(d: Duration) -> Value {
    Value::Float(d.as_secs_f64())
}

/// The counts of one run.
#[derive(Debug, Clone)]
pub struct Report {
    sections: Vec<(String, Value)>,
    zeros: Vec<(&'static str, u64)>,
    problems: Vec<String>,
}

impl Report {
    /// An empty report for a run in `mode` (quick or long) from `seed`.
    pub fn new(mode: &str, seed: u64) -> Report {
        Report {
            sections: vec![
                ("mode".into(), Value::Str(mode.into())),
                ("seed".into(), Value::Int(seed)),
            ],
            zeros: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn zero(&mut self, name: &'static str, n: u64) {
        match self.zeros.iter_mut().find(|(k, _)| *k == name) {
            Some((_, v)) => *v += n,
            None => self.zeros.push((name, n)),
        }
    }

    fn problems(&mut self, problems: &[String]) {
        for p in problems {
            if self.problems.len() < 40 {
                self.problems.push(p.clone());
            }
        }
    }

    /// Records the crash campaign.
    pub fn crash(&mut self, s: &CrashStats, took: Duration) {
        let modes = s
            .states_by_mode
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Int(*v)))
            .collect();
        self.sections.push((
            "crash".into(),
            Value::Obj(vec![
                ("workloads".into(), Value::Int(s.runs)),
                ("crash_states_checked".into(), Value::Int(s.states())),
                ("crash_states_by_mode".into(), Value::Obj(modes)),
                (
                    "states_from_crashed_recoveries".into(),
                    Value::Int(s.states_during_recovery),
                ),
                (
                    "acknowledged_writes_verified".into(),
                    Value::Int(s.acked_writes_verified),
                ),
                ("seconds".into(), secs(took)),
            ]),
        ));
        self.zero("acknowledged_writes_lost", s.acked_lost);
        self.zero(
            "gaps_half_batches_phantom_or_resurrected_values",
            s.not_a_prefix,
        );
        self.zero("failed_recoveries", s.recovery_failed);
        self.zero("reads_disagreeing_with_scans", s.read_mismatches);
        self.zero("writes_acknowledged_after_poisoning", s.acked_after_poison);
        self.problems(&s.problems);
    }

    /// Records the fault-at-every-call campaign.
    pub fn faults(&mut self, s: &FaultStats, took: Duration) {
        let kinds = s
            .fired_by_kind
            .iter()
            .map(|(k, v)| (k.clone(), Value::Int(*v)))
            .collect();
        self.sections.push((
            "faults".into(),
            Value::Obj(vec![
                ("runs".into(), Value::Int(s.runs)),
                ("filesystem_calls_faulted".into(), Value::Int(s.faulted())),
                ("faulted_by_call_and_error".into(), Value::Obj(kinds)),
                ("faults_that_did_not_fire".into(), Value::Int(s.not_fired)),
                ("space_quota_runs".into(), Value::Int(s.quota_runs)),
                ("crash_states_checked".into(), Value::Int(s.checks.states())),
                (
                    "acknowledged_writes_verified".into(),
                    Value::Int(s.checks.acked_writes_verified),
                ),
                ("seconds".into(), secs(took)),
            ]),
        ));
        self.zero("acknowledged_writes_lost", s.checks.acked_lost);
        self.zero(
            "gaps_half_batches_phantom_or_resurrected_values",
            s.checks.not_a_prefix + s.open_violations,
        );
        self.zero("failed_recoveries", s.checks.recovery_failed);
        self.zero("reads_disagreeing_with_scans", s.checks.read_mismatches);
        self.zero(
            "writes_acknowledged_after_poisoning",
            s.checks.acked_after_poison,
        );
        self.problems(&s.checks.problems);
    }

    /// Records the kill loop.
    pub fn kill(&mut self, s: &KillStats, took: Duration) {
        self.sections.push((
            "kill".into(),
            Value::Obj(vec![
                ("kill_cycles".into(), Value::Int(s.cycles)),
                (
                    "acknowledged_writes_verified".into(),
                    Value::Int(s.acked_verified),
                ),
                ("seconds".into(), secs(took)),
            ]),
        ));
        self.zero("acknowledged_writes_lost", s.acked_lost);
        self.zero(
            "gaps_half_batches_phantom_or_resurrected_values",
            s.inconsistent,
        );
        self.zero("failed_recoveries", s.recovery_failed + s.child_failures);
        self.problems(&s.problems);
    }

    /// Records the corruption campaign.
    pub fn corrupt(&mut self, s: &CorruptStats, took: Duration) {
        let kinds = s
            .by_kind
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    Value::Obj(vec![
                        ("injected".into(), Value::Int(v.injected)),
                        ("failed_open".into(), Value::Int(v.failed_open)),
                        ("failed_read".into(), Value::Int(v.failed_read)),
                        (
                            "dropped_as_torn_wal_tail".into(),
                            Value::Int(v.dropped_as_torn_tail),
                        ),
                        ("harmless_unread_bytes".into(), Value::Int(v.harmless)),
                        ("undetected".into(), Value::Int(v.undetected)),
                    ]),
                )
            })
            .collect();
        self.sections.push((
            "corruption".into(),
            Value::Obj(vec![
                ("corruptions_injected".into(), Value::Int(s.injected())),
                ("corruptions_detected".into(), Value::Int(s.detected())),
                ("by_file_kind".into(), Value::Obj(kinds)),
                ("seconds".into(), secs(took)),
            ]),
        ));
        self.zero("undetected_corruptions", s.undetected());
        self.problems(&s.problems);
    }

    /// Records one fuzz target's replay.
    pub fn fuzz(&mut self, name: &str, s: &ReplayStats) {
        let entry = Value::Obj(vec![
            ("executions".into(), Value::Int(s.executions)),
            ("panics".into(), Value::Int(s.panics)),
        ]);
        match self.sections.iter_mut().find(|(k, _)| k == "fuzz_replay") {
            Some((_, Value::Obj(fields))) => fields.push((name.into(), entry)),
            _ => self
                .sections
                .push(("fuzz_replay".into(), Value::Obj(vec![(name.into(), entry)]))),
        }
        self.zero("panics", s.panics);
        if let Some(input) = &s.first_panic {
            self.problems(&[format!("fuzz target {name} panicked on input {input}")]);
        }
    }

    /// Records the time the fuzz replay took.
    pub fn fuzz_time(&mut self, took: Duration) {
        if let Some((_, Value::Obj(fields))) =
            self.sections.iter_mut().find(|(k, _)| k == "fuzz_replay")
        {
            fields.push(("seconds".into(), secs(took)));
        }
    }

    /// Records the whole run's time.
    pub fn total_time(&mut self, took: Duration) {
        self.sections.push(("total_seconds".into(), secs(took)));
    }

    /// Records a harness that could not even start.
    pub fn setup_failure(&mut self, what: String) {
        self.zero("failed_recoveries", 1);
        self.problems(&[what]);
    }

    /// Sum of the counts that must be zero.
    pub fn violations(&self) -> u64 {
        self.zeros.iter().map(|(_, v)| v).sum()
    }

    fn value(&self) -> Value {
        let mut fields = self.sections.clone();
        fields.push((
            "must_be_zero".into(),
            Value::Obj(
                self.zeros
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::Int(*v)))
                    .collect(),
            ),
        ));
        fields.push((
            "problems".into(),
            Value::List(self.problems.iter().cloned().map(Value::Str).collect()),
        ));
        Value::Obj(fields)
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        let mut out = String::new();
        self.value().json(&mut out, 0);
        out.push('\n');
        out
    }

    /// The report as indented text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        text(&self.value(), 0, &mut out);
        out
    }
}

fn text(v: &Value, indent: usize, out: &mut String) {
    if let Value::Obj(fields) = v {
        for (k, v) in fields {
            out.push_str(&"  ".repeat(indent));
            out.push_str(k);
            match v {
                Value::Obj(_) => {
                    out.push_str(":\n");
                    text(v, indent + 1, out);
                }
                Value::List(items) => {
                    out.push_str(&format!(": {}\n", items.len()));
                    for item in items {
                        if let Value::Str(s) = item {
                            out.push_str(&format!("{}- {s}\n", "  ".repeat(indent + 1)));
                        }
                    }
                }
                other => {
                    let mut s = String::new();
                    other.json(&mut s, 0);
                    out.push_str(&format!(": {}\n", s.trim_matches('"')));
                }
            }
        }
    }
}
