/* Opening files that must be regular files (models, external data, inputs):
 * a FIFO, a device or a folder is refused at once, never waited on. */
#ifndef CGE_BASE_FILE_H
#define CGE_BASE_FILE_H

#include <stddef.h>
#include <stdio.h>

/* A blocking read-only descriptor of the regular file at `path` (its size
 * in *size), or -1 with *why set ("is a FIFO, not a regular file",
 * strerror(errno), ...). The open itself never blocks: it is made with
 * O_NONBLOCK, which a FIFO without a writer would otherwise wait in. */
int cge__open_regular(const char *path, size_t *size, const char **why);
/* The same as a stdio stream ("rb"), or NULL with *why set. */
FILE *cge__fopen_regular(const char *path, size_t *size, const char **why);

#endif
