//! A cache whose entries expire: expired entries are never returned, and compaction reclaims
//! their space.
//!
//! `cargo run -p shale --example ttl_cache`

use std::sync::Arc;
use std::time::Duration;

use shale::env::ManualClock;

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
    println!("at t=0:   bob -> {:?}", db.get("session:bob")?);
    clock.advance(10_000_000);
    println!("at t=10s: bob -> {:?} (expired)", db.get("session:bob")?);
    println!(
        "at t=10s: alice -> {:?}",
        db.get("session:alice")?.map(String::from_utf8)
    );
    clock.advance(60_000_000);
    db.compact_range(None, None)?;
    println!(
        "at t=70s: alice -> {:?}; expired entries dropped by compaction: {}",
        db.get("session:alice")?,
        db.stats().expired_dropped
    );
    Ok(())
}
