/*
 * shale.h: the C API of shale, an embedded, persistent, ordered key-value store.
 *
 * Link with libshale_c (shared: -lshale_c; static: libshale_c.a plus -lpthread -ldl -lm).
 * The shape follows LevelDB's c.h:
 *
 *  - Every object is an opaque handle made by a *_create or shale_open call and freed by the
 *    matching *_destroy, shale_close or shale_release_snapshot. Passing NULL to a destroy call
 *    is a no-op.
 *  - Keys and values are byte strings: a pointer and a length, never NUL-terminated. A NULL
 *    pointer with length 0 is the empty string.
 *  - A call that can fail takes `char** errptr` last. On failure it stores a malloc()ed,
 *    NUL-terminated message in *errptr, first freeing any message already there; on success
 *    it leaves *errptr untouched. So: set `char* err = NULL;` before a call and test it after.
 *    Free messages, and every buffer the API returns, with free() or shale_free().
 *    errptr may be NULL to drop the message, but then a failure shows only in the return
 *    value, if at all: shale_get, for one, returns NULL both for a missing key and on error.
 *  - NULL handles are checked: reported through errptr where there is one, otherwise the call
 *    does nothing and returns NULL or 0. Dangling or foreign pointers cannot be detected.
 *  - No call lets a panic or a C++ exception escape; internal failures are errors.
 *
 * Thread-safety: a shale_t may be used by many threads at once. Every other handle belongs
 * to one thread at a time.
 *
 * Unlike LevelDB, create_if_missing is on by default.
 */
#ifndef SHALE_H
#define SHALE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shale_t shale_t;
typedef struct shale_options_t shale_options_t;
typedef struct shale_readoptions_t shale_readoptions_t;
typedef struct shale_writeoptions_t shale_writeoptions_t;
typedef struct shale_writebatch_t shale_writebatch_t;
typedef struct shale_iterator_t shale_iterator_t;
typedef struct shale_snapshot_t shale_snapshot_t;

/* ---- Database ------------------------------------------------------------------------- */

/* Opens (by default creates) the database in directory `path`. `options` may be NULL for the
 * defaults. Returns NULL and sets *errptr on failure (e.g. the database is locked by another
 * handle, or an option set earlier was invalid). */
shale_t* shale_open(const char* path, const shale_options_t* options, char** errptr);

/* Opens for reading only: no lock, nothing written; works beside a process that has the
 * database open. Every write fails. */
shale_t* shale_open_read_only(const char* path, const shale_options_t* options, char** errptr);

/* Stops background work and releases the lock. No other call on `db` may be running. */
void shale_close(shale_t* db);

/* `options` may be NULL in every read and write call below, for the defaults. */
void shale_put(shale_t* db, const shale_writeoptions_t* options, const char* key,
               size_t keylen, const char* val, size_t vallen, char** errptr);
void shale_delete(shale_t* db, const shale_writeoptions_t* options, const char* key,
                  size_t keylen, char** errptr);
/* Adds a merge operand; fails unless a merge operator was set in the open options. */
void shale_merge(shale_t* db, const shale_writeoptions_t* options, const char* key,
                 size_t keylen, const char* val, size_t vallen, char** errptr);
/* Applies the batch atomically. The batch is unchanged and may be reused. Fails, writing
 * nothing, if an operation could not be added to the batch (see shale_writebatch_put). */
void shale_write(shale_t* db, const shale_writeoptions_t* options, shale_writebatch_t* batch,
                 char** errptr);

/* Returns the value in a malloc()ed buffer of *vallen bytes (not NUL-terminated; free it), or
 * NULL with *vallen == 0 when the key is absent. On error returns NULL and sets *errptr. An
 * empty value is a non-NULL pointer with *vallen == 0. Pass a non-NULL errptr: without one a
 * failed read (a damaged file, an I/O error) is indistinguishable from a missing key. */
char* shale_get(shale_t* db, const shale_readoptions_t* options, const char* key,
                size_t keylen, size_t* vallen, char** errptr);

/* A cursor over the database; not positioned until a seek. NULL only if `db` is NULL. */
shale_iterator_t* shale_create_iterator(shale_t* db, const shale_readoptions_t* options);

/* Pins the current state for reads through shale_readoptions_set_snapshot. */
const shale_snapshot_t* shale_create_snapshot(shale_t* db);
/* `db` is not used; releasing after shale_close is harmless. */
void shale_release_snapshot(shale_t* db, const shale_snapshot_t* snapshot);

/* A malloc()ed NUL-terminated string (free it), or NULL for an unknown name. Names:
 * "shale.stats", "shale.num-files-at-level<N>", "shale.sstables",
 * "shale.approximate-memory-usage", "shale.block-cache-usage", "shale.total-sst-size",
 * "shale.last-sequence". */
char* shale_property_value(shale_t* db, const char* propname);

/* Writes the memtable to a table file and waits for it. */
void shale_flush(shale_t* db, char** errptr);

/* Compacts [start_key, limit_key]; a NULL key leaves that end unbounded. */
void shale_compact_range(shale_t* db, const char* start_key, size_t start_key_len,
                         const char* limit_key, size_t limit_key_len, char** errptr);

/* Deletes, or salvages, a database that is not open. `options` may be NULL. */
void shale_destroy_db(const char* path, const shale_options_t* options, char** errptr);
void shale_repair_db(const char* path, const shale_options_t* options, char** errptr);

/* ---- Write batch ---------------------------------------------------------------------- */

shale_writebatch_t* shale_writebatch_create(void);
void shale_writebatch_destroy(shale_writebatch_t* batch);
/* Also forgets an operation that could not be added. */
void shale_writebatch_clear(shale_writebatch_t* batch);
/* Keys and values are copied. An operation with a NULL pointer and a non-zero length is not
 * added; the batch remembers the first such one, and shale_write of the batch then fails
 * with a message naming it ("write batch entry N", counting from 0 the operations added since
 * the batch was created or cleared) until shale_writebatch_clear. */
void shale_writebatch_put(shale_writebatch_t* batch, const char* key, size_t keylen,
                          const char* val, size_t vallen);
void shale_writebatch_delete(shale_writebatch_t* batch, const char* key, size_t keylen);
void shale_writebatch_merge(shale_writebatch_t* batch, const char* key, size_t keylen,
                            const char* val, size_t vallen);
uint32_t shale_writebatch_count(const shale_writebatch_t* batch);

/* ---- Iterator ------------------------------------------------------------------------- */

/* After each positioning call check shale_iter_valid; when it turns 0, shale_iter_get_error
 * tells an error from the end of the data. Moving an invalid iterator does nothing. */
void shale_iter_destroy(shale_iterator_t* iter);
unsigned char shale_iter_valid(const shale_iterator_t* iter);
void shale_iter_seek_to_first(shale_iterator_t* iter);
void shale_iter_seek_to_last(shale_iterator_t* iter);
/* First key >= key. `key` may be the iterator's own current key. A NULL key with a non-zero
 * length leaves the iterator invalid, and shale_iter_get_error reports it. */
void shale_iter_seek(shale_iterator_t* iter, const char* key, size_t keylen);
/* Last key <= key; `key` as in shale_iter_seek. */
void shale_iter_seek_for_prev(shale_iterator_t* iter, const char* key, size_t keylen);
void shale_iter_next(shale_iterator_t* iter);
void shale_iter_prev(shale_iterator_t* iter);
/* Pointers owned by the iterator, valid until it moves or is destroyed; NULL (length 0)
 * when the iterator is not valid. Not NUL-terminated. An empty key or value is a valid
 * non-NULL pointer (safe to pass to memcpy or memcmp with length 0). shale_iter_value reads a
 * value kept in a blob file; if that fails it returns NULL (length 0), the iterator turns
 * invalid and shale_iter_get_error reports the failure. */
const char* shale_iter_key(const shale_iterator_t* iter, size_t* klen);
const char* shale_iter_value(const shale_iterator_t* iter, size_t* vlen);
void shale_iter_get_error(const shale_iterator_t* iter, char** errptr);

/* ---- Options -------------------------------------------------------------------------- */

/* Setters do not fail on the spot: an invalid value (an unknown compression code or merge
 * operator name, a negative count) makes shale_open fail with a message naming it, until a
 * valid value is set for the same option. */
shale_options_t* shale_options_create(void);
void shale_options_destroy(shale_options_t* options);
void shale_options_set_create_if_missing(shale_options_t* options, unsigned char v);
void shale_options_set_error_if_exists(shale_options_t* options, unsigned char v);
void shale_options_set_paranoid_checks(shale_options_t* options, unsigned char v);
void shale_options_set_write_buffer_size(shale_options_t* options, size_t size);
void shale_options_set_max_open_files(shale_options_t* options, int n);
void shale_options_set_block_size(shale_options_t* options, size_t size);
/* 0 turns the block cache off. */
void shale_options_set_block_cache_capacity(shale_options_t* options, size_t capacity);
/* 0 turns bloom filters off. */
void shale_options_set_bloom_bits_per_key(shale_options_t* options, int bits);
void shale_options_set_max_file_size(shale_options_t* options, size_t size);

enum {
  shale_no_compression = 0,
  shale_snappy_compression = 1,
  shale_lz4_compression = 2, /* the default */
  shale_zstd_compression = 3 /* level 3 */
};
void shale_options_set_compression(shale_options_t* options, int compression);
/* LZ4 acceleration of flushed tables (default 2; 1 to 65537, larger is faster and compresses less). */
void shale_options_set_flush_lz4_acceleration(shale_options_t* options, int acceleration);

/* A built-in merge operator: "uint64add" (8-byte little-endian counters, wrapping),
 * "stringappend" (joins operands with ','), "max" (bytewise largest). NULL removes it. */
void shale_options_set_merge_operator(shale_options_t* options, const char* name);

shale_readoptions_t* shale_readoptions_create(void);
/* Also drops the read options' hold on their snapshot. */
void shale_readoptions_destroy(shale_readoptions_t* options);
void shale_readoptions_set_verify_checksums(shale_readoptions_t* options, unsigned char v);
void shale_readoptions_set_fill_cache(shale_readoptions_t* options, unsigned char v);
/* The read options keep the snapshot pinned themselves; NULL reads the latest state. */
void shale_readoptions_set_snapshot(shale_readoptions_t* options,
                                    const shale_snapshot_t* snapshot);
/* Iterator bounds: lower inclusive, upper exclusive; the key is copied; NULL removes it. A
 * bound that cannot be read (a length too large) makes reads and iterators with these options
 * fail, until that bound is set again. */
void shale_readoptions_set_iterate_lower_bound(shale_readoptions_t* options, const char* key,
                                               size_t keylen);
void shale_readoptions_set_iterate_upper_bound(shale_readoptions_t* options, const char* key,
                                               size_t keylen);

shale_writeoptions_t* shale_writeoptions_create(void);
void shale_writeoptions_destroy(shale_writeoptions_t* options);
/* Sync the WAL before the write returns: it then survives power loss. */
void shale_writeoptions_set_sync(shale_writeoptions_t* options, unsigned char v);
void shale_writeoptions_set_disable_wal(shale_writeoptions_t* options, unsigned char v);

/* ---- Utility -------------------------------------------------------------------------- */

/* The same as free(), for buffers and messages this API returned. */
void shale_free(void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHALE_H */
