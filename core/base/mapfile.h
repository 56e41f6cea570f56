/* Read-only memory-mapped files: the model loaders read tensors from them (in place with
 * --weights-mem map, else copied or converted into the model's arena). */
#ifndef IG_MAPFILE_H
#define IG_MAPFILE_H

#include <stddef.h>

#include "core/base/status.h"

typedef struct ig_mapfile ig_mapfile;

ig_status ig_mapfile_open(const char *path, ig_mapfile **out, ig_error *err);
void ig_mapfile_close(ig_mapfile *mf);
const void *ig_mapfile_data(const ig_mapfile *mf);
size_t ig_mapfile_size(const ig_mapfile *mf);
const char *ig_mapfile_path(const ig_mapfile *mf);

/* Reads a whole (small) file into a NUL-terminated heap buffer. */
ig_status ig_read_file(const char *path, char **out, size_t *len, ig_error *err);
int ig_path_is_dir(const char *path);
int ig_path_exists(const char *path);

#endif
