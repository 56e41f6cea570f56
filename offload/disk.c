/* Disk tier (see disk.h): files in a per-run directory, a pool of I/O threads, O_DIRECT when the
 * filesystem accepts it. */
#include "offload/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/base/log.h"

#define DISK_MAX_THREADS 16
#define DISK_QUEUE       256
#define DISK_CHUNK_MIN   (1u << 20)

typedef struct disk_req {
    int pending;
    int err_no;
    size_t err_off;
} disk_req;

typedef struct disk_job {
    int fd;
    size_t off, n;
    void *dst;
    disk_req *req;
} disk_job;

struct ig_disk {
    char dir[4096];
    int direct;
    size_t capacity, used, peak;
    int n_files;
    double bytes_read, bytes_written;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    disk_job q[DISK_QUEUE];
    size_t head, tail;
    int stop, n_threads;
    pthread_t threads[DISK_MAX_THREADS];
};

struct ig_disk_file {
    ig_disk *d;
    int fd;
    int rows;     /* buffered, any offset (ig_disk_pread/pwrite) */
    size_t bytes; /* rounded up */
    char path[4200];
};

static size_t round_up(size_t n) {
    return (n + IG_DISK_ALIGN - 1) / IG_DISK_ALIGN * IG_DISK_ALIGN;
}

/* pread/pwrite of exactly n bytes, retrying short transfers; returns 0 or an errno. */
static int full_pread(int fd, void *dst, size_t n, size_t off) {
    char *p = dst;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        if (r == 0) return EIO; /* the file is shorter than it was written */
        p += r;
        n -= (size_t)r;
        off += (size_t)r;
    }
    return 0;
}

static int full_pwrite(int fd, const void *src, size_t n, size_t off) {
    const char *p = src;
    while (n) {
        ssize_t r = pwrite(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        if (r == 0) return ENOSPC;
        p += r;
        n -= (size_t)r;
        off += (size_t)r;
    }
    return 0;
}

static void *io_worker(void *arg) {
    ig_disk *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->head == d->tail && !d->stop) pthread_cond_wait(&d->cv_job, &d->mu);
        if (d->head == d->tail) break;
        disk_job j = d->q[d->head++ % DISK_QUEUE];
        pthread_cond_broadcast(&d->cv_done); /* a queue slot is free */
        pthread_mutex_unlock(&d->mu);
        int e = full_pread(j.fd, j.dst, j.n, j.off);
        pthread_mutex_lock(&d->mu);
        if (e && !j.req->err_no) {
            j.req->err_no = e;
            j.req->err_off = j.off;
        }
        j.req->pending--;
        pthread_cond_broadcast(&d->cv_done);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static void remove_run_dir(const char *dir) {
    DIR *dh = opendir(dir);
    if (dh) {
        struct dirent *de;
        char p[8192];
        while ((de = readdir(dh)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(dh);
    }
    rmdir(dir);
}

ig_status ig_disk_create(const char *dir, size_t capacity, int io_threads, ig_disk **out,
                         ig_error *err) {
    *out = NULL;
    struct stat st;
    if (!dir || !*dir)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "disk tier: no directory given");
    if (stat(dir, &st) != 0)
        return ig_error_set(err, IG_ERR_IO, "disk tier %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "disk tier %s: not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return ig_error_set(err, IG_ERR_IO, "disk tier %s: not writable (%s)", dir,
                            strerror(errno));
    ig_disk *d = ig_calloc(1, sizeof *d, err);
    if (!d) return IG_ERR_NOMEM;
    if (snprintf(d->dir, sizeof d->dir, "%s/igen-XXXXXX", dir) >= (int)sizeof d->dir) {
        free(d);
        return ig_error_set(err, IG_ERR_INVALID_ARG, "disk tier %s: path too long", dir);
    }
    if (!mkdtemp(d->dir)) {
        int e = errno;
        free(d);
        return ig_error_set(err, IG_ERR_IO, "disk tier %s: cannot create a run directory (%s)", dir,
                            strerror(e));
    }
    struct statvfs vs;
    size_t free_bytes = statvfs(d->dir, &vs) == 0 ? (size_t)vs.f_bavail * (size_t)vs.f_frsize : 0;
    d->capacity = capacity ? capacity : free_bytes;
    /* O_DIRECT probe: a one-block aligned write and read */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.direct-probe", d->dir);
    int fd = open(probe, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd >= 0) {
        void *buf = NULL;
        if (posix_memalign(&buf, IG_DISK_ALIGN, IG_DISK_ALIGN) == 0) {
            memset(buf, 0, IG_DISK_ALIGN);
            d->direct = full_pwrite(fd, buf, IG_DISK_ALIGN, 0) == 0 &&
                        full_pread(fd, buf, IG_DISK_ALIGN, 0) == 0;
            free(buf);
        }
        close(fd);
    }
    unlink(probe);
    if (!d->direct)
        IG_INFO("disk tier %s: the filesystem refuses O_DIRECT; using buffered I/O (the page cache "
                "may serve reads)",
                dir);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv_job, NULL);
    pthread_cond_init(&d->cv_done, NULL);
    int nt = io_threads <= 0 ? 2 : io_threads > DISK_MAX_THREADS ? DISK_MAX_THREADS : io_threads;
    for (int i = 0; i < nt; i++) {
        if (pthread_create(&d->threads[i], NULL, io_worker, d) != 0) {
            ig_disk_free(d);
            return ig_error_set(err, IG_ERR_INTERNAL, "disk tier: cannot start I/O threads");
        }
        d->n_threads++;
    }
    *out = d;
    return IG_OK;
}

void ig_disk_free(ig_disk *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->cv_job);
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < d->n_threads; i++) pthread_join(d->threads[i], NULL);
    if (d->n_files)
        IG_WARN("disk tier %s: %d files still open at free; removing them", d->dir, d->n_files);
    remove_run_dir(d->dir);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv_job);
    pthread_cond_destroy(&d->cv_done);
    free(d);
}

const char *ig_disk_dir(const ig_disk *d) {
    return d->dir;
}
int ig_disk_is_direct(const ig_disk *d) {
    return d->direct;
}
size_t ig_disk_capacity(const ig_disk *d) {
    return d->capacity;
}
size_t ig_disk_used(const ig_disk *d) {
    return d->used;
}
size_t ig_disk_peak(const ig_disk *d) {
    return d->peak;
}
double ig_disk_bytes_read(const ig_disk *d) {
    return d->bytes_read;
}
double ig_disk_bytes_written(const ig_disk *d) {
    return d->bytes_written;
}

static ig_status file_create(ig_disk *d, const char *name, size_t bytes, int rows,
                             ig_disk_file **out, ig_error *err) {
    *out = NULL;
    size_t need = round_up(bytes ? bytes : 1);
    if (need > d->capacity - d->used)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "disk tier %s: %s needs %.1f MiB but only %.1f MiB of the tier's %.1f "
                            "MiB are left",
                            d->dir, name, (double)need / 1048576.0,
                            (double)(d->capacity - d->used) / 1048576.0,
                            (double)d->capacity / 1048576.0);
    ig_disk_file *f = ig_calloc(1, sizeof *f, err);
    if (!f) return IG_ERR_NOMEM;
    snprintf(f->path, sizeof f->path, "%s/%s", d->dir, name);
    f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | (d->direct && !rows ? O_DIRECT : 0), 0600);
    if (f->fd < 0) {
        int e = errno;
        free(f);
        return ig_error_set(err, IG_ERR_IO, "disk tier: cannot create %s/%s (%s)", d->dir, name,
                            strerror(e));
    }
    if (rows) {
        int e = posix_fallocate(f->fd, 0, (off_t)need);
        if (e) {
            close(f->fd);
            unlink(f->path);
            free(f);
            return ig_error_set(err, IG_ERR_CAPACITY,
                                "disk tier: cannot reserve %.1f MiB for %s/%s (%s)",
                                (double)need / 1048576.0, d->dir, name,
                                e == ENOSPC ? "no space left on the device" : strerror(e));
        }
    }
    f->rows = rows;
    f->d = d;
    f->bytes = need;
    d->used += need;
    if (d->used > d->peak) d->peak = d->used;
    d->n_files++;
    *out = f;
    return IG_OK;
}

ig_status ig_disk_file_create(ig_disk *d, const char *name, size_t bytes, ig_disk_file **out,
                              ig_error *err) {
    return file_create(d, name, bytes, 0, out, err);
}

ig_status ig_disk_file_create_rows(ig_disk *d, const char *name, size_t bytes, ig_disk_file **out,
                                   ig_error *err) {
    return file_create(d, name, bytes, 1, out, err);
}

static ig_status check_rows(const ig_disk_file *f, size_t off, size_t n, ig_error *err) {
    IG_ASSERT(f->rows);
    if (off > f->bytes || n > f->bytes - off)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "disk tier %s: bytes [%zu, %zu) outside the file's %zu", f->path, off,
                            off + n, f->bytes);
    return IG_OK;
}

ig_status ig_disk_pread(ig_disk_file *f, size_t off, void *dst, size_t n, ig_error *err) {
    IG_TRY(check_rows(f, off, n, err));
    int e = full_pread(f->fd, dst, n, off);
    if (e)
        return ig_error_set(err, IG_ERR_IO, "disk tier: reading %s at byte %zu: %s", f->path, off,
                            strerror(e));
    pthread_mutex_lock(&f->d->mu);
    f->d->bytes_read += (double)n;
    pthread_mutex_unlock(&f->d->mu);
    return IG_OK;
}

ig_status ig_disk_pwrite(ig_disk_file *f, size_t off, const void *src, size_t n, ig_error *err) {
    IG_TRY(check_rows(f, off, n, err));
    int e = full_pwrite(f->fd, src, n, off);
    if (e)
        return ig_error_set(err, IG_ERR_IO, "disk tier: writing %s at byte %zu: %s", f->path, off,
                            e == ENOSPC ? "no space left on the device" : strerror(e));
    pthread_mutex_lock(&f->d->mu);
    f->d->bytes_written += (double)n;
    pthread_mutex_unlock(&f->d->mu);
    return IG_OK;
}

void ig_disk_file_free(ig_disk_file *f) {
    if (!f) return;
    close(f->fd);
    unlink(f->path);
    f->d->used -= f->bytes;
    f->d->n_files--;
    free(f);
}

static ig_status check_range(const ig_disk_file *f, size_t off, size_t n, ig_error *err) {
    if (off % IG_DISK_ALIGN || off > f->bytes || n > f->bytes - off)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "disk tier %s: bytes [%zu, %zu) outside the file's %zu or unaligned",
                            f->path, off, off + n, f->bytes);
    return IG_OK;
}

ig_status ig_disk_write(ig_disk_file *f, size_t off, const void *src, size_t n, ig_error *err) {
    IG_TRY(check_range(f, off, n, err));
    size_t chunk = 8u << 20;
    void *bounce = NULL;
    if (posix_memalign(&bounce, IG_DISK_ALIGN, chunk) != 0)
        return ig_error_set(err, IG_ERR_NOMEM, "disk tier: no memory for an I/O buffer");
    ig_status st = IG_OK;
    for (size_t done = 0; done < n && st == IG_OK;) {
        size_t len = n - done < chunk ? n - done : chunk, padded = round_up(len);
        memcpy(bounce, (const char *)src + done, len);
        if (padded > len) memset((char *)bounce + len, 0, padded - len);
        int e = full_pwrite(f->fd, bounce, padded, off + done);
        if (e)
            st =
                ig_error_set(err, IG_ERR_IO, "disk tier: writing %s at byte %zu: %s", f->path,
                             off + done, e == ENOSPC ? "no space left on the device" : strerror(e));
        done += len;
    }
    free(bounce);
    if (st == IG_OK) f->d->bytes_written += (double)n;
    return st;
}

ig_status ig_disk_read(ig_disk_file *f, size_t off, void *dst, size_t n, ig_error *err) {
    IG_TRY(check_range(f, off, n, err));
    size_t chunk = 8u << 20;
    void *bounce = NULL;
    if (posix_memalign(&bounce, IG_DISK_ALIGN, chunk) != 0)
        return ig_error_set(err, IG_ERR_NOMEM, "disk tier: no memory for an I/O buffer");
    ig_status st = IG_OK;
    for (size_t done = 0; done < n && st == IG_OK;) {
        size_t len = n - done < chunk ? n - done : chunk;
        int e = full_pread(f->fd, bounce, round_up(len), off + done);
        if (e)
            st = ig_error_set(err, IG_ERR_IO, "disk tier: reading %s at byte %zu: %s", f->path,
                              off + done, strerror(e));
        else
            memcpy((char *)dst + done, bounce, len);
        done += len;
    }
    free(bounce);
    if (st == IG_OK) f->d->bytes_read += (double)n;
    return st;
}

ig_status ig_disk_read_parallel(ig_disk_file *f, size_t off, void *dst, size_t n, ig_error *err) {
    IG_TRY(check_range(f, off, n, err));
    if ((uintptr_t)dst % IG_DISK_ALIGN)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "disk tier: parallel read into an unaligned buffer");
    ig_disk *d = f->d;
    size_t total = round_up(n);
    size_t chunk = round_up(total / (size_t)d->n_threads + 1);
    if (chunk < DISK_CHUNK_MIN) chunk = DISK_CHUNK_MIN;
    disk_req req = {0, 0, 0};
    pthread_mutex_lock(&d->mu);
    for (size_t o = 0; o < total; o += chunk) {
        while (d->tail - d->head >= DISK_QUEUE) pthread_cond_wait(&d->cv_done, &d->mu);
        disk_job j = {f->fd, off + o, total - o < chunk ? total - o : chunk, (char *)dst + o, &req};
        d->q[d->tail++ % DISK_QUEUE] = j;
        req.pending++;
        pthread_cond_signal(&d->cv_job);
    }
    while (req.pending) pthread_cond_wait(&d->cv_done, &d->mu);
    if (!req.err_no) d->bytes_read += (double)n;
    pthread_mutex_unlock(&d->mu);
    if (req.err_no)
        return ig_error_set(err, IG_ERR_IO, "disk tier: reading %s at byte %zu: %s", f->path,
                            req.err_off, strerror(req.err_no));
    return IG_OK;
}
