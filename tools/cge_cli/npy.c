/* .npy reading and writing for every dtype cge has (numpy format 1.0-3.0,
 * little-endian, C order). bfloat16 has no numpy dtype: it travels as '<u2'
 * holding its bits, as in the Python package. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "cli.h"

static const struct {
    cge_dtype t;
    const char *descr;
} descrs[] = {
    {CGE_F32, "<f4"}, {CGE_F64, "<f8"}, {CGE_F16, "<f2"}, {CGE_BF16, "<u2"},
    {CGE_I8, "|i1"},  {CGE_I16, "<i2"}, {CGE_I32, "<i4"}, {CGE_I64, "<i8"},
    {CGE_U8, "|u1"},  {CGE_U16, "<u2"}, {CGE_U32, "<u4"}, {CGE_U64, "<u8"},
    {CGE_BOOL, "|b1"},
};
#define NUM_DESCRS (sizeof descrs / sizeof descrs[0])

const char *cli_npy_descr(cge_dtype d)
{
    for (size_t i = 0; i < NUM_DESCRS; i++)
        if (descrs[i].t == d)
            return descrs[i].descr;
    return NULL;
}

/* The dtype of a descr ("<f4", "=f4", "|u1", "i1"); UNDEFINED if unknown,
 * *big set for big-endian ones. */
static cge_dtype from_descr(const char *d, bool *big)
{
    *big = d[0] == '>';
    char norm[8];
    const char *body = (d[0] == '<' || d[0] == '>' || d[0] == '=' || d[0] == '|') ? d + 1 : d;
    if (strlen(body) > 4)
        return CGE_DTYPE_UNDEFINED;
    for (size_t i = 0; i < NUM_DESCRS; i++) {
        snprintf(norm, sizeof norm, "%s", descrs[i].descr + 1);
        if (!strcmp(norm, body) && descrs[i].t != CGE_BF16)
            return descrs[i].t;
    }
    return CGE_DTYPE_UNDEFINED;
}

static cge_status io_err(const char *path, const char *fmt, const char *detail)
{
    return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: %s%s", path, fmt, detail ? detail : "");
}

/* Value of key `key` in the header dict: points just after "'key':". */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

cge_status cli_npy_read(const char *path, cge_tensor *t)
{
    memset(t, 0, sizeof *t);
    const char *why = NULL;
    FILE *f = cge__fopen_regular(path, NULL, &why);
    if (!f)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot open: %s", path, why);
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);
    cge_status st = CGE_OK;
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6)) {
        fclose(f);
        return io_err(path, "not a .npy file (no \\x93NUMPY magic)", NULL);
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            fclose(f);
            return io_err(path, "truncated .npy header", NULL);
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        fclose(f);
        char v[32];
        snprintf(v, sizeof v, "%d", pre[6]);
        return io_err(path, "unsupported .npy format version ", v);
    }
    if (hlen > (1u << 20)) {
        fclose(f);
        return io_err(path, ".npy header is implausibly long", NULL);
    }
    char *hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
        free(hdr);
        fclose(f);
        return io_err(path, "truncated .npy header", NULL);
    }
    hdr[hlen] = '\0';
    const char *descr = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"),
               *shp = dict_value(hdr, "shape");
    char dbuf[16] = "";
    if (!descr || !fo || !shp || (descr[0] != '\'' && descr[0] != '"'))
        st = io_err(path, "the .npy header lacks descr, fortran_order or shape", NULL);
    if (!st) {
        size_t n = strcspn(descr + 1, "'\"");
        if (n >= sizeof dbuf)
            st = io_err(path, "unsupported .npy dtype (structured or too long)", NULL);
        else
            memcpy(dbuf, descr + 1, n);
    }
    bool big = false;
    if (!st) {
        t->dtype = from_descr(dbuf, &big);
        if (t->dtype == CGE_DTYPE_UNDEFINED)
            st = io_err(path, "unsupported .npy dtype ", dbuf);
        else if (big)
            st = io_err(path, "big-endian .npy data is not supported: ", dbuf);
        else if (!strncmp(fo, "True", 4))
            st = io_err(path, "Fortran-order .npy data is not supported (save a C-contiguous "
                              "array)", NULL);
    }
    if (!st) {
        if (*shp != '(')
            st = io_err(path, "malformed .npy shape", NULL);
        const char *p = shp + 1;
        t->shape.rank = 0;
        while (!st && *p && *p != ')') {
            while (*p == ' ' || *p == ',')
                p++;
            if (*p == ')')
                break;
            char *end;
            errno = 0;
            long long d = strtoll(p, &end, 10);
            if (end == p || d < 0 || errno)
                st = io_err(path, "malformed .npy shape", NULL);
            else if (t->shape.rank >= CGE_MAX_RANK)
                st = io_err(path, ".npy rank is above cge's limit of 8", NULL);
            else
                t->shape.dims[t->shape.rank++] = d;
            p = end;
            while (*p == 'L')
                p++;
        }
        if (!st && *p != ')')
            st = io_err(path, "malformed .npy shape", NULL);
    }
    free(hdr);
    if (!st) {
        size_t need = cge_tensor_nbytes(t->dtype, &t->shape);
        long here = ftell(f);
        fseek(f, 0, SEEK_END);
        long end = ftell(f);
        fseek(f, here, SEEK_SET);
        if (need == SIZE_MAX || end < here || (size_t)(end - here) != need) {
            char d[96];
            snprintf(d, sizeof d, "%ld bytes of data; its shape needs %zu",
                     end >= here ? end - here : 0L, need);
            st = io_err(path, "holds ", d);
        }
        t->data = st ? NULL : malloc(need + 1);
        if (!st && !t->data)
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", path);
        if (!st && need && fread(t->data, 1, need, f) != need)
            st = io_err(path, "short read", NULL);
        t->bytes = need;
    }
    fclose(f);
    if (st) {
        free(t->data);
        t->data = NULL;
    }
    return st;
}

cge_status cli_npy_write(const char *path, const cge_tensor *t)
{
    const char *descr = cli_npy_descr(t->dtype);
    if (!descr)
        return cge_error(CGE_LAYER_IO, CGE_ERR_DTYPE, "%s: dtype %s has no .npy form", path,
                         cge_dtype_name(t->dtype));
    char dict[512];
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int32_t i = 0; i < t->shape.rank; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)t->shape.dims[i],
                      i + 1 < t->shape.rank ? " " : "");
    if (t->shape.rank > 1)
        k--;   /* numpy writes (2, 3) but (3,) */
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    /* Pad with spaces so that the data starts at a multiple of 64. */
    size_t total = 10 + (size_t)k + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    size_t hlen = (size_t)k + pad + 1;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    FILE *f = fopen(path, "wb");
    if (!f)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)k, f) == (size_t)k;
    for (size_t i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t nb = cge_tensor_nbytes(t->dtype, &t->shape);
    ok = ok && (!nb || fwrite(t->data, 1, nb, f) == nb);
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return CGE_OK;
}
