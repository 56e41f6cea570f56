/* File mappings as heap copies, for the fuzz programs and the regression runner (linked with
 * -Wl,--wrap=mmap,--wrap=munmap): core/mapfile maps GGUF and safetensors files read-only, and a
 * real mapping hides a read past the end of the file up to the end of its page. A copy of exactly
 * the file's size lets AddressSanitizer see the first byte too far. Anything but a whole-file,
 * read-only, private file mapping goes to the real mmap. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *addr, size_t len);

#define MAX_COPIES 64

static struct {
    void *p;
    size_t len;
} g_copies[MAX_COPIES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (addr || fd < 0 || len == 0 || off != 0 || prot != PROT_READ || (flags & MAP_ANONYMOUS) ||
        (flags & (MAP_SHARED | MAP_PRIVATE)) != MAP_PRIVATE)
        return __real_mmap(addr, len, prot, flags, fd, off);
    void *p = NULL;
    if (posix_memalign(&p, 4096, len) != 0) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    for (size_t got = 0; got < len;) {
        ssize_t r = pread(fd, (char *)p + got, len - got, (off_t)got);
        if (r <= 0) {
            free(p);
            errno = r < 0 ? errno : EINVAL; /* shorter than asked: a real mapping would SIGBUS */
            return MAP_FAILED;
        }
        got += (size_t)r;
    }
    pthread_mutex_lock(&g_lock);
    int slot = -1;
    for (int i = 0; i < MAX_COPIES && slot < 0; i++)
        if (!g_copies[i].p) slot = i;
    if (slot >= 0) {
        g_copies[slot].p = p;
        g_copies[slot].len = len;
    }
    pthread_mutex_unlock(&g_lock);
    if (slot < 0) {
        free(p);
        return __real_mmap(addr, len, prot, flags, fd, off);
    }
    return p;
}

int __wrap_munmap(void *addr, size_t len) {
    pthread_mutex_lock(&g_lock);
    int slot = -1;
    for (int i = 0; i < MAX_COPIES && slot < 0; i++)
        if (g_copies[i].p && g_copies[i].p == addr) slot = i;
    size_t had = slot >= 0 ? g_copies[slot].len : 0;
    if (slot >= 0) g_copies[slot].p = NULL;
    pthread_mutex_unlock(&g_lock);
    if (slot < 0) return __real_munmap(addr, len);
    if (had != len) abort(); /* unmapping a copy with another length than it was mapped with */
    free(addr);
    return 0;
}
