// A diagnostic preload for the cuModuleLoadData SIGSEGV (docs/CUDA.md, "Open"): libcuda finds a
// per-thread allocator state through pthread_getspecific, and that state's free list is what is
// found damaged. Two ways another library could reach it: a pthread key deleted and handed out
// again (one library's stale key number then reads or writes another's per-thread value), or a
// library unloaded while something still points into it. Each switch removes one of those:
//   SHIM_NO_KEY_DELETE=1  pthread_key_delete does nothing, so no key number is ever reused
//   SHIM_NO_DLCLOSE=1     dlclose does nothing, so no library is ever unloaded
//   SHIM_TRACE=1          log every key create/delete and dlclose with the calling library
// If a crash disappears under one switch (and comes back without it), that is the mechanism.
//   gcc -O1 -g -shared -fPIC -o /tmp/lib_shim.so scripts/gpu_tools/lib_shim.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int on(const char* name) {
  const char* v = getenv(name);
  return v && v[0] == '1';
}

static const char* caller(void* addr) {
  Dl_info info;
  return dladdr(addr, &info) && info.dli_fname ? info.dli_fname : "?";
}

int pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  static int (*real)(pthread_key_t*, void (*)(void*));
  if (!real) real = (int (*)(pthread_key_t*, void (*)(void*)))dlsym(RTLD_NEXT, "pthread_key_create");
  int r = real(key, destructor);
  if (on("SHIM_TRACE"))
    fprintf(stderr, "shim: key_create %u by %s\n", r == 0 ? *key : ~0u,
            caller(__builtin_return_address(0)));
  return r;
}

int pthread_key_delete(pthread_key_t key) {
  static int (*real)(pthread_key_t);
  if (!real) real = (int (*)(pthread_key_t))dlsym(RTLD_NEXT, "pthread_key_delete");
  if (on("SHIM_TRACE"))
    fprintf(stderr, "shim: key_delete %u by %s%s\n", key, caller(__builtin_return_address(0)),
            on("SHIM_NO_KEY_DELETE") ? " (kept)" : "");
  return on("SHIM_NO_KEY_DELETE") ? 0 : real(key);
}

int dlclose(void* handle) {
  static int (*real)(void*);
  if (!real) real = (int (*)(void*))dlsym(RTLD_NEXT, "dlclose");
  if (on("SHIM_TRACE"))
    fprintf(stderr, "shim: dlclose %p by %s%s\n", handle, caller(__builtin_return_address(0)),
            on("SHIM_NO_DLCLOSE") ? " (kept loaded)" : "");
  return on("SHIM_NO_DLCLOSE") ? 0 : real(handle);
}
