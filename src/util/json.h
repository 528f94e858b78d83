/* JSON strings written and JSON text checked, in one place for the library
 * (RAS answers, flight records) and its tools (tutti-ras, tutti-perf): a
 * hostname, an error text or a peer's field goes into a document only
 * through this escaper. Needs nothing but libc, so tools compile it in. */
#ifndef TUTTI_UTIL_JSON_H
#define TUTTI_UTIL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Escapes up to n bytes of s as the inside of a JSON string (no quotes)
 * into out, NUL-terminated within cap bytes, whole escapes only: quotes,
 * backslashes and control characters escaped, bytes that are not UTF-8 as
 * U+FFFD. Returns the bytes written; *used (may be NULL) gets the bytes of s
 * they stand for, less than n when out was full. */
size_t tutti_json_escape(const char* s, size_t n, size_t* used, char* out, size_t cap);

/* s (NULL: null) as a quoted JSON string, to f. */
void tutti_json_fput(FILE* f, const char* s);

/* 1 when text[0..n) is exactly one JSON value (whitespace around it
 * allowed), with arrays and objects nested at most max_depth deep and
 * every string valid UTF-8; else 0. Linear in n, allocates nothing. */
int tutti_json_valid(const char* text, size_t n, int max_depth);

#endif
