/* Bounds on what a loaded YAML document expands to. libyaml's document API keeps an alias as a
 * second reference to the anchored node, so a few hundred bytes of nested aliases ("billion
 * laughs") describe billions of values: a reader that walks the document visits every one. Checked
 * before any walk, on the document's graph, in time linear in its size. */
#ifndef IG_YAML_GUARD_H
#define IG_YAML_GUARD_H

#include <stddef.h>

#include <yaml.h>

/* Largest input text a YAML reader accepts: configuration files are kilobytes. */
#define IG_YAML_MAX_BYTES ((size_t)16 << 20)
/* Most values (scalars, mappings and lists, each alias use counted in full) a document may expand
 * to, and the deepest nesting. A generous sweep is a few thousand values. */
#define IG_YAML_MAX_NODES 200000
#define IG_YAML_MAX_DEPTH 64

/* 0 when `doc` is within the bounds above; else 1, with *where the node at which the bound was
 * passed and `why` (n bytes) saying which. */
int ig_yaml_guard_check(yaml_document_t *doc, yaml_mark_t *where, char *why, size_t n);

#endif
