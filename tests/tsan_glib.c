/* ThreadSanitizer annotations for GLib's locks (linked into the TSan build of
 * test_gst_concurrent only, #46.8). GLib and GStreamer are not instrumented, and GMutex,
 * GRecMutex and GCond are futexes TSan cannot see: every access our code makes under
 * GST_OBJECT_LOCK or a pad's stream lock would look unsynchronised. These wrappers
 * interpose the GLib calls (the executable exports them: -rdynamic), call the real ones
 * and tell TSan that the lock was acquired or released, so that only real races in src/
 * and gst/ remain to be reported (tests/tsan.supp drops those inside GLib/GStreamer). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <glib.h>

void __tsan_acquire (void *addr);
void __tsan_release (void *addr);

#define REAL(ret, name, ...) \
  static ret (*real) (__VA_ARGS__); \
  if (real == NULL) \
  real = (ret (*) (__VA_ARGS__)) dlsym (RTLD_NEXT, name)

void
g_mutex_lock (GMutex *m)
{
  REAL (void, "g_mutex_lock", GMutex *);
  real (m);
  __tsan_acquire (m);
}

gboolean
g_mutex_trylock (GMutex *m)
{
  REAL (gboolean, "g_mutex_trylock", GMutex *);
  gboolean ok = real (m);
  if (ok)
    __tsan_acquire (m);
  return ok;
}

void
g_mutex_unlock (GMutex *m)
{
  REAL (void, "g_mutex_unlock", GMutex *);
  __tsan_release (m);
  real (m);
}

void
g_rec_mutex_lock (GRecMutex *m)
{
  REAL (void, "g_rec_mutex_lock", GRecMutex *);
  real (m);
  __tsan_acquire (m);
}

gboolean
g_rec_mutex_trylock (GRecMutex *m)
{
  REAL (gboolean, "g_rec_mutex_trylock", GRecMutex *);
  gboolean ok = real (m);
  if (ok)
    __tsan_acquire (m);
  return ok;
}

void
g_rec_mutex_unlock (GRecMutex *m)
{
  REAL (void, "g_rec_mutex_unlock", GRecMutex *);
  __tsan_release (m);
  real (m);
}

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
