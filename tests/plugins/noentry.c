/* A shared object without the kiln_backend_entry symbol. */
int kiln_test_not_a_plugin(void);
int kiln_test_not_a_plugin(void) { return 42; }
