//! Compaction: choosing which files to merge ([`picker`], pure, no I/O) and, in the DB layer,
//! running the merge.
//!
//! Leveled compaction with LevelDB's arithmetic: level 0 compacts when it holds
//! `level0_file_num_compaction_trigger` files; level L >= 1 when its bytes exceed
//! `max_bytes_for_level_base * max_bytes_for_level_multiplier^(L-1)`. The level with the highest
//! score (>= 1) goes first. See `docs/format/manifest.md` for the compact pointers the picker
//! persists.

pub mod picker;

pub use picker::{
    compact_level_in_place, compact_range, first_expired_file, level_scores, max_bytes_for_level,
    max_expanded_compaction_bytes, needs_compaction, next_file_expiry, pick_compaction, Compaction,
    CompactionReason,
};
