/* Activations homed off the device (acthome.h). */
#include "offload/acthome.h"

#include <stdlib.h>
#include <string.h>

struct ig_act_home {
    size_t bytes;
    unsigned char *host; /* host home, and the disk rows' relay */
    ig_disk_file *file;  /* NULL without a disk */
    const ig_link_model *link;
    ig_act_home_stats st;
};

ig_status ig_act_home_create(size_t bytes, const ig_link_model *link, ig_disk *disk,
                             ig_act_home **out, ig_error *err) {
    *out = NULL;
    ig_act_home *h = ig_calloc(1, sizeof *h, err);
    if (!h) return IG_ERR_NOMEM;
    h->bytes = bytes;
    h->link = link;
    h->host = ig_aligned_alloc(bytes ? bytes : 1, err);
    if (!h->host) {
        free(h);
        return IG_ERR_NOMEM;
    }
    if (disk) {
        ig_status rc = ig_disk_file_create_rows(disk, "activations", bytes, &h->file, err);
        if (rc != IG_OK) {
            ig_act_home_free(h);
            return rc;
        }
    }
    *out = h;
    return IG_OK;
}

void ig_act_home_free(ig_act_home *h) {
    if (!h) return;
    ig_disk_file_free(h->file);
    free(h->host);
    free(h);
}

static ig_status check_span(const ig_act_home *h, size_t off, size_t n, int on_disk,
                            ig_error *err) {
    if (off > h->bytes || n > h->bytes - off)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "activation home: bytes [%zu, %zu) outside its %zu bytes", off, off + n,
                            h->bytes);
    if (on_disk && !h->file)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "activation home: no disk file");
    return IG_OK;
}

ig_status ig_act_home_store(ig_act_home *h, size_t off, const void *dev, size_t n, int on_disk,
                            ig_error *err) {
    IG_TRY(check_span(h, off, n, on_disk, err));
    h->st.transfer_s += ig_link_copy(h->link, IG_LINK_D2H, h->host + off, dev, n);
    h->st.d2h_bytes += (double)n;
    if (on_disk) {
        IG_TRY(ig_disk_pwrite(h->file, off, h->host + off, n, err));
        h->st.disk_write_bytes += (double)n;
    }
    return IG_OK;
}

ig_status ig_act_home_load(ig_act_home *h, size_t off, void *dev, size_t n, int on_disk,
                           ig_error *err) {
    IG_TRY(check_span(h, off, n, on_disk, err));
    if (on_disk) {
        IG_TRY(ig_disk_pread(h->file, off, h->host + off, n, err));
        h->st.disk_read_bytes += (double)n;
    }
    h->st.transfer_s += ig_link_copy(h->link, IG_LINK_H2D, dev, h->host + off, n);
    h->st.h2d_bytes += (double)n;
    return IG_OK;
}

ig_act_home_stats ig_act_home_get_stats(const ig_act_home *h) {
    return h->st;
}

void ig_act_home_reset_stats(ig_act_home *h) {
    memset(&h->st, 0, sizeof h->st);
}
