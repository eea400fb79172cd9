/* ABI drift detector, compiled as C: compares sizeof, offsetof and enum
 * values of abi.h against the checked-in table abi_layout_table.h. */
#include <stdio.h>

#include <megahost/abi.h>

typedef struct Row {
  const char* what;
  long long actual;
  long long expected;
} Row;

#define SIZE(type, expected) {"sizeof(" #type ")", (long long)sizeof(type), expected}
#define FIELD(type, field, expected) {"offsetof(" #type ", " #field ")", (long long)offsetof(type, field), expected}
#define VALUE(name, expected) {#name, (long long)(name), expected}

static const Row kRows[] = {
#include "abi_layout_table.h"
};

int main(void) {
#if !defined(__LP64__)
  puts("the table describes LP64 targets; skipped");
  return 77;
#else
  size_t rows = sizeof kRows / sizeof kRows[0], wrong = 0;
  for (size_t i = 0; i < rows; ++i) {
    if (kRows[i].actual == kRows[i].expected) continue;
    fprintf(stderr, "%s is %lld, the released ABI has %lld\n", kRows[i].what, kRows[i].actual, kRows[i].expected);
    ++wrong;
  }
  printf("%zu of %zu layout facts differ from the released ABI\n", wrong, rows);
  if (wrong == 0) return 0;
  fputs("A new minor may only grow structs at their end: then update the SIZE rows of the grown\n"
        "structs and add rows for the new fields, structs and constants. Any other change breaks\n"
        "every plugin built against the released ABI.\n",
        stderr);
  return 1;
#endif
}
