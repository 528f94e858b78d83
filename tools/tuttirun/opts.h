/* Shared by the command line's parser (opts.c) and its value readers
 * (opts_util.c). */
#ifndef TUTTIRUN_OPTS_H
#define TUTTIRUN_OPTS_H

#include <stddef.h>

/* The message and the usage on stderr, exit 2. */
void tr_usage_error(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void tr_note(const char* fmt, ...) __attribute__((format(printf, 1, 2))); /* "tuttirun: note: " */
int tr_parse_int(const char* flag, const char* s, int lo, int hi);
double tr_parse_seconds(const char* flag, const char* s, double lo, double hi);
void tr_copy_arg(char* dst, size_t cap, const char* flag, const char* v);
/* host[:port]; host may be "[v6]" (the brackets dropped); *port kept if none. */
void tr_parse_endpoint(const char* flag, const char* s, char* host, size_t cap, int* port);
/* torchrun's Std.from_str: "0".."3" for every local rank, or "i:v,j:w". */
void tr_parse_std(const char* flag, const char* s, unsigned char* per_rank, int n);
/* torchrun's determine_local_world_size: a number, gpu, cpu or auto. */
int tr_local_world_size(const char* v);
const char* tr_find_python(void); /* $PYTHON_EXEC, else python3 on PATH */
/* A target tuttirun hands to Python: a .py/.pyc/.pyz file, or a file that
 * exists but is not executable. */
int tr_is_python_target(const char* t);

#endif
