"""The API's routers, one per surface: memory (the contract's reads), operations, admin, tools and context."""
