/* One copy of a model file's weights per process (see include/cony/cnn.h, "Sharing").
 *
 * A registry maps a file's identity to its loaded CnnWeights; cony_cnn_load() of a
 * file already loaded (and unchanged since) takes one more user of those weights
 * instead of reading the file again. Every ConyCnn keeps its own scratch and
 * settings; the weights are read-only after loading but for the forms derived on
 * first use, which each layer makes once under the weights' own lock.
 *
 * The key is the canonical path plus the file's device, inode, size and
 * modification time (nanoseconds): a file rewritten in place (new mtime, usually a
 * new size) or replaced by a rename (new inode) is a different key, so it is
 * loaded anew, while the weights of the old file stay with their users. A content
 * hash would also catch a rewrite that keeps the size and the mtime to the
 * nanosecond, but the loader computes none, and hashing every load would read the
 * whole file that sharing means not to read. The key is taken before and after
 * loading; a file that changed in between is loaded but not registered. */
#include "cnn-private.h"

#include "cony/modelpath.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static GHashTable *registry; /* key -> CnnWeights (the key is the weights' own) */

/* The identity of the file at @path, or NULL where it cannot be taken (then the
 * load goes on unshared and reports the file's problem as usual). */
static char *
file_key (const char *path)
{
  char *real = realpath (path, NULL);
  struct stat sb;
  if (real == NULL || stat (real, &sb) != 0 || !S_ISREG (sb.st_mode)) {
    free (real);
    return NULL;
  }
  char *key = g_strdup_printf ("%s\n%ju:%ju:%jd:%jd.%09ld", real, (uintmax_t) sb.st_dev,
      (uintmax_t) sb.st_ino, (intmax_t) sb.st_size, (intmax_t) sb.st_mtim.tv_sec,
      (long) sb.st_mtim.tv_nsec);
  free (real);
  return key;
}

/* One more user of the registered weights under @key, or NULL. Registry locked. */
static CnnWeights *
lookup_locked (const char *key)
{
  CnnWeights *w = registry ? g_hash_table_lookup (registry, key) : NULL;
  if (w != NULL)
    w->users++;
  return w;
}

CnnWeights *
cnn_weights_acquire (const char *name, gboolean share, GError **error)
{
  /* The file a relative name finds (models installed, $CONY_MODEL_PATH): its key. */
  g_autofree char *path = cony_model_path_find (name, error);
  if (path == NULL)
    return NULL;
  g_autofree char *key = share ? file_key (path) : NULL;
  if (key != NULL) {
    pthread_mutex_lock (&registry_lock);
    CnnWeights *w = lookup_locked (key);
    pthread_mutex_unlock (&registry_lock);
    if (w != NULL)
      return w;
  }
  /* Loaded outside the lock: other files load meanwhile. Threads loading the same file
   * at the same moment each read it; the first to finish registers its copy and the
   * others drop theirs (a brief peak, then one copy). */
  CnnWeights *w = cnn_weights_load (path, error);
  if (w == NULL)
    return NULL;
  g_autofree char *after = key ? file_key (path) : NULL;
  if (key == NULL || g_strcmp0 (key, after) != 0)
    return w;
  pthread_mutex_lock (&registry_lock);
  CnnWeights *other = lookup_locked (key); /* another thread loaded it meanwhile */
  if (other == NULL) {
    if (registry == NULL)
      registry = g_hash_table_new (g_str_hash, g_str_equal);
    w->key = g_steal_pointer (&key);
    g_hash_table_insert (registry, w->key, w);
  }
  pthread_mutex_unlock (&registry_lock);
  if (other != NULL) {
    cnn_weights_free (w);
    return other;
  }
  return w;
}

/* Takes @w out of the registry (its users keep it). Registry locked. */
static void
unregister_locked (CnnWeights *w)
{
  if (w->key == NULL)
    return;
  g_hash_table_remove (registry, w->key);
  g_clear_pointer (&w->key, g_free);
  if (g_hash_table_size (registry) == 0)
    g_clear_pointer (&registry, g_hash_table_unref);
}

void
cnn_weights_release (CnnWeights *w)
{
  if (w == NULL)
    return;
  pthread_mutex_lock (&registry_lock);
  gboolean last = --w->users == 0;
  if (last)
    unregister_locked (w);
  pthread_mutex_unlock (&registry_lock);
  if (last)
    cnn_weights_free (w);
}

void
cnn_weights_make_private (ConyCnn *cnn)
{
  CnnWeights *w = cnn->w;
  pthread_mutex_lock (&registry_lock);
  gboolean alone = w->users == 1;
  if (alone)
    unregister_locked (w); /* a later load must not find the changed weights */
  pthread_mutex_unlock (&registry_lock);
  if (alone)
    return;
  cnn->w = cnn_weights_copy (w);
  if (cnn->pca_e == w->pca_e) {
    cnn->pca_e = cnn->w->pca_e;
    cnn->pca_mu = cnn->w->pca_mu;
  }
  cnn_weights_release (w);
}

/* ---------------------------------------------------------------- queries */

guint
cony_cnn_get_weights_users (const ConyCnn *cnn)
{
  g_return_val_if_fail (cnn != NULL, 0);
  pthread_mutex_lock (&registry_lock);
  guint n = (guint) cnn->w->users;
  pthread_mutex_unlock (&registry_lock);
  return n;
}

gboolean
cony_cnn_shares_weights (const ConyCnn *a, const ConyCnn *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  return a->w == b->w;
}
