/* asr_fs.h -- file-system helpers. */
#ifndef ASR_FS_H
#define ASR_FS_H

/* Removes dir and everything under it, without following symbolic links;
 * what cannot be removed is left (best effort). */
void asr_rm_tree(const char *dir);

#endif /* ASR_FS_H */
