//! Snapshot reads: a consistent view while writes go on.
//!
//! `cargo run -p shale --example snapshots`

fn main() -> shale::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = shale::Db::open(dir.path(), shale::Options::default())?;
    db.put("balance:alice", "100")?;
    db.put("balance:bob", "50")?;
    let snapshot = db.snapshot();
    let mut transfer = shale::WriteBatch::new();
    transfer.put("balance:alice", "70");
    transfer.put("balance:bob", "80");
    db.write(transfer)?;
    let at_snapshot = shale::ReadOptions::at(&snapshot);
    let mut it = db.iter(at_snapshot);
    it.seek_to_first();
    while it.valid() {
        println!(
            "before: {} = {}",
            String::from_utf8_lossy(it.key()),
            String::from_utf8_lossy(it.value())
        );
        it.next();
    }
    it.status()?;
    for entry in db.range::<&[u8], _>(..) {
        let (k, v) = entry?;
        println!(
            "now:    {} = {}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        );
    }
    Ok(())
}
