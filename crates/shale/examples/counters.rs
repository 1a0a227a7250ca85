//! Counters with a merge operator: each increment is one write, with no read before it.
//!
//! `cargo run -p shale --example counters`

use std::sync::Arc;

fn main() -> shale::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = shale::Options {
        merge_operator: Some(Arc::new(shale::UInt64AddOperator)),
        ..shale::Options::default()
    };
    let db = shale::Db::open(dir.path(), options)?;
    let pages = ["/", "/about", "/", "/blog", "/", "/blog"];
    for page in pages {
        db.merge(format!("hits:{page}"), 1u64.to_le_bytes())?;
    }
    // Operands survive flushes and compactions, where they are folded into one value.
    db.flush()?;
    db.merge("hits:/", 10u64.to_le_bytes())?;
    db.compact_range(None, None)?;
    for entry in db.prefix("hits:") {
        let (key, value) = entry?;
        let count = u64::from_le_bytes(value.as_slice().try_into().expect("8-byte counter"));
        println!("{:<12} {count}", String::from_utf8_lossy(&key));
    }
    Ok(())
}
