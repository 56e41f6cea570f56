/* mmap-backed read-only files and whole-file reads. */
#include "core/base/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct ig_mapfile {
    void *data;
    size_t size;
    char *path;
};

ig_status ig_mapfile_open(const char *path, ig_mapfile **out, ig_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ig_error_set(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return ig_error_set(err, IG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ig_error_set(err, IG_ERR_IO, "%s: not a regular file", path);
    }
    ig_mapfile *mf = ig_calloc(1, sizeof *mf, err);
    if (!mf) {
        close(fd);
        return IG_ERR_NOMEM;
    }
    mf->size = (size_t)st.st_size;
    mf->path = strdup(path);
    if (mf->size > 0) {
        mf->data = mmap(NULL, mf->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mf->data == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(mf->path);
            free(mf);
            return ig_error_set(err, IG_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
        }
    }
    close(fd);
    *out = mf;
    return IG_OK;
}

void ig_mapfile_close(ig_mapfile *mf) {
    if (!mf) return;
    if (mf->data && mf->size) munmap(mf->data, mf->size);
    free(mf->path);
    free(mf);
}

const void *ig_mapfile_data(const ig_mapfile *mf) {
    return mf->data;
}
size_t ig_mapfile_size(const ig_mapfile *mf) {
    return mf->size;
}
const char *ig_mapfile_path(const ig_mapfile *mf) {
    return mf->path;
}

ig_status ig_read_file(const char *path, char **out, size_t *len, ig_error *err) {
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return ig_error_set(err, IG_ERR_IO, "%s: cannot seek", path);
    }
    long n = ftell(f);
    if (n < 0) {
        fclose(f);
        return ig_error_set(err, IG_ERR_IO, "%s: cannot tell size", path);
    }
    rewind(f);
    char *buf = ig_malloc((size_t)n + 1, err);
    if (!buf) {
        fclose(f);
        return IG_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(buf);
        return ig_error_set(err, IG_ERR_IO, "%s: short read (%zu of %ld bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = (size_t)n;
    return IG_OK;
}

int ig_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ig_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
