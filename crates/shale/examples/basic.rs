//! Open a database, write, read, delete and scan.
//!
//! `cargo run -p shale --example basic`

fn main() -> shale::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = shale::Db::open(dir.path(), shale::Options::default())?;
    for (fruit, colour) in [
        ("apple", "red"),
        ("banana", "yellow"),
        ("cherry", "dark red"),
    ] {
        db.put(fruit, colour)?;
    }
    db.delete("banana")?;
    println!("apple  -> {:?}", db.get("apple")?.map(String::from_utf8));
    println!("banana -> {:?}", db.get("banana")?);
    for entry in db.range::<&[u8], _>(..) {
        let (key, value) = entry?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    Ok(())
}
