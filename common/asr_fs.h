/* asr_fs.h -- file-system helpers. */
#ifndef ASR_FS_H
#define ASR_FS_H

#include <stddef.h>

/* Removes dir and everything under it, without following symbolic links;
 * what cannot be removed is left (best effort). */
void asr_rm_tree(const char *dir);

/* Reads the whole of path (a regular file, a pipe, anything read(2) reads to
 * its end) into a malloc'd buffer with a NUL byte added after the data.
 * Called by the readers of settings files, hostfiles and node files, which
 * then parse from memory, so that one parser serves both a file and a buffer
 * (the fuzz targets hand it buffers). max bounds what is read: a file of more
 * than max bytes (/dev/zero, a runaway generator) fails rather than taking
 * all memory.
 *
 * Returns 0 with *out (the caller frees it) and *len (the bytes read, the
 * added NUL not counted); or ASR_ETOOBIG when the file holds more than max
 * bytes, ASR_ENOMEM, or the ASR_E* of the errno that open(2) or read(2) failed
 * with (ASR_ENOENT for a missing file). On failure errno holds the cause, for
 * the caller's message (EISDIR for a directory, EFBIG for ASR_ETOOBIG), and
 * *out and *len are left alone. */
int asr_fs_read_file(const char *path, size_t max, char **out, size_t *len);

#endif /* ASR_FS_H */
