/* ThreadSanitizer annotations for GLib's locks (linked into the TSan build of
 * test_gst_concurrent only, #46.8). GLib and GStreamer are not instrumented, and GMutex,
 * GRecMutex and GCond are futexes TSan cannot see: every access our code makes under
 * GST_OBJECT_LOCK or a pad's stream lock would look unsynchronised. These wrappers
 * interpose the GLib calls (the executable exports them: -rdynamic), call the real ones
 * and tell TSan that the lock was acquired or released, so that only real races in src/
 * and gst/ remain to be reported (tests/tsan.supp drops those inside GLib/GStreamer). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <glib.h>

void __tsan_acquire (void *addr);
void __tsan_release (void *addr);

#define REAL(ret, name, ...) \
  static ret (*real) (__VA_ARGS__); \
  if (real == NULL) \
  real = (ret (*) (__VA_ARGS__)) dlsym (RTLD_NEXT, name)

/* lock, trylock and unlock of one lock type, annotated */
#define ANNOTATE_LOCK(Type, prefix) \
  void prefix##_lock (Type *m) \
  { \
    REAL (void, #prefix "_lock", Type *); \
    real (m); \
    __tsan_acquire (m); \
  } \
  gboolean prefix##_trylock (Type *m) \
  { \
    REAL (gboolean, #prefix "_trylock", Type *); \
    gboolean ok = real (m); \
    if (ok) \
      __tsan_acquire (m); \
    return ok; \
  } \
  void prefix##_unlock (Type *m) \
  { \
    REAL (void, #prefix "_unlock", Type *); \
    __tsan_release (m); \
    real (m); \
  }

ANNOTATE_LOCK (GMutex, g_mutex)
ANNOTATE_LOCK (GRecMutex, g_rec_mutex)

/* A wait releases the mutex and takes it back; whoever signalled released theirs. */
void
g_cond_wait (GCond *c, GMutex *m)
{
  REAL (void, "g_cond_wait", GCond *, GMutex *);
  __tsan_release (m);
  real (c, m);
  __tsan_acquire (m);
  __tsan_acquire (c);
}

gboolean
g_cond_wait_until (GCond *c, GMutex *m, gint64 end_time)
{
  REAL (gboolean, "g_cond_wait_until", GCond *, GMutex *, gint64);
  __tsan_release (m);
  gboolean ok = real (c, m, end_time);
  __tsan_acquire (m);
  __tsan_acquire (c);
  return ok;
}

void
g_cond_signal (GCond *c)
{
  REAL (void, "g_cond_signal", GCond *);
  __tsan_release (c);
  real (c);
}

void
g_cond_broadcast (GCond *c)
{
  REAL (void, "g_cond_broadcast", GCond *);
  __tsan_release (c);
  real (c);
}
