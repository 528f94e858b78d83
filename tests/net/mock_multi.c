/* The mock plugin's v9 table again, for a library that exports two
 * versions (v9 here, v12 from mock_plugin.c), as real plugins export
 * several: the loader must take the newest. */
#undef MOCK_ABI
#define MOCK_ABI 9
#include "mock_plugin.c"
