/* Line driver for tools/reference/fuzz_tokenizer.py (not a test by itself): loads a tokenizer.json
 * or GGUF, reads one JSON string per stdin line, writes the ids (space-separated), a tab and the
 * decoded text as a JSON string; "ERR message" for an input that fails. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/io/gguf.h"
#include "core/model/tokenizer/tokenizer.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s TOKENIZER(.json|.gguf) [ADD_BOS] < lines\n", argv[0]);
        return 2;
    }
    ig_error err;
    ig_error_clear(&err);
    ig_tokenizer *tok = NULL;
    ig_gguf *g = NULL;
    int add_bos = argc > 2 && atoi(argv[2]);
    ig_status rc = strstr(argv[1], ".gguf") ? ig_gguf_open(argv[1], &g, &err) : IG_OK;
    if (rc == IG_OK)
        rc = g ? ig_tokenizer_load_gguf(g, &tok, &err) : ig_tokenizer_load_hf(argv[1], &tok, &err);
    if (rc != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        ig_gguf_close(g);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        json_object *o = json_tokener_parse(line);
        if (!o || !json_object_is_type(o, json_type_string)) {
            printf("ERR input line is not a JSON string\n");
            json_object_put(o);
            continue;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        char *dec = NULL;
        if (ig_tokenizer_encode(tok, json_object_get_string(o),
                                (size_t)json_object_get_string_len(o), add_bos, &ids, &n,
                                &err) != IG_OK ||
            ig_tokenizer_decode(tok, ids, n, &dec, &err) != IG_OK) {
            printf("ERR %s\n", err.msg);
        } else {
            for (size_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
            json_object *d = json_object_new_string(dec);
            printf("\t%s\n", json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN));
            json_object_put(d);
        }
        free(dec);
        free(ids);
        json_object_put(o);
    }
    free(line);
    ig_tokenizer_free(tok);
    ig_gguf_close(g);
    return 0;
}
