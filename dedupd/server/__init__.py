"""The Redis server connection: URLs, clients, the embedded Redis."""
