/* The disk tier: a directory where tensors live as files, read and written by a pool of I/O
 * threads, with O_DIRECT where the filesystem allows it (page-aligned buffers, offsets and sizes;
 * buffered I/O otherwise, said once). Everything a run writes goes into one fresh subdirectory
 * (DIR/igen-XXXXXX) that is removed when the tier is freed, also after an error, so nothing is
 * left behind. Capacity is the filesystem's free space at create time, or less if the user says. */
#ifndef IG_DISK_H
#define IG_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"

#define IG_DISK_ALIGN 4096

typedef struct ig_disk ig_disk;
typedef struct ig_disk_file ig_disk_file;

/* capacity 0: the free space of DIR's filesystem. io_threads <= 0: 2. Fails (naming DIR) when DIR
 * does not exist, is not a directory, or is not writable. */
ig_status ig_disk_create(const char *dir, size_t capacity, int io_threads, ig_disk **out,
                         ig_error *err);
/* Removes every file of the run and the run's directory. */
void ig_disk_free(ig_disk *d);
const char *ig_disk_dir(const ig_disk *d); /* the run's own subdirectory */
int ig_disk_is_direct(const ig_disk *d);   /* O_DIRECT in use */
size_t ig_disk_capacity(const ig_disk *d);
size_t ig_disk_used(const ig_disk *d); /* bytes of files (rounded up to IG_DISK_ALIGN) */
size_t ig_disk_peak(const ig_disk *d);

/* A file of `bytes` (rounded up to IG_DISK_ALIGN) named NAME in the run directory; fails if the
 * tier's capacity would be exceeded (naming the need and what is left). */
ig_status ig_disk_file_create(ig_disk *d, const char *name, size_t bytes, ig_disk_file **out,
                              ig_error *err);
/* A file for small random reads and writes at any offset (KV rows): buffered I/O (no O_DIRECT),
 * its blocks preallocated now so that a full disk fails here rather than mid-run. */
ig_status ig_disk_file_create_rows(ig_disk *d, const char *name, size_t bytes, ig_disk_file **out,
                                   ig_error *err);
/* Reads / writes of n bytes at any offset of a rows file; thread-safe (counters included). */
ig_status ig_disk_pread(ig_disk_file *f, size_t off, void *dst, size_t n, ig_error *err);
ig_status ig_disk_pwrite(ig_disk_file *f, size_t off, const void *src, size_t n, ig_error *err);
/* Unlinks the file and returns its bytes to the tier. */
void ig_disk_file_free(ig_disk_file *f);

/* Synchronous write / read of n bytes at byte offset off (both multiples of IG_DISK_ALIGN unless
 * the write ends the file). The buffer need not be aligned: unaligned buffers go through a bounce
 * buffer. A full disk or an I/O error fails with the file, offset and errno's text. */
ig_status ig_disk_write(ig_disk_file *f, size_t off, const void *src, size_t n, ig_error *err);
ig_status ig_disk_read(ig_disk_file *f, size_t off, void *dst, size_t n, ig_error *err);

/* Reads split over the I/O threads: dst must be IG_DISK_ALIGN-aligned with room for n rounded up
 * to IG_DISK_ALIGN. Returns when every piece has arrived. */
ig_status ig_disk_read_parallel(ig_disk_file *f, size_t off, void *dst, size_t n, ig_error *err);

/* Bytes read and written since create. */
double ig_disk_bytes_read(const ig_disk *d);
double ig_disk_bytes_written(const ig_disk *d);

#endif
