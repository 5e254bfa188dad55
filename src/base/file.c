/* cge__open_regular and cge__fopen_regular: read-only opens of regular files
 * that refuse FIFOs, devices and folders instead of blocking on them. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "is a directory";
    if (S_ISFIFO(m))
        return "is a FIFO, not a regular file";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "is a device, not a regular file";
    if (S_ISSOCK(m))
        return "is a socket, not a regular file";
    return "is not a regular file";
}

int cge__open_regular(const char *path, size_t *size, const char **why)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        *why = kind_of(sb.st_mode);
        close(fd);
        return -1;
    }
    /* Regular files ignore O_NONBLOCK; clear it so that reads behave as
     * any caller expects. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size)
        *size = (size_t)sb.st_size;
    return fd;
}

FILE *cge__fopen_regular(const char *path, size_t *size, const char **why)
{
    int fd = cge__open_regular(path, size, why);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
}
