/* igen topo: the machine's topology as the offloading core sees it (packages, NUMA nodes with
 * memory and cores, GPUs with their NUMA node), from this machine, an hwloc XML file or a synthetic
 * description. Prints; never binds or allocates anything. */
#include <stdio.h>

#include "core/app/cli/cli.h"
#include "offload/topo.h"

static void help(void) {
    printf(
        "usage: igen topo [--xml FILE | --synthetic DESC] [--json]\n\n"
        "Prints the topology the offloading core plans with: packages, NUMA nodes (memory,\n"
        "cores, PUs), and NVIDIA GPUs with their PCI bus id and the NUMA node they hang off.\n"
        "Without options it is this machine, discovered with hwloc.\n\n"
        "  --xml FILE        an hwloc XML topology (e.g. from 'lstopo FILE.xml' on another\n"
        "                    machine), to plan for it\n"
        "  --synthetic DESC  an hwloc synthetic description, e.g. \"pack:2 numa:1 core:4 pu:2\"\n"
        "  --json            print one JSON object\n"
        "  -h, --help        this help\n");
}

int ig_cmd_topo(int argc, char **argv) {
    enum { O_XML = IG_OPT_FIRST_FREE, O_SYNTHETIC, O_JSON };
    static const struct option longopts[] = {
        {"xml", required_argument, NULL, O_XML},
        {"synthetic", required_argument, NULL, O_SYNTHETIC},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *xml = NULL, *synthetic = NULL;
    int json = 0, opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_XML:
            xml = optarg;
            break;
        case O_SYNTHETIC:
            synthetic = optarg;
            break;
        case O_JSON:
            json = 1;
            break;
        default:
            fprintf(stderr, "igen topo: see 'igen topo --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("topo", argc, argv)) return IG_EXIT_ERROR;
    if (xml && synthetic) {
        fprintf(stderr, "igen topo: --xml and --synthetic exclude each other\n");
        return IG_EXIT_ERROR;
    }
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = xml         ? ig_topo_load_xml(xml, &t, &err)
                   : synthetic ? ig_topo_load_synthetic(synthetic, &t, &err)
                               : ig_topo_discover(&t, &err);
    if (rc != IG_OK) {
        ig_cli_error("topo", &err);
        return IG_EXIT_ERROR;
    }
    if (json) {
        json_object *o = ig_topo_to_json(t);
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        ig_topo_print(t, stdout);
    }
    ig_topo_free(t);
    return 0;
}
