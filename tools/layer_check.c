/* The main of the igen_layer_check_<layer> programs (CMakeLists.txt): linked with one layer's
 * objects and those of the layers below it, it makes the linker resolve every function they call
 * within them. It is built, never run for a result. */
#include <stdio.h>

int main(void) {
    puts("igen layer link check: this layer and those below link alone");
    return 0;
}
