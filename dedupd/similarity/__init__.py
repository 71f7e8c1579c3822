"""The similarity algorithms: shingling, MinHash, LSH banding, verification and the work bounds (pure: no Redis)."""
