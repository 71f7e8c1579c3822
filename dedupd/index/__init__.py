"""The index on Redis: keys, records, buckets, clusters, the gateway and its Lua scripts."""
