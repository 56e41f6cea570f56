/* See yaml_guard.h. The expanded size of each node is computed once (memoised on libyaml's node
 * array), so a document whose aliases multiply its size is measured without being expanded; a node
 * reached again while it is being measured is an alias inside itself. */
#include "core/model/io/yaml_guard.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct guard {
    yaml_document_t *doc;
    size_t *size; /* expanded size per node, 0 = not measured yet */
    int *height;  /* levels below the node once expanded */
    unsigned char *busy;
    yaml_mark_t where;
    char *why;
    size_t n;
} guard;

enum { LIMIT = IG_YAML_MAX_NODES };

static size_t measure(guard *g, int id, int depth);

/* A child's expanded size; *h becomes the parent's height so far. */
static size_t child(guard *g, int id, int depth, int *h) {
    size_t s = measure(g, id, depth + 1);
    yaml_node_t *y = yaml_document_get_node(g->doc, id);
    if (y && g->size[id - 1] && g->height[id - 1] + 1 > *h) *h = g->height[id - 1] + 1;
    return s;
}

/* The node's expanded size, saturated at LIMIT + 1; LIMIT + 1 with g->why set on a failure. */
static size_t measure(guard *g, int id, int depth) {
    yaml_node_t *y = yaml_document_get_node(g->doc, id);
    if (!y) return 1;
    size_t i = (size_t)(id - 1);
    if (g->size[i] && depth + g->height[i] <= IG_YAML_MAX_DEPTH) return g->size[i];
    if (depth + (g->size[i] ? g->height[i] : 0) > IG_YAML_MAX_DEPTH) {
        g->where = y->start_mark;
        snprintf(g->why, g->n, "nested more than %d levels deep (the limit)", IG_YAML_MAX_DEPTH);
        return LIMIT + 1;
    }
    if (g->busy[i]) {
        g->where = y->start_mark;
        snprintf(g->why, g->n, "an alias refers to a node that contains it (recursive alias)");
        return LIMIT + 1;
    }
    g->busy[i] = 1;
    size_t total = 1;
    int h = 0;
    if (y->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = y->data.sequence.items.start;
             it < y->data.sequence.items.top && total <= LIMIT; it++)
            total += child(g, *it, depth, &h);
    } else if (y->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = y->data.mapping.pairs.start;
             p < y->data.mapping.pairs.top && total <= LIMIT; p++) {
            total += child(g, p->key, depth, &h);
            if (total <= LIMIT) total += child(g, p->value, depth, &h);
        }
    }
    g->height[i] = h;
    g->busy[i] = 0;
    if (total > LIMIT) {
        total = LIMIT + 1;
        if (!g->why[0]) {
            g->where = y->start_mark;
            snprintf(g->why, g->n,
                     "the document expands to more than %d values (aliases repeated inside "
                     "aliases?); the limit is %d",
                     LIMIT, LIMIT);
        }
    }
    g->size[i] = total;
    return total;
}

int ig_yaml_guard_check(yaml_document_t *doc, yaml_mark_t *where, char *why, size_t n) {
    why[0] = '\0';
    size_t count = (size_t)(doc->nodes.top - doc->nodes.start);
    if (count == 0) return 0;
    guard g = {
        doc, calloc(count, sizeof(size_t)), calloc(count, sizeof(int)), calloc(count, 1), {0}, why,
        n};
    if (!g.size || !g.height || !g.busy) {
        free(g.size);
        free(g.height);
        free(g.busy);
        snprintf(why, n, "out of memory measuring the document (%zu nodes)", count);
        *where = (yaml_mark_t){0};
        return 1;
    }
    size_t total = measure(&g, 1, 0); /* node 1 is the root */
    free(g.size);
    free(g.height);
    free(g.busy);
    if (total <= LIMIT && !why[0]) return 0;
    *where = g.where;
    return 1;
}
