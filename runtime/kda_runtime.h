/*
 * kda runtime: loads an ahead-of-time kernel bundle (runtime/BUNDLE.md) and
 * launches its kernels through the GPU driver API.
 *
 * The header is plain C (C99) so that any language with a C FFI (ctypes,
 * Rust, Go, ...) can bind it. The library needs neither MLIR nor the CUDA/HIP
 * toolkits: the driver (libcuda.so.1 / libamdhip64.so) is dlopen'ed on the
 * first launch, so a machine without a GPU can load and check bundles and gets
 * KDA_ERROR_NO_DRIVER, never a crash, when it tries to launch.
 *
 * Errors: every function except kda_bundle_free, kda_prepared_free,
 * kda_pieces_count, kda_pieces_free, kda_last_error and kda_status_name sets a thread-local message, read with
 * kda_last_error(): "" after a success, otherwise a sentence naming exactly what was wrong (the
 * tensor and dimension with the expected and found values, the manifest file,
 * line, column and field, the driver call and its error name). No function
 * aborts on bad input.
 *
 * Environment: KDA_CUDA_LIBRARY / KDA_HIP_LIBRARY name the driver library to
 * dlopen instead of libcuda.so.1 / libamdhip64.so.
 *
 * Threads: a bundle may be used from several threads at once (kernels are
 * loaded under a lock); kda_bundle_free must not race with other calls on the
 * same bundle.
 */
#ifndef KDA_RUNTIME_H
#define KDA_RUNTIME_H

#include <stdint.h>

#if defined(KDA_RUNTIME_BUILDING)
#define KDA_API __attribute__((visibility("default")))
#else
#define KDA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KDA_OK = 0,
  KDA_ERROR_INVALID_ARGUMENT, /* NULL where a value is needed, wrong tensor
                                 count, ... */
  KDA_ERROR_NO_DRIVER, /* libcuda.so.1 / libamdhip64.so missing, too old or
                          failing to initialise */
  KDA_ERROR_NO_DEVICE, /* the driver sees no device, or not the requested
                          ordinal */
  KDA_ERROR_WRONG_ARCHITECTURE, /* the bundle's chip cannot run on the device */
  KDA_ERROR_CORRUPT_BUNDLE, /* manifest.json or a binary is missing, malformed
                               or inconsistent */
  KDA_ERROR_NOT_FOUND,      /* no kernel or entry of that name in the bundle */
  KDA_ERROR_BAD_TENSOR,     /* a tensor does not match the kernel's parameter */
  KDA_ERROR_LAUNCH_FAILED /* a driver call failed while loading or launching */
} kda_status;

typedef enum { KDA_F32, KDA_F16, KDA_BF16, KDA_I32, KDA_I64 } kda_dtype;

/* A tensor argument, described like DLPack: the runtime reads it, never owns
 * it. */
typedef struct {
  void *data; /* first element */
  kda_dtype dtype;
  int32_t rank;
  const int64_t *shape;   /* rank entries (may be NULL when rank == 0) */
  const int64_t *strides; /* in elements; NULL = contiguous row-major */
  int32_t device;         /* CUDA/HIP device ordinal, -1 = host memory */
} kda_tensor;

typedef struct kda_bundle kda_bundle;

/* Parses and validates directory/manifest.json and reads every binary it names.
 * Needs no driver. On failure *out is set to NULL. */
KDA_API kda_status kda_bundle_load(const char *directory, kda_bundle **out);
/* Unloads the bundle's modules from every device they were loaded on. NULL is a
 * no-op. */
KDA_API void kda_bundle_free(kda_bundle *bundle);

/* -1 for a NULL bundle. */
KDA_API int32_t kda_bundle_num_kernels(const kda_bundle *bundle);
/* NULL for a NULL bundle or an index out of range (kda_last_error says which).
 * The string lives as long as the bundle. */
KDA_API const char *kda_bundle_kernel_name(const kda_bundle *bundle, int32_t i);
/* "sm_90a", "gfx942", ...; NULL for a NULL bundle. Lives as long as the bundle.
 */
KDA_API const char *kda_bundle_target_chip(const kda_bundle *bundle);

/* Entries (manifest version 2, runtime/BUNDLE.md "Entries"): one callable
 * made of several kernels launched in order on one stream, passing
 * intermediates through workspaces the runtime allocates per call. Every
 * function below that takes a kernel name also takes an entry name; the
 * tensors are then the entry's `params`, in order. */

/* The number of entries (0 for a version 1 bundle); -1 for a NULL bundle. */
KDA_API int32_t kda_bundle_num_entries(const kda_bundle *bundle);
/* NULL for a NULL bundle or an index out of range (kda_last_error says which).
 * The string lives as long as the bundle. */
KDA_API const char *kda_bundle_entry_name(const kda_bundle *bundle, int32_t i);

/* Checks `tensors` (one per `tensor` parameter of `kernel`, in order) against
 * the manifest: rank, dtype, fixed dimensions, symbol binding, contiguity,
 * alignment, and that all are device memory on one device. Needs no driver. */
KDA_API kda_status kda_check_tensors(const kda_bundle *bundle,
                                     const char *kernel,
                                     const kda_tensor *tensors,
                                     int32_t num_tensors);

/* kda_check_tensors, then asks the driver that every pointer is device memory
 * on the tensor's device, loads the kernel's module on that device on first
 * use and launches it on `stream` (a CUstream / hipStream_t of that device;
 * NULL = the legacy default stream). Asynchronous like any kernel launch: a
 * fault inside the kernel shows up at the caller's next synchronisation.
 * A grid with a zero dimension (e.g. an empty batch) launches nothing and
 * returns KDA_OK. */
KDA_API kda_status kda_launch(kda_bundle *bundle, const char *kernel,
                              const kda_tensor *tensors, int32_t num_tensors,
                              void *stream);

/* For an entry, kda_launch also: computes each workspace's size from the
 * symbols the tensors bind, allocates all of them as one stream-ordered
 * allocation on `stream` (cuMemAllocAsync / hipMallocAsync; each workspace at
 * an offset rounded up to its alignment, nothing allocated for 0 bytes),
 * launches the entry's kernels in order on `stream`, and frees the allocation
 * on `stream` (cuMemFreeAsync / hipFreeAsync), also when a launch fails; the
 * message then names the launch that failed. Capturable into a CUDA graph. */

/* The bytes of workspace `entry` needs for these tensors (checked as by
 * kda_check_tensors); 0 for a kernel name. Needs no driver. *bytes is 0 on
 * failure. */
KDA_API kda_status kda_entry_workspace_bytes(const kda_bundle *bundle,
                                             const char *entry,
                                             const kda_tensor *tensors,
                                             int32_t num_tensors,
                                             uint64_t *bytes);

/* kda_launch with caller-owned workspace memory: `workspace` (device memory
 * of the tensors' device, aligned to 256 bytes or to the largest alignment a
 * workspace declares) must hold at least kda_entry_workspace_bytes bytes;
 * a smaller `workspace_bytes`, a NULL or misaligned pointer is
 * KDA_ERROR_INVALID_ARGUMENT. The runtime allocates and frees nothing; the
 * memory must stay valid until the launches on `stream` finish. For a kernel
 * name the workspace is ignored. */
KDA_API kda_status kda_launch_with_workspace(kda_bundle *bundle,
                                             const char *name,
                                             const kda_tensor *tensors,
                                             int32_t num_tensors,
                                             void *workspace,
                                             uint64_t workspace_bytes,
                                             void *stream);

/* kda_launch_with_workspace for tensors a framework vouches for: the caller
 * guarantees that every data pointer (and the workspace) is device memory of
 * the tensor's device holding the whole tensor, as PyTorch's CUDA tensors
 * are. The runtime then skips asking the driver about each pointer (one
 * cuPointerGetAttributes per tensor, about half the C side of a launch);
 * every other check of kda_launch_with_workspace stays. A workspace of NULL
 * and 0 bytes is fine for a kernel name or an entry that needs none. */
KDA_API kda_status kda_launch_trusted(kda_bundle *bundle, const char *name,
                                      const kda_tensor *tensors,
                                      int32_t num_tensors, void *workspace,
                                      uint64_t workspace_bytes, void *stream);

/* Prepared launches: the per-call path of repeated launches of one name with
 * tensors of the same shapes, dtypes, strides and device (a framework's
 * planned calls, a decode loop). kda_prepare does, once, everything of
 * kda_launch_trusted that does not depend on the data pointers: it checks
 * `tensors` against the manifest (their data pointers too, as samples:
 * non-NULL and aligned), binds the symbols, lays out the workspaces, checks
 * the device and loads the modules (the device is made current for that and
 * restored), packs every kernel's arguments, and launches nothing. On success
 * *out is a handle (NULL on failure) and *workspace_bytes, when not NULL,
 * what kda_entry_workspace_bytes says (0 for a kernel name). The bundle must
 * outlive the handle. */
typedef struct kda_prepared kda_prepared;
KDA_API kda_status kda_prepare(kda_bundle *bundle, const char *name,
                               const kda_tensor *tensors, int32_t num_tensors,
                               kda_prepared **out, uint64_t *workspace_bytes);

/* kda_launch_trusted of the prepared tensors with new data pointers: `data`
 * holds one per tensor, in order (`num_data` of them, as prepared). Checks
 * that every non-empty tensor's pointer is non-NULL and aligned, and the
 * workspace as kda_launch_with_workspace does (size, NULL, alignment; for an
 * entry; ignored for a kernel); the caller vouches for the rest, as for
 * kda_launch_trusted: each pointer is device memory of the prepared device
 * holding the whole tensor. Then makes the device current, launches every
 * kernel on `stream` and restores the caller's context. Capturable into a
 * CUDA graph (the runtime allocates nothing). A handle must not be launched
 * from two threads at once (it keeps the packed arguments it updates). */
KDA_API kda_status kda_launch_prepared(kda_prepared *prepared,
                                       void *const *data, int32_t num_data,
                                       void *workspace,
                                       uint64_t workspace_bytes, void *stream);

/* Frees a handle of kda_prepare (never the bundle's modules). NULL is a
 * no-op. */
KDA_API void kda_prepared_free(kda_prepared *prepared);

/* Pipelined pieces (docs/pipelining.md): one sequence's entry run as pieces
 * of its tokens, so that the state pass of piece i runs beside the
 * chunk-parallel launch of piece i + 1. The entry must launch two kernels (a
 * chunk-parallel one that does not read the initial state, then the state
 * pass), or three where the third follows the state pass over earlier keys
 * (a layer's window: its kernel's manifest says "at_least" [S, T]), and take
 * tensors named initial_state and final_state of one dtype and size; every
 * tensor with the token dimension T has extent 1 before it (one sequence).
 * Piece i covers tokens [starts[i], starts[i + 1]) (the last up to T);
 * starts[0] = 0 and they strictly increase below T; a tensor whose rows are
 * the follower's key rows S (at least T of them) is passed from row 0 through
 * the piece's last token. The state pass is exact across any split: outputs
 * equal the one-piece launch's bit for bit. The follower of piece i runs
 * after that piece's state pass, beside the later pieces' state passes:
 * eagerly on a second kept stream of the device's default priority (waiting
 * for an event after the state pass; `stream` joins it too), as one graph
 * (below) after that state node only.
 *
 * kda_prepare_pieces prepares every piece as kda_prepare would its view of
 * the tensors (each per-token tensor offset by the piece's first token, the
 * piece's own workspace region), and gets the driver's side stream (of the
 * device's greatest priority, created once per device and kept) and P + 1
 * events. *workspace_bytes: what each call's workspace must hold, the pieces'
 * workspaces and the P - 1 states passed between them.
 *
 * kda_launch_pieces: checks the pointers as kda_launch_prepared does (the
 * workspace aligned to 256 bytes), then for each piece launches the
 * chunk-parallel kernel on `stream`, records an event, makes the side stream
 * wait for it and launches the state pass there; finally `stream` waits for
 * the side stream (also after a failed launch). Capturable into a CUDA graph:
 * the side stream joins the capture through the events. A handle must not be
 * launched from two threads at once, nor while an earlier launch of it is
 * being captured on another stream.
 *
 * Where the driver has graphs (CUDA) the schedule runs as one CUDA graph,
 * built at the first launch whose stream is not capturing: the same
 * dependencies, the state passes at the greatest priority; each later launch
 * sets the nodes' arguments anew where the pointers changed and launches the
 * graph on `stream` (a capturing stream still gets the launches above).
 * Environment: KDA_PIECES_GRAPH=0 (read by kda_prepare_pieces) launches the
 * pieces eagerly, as above, everywhere. KDA_PIECES_ALONE=1 (an experiment,
 * read there too) gives each state pass whose grid is at most half the
 * device's multiprocessors the dynamic shared memory an `alone` launch takes
 * (runtime/BUNDLE.md), so that no other block shares a multiprocessor with
 * its blocks. */
typedef struct kda_pieces kda_pieces;
KDA_API kda_status kda_prepare_pieces(kda_bundle *bundle, const char *entry,
                                      const kda_tensor *tensors,
                                      int32_t num_tensors,
                                      const int64_t *starts,
                                      int32_t num_pieces, kda_pieces **out,
                                      uint64_t *workspace_bytes);
KDA_API kda_status kda_launch_pieces(kda_pieces *pieces, void *const *data,
                                     int32_t num_data, void *workspace,
                                     uint64_t workspace_bytes, void *stream);
/* The number of pieces; -1 for NULL. */
KDA_API int32_t kda_pieces_count(const kda_pieces *pieces);
/* Frees a handle of kda_prepare_pieces and its events (never the side
 * stream). NULL is a no-op. */
KDA_API void kda_pieces_free(kda_pieces *pieces);

/* The message of this thread's last kda_status-returning call ("" after a
 * success). Valid until the thread's next call into the runtime. Never NULL. */
KDA_API const char *kda_last_error(void);

/* "KDA_ERROR_BAD_TENSOR", ... ("KDA_STATUS_UNKNOWN" for values outside the
 * enum). */
KDA_API const char *kda_status_name(kda_status status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KDA_RUNTIME_H */
