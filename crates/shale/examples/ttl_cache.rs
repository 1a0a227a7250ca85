//! A cache whose entries expire: expired entries are never returned, and compaction reclaims
//! their space, without any write having to trigger it.
//!
//! `cargo run -p shale --example ttl_cache`

use std::sync::Arc;
use std::time::Duration;

use shale::env::ManualClock;

fn text(value: Option<Vec<u8>>) -> String {
    match value {
        Some(v) => format!("{:?}", String::from_utf8_lossy(&v)),
        None => "(none)".to_string(),
    }
}

fn table_bytes(db: &shale::Db) -> u64 {
    db.stats().levels.iter().map(|l| l.bytes).sum()
}

fn main() -> shale::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    // A clock we can move by hand, so the example does not sleep; real programs keep the
    // default system clock.
    let clock = Arc::new(ManualClock::new(1_000_000));
    let options = shale::Options {
        default_ttl: Some(Duration::from_secs(60)),
        clock: clock.clone(),
        ..shale::Options::default()
    };
    let db = shale::Db::open(dir.path(), options)?;
    db.put("session:alice", "token-a")?; // the default TTL: 60 s
    db.put_with_ttl("session:bob", "token-b", Duration::from_secs(5))?;
    for i in 0..1000 {
        db.put(format!("page:{i:04}"), format!("cached page {i}"))?;
    }
    db.flush()?;
    println!("at t=0:   bob -> {}", text(db.get("session:bob")?));
    clock.advance(10_000_000);
    println!(
        "at t=10s: bob -> {} (expired)",
        text(db.get("session:bob")?)
    );
    println!("at t=10s: alice -> {}", text(db.get("session:alice")?));
    println!("at t=10s: {} bytes of tables", table_bytes(&db));

    // Every entry of the table has expired by t=70s: background compaction drops the table by
    // itself; `wait_for_compactions` just makes it happen now.
    clock.advance(60_000_000);
    db.wait_for_compactions()?;
    let stats = db.stats();
    println!(
        "at t=70s: alice -> {}; {} bytes of tables; {} expired entries dropped, {} bytes reclaimed",
        text(db.get("session:alice")?),
        table_bytes(&db),
        stats.expired_dropped,
        stats.expired_bytes_reclaimed
    );
    Ok(())
}
