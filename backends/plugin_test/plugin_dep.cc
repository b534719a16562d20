// libshardkit_plugin_test_dep.so: a library the needsdep plugin links against; the loader test
// loads that plugin from a folder without it, as a plugin whose libnccl.so.2 is missing.
extern "C" __attribute__((visibility("default"))) int ShardkitPluginTestDep() { return 18; }
