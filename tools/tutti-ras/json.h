/* A small JSON reader and writer: enough for RAS documents (docs/ras.md). */
#ifndef TUTTI_RAS_TOOL_JSON_H
#define TUTTI_RAS_TOOL_JSON_H

#include <stdio.h>

enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
  enum jt t;
  double num; /* J_NUM, J_BOOL (0 or 1) */
  char* str;  /* J_STR */
  int n;      /* J_ARR, J_OBJ: items */
  struct jv** items;
  char** keys; /* J_OBJ */
};

/* Parses text; NULL on a syntax error (with *err set to where). */
struct jv* json_parse(const char* text, const char** err);
void json_free(struct jv* v);
/* The member `key` of an object, or NULL. */
struct jv* json_get(const struct jv* o, const char* key);
double json_num(const struct jv* o, const char* key, double dflt);
const char* json_str(const struct jv* o, const char* key, const char* dflt);
/* New values; json_add appends to an array or (with key) an object. */
struct jv* json_new(enum jt t);
struct jv* json_new_str(const char* s);
struct jv* json_new_num(double x);
void json_add(struct jv* to, const char* key, struct jv* v);
/* Detaches and returns the member `key` (NULL: none). */
struct jv* json_take(struct jv* o, const char* key);
void json_write(FILE* f, const struct jv* v);

#endif
