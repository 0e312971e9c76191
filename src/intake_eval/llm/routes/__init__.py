"""Provider routes: how one alias's request reaches its provider (route.py is the contract, table.py the list)."""
