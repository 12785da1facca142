/* Shared by the fuzz harnesses: libFuzzer's entry point, and the input handed to the
 * file-reading loaders as a path without touching the disk (a memfd). */
#pragma once
#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

typedef struct {
  int fd;
  char path[64];
} FuzzFile;

/* Writes @data to an anonymous in-memory file; its path is /proc/self/fd/N. Aborts when
 * the kernel refuses (the harness cannot run, not a finding). */
static inline void
fuzz_file_open (FuzzFile *f, const uint8_t *data, size_t size)
{
  f->fd = memfd_create ("fuzz-input", MFD_CLOEXEC);
  g_assert (f->fd >= 0);
  for (size_t done = 0; done < size;) {
    ssize_t w = write (f->fd, data + done, size - done);
    g_assert (w > 0);
    done += (size_t) w;
  }
  g_snprintf (f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

static inline void
fuzz_file_close (FuzzFile *f)
{
  close (f->fd);
}

/* A refused input must say why: an error without a message is a finding. With
 * FUZZ_VERBOSE=1 in the environment the message is printed (replaying a seed). */
static inline void
fuzz_check_error (GError *error)
{
  g_assert (error != NULL && error->message != NULL && error->message[0] != '\0');
  if (g_getenv ("FUZZ_VERBOSE"))
    fprintf (stderr, "refused: %s\n", error->message);
  g_error_free (error);
}

/* Keeps a value the harness computed from being optimised away (reads must happen). */
static inline void
fuzz_use (double v)
{
  volatile double sink = v;
  (void) sink;
}

/* GLib criticals and warnings (a failed g_return_if_fail in json-glib, say) are
 * findings too: they abort, as G_DEBUG=fatal-criticals makes them in the test suite,
 * but through abort() (SIGABRT), which libFuzzer catches and saves the input of, not
 * GLib's breakpoint trap. */
static void
fuzz_log_abort (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  g_log_default_handler (domain, level, message, data);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    abort ();
}

__attribute__ ((constructor)) static void
fuzz_fatal_criticals (void)
{
  g_log_set_default_handler (fuzz_log_abort, NULL);
}
