//! A compaction filter that cleans up as compaction goes: it drops sessions a user logged out
//! of, and rewrites old-format records into the new format. Snapshots keep seeing what they saw.
//!
//! `cargo run -p shale --example compaction_filter`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale::{CompactionFilter, FilterDecision, ReadOptions};

/// Drops `session:*` records whose value is `logged-out`; upgrades `v1:` values to `v2:`.
#[derive(Default)]
struct Janitor {
    upgraded: AtomicU64,
}

impl CompactionFilter for Janitor {
    fn name(&self) -> &str {
        "example.Janitor"
    }

    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> FilterDecision {
        if key.starts_with(b"session:") && value == b"logged-out" {
            return FilterDecision::Remove;
        }
        if let Some(rest) = value.strip_prefix(b"v1:") {
            self.upgraded.fetch_add(1, Ordering::Relaxed);
            return FilterDecision::ChangeValue([b"v2:".as_slice(), rest].concat());
        }
        FilterDecision::Keep
    }
}

fn show(db: &shale::Db, options: ReadOptions, title: &str) -> shale::Result<()> {
    println!("{title}");
    let mut it = db.iter(options);
    it.seek_to_first();
    while it.valid() {
        println!(
            "  {:<16} {}",
            String::from_utf8_lossy(it.key()),
            String::from_utf8_lossy(it.value())
        );
        it.next();
    }
    it.status()
}

fn main() -> shale::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let janitor = Arc::new(Janitor::default());
    let options = shale::Options {
        compaction_filter: Some(janitor.clone()),
        ..shale::Options::default()
    };
    let db = shale::Db::open(dir.path(), options)?;
    db.put("session:alice", "active")?;
    db.put("session:bob", "logged-out")?;
    db.put("profile:alice", "v1:Alice")?;
    // A reader that must see the data as it is now, whatever compaction does meanwhile.
    let audit = db.snapshot();
    db.put("session:carol", "logged-out")?;
    db.put("profile:carol", "v1:Carol")?;

    // The filter runs only when compaction rewrites the data; compact everything now.
    db.compact_range(None, None)?;
    show(
        &db,
        ReadOptions::default(),
        "latest (carol's records were filtered):",
    )?;
    show(
        &db,
        ReadOptions::at(&audit),
        "at the snapshot (what it reads is never filtered):",
    )?;

    // Once the snapshot is gone, the next compaction filters the rest.
    drop(audit);
    db.compact_range(None, None)?;
    show(&db, ReadOptions::default(), "after releasing the snapshot:")?;
    let stats = db.stats();
    println!(
        "removed by the filter: {}; upgraded: {}",
        stats.filtered_dropped,
        janitor.upgraded.load(Ordering::Relaxed)
    );
    assert_eq!(db.get("session:bob")?, None);
    assert_eq!(db.get("profile:alice")?, Some(b"v2:Alice".to_vec()));
    Ok(())
}
