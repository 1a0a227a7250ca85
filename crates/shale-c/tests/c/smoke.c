/*
 * A C program using the shale C API end to end: open and its errors, puts, gets, deletes,
 * merges, batches, snapshots, iterators with bounds, flush, compaction, properties, read-only
 * reopen and destroy. It prints one line per observation; tests/c_smoke.rs compiles it with the
 * system C compiler, runs it on a temporary directory and compares the output.
 *
 * Usage: smoke DIR   (the database is created in DIR/db)
 */
#include "shale.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CHECK_NO_ERROR(err)                                                    \
  do {                                                                         \
    if ((err) != NULL) {                                                       \
      fprintf(stderr, "%s:%d: unexpected error: %s\n", __FILE__, __LINE__,     \
              (err));                                                          \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* Prints bytes with NUL and other unprintable bytes escaped, so any key fits on one line. */
static void print_escaped(const char* bytes, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      putchar(c);
    } else {
      printf("\\x%02x", c);
    }
  }
}

/* Expects an error containing `needle`, prints `label: needle`, frees the message. */
static void expect_error(const char* label, char** err, const char* needle) {
  if (*err == NULL) {
    fprintf(stderr, "%s: expected an error containing \"%s\", got none\n", label, needle);
    exit(1);
  }
  if (strstr(*err, needle) == NULL) {
    fprintf(stderr, "%s: expected an error containing \"%s\", got \"%s\"\n", label, needle, *err);
    exit(1);
  }
  printf("%s: %s\n", label, needle);
  shale_free(*err);
  *err = NULL;
}

static void encode_u64(uint64_t v, char out[8]) {
  for (int i = 0; i < 8; i++) {
    out[i] = (char)((v >> (8 * i)) & 0xff);
  }
}

static uint64_t decode_u64(const char* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) {
    v = (v << 8) | (unsigned char)in[i];
  }
  return v;
}

/* Prints `label: value` (or `label: missing`) for the key, failing on any error. */
static void print_get(shale_t* db, const shale_readoptions_t* ro, const char* label,
                      const char* key, size_t keylen) {
  char* err = NULL;
  size_t len = 12345;
  char* value = shale_get(db, ro, key, keylen, &len, &err);
  CHECK_NO_ERROR(err);
  printf("%s: ", label);
  if (value == NULL) {
    CHECK(len == 0);
    printf("missing\n");
    return;
  }
  printf("\"");
  print_escaped(value, len);
  printf("\" (%zu bytes)\n", len);
  free(value);
}

static void print_counter(shale_t* db, const char* key) {
  char* err = NULL;
  size_t len = 0;
  char* value = shale_get(db, NULL, key, strlen(key), &len, &err);
  CHECK_NO_ERROR(err);
  CHECK(value != NULL && len == 8);
  printf("counter %s: %llu\n", key, (unsigned long long)decode_u64(value));
  shale_free(value);
}

/* Walks the iterator in the given direction and prints every key on one line. */
static void print_walk(const char* label, shale_iterator_t* it, int forward) {
  printf("%s:", label);
  for (; shale_iter_valid(it); forward ? shale_iter_next(it) : shale_iter_prev(it)) {
    size_t klen = 0, vlen = 0;
    const char* key = shale_iter_key(it, &klen);
    const char* value = shale_iter_value(it, &vlen);
    CHECK(key != NULL && value != NULL);
    printf(" ");
    print_escaped(key, klen);
  }
  printf("\n");
  char* err = NULL;
  shale_iter_get_error(it, &err);
  CHECK_NO_ERROR(err);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/db", argv[1]);
  char* err = NULL;

  /* Open failures are reported through errptr. */
  shale_options_t* options = shale_options_create();
  shale_options_set_create_if_missing(options, 0);
  CHECK(shale_open(path, options, &err) == NULL);
  expect_error("open without create_if_missing", &err, "does not exist");
  shale_options_set_create_if_missing(options, 1);
  shale_options_set_merge_operator(options, "no-such-operator");
  CHECK(shale_open(path, options, &err) == NULL);
  expect_error("open with an unknown merge operator", &err, "unknown merge operator");
  CHECK(shale_open(NULL, NULL, &err) == NULL);
  expect_error("open with a NULL path", &err, "path is NULL");

  shale_options_destroy(options);
  options = shale_options_create();
  shale_options_set_merge_operator(options, "uint64add");
  shale_options_set_write_buffer_size(options, 64 * 1024);
  shale_options_set_compression(options, shale_zstd_compression);
  shale_options_set_flush_lz4_acceleration(options, 4);
  shale_options_set_bloom_bits_per_key(options, 10);
  shale_options_set_block_cache_capacity(options, 1 << 20);
  shale_t* db = shale_open(path, options, &err);
  CHECK_NO_ERROR(err);
  CHECK(db != NULL);
  CHECK(shale_open(path, options, &err) == NULL);
  expect_error("second open of the same directory", &err, "locked");

  /* Puts and gets; keys and values are byte strings, NULs included. */
  shale_writeoptions_t* sync = shale_writeoptions_create();
  shale_writeoptions_set_sync(sync, 1);
  shale_put(db, sync, "apple", 5, "red", 3, &err);
  CHECK_NO_ERROR(err);
  shale_put(db, NULL, "banana", 6, "yellow", 6, &err);
  CHECK_NO_ERROR(err);
  shale_put(db, NULL, "empty", 5, NULL, 0, &err);
  CHECK_NO_ERROR(err);
  shale_put(db, NULL, "nul\0key", 7, "x\0y", 3, &err);
  CHECK_NO_ERROR(err);
  print_get(db, NULL, "get apple", "apple", 5);
  print_get(db, NULL, "get pear", "pear", 4);
  print_get(db, NULL, "get empty", "empty", 5);
  print_get(db, NULL, "get nul\\x00key", "nul\0key", 7);

  /* Counters through the uint64add merge operator. */
  char operand[8];
  encode_u64(1, operand);
  for (int i = 0; i < 3; i++) {
    shale_merge(db, NULL, "visits", 6, operand, 8, &err);
    CHECK_NO_ERROR(err);
  }
  print_counter(db, "visits");

  /* An atomic batch; it stays usable after the write. */
  shale_writebatch_t* batch = shale_writebatch_create();
  shale_writebatch_put(batch, "cherry", 6, "dark red", 8);
  shale_writebatch_delete(batch, "banana", 6);
  encode_u64(2, operand);
  shale_writebatch_merge(batch, "visits", 6, operand, 8);
  printf("batch count: %u\n", shale_writebatch_count(batch));
  shale_write(db, sync, batch, &err);
  CHECK_NO_ERROR(err);
  printf("batch count after write: %u\n", shale_writebatch_count(batch));
  shale_writebatch_clear(batch);
  printf("batch count after clear: %u\n", shale_writebatch_count(batch));
  shale_writebatch_destroy(batch);
  print_get(db, NULL, "get banana after batch", "banana", 6);
  print_counter(db, "visits");

  /* A snapshot keeps seeing the state it was taken at, even after its handle is released,
   * as long as read options hold it. */
  const shale_snapshot_t* snapshot = shale_create_snapshot(db);
  CHECK(snapshot != NULL);
  shale_put(db, NULL, "date", 4, "brown", 5, &err);
  CHECK_NO_ERROR(err);
  shale_readoptions_t* at_snapshot = shale_readoptions_create();
  shale_readoptions_set_snapshot(at_snapshot, snapshot);
  shale_release_snapshot(db, snapshot);
  print_get(db, at_snapshot, "get date at snapshot", "date", 4);
  print_get(db, NULL, "get date now", "date", 4);

  /* Iterators: forwards at the snapshot, backwards now, seeks, bounds. */
  shale_iterator_t* it = shale_create_iterator(db, at_snapshot);
  CHECK(it != NULL);
  CHECK(!shale_iter_valid(it));
  size_t klen = 99;
  CHECK(shale_iter_key(it, &klen) == NULL && klen == 0);
  shale_iter_next(it); /* not valid: does nothing */
  shale_iter_seek_to_first(it);
  print_walk("forward at snapshot", it, 1);
  shale_iter_destroy(it);

  it = shale_create_iterator(db, NULL);
  shale_iter_seek_to_last(it);
  print_walk("backward now", it, 0);
  shale_iter_seek(it, "c", 1);
  print_walk("seek c", it, 1);
  shale_iter_seek_for_prev(it, "d", 1);
  print_walk("seek_for_prev d", it, 0);
  shale_iter_destroy(it);

  shale_readoptions_t* bounded = shale_readoptions_create();
  shale_readoptions_set_iterate_lower_bound(bounded, "b", 1);
  shale_readoptions_set_iterate_upper_bound(bounded, "e", 1);
  it = shale_create_iterator(db, bounded);
  shale_iter_seek_to_first(it);
  print_walk("bounded [b, e)", it, 1);
  shale_iter_seek_to_last(it);
  print_walk("bounded [b, e) backward", it, 0);
  shale_iter_destroy(it);
  shale_readoptions_destroy(bounded);

  /* Flush, compaction and properties. */
  shale_flush(db, &err);
  CHECK_NO_ERROR(err);
  shale_compact_range(db, NULL, 0, NULL, 0, &err);
  CHECK_NO_ERROR(err);
  char* sequence = shale_property_value(db, "shale.last-sequence");
  CHECK(sequence != NULL);
  printf("last sequence: %s\n", sequence);
  shale_free(sequence);
  CHECK(shale_property_value(db, "shale.no-such-property") == NULL);
  char* stats = shale_property_value(db, "shale.stats");
  CHECK(stats != NULL && strlen(stats) > 0);
  free(stats);
  print_get(db, NULL, "get cherry after compaction", "cherry", 6);
  print_counter(db, "visits");

  /* NULL arguments are reported, never dereferenced. */
  shale_put(NULL, NULL, "k", 1, "v", 1, &err);
  expect_error("put on a NULL database", &err, "database handle is NULL");
  size_t len = 0;
  CHECK(shale_get(db, NULL, NULL, 3, &len, &err) == NULL);
  expect_error("get with a NULL key", &err, "key is NULL");
  shale_write(db, NULL, NULL, &err);
  expect_error("write of a NULL batch", &err, "write batch is NULL");
  CHECK(shale_create_iterator(NULL, NULL) == NULL);
  CHECK(shale_create_snapshot(NULL) == NULL);
  it = shale_create_iterator(db, NULL);
  shale_iter_seek(it, NULL, 5);
  CHECK(!shale_iter_valid(it));
  shale_iter_get_error(it, &err);
  expect_error("seek with a NULL key", &err, "shale_iter_seek: key is NULL");
  /* An empty value is a real pointer: memcmp with length 0 is defined on it. */
  shale_iter_seek(it, "empty", 5);
  size_t vlen = 99;
  const char* empty = shale_iter_value(it, &vlen);
  CHECK(empty != NULL && vlen == 0 && memcmp(empty, "", 0) == 0);
  shale_iter_destroy(it);
  batch = shale_writebatch_create();
  shale_writebatch_put(batch, "k", 1, "v", 1);
  shale_writebatch_put(batch, NULL, 3, "v", 1);
  shale_write(db, NULL, batch, &err);
  expect_error("write of a batch with a NULL key", &err, "write batch entry 1 (put): key is NULL");
  print_get(db, NULL, "get k after the refused batch", "k", 1);
  shale_writebatch_destroy(batch);

  /* Errors from the engine come through too. */
  shale_merge(db, NULL, "visits", 6, "abc", 3, &err);
  CHECK_NO_ERROR(err); /* operands are checked when merged, at read time */
  CHECK(shale_get(db, NULL, "visits", 6, &len, &err) == NULL);
  expect_error("get of a counter with a bad operand", &err, "merge operator uint64add failed");
  shale_delete(db, NULL, "visits", 6, &err);
  CHECK_NO_ERROR(err);

  shale_readoptions_destroy(at_snapshot);
  shale_writeoptions_destroy(sync);
  shale_close(db);

  /* Everything acknowledged is there after a reopen, also read-only. */
  db = shale_open_read_only(path, options, &err);
  CHECK_NO_ERROR(err);
  print_get(db, NULL, "read-only get apple", "apple", 5);
  shale_put(db, NULL, "k", 1, "v", 1, &err);
  CHECK(err != NULL);
  printf("read-only put: refused\n");
  shale_free(err);
  err = NULL;
  shale_close(db);

  shale_destroy_db(path, options, &err);
  CHECK_NO_ERROR(err);
  shale_options_set_create_if_missing(options, 0);
  CHECK(shale_open(path, options, &err) == NULL);
  expect_error("open after destroy", &err, "does not exist");
  shale_options_destroy(options);

  /* Destroying NULL handles is a no-op, as free(NULL) is. */
  shale_close(NULL);
  shale_iter_destroy(NULL);
  shale_writebatch_destroy(NULL);
  shale_options_destroy(NULL);
  shale_readoptions_destroy(NULL);
  shale_writeoptions_destroy(NULL);
  shale_release_snapshot(NULL, NULL);
  shale_free(NULL);

  printf("ok\n");
  return 0;
}
