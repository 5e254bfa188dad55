/* Paths that are not regular files — a FIFO with no writer, a folder,
 * /dev/zero — given as a .cgm, an .onnx or ONNX external data: each is an
 * [io] error at once. A FIFO used to block in open() forever (an alarm turns
 * such a hang into a failure here). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/file.h"
#include "cge/cge.h"

static char dir[256], fifo[300];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cge_special_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0)
        return -1;
    snprintf(fifo, sizeof fifo, "%s/model.fifo", dir);
    if (mkfifo(fifo, 0600) != 0)
        return -1;
    alarm(30);   /* a blocking open would hang the test; fail it instead */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    unlink(fifo);
    rmdir(dir);
    return 0;
}

static void expect_io_error(cge_status st, const char *what)
{
    assert_int_equal(st, CGE_ERR_IO);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_IO);
    if (!strstr(cge_last_error(), what))
        fail_msg("expected '%s' in: %s", what, cge_last_error());
}

static void test_helper_refuses_non_regular(void **state)
{
    (void)state;
    const char *why = NULL;
    size_t size = 0;
    assert_int_equal(cge__open_regular(fifo, &size, &why), -1);
    assert_string_equal(why, "is a FIFO, not a regular file");
    assert_null(cge__fopen_regular(dir, &size, &why));
    assert_string_equal(why, "is a directory");
    assert_null(cge__fopen_regular("/dev/zero", &size, &why));
    assert_non_null(strstr(why, "device"));
    assert_null(cge__fopen_regular("/nonexistent/x.onnx", &size, &why));
    assert_non_null(why);
}

static void test_model_load_refuses_fifo(void **state)
{
    (void)state;
    cge_model *m = NULL;
    expect_io_error(cge_model_load(fifo, NULL, &m), "FIFO");
    assert_null(m);
    expect_io_error(cge_model_load(dir, NULL, &m), "directory");
}

static void test_onnx_import_refuses_fifo(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    expect_io_error(cge_onnx_import_file(fifo, NULL, &g), "FIFO");
    assert_null(g);
    expect_io_error(cge_onnx_import_file("/dev/zero", NULL, &g), "device");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helper_refuses_non_regular),
        cmocka_unit_test(test_model_load_refuses_fifo),
        cmocka_unit_test(test_onnx_import_refuses_fifo),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
