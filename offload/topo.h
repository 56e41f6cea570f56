/* The machine's topology as the offloading core sees it: packages, NUMA nodes with their memory and
 * cores, and GPUs with the NUMA node they hang off. Discovered with hwloc (this machine) or loaded
 * from an hwloc XML file or a synthetic description (tests, planning for another machine). What is
 * extracted is fixed at load time; the accessors never allocate and never touch hwloc again. */
#ifndef IG_TOPO_H
#define IG_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "core/base/status.h"
#include "offload/placement.h"

typedef struct ig_topo ig_topo;

typedef enum ig_topo_source {
    IG_TOPO_SRC_THIS_SYSTEM = 0, /* ig_topo_discover */
    IG_TOPO_SRC_XML = 1,         /* ig_topo_load_xml */
    IG_TOPO_SRC_SYNTHETIC = 2,   /* ig_topo_load_synthetic */
} ig_topo_source;

/* One NUMA node. Cores and PUs count those whose cpuset lies inside the node's cpuset (a
 * memory-only node, e.g. CXL or HBM without CPUs, has 0 of both). */
typedef struct ig_topo_numa {
    int os_index;       /* the kernel's node number (what numactl and mbind use) */
    size_t local_bytes; /* memory of this node (hwloc's local_memory; 0 when unknown) */
    int n_cores;
    int n_pus;
    int package; /* logical index (0..n_packages-1) of the package it belongs to; -1 none */
} ig_topo_numa;

#define IG_TOPO_NAME_MAX   96
#define IG_TOPO_OSDEVS_MAX 96

/* One NVIDIA GPU. Found as an OS device `cudaN` under a PCI device; an NVIDIA display/3D
 * controller (PCI class 0x03xx, vendor 0x10de) without a cudaN OS device is listed too, with
 * cuda_index == -1 (hwloc was built without CUDA support, or the device is hidden from CUDA). */
typedef struct ig_topo_gpu {
    int cuda_index;                  /* N of cudaN; -1: found as a PCI device only */
    char name[IG_TOPO_NAME_MAX];     /* GPUModel of an OS device, else the PCI device name */
    char pci_bus_id[16];             /* "dddd:bb:dd.f"; "" when no PCI object (should not happen) */
    uint16_t pci_vendor, pci_device; /* 0x10de, model id */
    int numa;                        /* OS index of the NUMA node it hangs off; -1 unknown */
    size_t memory_bytes; /* from the cudaN OS device (CUDAGlobalMemorySize); 0 unknown */
    char os_devices[IG_TOPO_OSDEVS_MAX]; /* its GPU OS devices, comma-separated ("cuda0,nvml0") */
} ig_topo_gpu;

/* This machine, with I/O objects kept (PCI devices and OS devices such as cudaN, nvmlN, when
 * hwloc's plugins find them). */
ig_status ig_topo_discover(ig_topo **out, ig_error *err);
/* An hwloc XML export (lstopo foo.xml, hwloc 2.x format). A missing or unreadable file, a file that
 * is not XML, not an hwloc topology, or truncated: an error naming the path and which of these. */
/* The file is first loaded in a child process, killed after IG_TOPO_XML_PROBE_S seconds: hwloc's
 * XML importer crashes or hangs on some malformed files, which must end in an error, not take the
 * caller down. */
#define IG_TOPO_XML_PROBE_S 10
ig_status ig_topo_load_xml(const char *path, ig_topo **out, ig_error *err);
/* Which XML parser hwloc uses here, found by loading two small topologies: 1 its libxml2 importer
 * (reads any well-formed XML), 0 its minimal parser (reads only XML as hwloc writes it: no
 * comments; Debian ships the importer in libhwloc-plugins), -1 neither loaded. */
int ig_topo_xml_full_parser(void);
/* An hwloc synthetic description such as "pack:2 numa:1 core:4 pu:2" (no I/O objects, no GPUs).
 * A description hwloc rejects: an error quoting it (and the level type it does not know, if any).
 */
/* Most objects a synthetic description may ask for (its levels' counts multiplied, summed over the
 * levels): hwloc takes minutes for millions. */
#define IG_TOPO_MAX_SYNTHETIC_OBJECTS 16384
/* Most children of one object (a level's count): hwloc inserts siblings in time that grows with
 * the cube of their number (a flat "14400" took 27 s, found by tools/fuzz.sh topo); real machines
 * have at most a few hundred per level. */
#define IG_TOPO_MAX_SYNTHETIC_ARITY 1024
ig_status ig_topo_load_synthetic(const char *desc, ig_topo **out, ig_error *err);
void ig_topo_free(ig_topo *t);

ig_topo_source ig_topo_source_kind(const ig_topo *t);
/* "this system", the XML path, or the synthetic string. */
const char *ig_topo_source_desc(const ig_topo *t);
/* 1 if the topology describes the machine this process runs on (hwloc_topology_is_thissystem):
 * only then can memory be bound through it. XML and synthetic topologies are not. */
int ig_topo_is_this_system(const ig_topo *t);

int ig_topo_n_packages(const ig_topo *t);
int ig_topo_n_cores(const ig_topo *t);
int ig_topo_n_pus(const ig_topo *t);
/* NUMA nodes in logical order (0..n-1); ig_topo_numa_at(t, i)->os_index is the kernel's number. */
int ig_topo_n_numa(const ig_topo *t);
const ig_topo_numa *ig_topo_numa_at(const ig_topo *t, int i);
/* Logical index of the node with this OS index, -1 if there is none. */
int ig_topo_numa_find(const ig_topo *t, int os_index);
/* Sum of local_bytes over all nodes. */
size_t ig_topo_total_memory(const ig_topo *t);
/* Writes the nodes' OS indices as "0, 1, 2" into buf (for error messages). */
void ig_topo_numa_list(const ig_topo *t, char *buf, size_t n);

/* GPUs: CUDA devices first, in cudaN order, then PCI-only ones in PCI order. */
int ig_topo_n_gpus(const ig_topo *t);
const ig_topo_gpu *ig_topo_gpu_at(const ig_topo *t, int i);
/* Index of the GPU whose OS device is cudaN, -1 if none. */
int ig_topo_gpu_find_cuda(const ig_topo *t, int cuda_index);

/* Fills m's NUMA fields: n_numa, numa_os and numa_bytes (local memory of each node; at most
 * IG_MAX_NUMA nodes, the rest are dropped with a warning), and device_numa = the NUMA node of GPU
 * `gpu` (an index for ig_topo_gpu_at; -1 when that GPU's node is unknown). With gpu < 0, or a
 * topology without GPUs, device_numa is the first node (the CPU backend computes there by
 * default). device_bytes and disk_bytes are set to 0 for the caller to fill. Returns
 * IG_ERR_INVALID_ARG (m untouched) when gpu >= ig_topo_n_gpus(t) > 0. */
ig_status ig_topo_fill_machine(const ig_topo *t, int gpu, ig_machine *m);

/* A human table: source, packages, NUMA nodes (GiB, cores, PUs, package), GPUs (bus id, node). */
void ig_topo_print(const ig_topo *t, FILE *f);
/* A new json-c object (caller puts it): source, source_kind, this_system, packages, cores, pus,
 * numa_nodes: [{os_index, memory_bytes, cores, pus, package}], gpus: [{index, cuda_index, name,
 * pci_bus_id, numa, memory_bytes, os_devices}]. */
json_object *ig_topo_to_json(const ig_topo *t);

/* The underlying hwloc topology (for hostmem and tests that query binding); owned by t. */
struct hwloc_topology *ig_topo_hwloc(const ig_topo *t);

#endif
