/*
 * The C API from C: compiled as C99 with -pedantic-errors and linked against
 * libkda_runtime.so, so it proves that kda_runtime.h is C and that the shared
 * library exports what it declares. Writes a small bundle to a temporary
 * directory, loads it, checks tensors and takes the no-driver path.
 */
#define _POSIX_C_SOURCE 200809L

#include "runtime/kda_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,  \
              __LINE__, #cond, kda_last_error());                              \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static int write_file(const char *dir, const char *name, const void *data,
                      size_t size) {
  char path[4096];
  FILE *f;
  size_t written;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (!f)
    return 0;
  written = fwrite(data, 1, size, f);
  return fclose(f) == 0 && written == size;
}

static void remove_file(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  unlink(path);
}

static const char manifest[] =
    "{\"format\": \"kda-bundle\", \"version\": 1,\n"
    " \"target\": {\"vendor\": \"nvidia\", \"chip\": \"sm_80\"},\n"
    " \"source_hash\": "
    "\"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\",\n"
    " \"kernels\": [{\"name\": \"scale\", \"binary\": \"scale.cubin\", "
    "\"entry\": \"scale\",\n"
    "   \"params\": [{\"name\": \"x\", \"kind\": \"tensor\", \"dtype\": "
    "\"f32\", \"shape\": [\"N\", 8]},\n"
    "              {\"name\": \"N\", \"kind\": \"dim\"}],\n"
    "   \"grid\": [\"N\", 1, 1], \"block\": [8, 1, 1]}]}\n";

int main(void) {
  char dir[] = "/tmp/kda-capi-smoke-XXXXXX";
  unsigned char cubin[80];
  kda_bundle *bundle = NULL;
  float data[4 * 8];
  int64_t shape[2] = {4, 8};
  kda_tensor x;

  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  /* A 64-bit little-endian ELF header for EM_CUDA (190); loading never runs it.
   */
  memset(cubin, 0, sizeof cubin);
  memcpy(cubin, "\177ELF\002\001\001", 7);
  cubin[18] = 190;
  if (!write_file(dir, "manifest.json", manifest, strlen(manifest)) ||
      !write_file(dir, "scale.cubin", cubin, sizeof cubin)) {
    perror("writing the bundle");
    return 1;
  }

  CHECK(kda_bundle_load(dir, &bundle) == KDA_OK);
  CHECK(bundle != NULL);
  if (bundle) {
    CHECK(kda_bundle_num_kernels(bundle) == 1);
    CHECK(strcmp(kda_bundle_kernel_name(bundle, 0), "scale") == 0);
    CHECK(kda_bundle_kernel_name(bundle, 1) == NULL);
    CHECK(strcmp(kda_bundle_target_chip(bundle), "sm_80") == 0);
    CHECK(kda_bundle_num_entries(bundle) == 0); /* a version 1 bundle */
    CHECK(kda_bundle_entry_name(bundle, 0) == NULL);

    x.data = data;
    x.dtype = KDA_F32;
    x.rank = 2;
    x.shape = shape;
    x.strides = NULL;
    x.device = 0;
    CHECK(kda_check_tensors(bundle, "scale", &x, 1) == KDA_OK);
    CHECK(strcmp(kda_last_error(), "") == 0);
    {
      uint64_t bytes = 1;
      CHECK(kda_entry_workspace_bytes(bundle, "scale", &x, 1, &bytes) ==
            KDA_OK);
      CHECK(bytes == 0); /* a kernel needs no workspace */
    }

    x.dtype = KDA_F16;
    CHECK(kda_check_tensors(bundle, "scale", &x, 1) == KDA_ERROR_BAD_TENSOR);
    printf("bad dtype: %s: %s\n", kda_status_name(KDA_ERROR_BAD_TENSOR),
           kda_last_error());
    x.dtype = KDA_F32;

    CHECK(kda_check_tensors(bundle, "missing", &x, 1) == KDA_ERROR_NOT_FOUND);

    /* C may put any int in an enum; the runtime must cope. */
    CHECK(strcmp(kda_status_name((kda_status)99), "KDA_STATUS_UNKNOWN") == 0);
    {
      int not_a_dtype = 17;
      memcpy(&x.dtype, &not_a_dtype, sizeof not_a_dtype);
      CHECK(kda_check_tensors(bundle, "scale", &x, 1) == KDA_ERROR_BAD_TENSOR);
      CHECK(strstr(kda_last_error(),
                   "has dtype 17, which is not a kda_dtype") != NULL);
      x.dtype = KDA_F32;
    }

    /* No driver: a clear status, not a crash. */
    setenv("KDA_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    CHECK(kda_launch(bundle, "scale", &x, 1, NULL) == KDA_ERROR_NO_DRIVER);
    CHECK(kda_launch_with_workspace(bundle, "scale", &x, 1, NULL, 0, NULL) ==
          KDA_ERROR_NO_DRIVER);
    CHECK(strstr(kda_last_error(), "/nonexistent/libcuda.so.1") != NULL);
    printf("launch without a driver: %s\n", kda_last_error());
    kda_bundle_free(bundle);
  }

  remove_file(dir, "manifest.json");
  remove_file(dir, "scale.cubin");
  rmdir(dir);
  if (failures) {
    fprintf(stderr, "capi_smoke: %d check(s) failed\n", failures);
    return 1;
  }
  printf("capi_smoke: ok\n");
  return 0;
}
